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

from gpu_tenancy.builders import shell


def snapshotter_awk() -> str:
    """awk over `containerd config dump`: the first `snapshotter = ...` in either section, quotes removed
    (containerd 2.x writes TOML literal strings, [plugins.'io.containerd.cri.v1.images'] and 'overlayfs';
    1.x basic strings, "overlayfs")."""
    return shell.script(__name__, "snapshotter.awk").removesuffix("\n")


def load_script() -> str:
    """`sh` script: $IMAGE (a local Docker image) into the containerd of node container $NODE_CONTAINER."""
    # The awk program goes between single quotes: each of its own quotes closes them, is escaped, reopens them.
    return shell.script(__name__, "image_load.sh", SNAPSHOTTER_AWK=snapshotter_awk().replace("'", "'\\''"))
