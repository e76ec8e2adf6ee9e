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


def _interval(value: str) -> tuple[int, int, int]:
    """(space, first, last) of a claim's value: a CIDR's addresses (space 4 or 6, its IP version), a port
    range "first-last" (space 0). Two values overlap when they share a space and their ranges intersect."""
    if "/" in value:
        network = ipaddress.ip_network(value)
        return network.version, int(network.network_address), int(network.broadcast_address)
    first, last = (int(p) for p in value.split("-"))
    if first > last:
        raise ValueError(f"port range {value!r}: first > last")
    return 0, first, last


# The earliest claims seen in some set: the first one, then the first of another tenant (the only ones that
# can be reported against a claim, whatever its tenant). Empty when the set is.
_Earliest = tuple[int, ...]


class _EarliestClaims:
    """Claims placed on a line of ``size`` positions: added by their start (found by ``starting_in``) and by
    the positions they cover (found by ``covering``), each query answering with the earliest two claims of
    distinct tenants, in O(log size). A segment tree; node 1 is the root, node k has children 2k and 2k+1."""

    def __init__(self, size: int, tenants: list[str]) -> None:
        self.leaves = 1 << max(size - 1, 0).bit_length()
        self.tenants = tenants
        self.by_start: list[_Earliest] = [()] * (2 * self.leaves)
        self.by_cover: list[_Earliest] = [()] * (2 * self.leaves)

    def merge(self, a: _Earliest, b: _Earliest) -> _Earliest:
        if not a or not b:
            return a or b
        first = min(a[0], b[0])
        others = [i for i in (*a, *b) if self.tenants[i] != self.tenants[first]]
        return (first, min(others)) if others else (first,)

    def add(self, claim: int, first: int, last: int) -> None:
        one = (claim,)
        node = first + self.leaves
        while node:
            self.by_start[node] = self.merge(self.by_start[node], one)
            node //= 2
        low, high = first + self.leaves, last + self.leaves + 1
        while low < high:
            if low & 1:
                self.by_cover[low] = self.merge(self.by_cover[low], one)
                low += 1
            if high & 1:
                high -= 1
                self.by_cover[high] = self.merge(self.by_cover[high], one)
            low //= 2
            high //= 2

    def starting_in(self, first: int, last: int) -> _Earliest:
        found: _Earliest = ()
        low, high = first + self.leaves, last + self.leaves + 1
        while low < high:
            if low & 1:
                found = self.merge(found, self.by_start[low])
                low += 1
            if high & 1:
                high -= 1
                found = self.merge(found, self.by_start[high])
            low //= 2
            high //= 2
        return found

    def covering(self, position: int) -> _Earliest:
        found: _Earliest = ()
        node = position + self.leaves
        while node:
            found = self.merge(found, self.by_cover[node])
            node //= 2
        return found

    def overlapping(self, first: int, last: int) -> _Earliest:
        """Among the claims added, the earliest two of distinct tenants whose range meets [first, last]: they
        start inside it, or cover its first position."""
        return self.merge(self.starting_in(first, last), self.covering(first))


def collisions(claims: Iterable[Claim]) -> list[tuple[str, str]]:
    """(key, problem) for each claim that overlaps an earlier tenant's claim (CIDR with CIDR, ports with ports).

    Reported on a derived claim when there is one (the fix is to set it), otherwise on the later tenant.
    Each claim is checked against the earliest earlier claim it collides with, found in O(log n): all
    values are placed on one line (spaces apart), derived and explicit claims in separate trees, since two
    explicit CIDRs are left to the policy pack.
    """
    claims = list(claims)
    intervals = [_interval(claim.value) for claim in claims]
    line = sorted({(space, point) for space, first, last in intervals for point in (first, last)})
    position = {point: index for index, point in enumerate(line)}
    tenants = [claim.tenant for claim in claims]
    derived = _EarliestClaims(len(line), tenants)
    explicit = _EarliestClaims(len(line), tenants)
    problems: list[tuple[str, str]] = []
    for index, (claim, (space, first, last)) in enumerate(zip(claims, intervals, strict=True)):
        low, high = position[(space, first)], position[(space, last)]
        earliest = derived.overlapping(low, high)
        if not (claim.explicit and space != 0):
            # CIDRs both chosen by the user: policy tenant-cidrs-disjoint judges those at preview
            earliest = derived.merge(earliest, explicit.overlapping(low, high))
        other_index = next((i for i in earliest if tenants[i] != claim.tenant), None)
        (explicit if claim.explicit else derived).add(index, low, high)
        if other_index is None:
            continue
        other = claims[other_index]
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
    return problems
