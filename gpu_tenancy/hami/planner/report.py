"""What a plan reports: each replica's placements (node, card, MiB, cores) or its failure with HAMi's
reason per node. What is allocated per GPU is gpu_tenancy.hami.allocation's view of these placements.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Failure", "Placement", "PlanResult"]


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
