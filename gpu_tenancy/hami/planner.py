"""Pure GPU capacity planner modelled on HAMi v2.10.0's NVIDIA scheduling.

Re-implemented from HAMi v2.10.0 (read at the tag, none of it copied): pkg/device/nvidia/device.go
(``Fit``, ``GenerateResourceRequests``, ``defaultExclusiveCoreIfNeeded``, ``validateMemoryPercentage``),
pkg/scheduler/score.go (``fitInDevices``), pkg/scheduler/policy/gpu_policy.go (``Less``,
``ComputeScore``) and node_policy.go (``ComputeDefaultScore``).  Given node inventories (shaped like HAMi's
``hami.io/node-nvidia-register`` annotation) and a set of workloads, ``plan``
places every replica the way the HAMi scheduler extender would and reports the
replicas that do not fit, with HAMi's own reason strings (``"n/N Reason, ..."``).

No Kubernetes, Pulumi or I/O dependencies: everything here is plain data.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ALLOCATED_CARDS_INSUFFICIENT_REQUEST",
    "CARD_COMPUTE_UNITS_EXHAUSTED",
    "CARD_INSUFFICIENT_CORE",
    "CARD_INSUFFICIENT_MEMORY",
    "CARD_NOT_HEALTH",
    "CARD_TIME_SLICING_EXHAUSTED",
    "CARD_TYPE_MISMATCH",
    "EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT",
    "NODE_INSUFFICIENT_DEVICE",
    "QUOTA_GPU",
    "QUOTA_GPUCORES",
    "QUOTA_GPUMEM",
    "RESOURCE_QUOTA_NOT_FIT",
    "ContainerRequest",
    "Device",
    "Failure",
    "GpuUtilisation",
    "Node",
    "Placement",
    "PlanResult",
    "Policy",
    "Quota",
    "Utilisation",
    "Workload",
    "gen_reason",
    "node_from_register",
    "nodes_from_register",
    "plan",
    "utilisation",
]

# HAMi reason strings (pkg/device/common), spelled exactly.
CARD_TYPE_MISMATCH = "CardTypeMismatch"
CARD_TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
CARD_COMPUTE_UNITS_EXHAUSTED = "CardComputeUnitsExhausted"
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE = "CardInsufficientCore"
CARD_NOT_HEALTH = "CardNotHealth"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT = "ExclusiveDeviceAllocateConflict"
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST = "AllocatedCardsInsufficientRequest"
RESOURCE_QUOTA_NOT_FIT = "ResourceQuotaNotFit"

# ResourceQuota keys as HAMi / Kubernetes spell them.
QUOTA_GPU = "limits.nvidia.com/gpu"
QUOTA_GPUMEM = "limits.nvidia.com/gpumem"
QUOTA_GPUCORES = "limits.nvidia.com/gpucores"
_QUOTA_KEYS = (QUOTA_GPU, QUOTA_GPUMEM, QUOTA_GPUCORES)

Policy = Literal["binpack", "spread"]
_POLICIES = ("binpack", "spread")
_NVIDIA = "nvidia"
# The request type of an NVIDIA container (nvidia.NvidiaGPUDevice); ComputeScore only counts the
# incoming request on a device whose type is exactly this.
_REQUEST_TYPE = "NVIDIA"
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
    numa: int = 0
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", tuple(self.devices))
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


# --------------------------------------------------------------------------- inventory


def node_from_register(
    node_name: str, devices: Iterable[Mapping[str, Any]], tenant: str | None = None
) -> Node:
    """Build a Node from ``hami.io/node-nvidia-register``-shaped device dicts.

    Keys: ``id, index, count, devmem, devcore, type, numa, mode, health``; unknown keys
    (``custominfo``, ``migProfiles`` ...) are ignored. HAMi writes every DeviceInfo field ``omitempty`` and
    reads them back with json.Unmarshal (pkg/device/devices.go UnMarshalNodeDevices), so an absent key
    is Go's zero value: no ``health`` is an unhealthy card, no ``count`` no slots, no ``devcore`` no cores.
    """
    out = []
    for pos, d in enumerate(devices):
        if "id" not in d or "devmem" not in d:
            raise ValueError(f"node {node_name!r}: device #{pos} needs 'id' and 'devmem'")
        health = d.get("health", False)
        if isinstance(health, str):
            health = health.strip().lower() in ("true", "1", "yes")
        out.append(
            Device(
                id=str(d["id"]),
                type=str(d.get("type", "")),
                devmem=int(d["devmem"]),
                devcore=int(d.get("devcore", 0)),
                count=int(d.get("count", 0)),
                numa=int(d.get("numa", 0)),
                health=bool(health),
                index=int(d.get("index", 0)),
                mode=str(d.get("mode", "") or ""),
            )
        )
    return Node(name=node_name, devices=tuple(out), tenant=tenant)


# Name kept as in the brief; returns one Node.
nodes_from_register = node_from_register


# --------------------------------------------------------------------------- reasons


def gen_reason(reasons: Mapping[str, int], cards: int) -> str:
    """HAMi's GenReason: ``"n/N Reason"`` entries, byte-wise sorted, joined with ``", "``."""
    return ", ".join(sorted(f"{n}/{cards} {r}" for r, n in reasons.items()))


