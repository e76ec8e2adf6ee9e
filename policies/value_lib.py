"""Values in the engine's property maps: read without ever touching an unknown one, and the ones the
policies compare parsed (integer Kubernetes quantities, CIDRs and address ranges).

Nothing here imports pulumi_policy's server or blocks; the policy group modules wire these into policies.

Property maps arrive from the engine wrapped in pulumi_policy's unknown-checking proxy: touching a value
that is unknown during preview raises ``UnknownValueError``. `plain` converts such a map once into plain
dicts and lists in which every unknown value is the `UNKNOWN` sentinel, so policy code never raises and
can decide for itself to skip a check whose input is not known yet.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy.proxy import UnknownValueError

# The sentinels pulumi_policy.proxy recognises (same values as in pulumi's rpc module).
_UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string (also pulumi.runtime.rpc.UNKNOWN)
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)


# --------------------------------------------------------------------------- unknown-safe values


class _Unknown:
    """A value the engine does not know yet (preview). Falsy; compares equal only to itself."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN: Any = _Unknown()


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN


def plain(value: Any) -> Any:
    """A plain copy of an engine property value; unknown values (proxied or raw sentinels) become UNKNOWN."""
    if isinstance(value, str):
        return UNKNOWN if value in _UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                item = value[key]
            except UnknownValueError:
                out[key] = UNKNOWN
                continue
            out[key] = plain(item)
        return out
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                item = value[index]
            except UnknownValueError:
                items.append(UNKNOWN)
                continue
            items.append(plain(item))
        return items
    return value


def dig(value: Any, *path: str | int, default: Any = None) -> Any:
    """value[path[0]][path[1]]...; `default` when a step is missing, UNKNOWN when a step is unknown."""
    current = value
    for step in path:
        if is_unknown(current):
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                return default
            current = current[step]
        else:
            if not isinstance(current, dict) or step not in current:
                return default
            current = current[step]
    return current


def known_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None  # UNKNOWN is no string


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def contains_unknown(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return False


# --------------------------------------------------------------------------- quantities and CIDRs


def quantity(value: Any) -> int | None:
    """An integer Kubernetes quantity ('2', 2, '2.0'); None when absent, unknown or not an integer."""
    if isinstance(value, bool):  # a bool is an int to Python, not a quantity (None and UNKNOWN fall through)
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() else None
    return None


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def network(value: Any) -> Network | None:
    if not isinstance(value, str):  # nor UNKNOWN, which is no string
        return None
    try:
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        return None


def range_networks(value: Any) -> list[Network]:
    """Networks covering a MetalLB address entry: a CIDR or a 'first-last' range."""
    if not isinstance(value, str):  # nor UNKNOWN, which is no string
        return []
    if "-" in value:
        first, _, last = value.partition("-")
        try:
            start, end = ipaddress.ip_address(first.strip()), ipaddress.ip_address(last.strip())
            return list(ipaddress.summarize_address_range(start, end))
        except (ValueError, TypeError):
            return []
    net = network(value)
    return [net] if net else []


def overlaps(a: Network, b: Network) -> bool:
    return a.version == b.version and a.overlaps(b)
