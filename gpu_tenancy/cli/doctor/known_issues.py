"""`make doctor`, kind's known issues (kubernetes-sigs/kind v0.32.0 site/content/docs/user/known-issues.md) that
this host can show before anything is made. Pure checks over facts gathered in gpu_tenancy/cli/doctor/command.py:

* "Docker Installed With Snap": snap's docker cannot reach `$TMPDIR`; seen as the `docker` CLI resolving under
  `/snap/`, or Docker's data root under `/var/snap/docker/`.
* "Fedora / Firewalld": firewalld with `FirewallBackend=nftables` (`/etc/firewalld/firewalld.conf`) while it runs
  (`firewall-cmd --state` prints "running") leaves kind's nodes unable to reach each other.
* a kind network whose IPv4 subnet overlaps a route of this host that is not the network's own bridge
  (`/proc/net/route`): traffic to the overlapping addresses goes one way or the other, never both.
* "Failed to get rootfs info": on btrfs (storage driver or backing filesystem, `docker info` `Driver` and
  `DriverStatus`) or a device-mapper device (`findmnt -n -o SOURCE --target <data root>` under `/dev/mapper/`,
  e.g. LUKS) the kubelet cannot find the device of its root filesystem. kind bind-mounts `/dev/mapper` into its
  nodes on such storage (pkg/cluster/internal/providers/docker/util.go mountDevMapper), and the workers get the
  same (gpu_tenancy/builders/worker/kind_node.py), but not the device itself: a partition (/dev/nvme0n1p3) or the
  `/dev/dm-N` a `/dev/mapper/luks-*` link points to, which kind's docs add by hand as an extraMount.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field

from gpu_tenancy.cli.doctor.host import Problem


@dataclass
class KnownIssueFacts:
    docker_cli: str | None = None  # the docker CLI's resolved path
    docker_info: dict[str, object] = field(default_factory=dict)
    firewalld_running: bool = False
    firewalld_backend: str | None = None  # FirewallBackend= in firewalld.conf
    routes: list[tuple[str, str]] = field(default_factory=list)  # (interface, IPv4 network) of this host
    network_bridge: str | None = None  # the kind network's bridge interface (br-<id[:12]> unless named)
    network_subnets: list[str] = field(default_factory=list)
    data_root_source: str | None = None  # the device Docker's data root is on


def snap_problems(facts: KnownIssueFacts) -> list[Problem]:
    root = str(facts.docker_info.get("DockerRootDir") or "")
    if not ((facts.docker_cli or "").startswith("/snap/") or root.startswith("/var/snap/docker/")):
        return []
    return [Problem(
        "docker", "Docker is installed as a snap, whose `docker` cannot read $TMPDIR (kind known issues, Docker "
        "Installed With Snap)", "install Docker Engine from Docker's or your distribution's packages "
        "(https://docs.docker.com/engine/install/), or export TMPDIR=$HOME/tmp (mkdir it first) before make")]


def firewalld_problems(facts: KnownIssueFacts) -> list[Problem]:
    if not (facts.firewalld_running and (facts.firewalld_backend or "").lower() == "nftables"):
        return []
    return [Problem(
        "firewalld", "firewalld runs with FirewallBackend=nftables: kind's nodes cannot reach each other (kind known "
        "issues, Fedora: Firewalld)", "sudo sed -i 's/^FirewallBackend=.*/FirewallBackend=iptables/' "
        "/etc/firewalld/firewalld.conf && sudo systemctl restart firewalld")]


def route_problems(facts: KnownIssueFacts, network: str) -> list[Problem]:
    subnets = [n for n in (ipaddress.ip_network(s, strict=False) for s in facts.network_subnets)
               if isinstance(n, ipaddress.IPv4Network)]
    clashes = []
    for interface, destination in facts.routes:
        route = ipaddress.IPv4Network(destination)
        if interface == facts.network_bridge or route.prefixlen == 0:
            continue
        clashes += [f"{route} via {interface}" for subnet in subnets if route.overlaps(subnet)]
    if not clashes:
        return []
    return [Problem(
        "kind network", f"the Docker network {network!r} ({', '.join(map(str, subnets))}) overlaps this host's route "
        f"{', '.join(sorted(set(clashes)))}: addresses there reach either the lab or that network, not both",
        f"with no lab on it, `docker network rm {network}` (Docker then picks a free subnet), or create one "
        "(`docker network create --subnet <free /16> <name>`) and set gpu-tenancy:kind: {network: <name>}")]


def _backing_filesystem(info: dict[str, object]) -> str:
    for item in info.get("DriverStatus") or []:  # type: ignore[attr-defined]
        if isinstance(item, list) and len(item) == 2 and item[0] == "Backing Filesystem":
            return str(item[1]).lower()
    return ""


def rootfs_problems(facts: KnownIssueFacts) -> list[Problem]:
    driver = str(facts.docker_info.get("Driver") or "").lower()
    root = str(facts.docker_info.get("DockerRootDir") or "Docker's data root")
    why = ""
    if "btrfs" in (driver, _backing_filesystem(facts.docker_info)):
        why = "on btrfs"
    elif (facts.data_root_source or "").startswith("/dev/mapper/"):
        why = f"on a device-mapper device ({facts.data_root_source}, e.g. LUKS or LVM)"
    if not why:
        return []
    return [Problem(
        "disk", f"{root} is {why}: kubelets there fail with 'failed to get rootfs info' (kind known issues): neither "
        "kind's node nor the workers mount that device", "move Docker's data-root (/etc/docker/daemon.json "
        "\"data-root\") to an ext4 or xfs filesystem on a plain partition, then restart Docker")]


def known_issue_problems(facts: KnownIssueFacts, network: str) -> list[Problem]:
    return [*snap_problems(facts), *firewalld_problems(facts), *route_problems(facts, network),
            *rootfs_problems(facts)]


def parse_proc_net_route(text: str) -> list[tuple[str, str]]:
    """(interface, network) per line of /proc/net/route (hex, host byte order little-endian on x86 and arm64)."""
    routes = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            destination = ipaddress.IPv4Address(bytes.fromhex(fields[1])[::-1])
            mask = ipaddress.IPv4Address(bytes.fromhex(fields[7])[::-1])
            network = ipaddress.IPv4Network(f"{destination}/{mask}", strict=False)
        except ValueError:
            continue
        routes.append((fields[0], str(network)))
    return routes


def parse_firewalld_backend(text: str) -> str | None:
    for line in text.splitlines():
        key, _, value = line.strip().partition("=")
        if key.strip() == "FirewallBackend":
            return value.strip()
    return None


def bridge_name(network_inspect: str) -> str | None:
    """The Linux bridge of a Docker bridge network from `docker network inspect NAME` (moby libnetwork: `br-` +
    the first 12 of its id, unless the option com.docker.network.bridge.name names it); None if none is named."""
    try:
        networks = json.loads(network_inspect)
    except ValueError:
        return None
    if not isinstance(networks, list) or not networks or not isinstance(networks[0], dict):
        return None
    options = networks[0].get("Options") or {}
    named = options.get("com.docker.network.bridge.name") if isinstance(options, dict) else None
    identifier = str(networks[0].get("Id") or "")
    return str(named) if named else (f"br-{identifier[:12]}" if identifier else None)
