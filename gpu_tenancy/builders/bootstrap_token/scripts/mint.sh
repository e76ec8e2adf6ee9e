set -eu
@STDIN_KUBECONFIG@
@MINT@
printf '%s.%s\n' "$token_id" "$token_secret"
