"""Shell fragments shared by the scripts the program runs on the Pulumi host (pulumi-command, `/bin/sh -c`)."""

from __future__ import annotations

# The credentials arrive on stdin (never on a command line) and live in a private temporary file that is
# removed on any exit, signals included; scripts then call kubectl with `--kubeconfig "$kubeconfig"`.
STDIN_KUBECONFIG = """umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cat > "$kubeconfig"
"""

# `kubectl_unreachable "$output"` succeeds, printing kubectl's last line, when that line says kubectl never reached an
# API server that would answer this kubeconfig: kubectl's message for a *url.Error (kubectl `pkg/cmd/util/helpers.go`
# `StandardErrorMessage`): refused, no such host, a dial that timed out or found no route, or a server certificate
# the kubeconfig's CA does not verify. Anything the server answered (Forbidden, Unauthorized, ...) is not.
KUBECTL_UNREACHABLE = """kubectl_unreachable() {
  last=$(printf '%s\\n' "$1" | tail -n 1)
  case $last in
    "The connection to the server "*" was refused - did you specify the right host or port?" \\
      | "Unable to connect to the server: "*"no such host" \\
      | "Unable to connect to the server: "*"i/o timeout" \\
      | "Unable to connect to the server: "*"no route to host" \\
      | "Unable to connect to the server: "*"x509: "*)
      printf '%s\\n' "$last"
      return 0
      ;;
  esac
  return 1
}
"""
