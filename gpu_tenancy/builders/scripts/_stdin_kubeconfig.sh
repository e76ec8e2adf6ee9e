umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cat > "$kubeconfig"
