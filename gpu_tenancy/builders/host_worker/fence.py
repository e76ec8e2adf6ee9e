"""A host firewall for a real GPU host (mode real): the host and its pods reach no other tenant's control plane
and no other tenant's GPU host, and those hosts open no connection to it.

A pod's traffic leaves its host masqueraded, so a rule on the host holds for every pod on it, in any namespace
(the workloads namespace's NetworkPolicy covers that namespace only, and only while the CNI enforces it). The
rules are one nftables table of their own, loaded atomically (`nft -f`: the table is declared, deleted and
declared again in one transaction, so a re-run replaces it) and again at boot by a systemd unit.

What stays open, on purpose: the host's own tenant's API server and konnectivity server (the kubelet and the
konnectivity agent dial out to them), and everything that is not another tenant's (package mirrors, registries),
over IPv4: of IPv6, only loopback and ICMPv6 (neighbour discovery) stay open.
"""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Iterable

from gpu_tenancy.builders import shell

TABLE = "gpu_tenancy_fence"
RULES_FILE = "/etc/gpu-tenancy/fence.nft"
UNIT = "gpu-tenancy-fence.service"


def _address(endpoint: str) -> tuple[ipaddress.IPv4Address, int]:
    """('192.0.2.10', 31002) for '192.0.2.10:31002'; a name or IPv6 address cannot be fenced by address."""
    host, _, port = endpoint.rpartition(":")
    try:
        return ipaddress.IPv4Address(host), int(port)
    except ValueError:
        raise ValueError(f"control-plane endpoint {endpoint!r} is not IPv4-address:port; the host firewall of "
                         "mode real fences control planes by address") from None


def _host(address: str) -> str:
    try:
        return str(ipaddress.IPv4Address(address))
    except ValueError:
        raise ValueError(f"GPU host address {address!r} is not an IPv4 address; the host firewall of mode real "
                         "fences other tenants' hosts by address: give tenants[].workers[].address as one") from None


def fence_rules(own_endpoint: str, foreign_endpoints: Iterable[str], foreign_hosts: Iterable[str], *,
                node_ports: bool) -> str:
    """The nftables ruleset for a host of the tenant at `own_endpoint`.

    A foreign control plane on an address other than the own one is fenced whole. With `node_ports`
    (controlPlane.serviceType NodePort) each control plane is a NodePort pair, the API port and the konnectivity
    port after it (gpu_tenancy/contract/tenant_config.py), which kube-proxy serves on every address of every
    management node: the other tenants' pairs are fenced on every destination address, the own pair never.
    IPv6 is closed but for loopback and ICMPv6 (neighbour discovery): the tenancy runs over IPv4, and a rule by
    IPv4 address says nothing of a host's IPv6 addresses (every interface has a link-local one).
    """
    own_ip, own_port = _address(own_endpoint)
    foreign = [_address(endpoint) for endpoint in foreign_endpoints]
    whole = {ip for ip, _ in foreign if ip != own_ip}
    # A shared address is NodePort whatever the caller says; the own pair stays open whatever the inputs say.
    ports = {p for ip, port in foreign if node_ports or ip == own_ip for p in (port, port + 1)}
    ports -= {own_port, own_port + 1}
    hosts = sorted({_host(h) for h in foreign_hosts} - {str(own_ip)}, key=ipaddress.IPv4Address)
    outbound = ["meta nfproto ipv6 oifname != \"lo\" meta l4proto != ipv6-icmp reject comment \"IPv6 other than "
                "ICMPv6\""]
    if whole:
        outbound.append(f"ip daddr {{ {', '.join(map(str, sorted(whole)))} }} reject "
                        "comment \"other tenants' control planes\"")
    if ports:
        outbound.append(f"tcp dport {{ {', '.join(map(str, sorted(ports)))} }} reject "
                        "comment \"other tenants' control planes (NodePorts, on every address)\"")
    if hosts:
        outbound.append(f"ip daddr {{ {', '.join(hosts)} }} reject comment \"other tenants' GPU hosts\"")
    inbound = ["meta nfproto ipv6 iifname != \"lo\" meta l4proto != ipv6-icmp ct state new drop comment \"IPv6 "
               "other than ICMPv6\""]
    if hosts:
        inbound.append(f"ip saddr {{ {', '.join(hosts)} }} ct state new drop comment \"other tenants' GPU hosts\"")

    def chain(name: str, hook: str, rules: list[str]) -> str:
        body = "".join(f"    {rule}\n" for rule in rules)
        return f"  chain {name} {{\n    type filter hook {hook} priority filter; policy accept;\n{body}  }}\n"

    return (
        f"table inet {TABLE}\n"
        f"delete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        + chain("output", "output", outbound)
        + chain("forward", "forward", outbound)  # the host's pods, before masquerading
        + chain("input", "input", inbound)
        + "}\n"
    )


def fence_script() -> str:
    """Installs the ruleset read on stdin: checked first (`nft -c`), then kept for boot and loaded."""
    return shell.script(__name__, "fence.sh", RULES_FILE=RULES_FILE, UNIT=UNIT, TABLE=TABLE)


def unfence_script() -> str:
    return shell.script(__name__, "unfence.sh", UNIT=UNIT, TABLE=TABLE, RULES_FILE=RULES_FILE)


def fence_command() -> str:
    """Runs fence_script as root with the ruleset on stdin."""
    return f"sudo -n bash -c {shlex.quote(fence_script())}"


def unfence_command() -> str:
    return f"sudo -n bash -c {shlex.quote(unfence_script())}"
