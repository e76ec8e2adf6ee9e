"""The host-dependent `docker run` flags kind adds to its node containers, decided from `docker info`.

kind v0.32.0 `pkg/cluster/internal/providers/docker/provision.go` `commonArgs` adds `--userns=host`
when `usernsRemap()`, a `/dev/mapper` bind mount when `mountDevMapper()` and `--device /dev/fuse` when
`mountFuse()` (`util.go`; rootless detection in `provider.go` `info()`). Each of those runs `docker info`
and answers false when docker info fails or cannot be parsed; `host_flags` does the same from one
`docker info` output, so a worker container gets exactly the flags kind would give it on that host.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

# One `docker info` call printing the three facts kind reads, as one JSON object.
DOCKER_INFO_COMMAND = (
    "docker info --format "
    "'{\"SecurityOptions\":{{json .SecurityOptions}},\"Driver\":{{json .Driver}},"
    "\"DriverStatus\":{{json .DriverStatus}}}'"
)


@dataclass(frozen=True)
class KindHostFlags:
    userns_host: bool = False
    mount_dev_mapper: bool = False
    mount_fuse: bool = False


def _rootless(security_options: list[str]) -> bool:
    """kind `info()`: any comma-separated field of a security option equal to `name=rootless`."""
    for option in security_options:
        for row in csv.reader([option]):
            if "name=rootless" in row:
                return True
    return False


def host_flags(docker_info: str) -> KindHostFlags:
    """The flags kind's `usernsRemap`, `mountDevMapper` and `mountFuse` would choose on this host."""
    try:
        info = json.loads(docker_info)
    except ValueError:
        return KindHostFlags()
    if not isinstance(info, dict):
        return KindHostFlags()
    options = [o for o in info.get("SecurityOptions") or [] if isinstance(o, str)]
    rootless = _rootless(options)
    # usernsRemap: the JSON list of security options contains "name=userns".
    userns = "name=userns" in json.dumps(options)
    driver = str(info.get("Driver") or "").strip().lower()
    backing = ""
    for item in info.get("DriverStatus") or []:
        if isinstance(item, list) and len(item) >= 2 and item[0] == "Backing Filesystem":
            backing = str(item[1]).lower()
            break
    dev_mapper = not rootless and (
        driver in ("btrfs", "zfs", "devicemapper") or backing in ("btrfs", "zfs", "xfs")
    )
    return KindHostFlags(userns_host=userns, mount_dev_mapper=dev_mapper, mount_fuse=rootless)


# kind's `--security-opt seccomp=unconfined --security-opt apparmor=unconfined` (provision.go runArgsForNode),
# and `label=disable`, which the Docker daemon stores for every privileged container that names no `label=`
# option (moby v28.5 daemon/create.go generateSecurityOpt): sending it changes nothing on the host and keeps
# what the provider reads back equal to what the program sends.
SECURITY_OPTS = ("seccomp=unconfined", "apparmor=unconfined", "label=disable")

SNAPSHOTTER_VARIABLE = "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER"


def snapshotter_env(environ: Mapping[str, str]) -> list[str]:
    """kind's `-e KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER` (provision.go runArgsForNode): the host's value
    reaches the node's entrypoint, which switches containerd's snapshotter; unset on the host, unset in the
    node (the docker CLI drops `-e NAME` for an unset NAME)."""
    value = environ.get(SNAPSHOTTER_VARIABLE)
    return [f"{SNAPSHOTTER_VARIABLE}={value}"] if value else []


PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
# What kind adds to NO_PROXY for in-cluster names (best effort on the default CoreDNS spec).
CLUSTER_DNS_SUFFIXES = (".svc", ".svc.cluster", ".svc.cluster.local")


def has_proxy(environ: Mapping[str, str]) -> bool:
    """Whether kind would pass proxy settings at all: any of PROXY_VARIABLES set, in either case."""
    return any(environ.get(name) or environ.get(name.lower()) for name in PROXY_VARIABLES)


def proxy_has_credentials(environ: Mapping[str, str]) -> bool:
    """Whether a proxy URL carries a user or password (`http://user:secret@proxy:3128`)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY"):
        for value in (environ.get(name), environ.get(name.lower())):
            if value and urlsplit(value if "://" in value else f"http://{value}").username is not None:
                return True
    return False


def proxy_env(
    environ: Mapping[str, str], service_cidr: str, pod_cidr: str, subnets: Sequence[str], node_names: Sequence[str]
) -> dict[str, str]:
    """The proxy variables kind passes to a node container, from the host's environment.

    kind v0.32.0 `pkg/cluster/internal/providers/common/proxy.go` `getProxyEnvs` (upper- or lower-case
    HTTP_PROXY/HTTPS_PROXY/NO_PROXY, both spellings passed, NO_PROXY extended by the cluster's service and
    pod subnets) and `providers/docker/provision.go` `getProxyEnv` (then the Docker network's subnets
    first, the node names and the in-cluster DNS suffixes). Nothing when no proxy is set.
    """
    envs: dict[str, str] = {}
    for name in PROXY_VARIABLES:
        value = environ.get(name) or environ.get(name.lower()) or ""
        if value:
            envs[name] = envs[name.lower()] = value
    if not envs:
        return {}
    no_proxy = envs.get("NO_PROXY", "")
    no_proxy = (no_proxy + "," if no_proxy else "") + f"{service_cidr},{pod_cidr}"
    joined = ",".join([*subnets, no_proxy, *node_names, *CLUSTER_DNS_SUFFIXES])
    envs["NO_PROXY"] = envs["no_proxy"] = joined
    return envs
