"""What is allocated where: one view shared by the planner's report (planned) and `status` (live).

Plain data only. `cli.plan report` builds it from a `PlanResult`; the status reader builds it from the
objects HAMi writes in each tenant (node register annotation, pod allocation annotations, quota). The
table and the picture (`gpu_tenancy.cli.allocation_chart`) render either the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from gpu_tenancy.hami.protocol import NVIDIA


@dataclass(frozen=True)
class Slice:
    """One container's share of one GPU."""

    workload: str  # the owning workload (Deployment) or, failing that, the pod name
    pod: str  # pod name (live) or "<workload>-<replica>" (planned)
    memory_mib: int
    cores: int  # percent of the GPU's compute


@dataclass(frozen=True)
class GpuView:
    node: str
    model: str  # HAMi's device type, e.g. "NVIDIA-A100-SXM4-80GB"
    index: int  # the device's index on its node
    uuid: str
    memory_mib: int  # devmem as registered
    cores: int  # devcore as registered (100)
    split_count: int  # slots: how many containers may share it
    slices: tuple[Slice, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.node} / {self.model} #{self.index}"

    # Summed once: a card may hold hundreds of slices and every rendering asks (frozen dataclasses keep
    # cached_property's value in the instance __dict__, outside the compared fields).
    @cached_property
    def memory_allocated(self) -> int:
        return sum(s.memory_mib for s in self.slices)

    @cached_property
    def cores_allocated(self) -> int:
        return sum(s.cores for s in self.slices)

    @property
    def slots_used(self) -> int:
        return len(self.slices)


@dataclass(frozen=True)
class Unplaced:
    """A replica (planned) or pod (live) with GPU requests that no GPU holds, and HAMi's reason."""

    workload: str
    pod: str
    reason: str  # planned: the planner's HAMi reason; live: the scheduler's message, cleaned
    explanation: str = ""  # live: why it waits in the tenant's terms, from the planner (gpu_tenancy.cli.status.pending)


# One order for quota keys in every view (plan and live): GPU count, memory, cores, then anything else.
_QUOTA_ORDER = (NVIDIA.resource_count, NVIDIA.resource_memory, NVIDIA.resource_cores)


def quota_sort_key(key: str) -> tuple[str, int, str]:
    """Per quota (`<namespace>/<name>: ` prefix, none for the workloads namespace): `limits.` or
    `requests.nvidia.com/gpu` first, then gpumem, gpucores, then the rest."""
    prefix, _, bare = key.rpartition(": ")
    resource = bare.split(".", 1)[-1]
    rank = _QUOTA_ORDER.index(resource) if resource in _QUOTA_ORDER else len(_QUOTA_ORDER)
    return prefix, rank, bare


@dataclass(frozen=True)
class QuotaUse:
    """One `limits.nvidia.com/*` key of the tenant's ResourceQuota."""

    key: str
    used: int
    limit: int


@dataclass(frozen=True)
class TenantView:
    tenant: str
    gpus: tuple[GpuView, ...] = ()
    unplaced: tuple[Unplaced, ...] = ()
    quota: tuple[QuotaUse, ...] = ()
    error: str | None = None  # one line when the tenant could not be read (live)

    @property
    def fits(self) -> bool:
        return self.error is None and not self.unplaced


@dataclass(frozen=True)
class AllocationView:
    source: Literal["planned", "live"]
    tenants: tuple[TenantView, ...] = field(default_factory=tuple)

    @property
    def fits(self) -> bool:
        return all(t.fits for t in self.tenants)

    @property
    def verdict(self) -> str:
        unplaced = sum(len(t.unplaced) for t in self.tenants)
        errors = sum(1 for t in self.tenants if t.error)
        parts = []
        if unplaced:
            parts.append(f"{unplaced} replica(s) do not fit" if self.source == "planned" else f"{unplaced} pending")
        if errors:
            parts.append(f"{errors} tenant(s) unreachable")
        return "; ".join(parts) if parts else ("everything fits" if self.source == "planned" else "all placed")
