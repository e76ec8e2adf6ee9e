"""`make doctor`, the host: what would break a first `make up` on this machine, found before anything is made.

Pure checks over facts the CLI gathers (gpu_tenancy/cli/doctor/command.py); each returns the problems it found, one line
each with its fix. Where a fact comes from, and why it matters:

* `docker info --format '{{json .}}'` (moby v28.5 `api/types/system.Info`): `ServerVersion` against the
  documented minimum; `CgroupVersion` "2" (Kubernetes 1.35 kubelets default `failCgroupV1: true`,
  kubernetes#134298, and kind v0.31+ node images for 1.35 need cgroup v2); `SecurityOptions` with
  `name=rootless` (kind v0.32.0 `providers/docker/provider.go` `info()`): the kind network then lives in
  rootlesskit's namespace, which this host cannot reach, so sim is refused; `OperatingSystem` "Docker
  Desktop": container networks are not exposed to the host (kind known-issues, "Docker Desktop for macOS
  and Windows"); `DockerRootDir` for the disk check.
* the proxy variables (upper or lower case, as Go's net/http `ProxyFromEnvironment` reads them): the program's
  own `kubectl` and the Kubernetes/Helm providers reach the tenants' API servers on the kind network, so its
  IPv4 subnet must be in NO_PROXY (Go honours CIDRs there, `golang.org/x/net/http/httpproxy`).
* `sysctl -n fs.inotify.max_user_instances` / `max_user_watches` (kind known-issues, "Pod errors due to too
  many open files": 512 / 524288 for a multi-node cluster; every tenant worker runs its own kubelet and
  containerd, so the instances needed grow with the tenants).
* `df -Pk <DockerRootDir>` and `free -b` (procps): free disk and available memory against the lab's footprint
  (docs/live-suite.md, "Footprint"), when the lab is not there yet.
* `kind version`, `kubectl version --client -o json`, `pulumi version` against the exact pins `make tools` installs.
* another lab on the same Docker network: worker containers labelled `gpu-tenancy.io/component=worker`
  and kind clusters named `gpu-tenancy-*` whose nodes sit on it. Every lab takes its MetalLB pool from the top of that
  network's IPv4 subnet (gpu_tenancy/builders/metallb/netpool.py), so two labs would hand out the same addresses.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpu_tenancy.cli.tools import TOOLS_BY_NAME
from gpu_tenancy.contract import versions
from gpu_tenancy.contract.device_layers import DeviceLayer, find_layer

GIB = 1024**3


@dataclass(frozen=True)
class Problem:
    subject: str
    what: str
    fix: str

    def line(self) -> str:
        return f"{self.subject}: {self.what}. Fix: {self.fix}"


@dataclass(frozen=True)
class LabShape:
    """What the stack file says about the lab this host is to run."""

    stack: str
    mode: str
    cluster_name: str
    network: str
    tenants: tuple[str, ...]

    @property
    def layer(self) -> DeviceLayer | None:
        """The mode's device layer; None for a mode no layer registers (the stack file's check names it)."""
        return find_layer(self.mode)

    @property
    def simulated(self) -> bool:
        return self.layer is not None and self.layer.simulated


@dataclass
class HostFacts:
    docker_info: dict[str, object] | None = None  # None: the engine did not answer
    docker_error: str = ""
    environ: Mapping[str, str] = field(default_factory=dict)
    network_subnets: list[str] | None = None  # None: the network does not exist (yet)
    network_bridge: str | None = None  # its Linux bridge (known_issues.bridge_name); None: not known
    inotify_instances: int | None = None
    inotify_watches: int | None = None
    disk_free_bytes: int | None = None
    memory_available_bytes: int | None = None
    tool_versions: dict[str, str | None] = field(default_factory=dict)  # tool -> version text (None: missing)
    kind_clusters: list[str] | None = None  # None: not known (Docker or kind did not answer)
    cluster_networks: dict[str, list[str]] = field(default_factory=dict)  # other kind cluster -> its networks
    workers_on_network: list[str] = field(default_factory=list)  # gpu-tenancy worker containers on the network


def footprint_bytes(shape: LabShape) -> tuple[int, int]:
    """(memory, disk) a fresh lab needs (docs/live-suite.md, "Footprint"): kind control plane 1.5 GB, Kamaji,
    cert-manager, MetalLB and etcd 0.8 GB, each tenant 0.6 GB control plane + 0.8 GB worker (+0.2 GB sim-nvml);
    disk 8 GB plus 1 GB per tenant, and the mock NVML image with its build cache (2.5 GB) in sim-nvml."""
    layer = shape.layer
    per_tenant = layer.lab_memory_gib_per_tenant if layer else 0.0
    memory = (2.3 + per_tenant * len(shape.tenants)) * GIB
    disk = (8 + len(shape.tenants) + (layer.lab_disk_gib if layer else 0.0)) * GIB
    return int(memory), int(disk)


def _version(text: str | None) -> tuple[int, ...] | None:
    match = re.search(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return tuple(int(part or 0) for part in match.groups()) if match else None


def docker_problems(facts: HostFacts, shape: LabShape) -> list[Problem]:
    if not shape.simulated:
        return []
    info = facts.docker_info
    if "docker" in facts.tool_versions and facts.tool_versions["docker"] is None:
        return []  # no CLI: tool_problems names it
    if info is None:
        reason = facts.docker_error.strip().splitlines()[-1] if facts.docker_error.strip() else "no answer"
        return [Problem("docker", f"the Docker engine does not answer `docker info` ({reason})",
                        "start the daemon (`sudo systemctl start docker`) and let this user use it "
                        "(`sudo usermod -aG docker $USER`, then log in again)")]
    problems = []
    server = _version(str(info.get("ServerVersion") or ""))
    minimum = _version(versions.DOCKER_ENGINE_MINIMUM)
    if server is None or (minimum and server < minimum):
        problems.append(Problem("docker", f"Docker Engine {info.get('ServerVersion') or '?'} is older than "
                                f"{versions.DOCKER_ENGINE_MINIMUM}", "upgrade Docker Engine (README: Prerequisites)"))
    if str(info.get("CgroupVersion") or "") != "2":
        problems.append(Problem(
            "cgroup", f"this host runs cgroup v{info.get('CgroupVersion') or '1'}: Kubernetes 1.35 kubelets refuse "
            "to start on cgroup v1 (failCgroupV1 defaults to true) and kind's 1.35 node images need v2",
            "boot with cgroup v2 (kernel argument systemd.unified_cgroup_hierarchy=1, then reboot)"))
    options = [str(o) for o in info.get("SecurityOptions") or []]  # type: ignore[attr-defined]
    if any("name=rootless" in option.split(",") for option in options):
        problems.append(Problem(
            "docker", "rootless Docker: the kind network lives in rootlesskit's network namespace, so neither this "
            "host nor the program's kubectl reaches the tenants' control planes on it (and the workers would need "
            "KubeletInUserNamespace)", "use the system Docker daemon (`docker context use default`, or unset "
            "DOCKER_HOST) for sim and sim-nvml stacks"))
    if "docker desktop" in str(info.get("OperatingSystem") or "").lower():
        problems.append(Problem(
            "docker", "Docker Desktop runs containers in a VM whose networks are not reachable from this host (kind "
            "known issues), so the tenants' MetalLB addresses cannot be reached", "run the lab on a Linux host with "
            "Docker Engine"))
    return problems


def _no_proxy_covers(no_proxy: str, subnet: ipaddress.IPv4Network) -> bool:
    for entry in (e.strip() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if isinstance(network, ipaddress.IPv4Network) and subnet.subnet_of(network):
            return True
    return False


# Where Docker picks a new bridge network's subnet with the default address pools (moby
# libnetwork/ipamutils: 172.17.0.0/16 .. 172.31.0.0/16 and 192.168.0.0/16 in /20s).
DOCKER_DEFAULT_POOLS = ("172.16.0.0/12", "192.168.0.0/16")


def proxy_problems(facts: HostFacts, shape: LabShape) -> list[Problem]:
    environ = facts.environ
    names = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
    proxy = next((environ[n] for n in names if environ.get(n)), "")
    if not proxy or not shape.simulated:
        return []
    no_proxy = environ.get("NO_PROXY") or environ.get("no_proxy") or ""
    if facts.network_subnets is None:
        needed = [ipaddress.IPv4Network(pool) for pool in DOCKER_DEFAULT_POOLS]
        where = f"the kind network {shape.network!r} does not exist yet, so its subnet is one Docker picks from"
    else:
        needed = [n for n in (ipaddress.ip_network(s, strict=False) for s in facts.network_subnets)
                  if isinstance(n, ipaddress.IPv4Network)]
        where = f"the kind network {shape.network!r} is"
    missing = [str(n) for n in needed if not _no_proxy_covers(no_proxy, n)]
    if not missing:
        return []
    return [Problem(
        "proxy", f"a proxy is set ({proxy}) and NO_PROXY does not cover {', '.join(missing)}: {where} "
        f"{', '.join(str(n) for n in needed)}, and the program's kubectl and providers would send the tenants' "
        "API traffic to the proxy", f"export NO_PROXY=\"$NO_PROXY,{','.join(missing)}\" (and no_proxy alike)")]


def inotify_problems(facts: HostFacts, shape: LabShape) -> list[Problem]:
    if not shape.simulated:
        return []
    nodes = 1 + len(shape.tenants)
    wanted_instances = max(512, 128 * nodes)
    wanted_watches = 524288
    problems = []
    if facts.inotify_instances is not None and facts.inotify_instances < wanted_instances:
        problems.append(Problem(
            "inotify", f"fs.inotify.max_user_instances is {facts.inotify_instances}, below {wanted_instances} for "
            f"{nodes} kubelets (kind known issues: pods fail with 'too many open files')",
            f"sudo sysctl fs.inotify.max_user_instances={wanted_instances} (persist it in /etc/sysctl.d/)"))
    if facts.inotify_watches is not None and facts.inotify_watches < wanted_watches:
        problems.append(Problem(
            "inotify", f"fs.inotify.max_user_watches is {facts.inotify_watches}, below {wanted_watches} (kind known "
            "issues)", f"sudo sysctl fs.inotify.max_user_watches={wanted_watches} (persist it in /etc/sysctl.d/)"))
    return problems


def capacity_problems(facts: HostFacts, shape: LabShape, deployed: bool) -> list[Problem]:
    """Free disk and memory against what a fresh lab takes; a deployed lab only needs headroom."""
    if not shape.simulated:
        return []
    memory, disk = footprint_bytes(shape) if not deployed else (GIB // 2, 2 * GIB)
    problems = []
    if facts.disk_free_bytes is not None and facts.disk_free_bytes < disk:
        where = (facts.docker_info or {}).get("DockerRootDir") or "Docker's data root"
        problems.append(Problem(
            "disk", f"{facts.disk_free_bytes / GIB:.1f} GiB free under {where}, the lab needs {disk / GIB:.1f} GiB",
            "free space (`docker system prune`, `docker image prune`) or move Docker's data-root"))
    if facts.memory_available_bytes is not None and facts.memory_available_bytes < memory:
        problems.append(Problem(
            "memory", f"{facts.memory_available_bytes / GIB:.1f} GiB available, the lab needs about "
            f"{memory / GIB:.1f} GiB ({len(shape.tenants)} tenants)",
            "close what uses memory, or declare fewer tenants"))
    return problems


DOCKER_INSTALL = ("install Docker Engine (https://docs.docker.com/engine/install/, or your distribution's docker.io "
                  "package), start it and let this user use it (`sudo usermod -aG docker $USER`, then log in again)")


def tool_problems(facts: HostFacts, shape: LabShape) -> list[Problem]:
    """The CLIs at exactly the versions `make tools` installs (gpu_tenancy/cli/tools.py, the same pins and parsers)."""
    names = ["kubectl", "pulumi", *(["docker", "kind"] if shape.simulated else [])]
    problems = []
    for name in names:
        if name not in facts.tool_versions:
            continue
        text = facts.tool_versions[name]
        if name == "docker":
            if text is None:
                problems.append(Problem("docker", "not found on PATH", DOCKER_INSTALL))
            continue
        tool = TOOLS_BY_NAME[name]
        if text is None:
            problems.append(Problem(name, "not found on PATH", f"`make tools` installs {name} {tool.version}"))
            continue
        found = tool.parse_version(text)
        if found != tool.version:
            seen = found or (repr(text.strip()) if text.strip() else "an unknown version")
            problems.append(Problem(name, f"{seen} is not the pinned "
                                    f"{tool.version}", f"`make tools` installs {tool.version} into .tools/bin, "
                                    "which make puts first on PATH"))
    return problems


def other_lab_problems(facts: HostFacts, shape: LabShape) -> list[Problem]:
    if not shape.simulated:
        return []
    others = sorted(
        name for name in facts.kind_clusters or []
        if name != shape.cluster_name and name.startswith("gpu-tenancy-")
        and shape.network in facts.cluster_networks.get(name, [shape.network])
    )
    workers = sorted(w for w in facts.workers_on_network if not w.startswith(f"{shape.cluster_name}-"))
    if not others and not workers:
        return []
    names = ", ".join([*(f"kind cluster {c}" for c in others), *(f"worker {w}" for w in workers)])
    return [Problem(
        "another lab", f"{names} already run(s) on Docker network {shape.network!r}: every lab takes its MetalLB pool "
        "from the top of that network's subnet, so both would hand out the same control-plane addresses",
        "destroy the other lab first (`make destroy STACK=<its stack>`), or give this stack its own network "
        "(gpu-tenancy:kind: {network: <name>})")]


def host_problems(facts: HostFacts, shape: LabShape, deployed: bool) -> list[Problem]:
    return [
        *docker_problems(facts, shape),
        *tool_problems(facts, shape),
        *proxy_problems(facts, shape),
        *inotify_problems(facts, shape),
        *capacity_problems(facts, shape, deployed),
        *other_lab_problems(facts, shape),
    ]


# --------------------------------------------------------------------------- parsing what the tools print


def parse_df_available(text: str) -> int | None:
    """Available bytes from `df -Pk PATH` (POSIX format: a header, then `fs 1024-blocks used avail cap% mount`)."""
    lines = [line.split() for line in text.strip().splitlines()[1:] if line.strip()]
    try:
        return int(lines[-1][3]) * 1024 if lines else None
    except (IndexError, ValueError):
        return None


def parse_free_available(text: str) -> int | None:
    """The `available` column of `free -b`'s `Mem:` line (procps-ng 3.3+)."""
    lines = text.strip().splitlines()
    if not lines:
        return None
    header = lines[0].split()
    for line in lines[1:]:
        fields = line.split()
        if fields and fields[0] == "Mem:" and "available" in header:
            try:
                return int(fields[1 + header.index("available")])
            except (IndexError, ValueError):
                return None
    return None


def parse_network_subnets(text: str) -> list[str] | None:
    """IPAM subnets from `docker network inspect NAME` (a JSON list of networks); None if none was found."""
    try:
        networks = json.loads(text)
    except ValueError:
        return None
    if not isinstance(networks, list) or not networks:
        return None
    configs: Iterable[dict[str, str]] = (networks[0].get("IPAM") or {}).get("Config") or []
    return [c["Subnet"] for c in configs if c.get("Subnet")]
