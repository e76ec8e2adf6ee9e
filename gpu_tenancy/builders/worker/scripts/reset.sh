set -eu
worker="$GPU_TENANCY_WORKER"
cat >/dev/null
if ! output=$(docker exec "$worker" kubeadm reset --force 2>&1); then
  echo "gpu-tenancy: kubeadm reset in $worker failed (its next join resets it): $output" >&2
fi
