set -eu
config=$(docker exec "$NODE_CONTAINER" containerd config dump)
snapshotter=$(printf '%s\n' "$config" | awk '@SNAPSHOTTER_AWK@')
if [ -z "$snapshotter" ]; then
  echo "gpu-tenancy: cannot tell the containerd snapshotter of $NODE_CONTAINER (containerd config dump)" >&2
  exit 1
fi
docker save "$IMAGE" | docker exec -i "$NODE_CONTAINER" \
  ctr --namespace=k8s.io images import --all-platforms --digests --snapshotter="$snapshotter" -
