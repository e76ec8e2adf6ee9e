kubectl_unreachable() {
  last=$(printf '%s\n' "$1" | tail -n 1)
  case $last in
    "The connection to the server "*" was refused - did you specify the right host or port?" \
      | "Unable to connect to the server: "*"no such host" \
      | "Unable to connect to the server: "*"i/o timeout" \
      | "Unable to connect to the server: "*"no route to host" \
      | "Unable to connect to the server: "*"x509: "*)
      printf '%s\n' "$last"
      return 0
      ;;
  esac
  return 1
}
