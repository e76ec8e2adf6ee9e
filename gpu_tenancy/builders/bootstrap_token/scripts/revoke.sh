set -eu
@STDIN_KUBECONFIG@
@KUBECTL_UNREACHABLE@
token="${PULUMI_COMMAND_STDOUT:-}"
token_id="${token%%.*}"
if [ -z "$token_id" ]; then exit 0; fi
if ! output=$(@REVOKE@ 2>&1 >/dev/null); then
  if reason=$(kubectl_unreachable "$output"); then
    echo "gpu-tenancy: skipped revoking bootstrap token $token_id: the kubeconfig stored for it no longer reaches \
the tenant's API server ($reason); the token expires within @TTL_HOURS@ h of its minting and the tenant's \
tokencleaner then deletes it" >&2
    exit 0
  fi
  printf '%s\n' "$output" >&2
  exit 1
fi
