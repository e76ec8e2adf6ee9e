"""HAMi's fit rules on one node: which card each container slice of a pod lands on, or why every card refuses.

From pkg/device/nvidia/device.go (``Fit``), pkg/scheduler/score.go (``fitInDevices``),
pkg/scheduler/policy/gpu_policy.go (``Less``, ``ComputeScore``) and node_policy.go
(``ComputeDefaultScore``): the float32 scores that order a node's cards and rank nodes, the per-card
refusal reasons (pkg/device/common) and their ``"n/N Reason"`` summary. The loop over nodes and
replicas is in ``schedule``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Quota

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
    "RESOURCE_QUOTA_NOT_FIT",
    "TOO_MANY_PODS",
    "gen_reason",
    "type_terms",
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
# kube-scheduler's NodeResourcesFit when the node already runs its allocatable pods (noderesources/fit.go).
TOO_MANY_PODS = "Too many pods"

# What a registered type must contain, lower-cased, for Fit to consider the card (score.go getNodeResources).
_NVIDIA = hami.NVIDIA.device_type.lower()
# The request type of an NVIDIA container (nvidia.NvidiaGPUDevice); ComputeScore only counts the
# incoming request on a device whose type is exactly this.
_REQUEST_TYPE = hami.NVIDIA.device_type


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
    __slots__ = ("dev", "numa", "request_counts", "sort_keys", "used", "usedcores", "usedmem")

    def __init__(self, dev: Device, scores: _Scores) -> None:
        self.dev = dev
        # The declared plan breaks a tie on an unknown NUMA node as NUMA 0; ``orders`` tries every tie.
        self.numa = 0 if dev.numa is None else dev.numa
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
        return (-score, self.numa), (score, self.numa)

    def add(self, mem: int, cores: int, scores: _Scores) -> None:
        self.used += 1
        self.usedmem += mem
        self.usedcores += cores
        self.sort_keys = self.keys_for(self.usage_score(scores))


class _NodeState:
    __slots__ = (
        "all_devs", "capacity", "devs", "idx", "node", "pods", "score", "used", "usedcores", "usedmem", "version"
    )

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
        self.pods = 0  # planned pods on the node, against its max_pods

    def compute_score(self, scores: _Scores) -> float:
        """ComputeDefaultScore: 10 x (used/slots + cores/total + mem/total) over the node's devices,
        summed before dividing, in float32, from the usage before the pod."""
        return scores(*self.capacity, self.used, self.usedcores, self.usedmem)


@dataclass
class _QuotaUse:
    gpu: int = 0
    mem: int = 0
    cores: int = 0


def type_terms(entries: Sequence[str]) -> list[str]:
    """A type filter's terms as HAMi reads the annotation (pkg/device/devices.go ``CheckType``): the entries
    are joined with ",", split on ",", each part trimmed, empty parts dropped, compared upper-cased."""
    return [t.strip().upper() for entry in entries for t in entry.split(",") if t.strip()]


def _type_ok(dev_type: str, use: Sequence[str], nouse: Sequence[str]) -> bool:
    """CheckType: a card passes when some use term is a substring of its type (if any is set) and no
    nouse term is."""
    t = dev_type.upper()
    use_l = type_terms(use)
    nouse_l = type_terms(nouse)
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
        (sign * _device_score(s, req, *eff(s), scores), s.numa)
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
    if ns.pods >= ns.node.max_pods:
        return None, TOO_MANY_PODS
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
