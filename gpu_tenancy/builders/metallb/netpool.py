"""MetalLB address pool selection from a Docker network's IPAM configuration.

kind creates its network dual-stack and Docker returns the IPAM entries in either order, so the pool
is always built from the IPv4 entry (the IPv6 trap: Kamaji's kind guide, kind #3167). Docker hands
node addresses out from the bottom of the subnet, so the pool sits at the top, below the broadcast
address and never on the gateway.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class PoolError(ValueError):
    """The network cannot host a MetalLB pool; the message names the network."""


@dataclass(frozen=True)
class AddressPool:
    subnet: str
    first: str
    last: str

    @property
    def range(self) -> str:
        return f"{self.first}-{self.last}"

    @property
    def size(self) -> int:
        return int(ipaddress.IPv4Address(self.last)) - int(ipaddress.IPv4Address(self.first)) + 1


def ipv4_subnet(
    network: str, ipam_configs: Sequence[Mapping[str, str | None]]
) -> tuple[ipaddress.IPv4Network, str | None]:
    """The IPv4 subnet (and gateway) among a network's IPAM entries."""
    for entry in ipam_configs:
        subnet = entry.get("subnet")
        if not subnet:
            continue
        parsed = ipaddress.ip_network(subnet, strict=False)
        if isinstance(parsed, ipaddress.IPv4Network):
            return parsed, entry.get("gateway") or None
    found = ", ".join(str(e.get("subnet")) for e in ipam_configs) or "none"
    raise PoolError(f"Docker network {network!r} has no IPv4 subnet (IPAM subnets: {found})")


def select_pool(
    network: str,
    ipam_configs: Sequence[Mapping[str, str | None]],
    addresses_needed: int,
) -> AddressPool:
    """Pick `addresses_needed` addresses at the top of the network's IPv4 subnet.

    The pool must fit in the upper half of the subnet, which Docker's sequential allocation reaches
    only after half the subnet is taken by containers.
    """
    if addresses_needed < 1:
        raise ValueError("addresses_needed must be at least 1")
    subnet, gateway = ipv4_subnet(network, ipam_configs)
    broadcast = int(subnet.broadcast_address)
    last = broadcast - 1
    first = last - addresses_needed + 1
    upper_half_start = int(subnet.network_address) + subnet.num_addresses // 2
    gateway_int = int(ipaddress.IPv4Address(gateway)) if gateway else None
    if gateway_int is not None and first <= gateway_int <= last:
        # A gateway at the top (custom networks) shifts the pool below it.
        last = gateway_int - 1
        first = last - addresses_needed + 1
    if first < upper_half_start:
        raise PoolError(
            f"Docker network {network!r} subnet {subnet} is too small for {addresses_needed} "
            f"load-balancer addresses in its upper half; use a larger subnet (at least /"
            f"{_prefix_for(addresses_needed)})"
        )
    return AddressPool(
        subnet=str(subnet),
        first=str(ipaddress.IPv4Address(first)),
        last=str(ipaddress.IPv4Address(last)),
    )


def _prefix_for(addresses: int) -> int:
    prefix = 30
    while prefix > 8 and (2 ** (32 - prefix)) // 2 - 1 < addresses:
        prefix -= 1
    return prefix
