"""``gpu_tenancy.contract.addressing.collisions`` as it was before it was made O(n log n): every claim against every
earlier one (gpu_tenancy/contract/addressing.py at commit bf99fc8). The reference tests/test_addressing.py compares the
current implementation against."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from gpu_tenancy.contract.addressing import Claim


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
