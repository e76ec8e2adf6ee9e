"""What a plan reports: each replica's placements (node, card, MiB, cores) or its failure with HAMi's
reason per node, and per-GPU utilisation (memory, cores and slots allocated versus capacity, with the
node's tenant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpu_tenancy.hami.planner.model import Node, Workload

__all__ = [
    "Failure",
    "GpuUtilisation",
    "Placement",
    "PlanResult",
    "Utilisation",
    "utilisation",
]


@dataclass(frozen=True)
class Placement:
    workload: str
    replica: int
    container: int
    node: str
    device_id: str
    mem_mib: int
    cores: int


@dataclass(frozen=True)
class Failure:
    workload: str
    replica: int
    reason: str
    node_reasons: Mapping[str, str] = field(default_factory=dict)
    #: False when the GPU-count quota refused the pod (it is never created, so it holds no quota)
    admitted: bool = True


@dataclass(frozen=True)
class PlanResult:
    placements: tuple[Placement, ...]
    failures: tuple[Failure, ...]

    @property
    def fits(self) -> bool:
        return not self.failures


# --------------------------------------------------------------------------- utilisation


@dataclass(frozen=True)
class GpuUtilisation:
    node: str
    tenant: str | None
    device_id: str
    type: str
    mem_allocated: int
    mem_capacity: int
    cores_allocated: int
    cores_capacity: int
    slots_used: int
    slots_capacity: int

    @property
    def mem_pct(self) -> float:
        return 100.0 * self.mem_allocated / self.mem_capacity if self.mem_capacity else 0.0

    @property
    def cores_pct(self) -> float:
        return 100.0 * self.cores_allocated / self.cores_capacity if self.cores_capacity else 0.0


@dataclass(frozen=True)
class Utilisation:
    gpus: tuple[GpuUtilisation, ...]
    cards_total: int
    cards_in_use: int
    #: cards the placed replicas would need without sharing (one per placement)
    whole_cards_placed: int
    #: the same for every requested replica, including the ones that did not fit
    whole_cards_requested: int


def utilisation(
    nodes: Sequence[Node], result: PlanResult, workloads: Sequence[Workload] | None = None
) -> Utilisation:
    """Per-GPU allocated memory / cores / slots versus capacity.

    ``whole_cards_requested`` adds the GPUs of the failed replicas; it needs
    ``workloads`` to look those up and equals ``whole_cards_placed`` without them.
    """
    acc: dict[tuple[str, str], list[int]] = {}
    for p in result.placements:
        a = acc.setdefault((p.node, p.device_id), [0, 0, 0])
        a[0] += p.mem_mib
        a[1] += p.cores
        a[2] += 1
    gpus = []
    for n in nodes:
        for d in n.devices:
            mem, cores, slots = acc.get((n.name, d.id), (0, 0, 0))
            gpus.append(
                GpuUtilisation(n.name, n.tenant, d.id, d.type, mem, d.devmem, cores, d.devcore, slots, d.count)
            )
    placed = len(result.placements)
    requested = placed
    if workloads is not None:
        per_pod = {w.name: sum(c.gpus for c in w.containers) for w in workloads}
        requested += sum(per_pod.get(f.workload, 0) for f in result.failures)
    return Utilisation(
        gpus=tuple(gpus),
        cards_total=len(gpus),
        cards_in_use=sum(1 for g in gpus if g.slots_used),
        whole_cards_placed=placed,
        whole_cards_requested=requested,
    )
