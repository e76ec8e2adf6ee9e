"""The planner's input model: GPUs as HAMi registers them, nodes, container requests, workloads, quotas.

``ContainerRequest`` resolves a container's limits the way HAMi's webhook and GenerateResourceRequests do
(pkg/device/nvidia/device.go ``defaultExclusiveCoreIfNeeded``, ``validateMemoryPercentage``);
``node_from_register`` reads a node's ``hami.io/node-nvidia-register`` devices. Plain data, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.kubelet import KUBELET_MAX_PODS

__all__ = [
    "KUBELET_MAX_PODS",
    "MAX_DEVICES_PER_NODE",
    "QUOTA_GPU",
    "QUOTA_GPUCORES",
    "QUOTA_GPUMEM",
    "ContainerRequest",
    "Device",
    "Node",
    "Policy",
    "Quota",
    "Workload",
    "node_from_register",
    "nodes_from_register",
]

# ResourceQuota keys as HAMi / Kubernetes spell them.
QUOTA_GPU, QUOTA_GPUMEM, QUOTA_GPUCORES = hami.NVIDIA.quota_keys
_QUOTA_KEYS = (QUOTA_GPU, QUOTA_GPUMEM, QUOTA_GPUCORES)

Policy = Literal["binpack", "spread"]
_POLICIES = ("binpack", "spread")
# Go's sort.Sort is an insertion sort (stable) up to 12 elements and pdqsort (not stable) above
# (sort/zsortinterface.go); HAMi sorts a node's whole device list, so tied devices on a node with more
# devices keep an order the planner does not reproduce.
MAX_DEVICES_PER_NODE = 12
_MIG = "mig"


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Device:
    """One physical GPU as registered by the HAMi device plugin."""

    id: str
    type: str
    devmem: int  # MiB
    devcore: int = 100
    count: int = 10  # split slots (time-slicing count)
    # The card's NUMA node as HAMi reads it from sysfs; None = not known, so it may break a tie either way.
    numa: int | None = 0
    health: bool = True
    index: int = 0
    mode: str = ""

    def __post_init__(self) -> None:
        if self.devmem < 0 or self.devcore < 0 or self.count < 0:
            raise ValueError(f"device {self.id!r}: devmem, devcore and count must be >= 0")
        if self.mode == _MIG:
            raise ValueError(f"device {self.id!r}: MIG mode is not modelled by the planner")


@dataclass(frozen=True)
class Node:
    name: str
    devices: tuple[Device, ...]
    tenant: str | None = None
    # Pods the kubelet admits for the planned workloads: its maxPods (110 unless set when the node joins)
    # minus the pods the program itself runs there. kube-scheduler's NodeResourcesFit refuses the rest
    # ("Too many pods") before HAMi is asked.
    max_pods: int = KUBELET_MAX_PODS

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(self.devices))
        if self.max_pods < 0:
            raise ValueError(f"node {self.name!r}: max_pods must be >= 0")
        ids = [d.id for d in self.devices]
        if len(set(ids)) != len(ids):
            raise ValueError(f"node {self.name!r}: duplicate device ids")


@dataclass(frozen=True)
class ContainerRequest:
    """``nvidia.com/gpu``, ``nvidia.com/gpumem`` (MiB), ``gpumem-percentage``, ``gpucores``.

    ``None`` means the limit is absent from the container, which is not the same as 0 to HAMi.
    """

    gpus: int = 1
    gpumem_mib: int | None = None
    gpumem_percentage: int | None = None
    gpucores: int | None = None

    def __post_init__(self) -> None:
        if self.gpus < 0:
            raise ValueError("gpus must be >= 0")
        if self.gpumem_mib is not None and self.gpumem_mib < 0:
            raise ValueError("gpumem_mib must be >= 0")
        # HAMi's webhook denies the pod otherwise (device.go validateMemoryPercentage).
        if self.gpumem_percentage is not None and not 0 <= self.gpumem_percentage <= 100:
            raise ValueError("gpumem_percentage must be between 0 and 100 (HAMi's webhook denies the pod otherwise)")
        if self.gpucores is not None and self.gpucores < 0:
            raise ValueError("gpucores must be >= 0")

    @property
    def exclusive(self) -> bool:
        """The webhook gives ``gpucores: 100`` to a GPU container without gpucores that takes whole cards:
        percentage exactly 100, or no memory limit at all (device.go defaultExclusiveCoreIfNeeded)."""
        if self.gpucores is not None or self.gpus <= 0:
            return False
        if self.gpumem_percentage is not None:
            return self.gpumem_percentage == 100
        return self.gpumem_mib is None

    @property
    def coresreq(self) -> int:
        """HAMi's Coresreq: gpucores as given, the webhook's 100 for exclusive requests, else 0
        (chart device config defaultCores: 0)."""
        if self.gpucores is not None:
            return self.gpucores
        return 100 if self.exclusive else 0

    @property
    def cores(self) -> int:
        """Coresreq clamped to 100, as Fit does."""
        return min(self.coresreq, 100)

    @property
    def mem_percentagereq(self) -> int:
        """HAMi's MemPercentagereq (GenerateResourceRequests): the percentage if > 0, 101 ("unset")
        otherwise, and 100 when neither memory limit resolves to anything (defaultMemory: 0).
        ``gpumem-percentage: 0`` is ignored, so without gpumem it means the whole card."""
        pct = self.gpumem_percentage
        resolved = pct if pct is not None and pct > 0 else 101
        if resolved == 101 and not self.gpumem_mib:
            return 100
        return resolved

    @property
    def percentage(self) -> int | None:
        """The percentage Fit applies, or None when gpumem (MiB) decides."""
        if self.gpumem_mib:
            return None
        return self.mem_percentagereq

    def memreq(self, device: Device) -> int:
        """MiB this container takes on ``device`` (gpumem wins over the percentage)."""
        if self.gpumem_mib:
            return self.gpumem_mib
        pct = self.percentage
        assert pct is not None
        return device.devmem * pct // 100


@dataclass(frozen=True)
class Workload:
    name: str
    containers: tuple[ContainerRequest, ...]
    replicas: int = 1
    use_gpu_type: tuple[str, ...] = ()
    nouse_gpu_type: tuple[str, ...] = ()
    gpu_scheduler_policy: Policy = "spread"
    node_scheduler_policy: Policy = "binpack"
    tenant: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "containers", tuple(self.containers))
        object.__setattr__(self, "use_gpu_type", tuple(self.use_gpu_type))
        object.__setattr__(self, "nouse_gpu_type", tuple(self.nouse_gpu_type))
        if self.replicas < 0:
            raise ValueError(f"workload {self.name!r}: replicas must be >= 0")
        if self.gpu_scheduler_policy not in _POLICIES:
            raise ValueError(f"workload {self.name!r}: gpu_scheduler_policy must be binpack|spread")
        if self.node_scheduler_policy not in _POLICIES:
            raise ValueError(f"workload {self.name!r}: node_scheduler_policy must be binpack|spread")


@dataclass(frozen=True)
class Quota:
    """A namespace ResourceQuota restricted to HAMi's NVIDIA keys (``None`` = not set)."""

    gpu: int | None = None
    gpumem: int | None = None
    gpucores: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Quota:
        unknown = set(data) - set(_QUOTA_KEYS)
        if unknown:
            raise ValueError(f"unknown quota keys: {sorted(unknown)}")

        def get(key: str) -> int | None:
            v = data.get(key)
            return None if v is None else int(v)

        return cls(gpu=get(QUOTA_GPU), gpumem=get(QUOTA_GPUMEM), gpucores=get(QUOTA_GPUCORES))

    def to_dict(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for key, v in zip(_QUOTA_KEYS, (self.gpu, self.gpumem, self.gpucores), strict=True):
            if v is not None:
                out[key] = v
        return out


# --------------------------------------------------------------------------- inventory


def node_from_register(
    node_name: str,
    devices: Iterable[Mapping[str, Any]],
    tenant: str | None = None,
    max_pods: int = KUBELET_MAX_PODS,
) -> Node:
    """Build a Node from ``hami.io/node-nvidia-register``-shaped device dicts.

    Keys: ``id, index, count, devmem, devcore, type, numa, mode, health``; unknown keys
    (``custominfo``, ``migProfiles`` ...) are ignored. HAMi writes every DeviceInfo field ``omitempty`` and
    reads them back with json.Unmarshal (pkg/device/devices.go UnMarshalNodeDevices), so an absent key
    is Go's zero value: no ``health`` is an unhealthy card, no ``count`` no slots, no ``devcore`` no cores.
    ``numa: null`` is the planner's own spelling for a card whose NUMA node is not known.
    """
    out = []
    for pos, d in enumerate(devices):
        if "id" not in d or "devmem" not in d:
            raise ValueError(f"node {node_name!r}: device #{pos} needs 'id' and 'devmem'")
        health = d.get("health")  # missing reads as unhealthy (bool(None))
        if isinstance(health, str):
            health = health.strip().lower() in ("true", "1", "yes")
        out.append(
            Device(
                id=str(d["id"]),
                type=str(d.get("type", "")),
                devmem=int(d["devmem"]),
                devcore=int(d.get("devcore", 0)),
                count=int(d.get("count", 0)),
                numa=None if "numa" in d and d["numa"] is None else int(d.get("numa") or 0),
                health=bool(health),
                index=int(d.get("index", 0)),
                mode=str(d.get("mode") or ""),
            )
        )
    return Node(name=node_name, devices=tuple(out), tenant=tenant, max_pods=max_pods)


# Name kept as in the brief; returns one Node.
nodes_from_register = node_from_register
