set -eu
@STDIN_KUBECONFIG@
worker="$GPU_TENANCY_WORKER"
# A reset node's kubelet is stopped and cannot register the Node again.
docker exec "$worker" kubeadm reset --force >/dev/null 2>&1 || true
if [ "${GPU_TENANCY_LAB_GONE:-}" = 1 ]; then
  if ! kubectl --kubeconfig "$kubeconfig" --request-timeout=10s delete node "$worker" --ignore-not-found; then
    echo "gpu-tenancy: the tenant's control plane is gone with its kind cluster: skipped removing Node $worker" >&2
  fi
  exit 0
fi
kubectl --kubeconfig "$kubeconfig" --request-timeout=60s delete node "$worker" --ignore-not-found
