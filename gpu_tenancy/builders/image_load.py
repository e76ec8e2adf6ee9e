"""Load a locally built image into a kind node container's containerd, as `kind load docker-image` does.

kind v0.32.0 `pkg/cluster/nodeutils/util.go` `LoadImageArchive` imports with `--all-platforms --digests
--snapshotter=<the node's>`: the node image's entrypoint switches containerd from overlayfs to `native`
(ZFS) or `fuse-overlayfs` (rootless) on such hosts (`images/base/files/usr/local/bin/entrypoint`
`configure_containerd`), and a plain `ctr images import` would unpack into a snapshotter that cannot
work there. The snapshotter is read from `containerd config dump` as kind's `parseSnapshotter` does:
`plugins."io.containerd.grpc.v1.cri".containerd.snapshotter` (config version 2) or
`plugins."io.containerd.cri.v1.images".snapshotter` (versions 3 and 4).
"""

from __future__ import annotations

# awk over `containerd config dump`: the first `snapshotter = ...` in either section, quotes removed
# (containerd 2.x writes TOML literal strings, [plugins.'io.containerd.cri.v1.images'] and 'overlayfs';
# 1.x basic strings, "overlayfs").
_SNAPSHOTTER_AWK = r"""{ line = $0; sub(/^[ \t]+/, "", line) }
line ~ /^\[/ { section = line; gsub(/'/, "\"", section); next }
(section == "[plugins.\"io.containerd.cri.v1.images\"]" ||
 section == "[plugins.\"io.containerd.grpc.v1.cri\".containerd]") && line ~ /^snapshotter[ \t]*=/ {
  value = line; sub(/^snapshotter[ \t]*=[ \t]*/, "", value); gsub(/["']/, "", value); print value; exit
}"""


def snapshotter_awk() -> str:
    return _SNAPSHOTTER_AWK


def load_script() -> str:
    """`sh` script: $IMAGE (a local Docker image) into the containerd of node container $NODE_CONTAINER."""
    awk = _SNAPSHOTTER_AWK.replace("'", "'\\''")
    return f"""set -eu
config=$(docker exec "$NODE_CONTAINER" containerd config dump)
snapshotter=$(printf '%s\\n' "$config" | awk '{awk}')
if [ -z "$snapshotter" ]; then
  echo "gpu-tenancy: cannot tell the containerd snapshotter of $NODE_CONTAINER (containerd config dump)" >&2
  exit 1
fi
docker save "$IMAGE" | docker exec -i "$NODE_CONTAINER" \\
  ctr --namespace=k8s.io images import --all-platforms --digests --snapshotter="$snapshotter" -
"""
