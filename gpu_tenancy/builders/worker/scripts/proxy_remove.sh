set -eu
worker="$GPU_TENANCY_WORKER"
if ! output=$(docker exec "$worker" test -f @DROPIN@ 2>&1); then
  case $output in
    *"No such container"*) echo "gpu-tenancy: $worker is gone: no proxy settings to remove" >&2 ;;
    "") ;;
    *) echo "gpu-tenancy: cannot reach $worker to remove its proxy settings: $output" >&2; exit 1 ;;
  esac
  exit 0
fi
docker exec "$worker" rm -f @DROPIN@
docker exec "$worker" systemctl daemon-reload
docker exec "$worker" systemctl restart containerd
echo "gpu-tenancy: containerd in $worker restarted without proxy settings" >&2