# --------------------------------------------------------------------------- engine

# Go computes scores in float32 and rounds every operation; Python floats are doubles. One precompiled
# Struct rounds a double to float32 (pack, unpack) without parsing the format on every call.
_FLOAT32 = struct.Struct("f")
_pack_f32 = _FLOAT32.pack
_unpack_f32 = _FLOAT32.unpack


def _f32(value: float) -> float:
    """``value`` rounded to float32, as Go's float32 arithmetic rounds every operation."""
    return float(_unpack_f32(_pack_f32(value))[0])


def _ratio(part: int, total: int) -> float:
    return _f32(_f32(part) / _f32(total))


def _score(count: int, cores: int, mem: int, used: int, usedcores: int, usedmem: int) -> float:
    """10 x (used/count + usedcores/cores + usedmem/mem) in float32, 0 when a capacity is 0: the shape of
    both ComputeDefaultScore (a node's sums) and ComputeScore (one device, usage plus the request)."""
    if count == 0 or cores == 0 or mem == 0:
        return 0.0
    use = _ratio(used, count)
    core = _ratio(usedcores, cores)
    memory = _ratio(usedmem, mem)
    return _f32(10 * _f32(_f32(use + core) + memory))


class _Scores:
    """Memoised scores of one ``plan`` call. A score depends only on capacities and usage, and the same few
    (capacity, usage) combinations recur across nodes and replicas, so each is rounded to float32 once."""

    __slots__ = ("cache",)

    def __init__(self) -> None:
        self.cache: dict[tuple[int, int, int, int, int, int], float] = {}

    def __call__(self, count: int, cores: int, mem: int, used: int, usedcores: int, usedmem: int) -> float:
        key = (count, cores, mem, used, usedcores, usedmem)
        value = self.cache.get(key)
        if value is None:
            value = self.cache[key] = _score(*key)
        return value


class _DevState:
    __slots__ = ("dev", "request_counts", "sort_keys", "used", "usedcores", "usedmem")

    def __init__(self, dev: Device, scores: _Scores) -> None:
        self.dev = dev
        self.used = 0
        self.usedmem = 0
        self.usedcores = 0
        # ComputeScore only adds the container's own request on a device whose type is exactly "NVIDIA".
        self.request_counts = dev.type == _REQUEST_TYPE
        self.sort_keys = self.keys_for(self.usage_score(scores))

    def usage_score(self, scores: _Scores) -> float:
        """ComputeScore of a request that does not count on this device: the device's usage alone."""
        d = self.dev
        return scores(d.count, d.devcore, d.devmem, self.used, self.usedcores, self.usedmem)

    def keys_for(self, score: float) -> tuple[tuple[float, int], tuple[float, int]]:
        """DeviceUsageList.Less's keys (spread, binpack), indexed by ``binpack``: see _fit_container."""
        return (-score, self.dev.numa), (score, self.dev.numa)

    def add(self, mem: int, cores: int, scores: _Scores) -> None:
        self.used += 1
        self.usedmem += mem
        self.usedcores += cores
        self.sort_keys = self.keys_for(self.usage_score(scores))


