"""A tenant's default addresses, derived from its name alone.

Defaults that came from a tenant's position in the list re-addressed every later tenant (and so replaced
its control plane) when one was removed or the list reordered. Here each default depends on the tenant's
name only: a stable hash picks a slot. Two tenants whose names land on the same slot are refused by
`collisions` with a message that says which explicit setting resolves it.

Layout (clear of kind's own 10.244.0.0/16 pods and 10.96.0.0/16 services, and of 172.16.0.0/12 where
Docker puts the kind network):
- pods: a /20 of 10.128.0.0/10 (16 nodes of kube-controller-manager's default /24 node mask);
- services: a /22 of 10.192.0.0/12 (Kamaji's defaulting webhook puts CoreDNS on its .10);
- NodePort control planes: API on `base + 2 slot`, Konnectivity on the port after it.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

POD_SUPERNET = ipaddress.IPv4Network("10.128.0.0/10")
POD_PREFIX = 20
SERVICE_SUPERNET = ipaddress.IPv4Network("10.192.0.0/12")
SERVICE_PREFIX = 22
CIDR_SLOTS = 1024  # 2**(20-10) pod blocks == 2**(22-12) service blocks
NODE_PORT_MAX = 32767  # kube-apiserver's default --service-node-port-range end


def name_hash(name: str) -> int:
    """A stable (process- and platform-independent) hash of a tenant name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")


def _block(supernet: ipaddress.IPv4Network, prefix: int, slot: int) -> str:
    size = 2 ** (32 - prefix)
    return str(ipaddress.IPv4Network((int(supernet.network_address) + slot * size, prefix)))


def default_cidrs(name: str) -> tuple[str, str]:
    """The pod and service CIDR a tenant gets unless it sets `podCidr` / `serviceCidr`."""
    slot = name_hash(name) % CIDR_SLOTS
    return _block(POD_SUPERNET, POD_PREFIX, slot), _block(SERVICE_SUPERNET, SERVICE_PREFIX, slot)


def node_port_pairs(base: int) -> int:
    """How many (API, Konnectivity) NodePort pairs fit from `base` to the end of the NodePort range."""
    return (NODE_PORT_MAX - base + 1) // 2


def default_node_ports(name: str, base: int) -> tuple[int, int]:
    """API server and Konnectivity NodePorts a tenant gets unless it sets `nodePort`."""
    api = base + 2 * (name_hash(name) % node_port_pairs(base))
    return api, api + 1


@dataclass(frozen=True)
class Claim:
    """One tenant's use of an address resource, and whether the user set it or it was derived."""

    tenant_index: int
    tenant: str
    key: str  # the config key under tenants[i] that sets it, e.g. "podCidr"
    value: str  # a CIDR, or a port range "first-last"
    explicit: bool


def _overlap(a: str, b: str) -> bool:
    """CIDRs overlap, or port ranges "first-last" share a port (a CIDR and a port range never do)."""
    if ("/" in a) != ("/" in b):
        return False
    if "/" in a:
        return ipaddress.ip_network(a).overlaps(ipaddress.ip_network(b))
    a_first, a_last = (int(p) for p in a.split("-"))
    b_first, b_last = (int(p) for p in b.split("-"))
    return a_first <= b_last and b_first <= a_last


def collisions(claims: Iterable[Claim]) -> list[tuple[str, str]]:
    """(key, problem) for each claim that overlaps an earlier tenant's claim (CIDR with CIDR, ports with ports).

    Reported on a derived claim when there is one (the fix is to set it), otherwise on the later tenant.
    """
    problems: list[tuple[str, str]] = []
    seen: list[Claim] = []
    for claim in claims:
        for other in seen:
            if other.tenant == claim.tenant or not _overlap(other.value, claim.value):
                continue
            if other.explicit and claim.explicit and "/" in claim.value:
                continue  # CIDRs both chosen by the user: policy tenant-cidrs-disjoint judges those at preview
            culprit, holder = (other, claim) if (not other.explicit and claim.explicit) else (claim, other)
            key = f"tenants[{culprit.tenant_index}].{culprit.key}"
            how, fix = ("set", f"choose another {key}") if culprit.explicit else (
                "derived from its name", f"set {key} explicitly"
            )
            problems.append(
                (
                    key,
                    f"{culprit.value} ({how}) of tenant {culprit.tenant!r} collides with {holder.value} of tenant "
                    f"{holder.tenant!r}; {fix}",
                )
            )
            break
        seen.append(claim)
    return problems
