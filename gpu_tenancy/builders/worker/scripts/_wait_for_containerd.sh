waited=0
until docker exec "$worker" systemctl is-active --quiet containerd; do
  waited=$((waited + 1))
  if [ "$waited" -ge @CONTAINERD_WAIT_SECONDS@ ]; then
    echo "gpu-tenancy: containerd in $worker is not active after @CONTAINERD_WAIT_SECONDS@s" >&2
    exit 1
  fi
  sleep 1
done
