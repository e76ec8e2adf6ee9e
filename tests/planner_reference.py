"""The planner's engine as it was before it was made near-linear: the reference the differential test
(tests/test_planner_differential.py) compares ``gpu_tenancy.hami.planner.schedule.plan`` against.

Kept verbatim (the engine section of gpu_tenancy/hami/planner.py at commit bf99fc8; the engine now lives in
gpu_tenancy/hami/planner/fit.py and schedule.py), with the reason strings copied too so that a change to them
in the planner shows up as a difference. The public data model (Device, Node, ContainerRequest, Workload, Quota
from planner.model; Placement, Failure, PlanResult from planner.report) is imported: both engines read the
same inputs and must build equal outputs. This implementation is Θ(replicas × nodes): it walks
every node for every replica; use it on small inputs only.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpu_tenancy.hami.planner.model import MAX_DEVICES_PER_NODE, ContainerRequest, Device, Node, Quota, Workload
from gpu_tenancy.hami.planner.report import Failure, Placement, PlanResult

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
QUOTA_GPU = "limits.nvidia.com/gpu"
QUOTA_GPUMEM = "limits.nvidia.com/gpumem"
QUOTA_GPUCORES = "limits.nvidia.com/gpucores"
_NVIDIA = "nvidia"
_REQUEST_TYPE = "NVIDIA"


def gen_reason(reasons: Mapping[str, int], cards: int) -> str:
    """HAMi's GenReason: ``"n/N Reason"`` entries, byte-wise sorted, joined with ``", "``."""
    return ", ".join(sorted(f"{n}/{cards} {r}" for r, n in reasons.items()))




