set -eu
worker="$GPU_TENANCY_WORKER"
wanted="$(cat)"
# Wait for systemd and containerd inside the node container: a drop-in written before systemd has read its
# units could be missed, and `systemctl` needs systemd running.
@WAIT_FOR_CONTAINERD@
current="$(docker exec "$worker" cat @DROPIN@ 2>/dev/null || true)"
if [ "$current" = "$wanted" ]; then
  exit 0
fi
docker exec "$worker" mkdir -p @DROPIN_DIR@
printf '%s\n' "$wanted" | docker exec -i "$worker" sh -c 'umask 077; cat > @DROPIN@'
docker exec "$worker" systemctl daemon-reload
docker exec "$worker" systemctl restart containerd
echo "gpu-tenancy: containerd in $worker restarted with the host's proxy settings" >&2
