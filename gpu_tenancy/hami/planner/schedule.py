"""The scheduling loop: ``plan`` places every replica of the workloads on the nodes as HAMi would.

Workloads in order, replica by replica: admission against the namespace quota (HAMi's webhook,
scheduler/webhook.go ``fitResourceQuota``, then the API server's GPU count), then the nodes in the node
policy's order until one fits the pod (``fit``). Refusals that cannot change are remembered so that a
replica costs O(log nodes) rather than a walk over every node.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from gpu_tenancy.hami.planner.fit import (
    RESOURCE_QUOTA_NOT_FIT,
    _Alloc,
    _fit_pod,
    _NodeState,
    _QuotaUse,
    _Request,
    _Scores,
    _type_ok,
)
from gpu_tenancy.hami.planner.model import (
    MAX_DEVICES_PER_NODE,
    QUOTA_GPU,
    QUOTA_GPUCORES,
    QUOTA_GPUMEM,
    ContainerRequest,
    Node,
    Quota,
    Workload,
)
from gpu_tenancy.hami.planner.report import Failure, Placement, PlanResult

__all__ = ["plan"]


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
                # Every node is tried for every replica: a placement changes the quota's usage, which every
                # node's fit depends on, and a refusal everywhere ends the workload (`unplaceable`).
                for key in reversed(scope_nodes):
                    ns = index.node(key)
                    allocs, reason = _fit_pod(ns, requests, gpu_binpack, type_ok, wq, qused, scores)
                    if allocs is None:
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
            ns.pods += 1
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