class _NodeState:
    __slots__ = ("all_devs", "capacity", "devs", "idx", "node", "score", "used", "usedcores", "usedmem", "version")

    def __init__(self, node: Node, idx: int, scores: _Scores) -> None:
        self.node = node
        self.idx = idx
        # In registration order: the order HAMi builds each pod's device list in (buildNodeUsage).
        self.all_devs = [_DevState(d, scores) for d in node.devices]
        # getNodeResources: only devices whose type contains "nvidia" take part in Fit.
        self.devs = [s for s in self.all_devs if _NVIDIA in s.dev.type.lower()]
        self.capacity = (
            sum(d.count for d in node.devices),
            sum(d.devcore for d in node.devices),
            sum(d.devmem for d in node.devices),
        )
        # The node's usage summed over its devices, kept as placements land (only placements change it).
        self.used = 0
        self.usedcores = 0
        self.usedmem = 0
        self.version = 0
        self.score = 0.0

    def compute_score(self, scores: _Scores) -> float:
        """ComputeDefaultScore: 10 x (used/slots + cores/total + mem/total) over the node's devices,
        summed before dividing, in float32, from the usage before the pod."""
        return scores(*self.capacity, self.used, self.usedcores, self.usedmem)


@dataclass
class _QuotaUse:
    gpu: int = 0
    mem: int = 0
    cores: int = 0


def _type_ok(dev_type: str, use: Sequence[str], nouse: Sequence[str]) -> bool:
    t = dev_type.lower()
    use_l = [u.strip().lower() for u in use if u.strip()]
    nouse_l = [u.strip().lower() for u in nouse if u.strip()]
    if use_l and not any(u in t for u in use_l):
        return False
    return not (nouse_l and any(u in t for u in nouse_l))


class _Request:
    """One container's request as Fit and ComputeScore read it, resolved once per workload."""

    __slots__ = ("cores", "memreq_by_devmem", "nums", "req", "score_request")

    def __init__(self, req: ContainerRequest) -> None:
        self.req = req
        self.nums = req.gpus
        self.cores = req.cores
        # What ComputeScore adds on a device of the request's own type: (request, core, mem) with mem the
        # percentage of the card when one is set (not 0 or 101, "unset"), else gpumem in MiB.
        pct = req.mem_percentagereq
        self.score_request = (1, req.coresreq, pct, req.gpumem_mib or 0)
        self.memreq_by_devmem: dict[int, int] = {}

    def memreq(self, d: Device) -> int:
        value = self.memreq_by_devmem.get(d.devmem)
        if value is None:
            value = self.memreq_by_devmem[d.devmem] = self.req.memreq(d)
        return value


# A tentative allocation inside one pod: (device state, mem, cores)
_Alloc = tuple[_DevState, int, int]


def _device_score(s: _DevState, req: _Request, used: int, usedmem: int, usedcores: int, scores: _Scores) -> float:
    """ComputeScore with the default weights (slot=core=memory=1), in float32. The container's own
    request only counts on a device whose type is exactly "NVIDIA" (the request type); registered
    types are "NVIDIA-<model>", so usually only the existing usage ranks the devices."""
    d = s.dev
    if not s.request_counts:
        return scores(d.count, d.devcore, d.devmem, used, usedcores, usedmem)
    request, core, pct, gpumem = req.score_request
    mem = d.devmem * pct // 100 if pct not in (0, 101) else gpumem
    return scores(d.count, d.devcore, d.devmem, request + used, core + usedcores, mem + usedmem)


