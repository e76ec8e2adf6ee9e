set -eu
@STDIN_KUBECONFIG@
@KUBECTL_UNREACHABLE@
if ! output=$(@DELETE_NODE@ 2>&1); then
  if reason=$(kubectl_unreachable "$output"); then
    echo "gpu-tenancy: skipped removing Node $GPU_TENANCY_NODE: the kubeconfig stored for it no longer reaches the tenant's API server ($reason); 'make up' removes it before the host joins again, or remove it by hand: kubectl delete node $GPU_TENANCY_NODE" >&2
    exit 0
  fi
  printf '%s\n' "$output" >&2
  exit 1
fi
if [ -n "$output" ]; then printf '%s\n' "$output"; fi