def _f32(value: float) -> float:
    """``value`` rounded to float32, as Go's float32 arithmetic rounds every operation."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _ratio(part: int, total: int) -> float:
    return _f32(_f32(part) / _f32(total))


class _DevState:
    __slots__ = ("dev", "used", "usedcores", "usedmem")

    def __init__(self, dev: Device) -> None:
        self.dev = dev
        self.used = 0
        self.usedmem = 0
        self.usedcores = 0


class _NodeState:
    __slots__ = ("all_devs", "devs", "idx", "node", "score", "version")

    def __init__(self, node: Node, idx: int) -> None:
        self.node = node
        self.idx = idx
        # In registration order: the order HAMi builds each pod's device list in (buildNodeUsage).
        self.all_devs = [_DevState(d) for d in node.devices]
        # getNodeResources: only devices whose type contains "nvidia" take part in Fit.
        self.devs = [s for s in self.all_devs if _NVIDIA in s.dev.type.lower()]
        self.version = 0
        self.score = 0.0

    def compute_score(self) -> float:
        """ComputeDefaultScore: 10 x (used/slots + cores/total + mem/total) over the node's devices,
        summed before dividing, in float32, from the usage before the pod."""
        devs = self.all_devs
        total = sum(s.dev.count for s in devs)
        total_core = sum(s.dev.devcore for s in devs)
        total_mem = sum(s.dev.devmem for s in devs)
        if total == 0 or total_core == 0 or total_mem == 0:
            return 0.0
        use = _ratio(sum(s.used for s in devs), total)
        core = _ratio(sum(s.usedcores for s in devs), total_core)
        mem = _ratio(sum(s.usedmem for s in devs), total_mem)
        return _f32(10 * _f32(_f32(use + core) + mem))


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


# A tentative allocation inside one pod: (device state, mem, cores)
_Alloc = tuple[_DevState, int, int]


def _device_score(d: Device, req: ContainerRequest, used: int, usedmem: int, usedcores: int) -> float:
    """ComputeScore with the default weights (slot=core=memory=1), in float32. The container's own
    request only counts on a device whose type is exactly "NVIDIA" (the request type); registered
    types are "NVIDIA-<model>", so usually only the existing usage ranks the devices."""
    if d.count == 0 or d.devcore == 0 or d.devmem == 0:
        return 0.0
    request = core = mem = 0
    if d.type == _REQUEST_TYPE:
        request = 1
        core = req.coresreq
        pct = req.mem_percentagereq
        mem = d.devmem * pct // 100 if pct not in (0, 101) else (req.gpumem_mib or 0)
    slot_score = _ratio(request + used, d.count)
    core_score = _ratio(core + usedcores, d.devcore)
    mem_score = _ratio(mem + usedmem, d.devmem)
    return _f32(10 * _f32(_f32(slot_score + core_score) + mem_score))


def _fit_container(
    order: list[_DevState],
    req: ContainerRequest,
    wl: Workload,
    pending: dict[int, list[int]],
    type_ok: dict[str, bool],
    quota: Quota | None,
    quota_base: tuple[int, int],
) -> tuple[list[_Alloc] | None, str]:
    """One container on one node: HAMi fitInDevices + Fit.

    ``order`` is the pod's device list: registration order for the pod's first container, then
    left as the previous container sorted it (fitInDevices sorts the same list in place). ``pending``
    holds the usage (used, mem, cores) already claimed on a device by earlier containers of the same
    pod, keyed by ``id(devstate)``."""
    nums = req.gpus
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
    sign = 1.0 if wl.gpu_scheduler_policy == "binpack" else -1.0
    keys = {id(s): (sign * _device_score(s.dev, req, *eff(s)), s.dev.numa) for s in order}
    order.sort(key=lambda s: keys[id(s)])

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
    wl: Workload,
    type_ok: dict[str, bool],
    quota: Quota | None,
    qused: _QuotaUse,
) -> tuple[list[list[_Alloc]] | None, str]:
    pending: dict[int, list[int]] = {}
    allocs: list[list[_Alloc]] = []
    order = list(ns.devs)
    pod_mem = 0
    pod_cores = 0
    for req in wl.containers:
        if req.gpus == 0:
            allocs.append([])
            continue
        got, reason = _fit_container(
            order, req, wl, pending, type_ok, quota, (qused.mem + pod_mem, qused.cores + pod_cores)
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


class _NodeIndex:
    """Nodes kept sorted by score for both node policies, updated incrementally."""

    def __init__(self, states: list[_NodeState]) -> None:
        self.states = states
        self.asc: list[tuple[float, int]] = sorted((s.score, s.idx) for s in states)
        self.desc: list[tuple[float, int]] = sorted((-s.score, s.idx) for s in states)

    def order(self, policy: str) -> Iterable[_NodeState]:
        # binpack -> highest score first; spread -> lowest first; ties -> input order.
        keys = self.desc if policy == "binpack" else self.asc
        st = self.states
        return [st[i] for _, i in keys]

    def update(self, ns: _NodeState, new_score: float) -> None:
        old = ns.score
        if new_score == old:
            return
        for lst, k_old, k_new in ((self.asc, old, new_score), (self.desc, -old, -new_score)):
            pos = bisect.bisect_left(lst, (k_old, ns.idx))
            del lst[pos]
            bisect.insort(lst, (k_new, ns.idx))
        ns.score = new_score


def _quota_for(quota: Quota | Mapping[str, Quota] | None, tenant: str | None) -> Quota | None:
    if quota is None or isinstance(quota, Quota):
        return quota
    if tenant is None:
        return None
    return quota.get(tenant)


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
    states = [_NodeState(n, i) for i, n in enumerate(nodes)]
    index = _NodeIndex(states)
    all_types = {d.type for n in nodes for d in n.devices}
    qusage: dict[str | None, _QuotaUse] = {}

    placements: list[Placement] = []
    failures: list[Failure] = []

    for wl in workloads:
        type_ok = {t: _type_ok(t, wl.use_gpu_type, wl.nouse_gpu_type) for t in all_types}
        wq = _quota_for(quota, wl.tenant)
        qkey = wl.tenant if isinstance(quota, Mapping) else None
        qused = qusage.setdefault(qkey, _QuotaUse())
        pod_gpus = sum(c.gpus for c in wl.containers)
        eligible = [s for s in states if wl.tenant is None or s.node.tenant == wl.tenant]
        eligible_ids = {s.idx for s in eligible}
        # node idx -> (node version, gpumem/gpucores quota usage, reason) of a failed attempt
        memo: dict[int, tuple[int, tuple[int, int], str]] = {}

        for r in range(wl.replicas):
            if pod_gpus == 0:
                continue  # not a HAMi pod
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
            qsnap = (qused.mem, qused.cores)
            node_reasons: dict[str, str] = {}
            placed = False
            for ns in index.order(wl.node_scheduler_policy):
                if ns.idx not in eligible_ids:
                    continue
                m = memo.get(ns.idx)
                if m is not None and m[0] == ns.version and (wq is None or m[1] == qsnap):
                    node_reasons[ns.node.name] = m[2]
                    continue
                allocs, reason = _fit_pod(ns, wl, type_ok, wq, qused)
                if allocs is None:
                    memo[ns.idx] = (ns.version, qsnap, reason)
                    node_reasons[ns.node.name] = reason
                    continue
                for ci, got in enumerate(allocs):
                    for s, mem, cores in got:
                        s.used += 1
                        s.usedmem += mem
                        s.usedcores += cores
                        qused.mem += mem
                        qused.cores += cores
                        placements.append(
                            Placement(wl.name, r, ci, ns.node.name, s.dev.id, mem, cores)
                        )
                ns.version += 1
                index.update(ns, ns.compute_score())
                placed = True
                break
            if not placed:
                failures.append(Failure(wl.name, r, _summarise(node_reasons), node_reasons))

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