def _fit_container(
    order: list[_DevState],
    req: _Request,
    binpack: bool,
    pending: dict[int, list[int]],
    type_ok: dict[str, bool],
    quota: Quota | None,
    quota_base: tuple[int, int],
    scores: _Scores,
) -> tuple[list[_Alloc] | None, str]:
    """One container on one node: HAMi fitInDevices + Fit.

    ``order`` is the pod's device list: registration order for the pod's first container, then
    left as the previous container sorted it (fitInDevices sorts the same list in place). ``pending``
    holds the usage (used, mem, cores) already claimed on a device by earlier containers of the same
    pod, keyed by ``id(devstate)``."""
    nums = req.nums
    if nums > len(order):
        return None, NODE_INSUFFICIENT_DEVICE

    def eff(s: _DevState) -> tuple[int, int, int]:
        p = pending.get(id(s))
        if p is None:
            return s.used, s.usedmem, s.usedcores
        return s.used + p[0], s.usedmem + p[1], s.usedcores + p[2]

    # DeviceUsageList.Less for a single policy: spread -> score descending, binpack -> score
    # ascending, NUMA ascending on equal scores; no further key. sort.Sort is an insertion sort
    # (stable) at this size, so devices that still tie keep their previous order. Fit then walks
    # the list from its end: spread tries the least used first, binpack the most used.
    # A device's keys from its usage alone are kept up to date as placements land (_DevState.add).
    sign = 1.0 if binpack else -1.0
    keys = [
        (sign * _device_score(s, req, *eff(s), scores), s.dev.numa)
        if s.request_counts or (pending and id(s) in pending)
        else s.sort_keys[binpack]
        for s in order
    ]
    order[:] = [order[i] for i in sorted(range(len(order)), key=keys.__getitem__)]

    cores = req.cores
    reasons: dict[str, int] = {}
    chosen: list[_Alloc] = []
    q_mem, q_cores = quota_base
    for s in reversed(order):
        d = s.dev
        if not d.health:
            reason = CARD_NOT_HEALTH
        elif not type_ok[d.type]:
            reason = CARD_TYPE_MISMATCH
        else:
            used, usedmem, usedcores = eff(s)
            memreq = req.memreq(d)
            if d.count <= used:
                reason = CARD_TIME_SLICING_EXHAUSTED
            elif quota is not None and (
                (quota.gpumem is not None and q_mem + memreq > quota.gpumem)
                or (quota.gpucores is not None and q_cores + cores > quota.gpucores)
            ):
                reason = RESOURCE_QUOTA_NOT_FIT
            elif d.devmem - usedmem < memreq:
                reason = CARD_INSUFFICIENT_MEMORY
            elif d.devcore - usedcores < cores:
                reason = CARD_INSUFFICIENT_CORE
            elif d.devcore == 100 and cores == 100 and used > 0:
                reason = EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT
            elif d.devcore != 0 and usedcores == d.devcore and cores == 0:
                reason = CARD_COMPUTE_UNITS_EXHAUSTED
            else:
                chosen.append((s, memreq, cores))
                q_mem += memreq
                q_cores += cores
                if len(chosen) == nums:
                    return chosen, ""
                continue
        reasons[reason] = reasons.get(reason, 0) + 1
    if chosen:
        reasons[ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(chosen)
    return None, gen_reason(reasons, len(order))


def _fit_pod(
    ns: _NodeState,
    requests: Sequence[_Request],
    binpack: bool,
    type_ok: dict[str, bool],
    quota: Quota | None,
    qused: _QuotaUse,
    scores: _Scores,
) -> tuple[list[list[_Alloc]] | None, str]:
    pending: dict[int, list[int]] = {}
    allocs: list[list[_Alloc]] = []
    order = list(ns.devs)
    pod_mem = 0
    pod_cores = 0
    for req in requests:
        if req.nums == 0:
            allocs.append([])
            continue
        got, reason = _fit_container(
            order, req, binpack, pending, type_ok, quota, (qused.mem + pod_mem, qused.cores + pod_cores), scores
        )
        if got is None:
            return None, reason
        for s, m, c in got:
            p = pending.setdefault(id(s), [0, 0, 0])
            p[0] += 1
            p[1] += m
            p[2] += c
            pod_mem += m
            pod_cores += c
        allocs.append(got)
    return allocs, ""


# A node's place in a policy's order: see _NodeIndex.key.
_Key = tuple[float, int]


class _NodeIndex:
    """The nodes in each node policy's order, per scope, updated incrementally as placements change scores.

    A scope is None (every node: what a workload without a tenant sees) or a tenant (its nodes only). The
    scheduler tries the highest score first under binpack and the lowest under spread, ties in input order.
    Each list holds the nodes in *reverse* order of preference, so the next node to try is at its end
    (``list.pop`` is O(1)). Lists are built on first use, then kept sorted on every score change.
    """

    def __init__(self, states: list[_NodeState]) -> None:
        self.states = states
        self.stores: dict[tuple[str | None, bool], list[_Key]] = {}

    @staticmethod
    def key(score: float, idx: int, binpack: bool) -> _Key:
        return (score, -idx) if binpack else (-score, -idx)

    def node(self, key: _Key) -> _NodeState:
        return self.states[-key[1]]

    def store(self, scope: str | None, binpack: bool) -> list[_Key]:
        """The scope's nodes, least preferred first (do not modify: copy it)."""
        found = self.stores.get((scope, binpack))
        if found is None:
            found = self.stores[(scope, binpack)] = sorted(
                self.key(s.score, s.idx, binpack) for s in self.states if scope is None or s.node.tenant == scope
            )
        return found

    def update(self, ns: _NodeState, new_score: float) -> None:
        old = ns.score
        if new_score == old:
            return
        scopes = (None,) if ns.node.tenant is None else (None, ns.node.tenant)
        for scope in scopes:
            for binpack in (True, False):
                lst = self.stores.get((scope, binpack))
                if lst is not None:
                    _move(lst, self.key(old, ns.idx, binpack), self.key(new_score, ns.idx, binpack))
        ns.score = new_score


def _move(keys: list[_Key], old: _Key, new: _Key) -> None:
    """Replace ``old`` with ``new`` in the sorted list ``keys``."""
    del keys[bisect.bisect_left(keys, old)]
    bisect.insort(keys, new)


def _quota_for(quota: Quota | Mapping[str, Quota] | None, tenant: str | None) -> Quota | None:
    if quota is None or isinstance(quota, Quota):
        return quota
    if tenant is None:
        return None
    return quota.get(tenant)


def _quota_decides(quota: Quota | None) -> bool:
    """Whether a pod's fit on a node depends on the quota's usage: gpumem or gpucores is limited (Fit's
    fitQuota). A GPU-count quota is checked at admission, before any node."""
    return quota is not None and (quota.gpumem is not None or quota.gpucores is not None)


# What a pod's fit on a node depends on besides the node's usage (and, with a gpumem/gpucores quota, the
# quota's usage): containers, type filters, GPU policy.
_Shape = tuple[tuple[ContainerRequest, ...], tuple[str, ...], tuple[str, ...], str]


def _pod_shape(wl: Workload) -> _Shape:
    return (wl.containers, wl.use_gpu_type, wl.nouse_gpu_type, wl.gpu_scheduler_policy)


def plan(
    nodes: Sequence[Node],
    workloads: Sequence[Workload],
    quota: Quota | Mapping[str, Quota] | None = None,
    *,
    exact_device_order: bool = True,
) -> PlanResult:
    """Place every replica of ``workloads`` on ``nodes`` as HAMi would.

    A node with more than ``MAX_DEVICES_PER_NODE`` GPUs is refused unless ``exact_device_order`` is
    False: then tied GPUs are taken in registration order, which HAMi's unstable sort may not keep (the
    fit verdict is the same for identical GPUs; which card a replica lands on may differ).

    Workloads are scheduled in the given order, replica by replica (one replica = one
    pod; all its containers on the same node).  ``quota`` is either one namespace
    quota applied to all workloads, or a mapping tenant -> Quota applied to the
    workloads whose ``tenant`` matches.  A workload with a ``tenant`` only sees nodes of
    that tenant; one without sees every node.

    The scheduler tries every node for every pod; the planner reaches the same verdicts without doing so.
    A pod's fit on a node depends only on the node's usage, the pod and, with a gpumem/gpucores quota, the
    quota's usage. Without such a quota, a node that refused a pod keeps refusing pods of the same shape
    until something is placed on it, so it is set aside (with its reason) and only placed-on nodes are
    tried again: each replica costs O(log nodes) plus the nodes it sets aside. With such a quota a
    refusal can turn into a fit as the quota fills (Fit takes cards greedily against what is left, and a
    smaller remainder can skip a large card and take two small ones), so every node is tried again.
    """
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ValueError("duplicate node names")
    for n in nodes:
        if exact_device_order and len(n.devices) > MAX_DEVICES_PER_NODE:
            raise ValueError(
                f"node {n.name!r} has {len(n.devices)} GPUs; the planner reproduces HAMi's device order "
                f"only up to {MAX_DEVICES_PER_NODE} per node (Go's sort.Sort is not stable above that)"
            )
    scores = _Scores()
    states = [_NodeState(n, i, scores) for i, n in enumerate(nodes)]
    index = _NodeIndex(states)
    all_types = {d.type for n in nodes for d in n.devices}
    qusage: dict[str | None, _QuotaUse] = {}
    # Per pod shape: node idx -> (node version, reason) of a refusal that holds while the node is unchanged.
    refusals: dict[_Shape, dict[int, tuple[int, str]]] = {}

    placements: list[Placement] = []
    failures: list[Failure] = []

    for wl in workloads:
        pod_gpus = sum(c.gpus for c in wl.containers)
        if pod_gpus == 0 or wl.replicas == 0:
            continue  # not a HAMi pod
        type_ok = {t: _type_ok(t, wl.use_gpu_type, wl.nouse_gpu_type) for t in all_types}
        requests = [_Request(c) for c in wl.containers]
        gpu_binpack = wl.gpu_scheduler_policy == "binpack"
        node_binpack = wl.node_scheduler_policy == "binpack"
        wq = _quota_for(quota, wl.tenant)
        qkey = wl.tenant if isinstance(quota, Mapping) else None
        qused = qusage.setdefault(qkey, _QuotaUse())
        quota_decides = _quota_decides(wq)
        scope_nodes = index.store(wl.tenant, node_binpack)
        refused = refusals.setdefault(_pod_shape(wl), {})
        # Nodes that may still fit, least preferred first (without a gpumem/gpucores quota).
        candidates = [] if quota_decides else list(scope_nodes)
        # node idx -> (node version, gpumem/gpucores quota usage, reason) of a failed attempt
        memo: dict[int, tuple[int, tuple[int, int], str]] = {}
        # Once a replica is refused everywhere nothing changes until the next workload: later admitted
        # replicas fail the same way.
        unplaceable: tuple[str, dict[str, str]] | None = None

        for r in range(wl.replicas):
            denied = _webhook_quota_denial(wl, wq, qused)
            if denied:
                failures.append(Failure(wl.name, r, denied, admitted=False))
                continue
            if wq is not None and wq.gpu is not None and qused.gpu + pod_gpus > wq.gpu:
                failures.append(
                    Failure(
                        wl.name,
                        r,
                        f"{RESOURCE_QUOTA_NOT_FIT}: {QUOTA_GPU} {qused.gpu}+{pod_gpus} > {wq.gpu}",
                        admitted=False,
                    )
                )
                continue
            # The API server admits the pod against requests.nvidia.com/gpu when it is created, and a
            # pod HAMi cannot place stays Pending and keeps counting (only terminal pods are released).
            qused.gpu += pod_gpus
            if unplaceable is not None:
                failures.append(Failure(wl.name, r, unplaceable[0], dict(unplaceable[1])))
                continue
            placed: tuple[_NodeState, list[list[_Alloc]]] | None = None
            node_reasons: dict[str, str] = {}
            if not quota_decides:
                while candidates:
                    ns = index.node(candidates[-1])
                    seen = refused.get(ns.idx)
                    if seen is not None and seen[0] == ns.version:
                        candidates.pop()
                        continue
                    allocs, reason = _fit_pod(ns, requests, gpu_binpack, type_ok, wq, qused, scores)
                    if allocs is None:
                        refused[ns.idx] = (ns.version, reason)
                        candidates.pop()
                        continue
                    placed = ns, allocs
                    break
                else:
                    for key in reversed(scope_nodes):
                        ns = index.node(key)
                        node_reasons[ns.node.name] = refused[ns.idx][1]
            else:
                qsnap = (qused.mem, qused.cores)
                for key in reversed(scope_nodes):
                    ns = index.node(key)
                    m = memo.get(ns.idx)
                    if m is not None and m[0] == ns.version and m[1] == qsnap:
                        node_reasons[ns.node.name] = m[2]
                        continue
                    allocs, reason = _fit_pod(ns, requests, gpu_binpack, type_ok, wq, qused, scores)
                    if allocs is None:
                        memo[ns.idx] = (ns.version, qsnap, reason)
                        node_reasons[ns.node.name] = reason
                        continue
                    placed = ns, allocs
                    break
            if placed is None:
                unplaceable = (_summarise(node_reasons), node_reasons)
                failures.append(Failure(wl.name, r, unplaceable[0], dict(node_reasons)))
                continue
            ns, allocs = placed
            for ci, got in enumerate(allocs):
                for s, mem, cores in got:
                    s.add(mem, cores, scores)
                    ns.used += 1
                    ns.usedmem += mem
                    ns.usedcores += cores
                    qused.mem += mem
                    qused.cores += cores
                    placements.append(Placement(wl.name, r, ci, ns.node.name, s.dev.id, mem, cores))
            ns.version += 1
            new_score = ns.compute_score(scores)
            if not quota_decides:
                candidates.pop()
                bisect.insort(candidates, index.key(new_score, ns.idx, node_binpack))
            index.update(ns, new_score)

    return PlanResult(tuple(placements), tuple(failures))


def _webhook_quota_denial(wl: Workload, quota: Quota | None, qused: _QuotaUse) -> str:
    """HAMi's admission webhook (scheduler/webhook.go fitResourceQuota) denies a pod whose Memreq x Nums
    and Coresreq x Nums, summed over its containers, exceed what the namespace quota has left. Memreq is
    gpumem in MiB only (0 for a percentage or a whole card) and Coresreq is not clamped here. A denied pod
    is never created, so it holds no quota; '' when the pod is admitted."""
    if quota is None or (quota.gpumem is None and quota.gpucores is None):
        return ""
    mem = sum(c.gpus * (c.gpumem_mib or 0) for c in wl.containers if c.gpus > 0)
    cores = sum(c.gpus * c.coresreq for c in wl.containers if c.gpus > 0)
    if mem == 0 and cores == 0:
        return ""
    over = []
    if quota.gpumem is not None and qused.mem + mem > quota.gpumem:
        over.append(f"{QUOTA_GPUMEM} {qused.mem}+{mem} > {quota.gpumem}")
    if quota.gpucores is not None and qused.cores + cores > quota.gpucores:
        over.append(f"{QUOTA_GPUCORES} {qused.cores}+{cores} > {quota.gpucores}")
    if not over:
        return ""
    return (
        f'{RESOURCE_QUOTA_NOT_FIT} at admission: admission webhook "vgpu.hami.io" denied the request: '
        f"exceeding resource quota ({', '.join(over)})"
    )


def _summarise(node_reasons: Mapping[str, str]) -> str:
    if not node_reasons:
        return "no nodes available"
    if len(node_reasons) == 1:
        return next(iter(node_reasons.values()))
    return "; ".join(f"{n}: {r}" for n, r in sorted(node_reasons.items()))


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
