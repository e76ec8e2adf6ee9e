set -eu
if docker exec "$NODE_CONTAINER" sh -c 'ls /dev/nvidia[0-9]* >/dev/null 2>&1'; then
  reason="the mock NVML would report only as many GPUs as the host has; use mode real on this host"
  echo "gpu-tenancy: $NODE_CONTAINER sees the Docker host's NVIDIA GPUs (/dev/nvidia*): $reason" >&2
  exit 1
fi
