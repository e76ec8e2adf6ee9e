"""The order verdicts at scale: when order and ties cannot change how many pods fit (``orders``).

One pod shape with one GPU container, every card and node of a group the same, no gpumem/gpucores quota the
group could reach: a card's usage is then k times the container's request and a node's state follows from its
pod count, so equal scores mean identical states and every tie is between interchangeable cards or nodes.
Only which pods get the places the declared plan finds depends on the order.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from gpu_tenancy.hami.planner.fit import _NVIDIA
from gpu_tenancy.hami.planner.model import Node, Quota, Workload
from gpu_tenancy.hami.planner.report import PlanResult
from gpu_tenancy.hami.planner.schedule import _pod_shape, plan
from gpu_tenancy.hami.planner.ties import node_score

__all__ = ["symmetric"]


def symmetric(
    nodes: Sequence[Node], workloads: Sequence[Workload], quotas: Sequence[Quota | None], ordered: bool,
    declared: PlanResult | None,
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(fewest, most) placed per workload when order and ties cannot change how many pods fit: one pod shape
    with one GPU container, every card of the group the same, every node the same, and no gpumem/gpucores
    quota the whole group could reach (so neither the webhook nor Fit's quota check ever refuses). Then a
    card's usage is k times the container's request, a node's state follows from its pod count, and equal
    scores mean identical states: every tie is between interchangeable cards or nodes. Pods are identical,
    so which pods fit is any set of the declared plan's size. None when the argument does not apply."""
    shapes = {(_pod_shape(w), w.node_scheduler_policy, w.tenant) for w in workloads}
    if len(shapes) != 1 or sum(1 for c in workloads[0].containers if c.gpus > 0) != 1:
        return None
    cards = {(d.type, d.devmem, d.devcore, d.count, d.health) for n in nodes for d in n.devices}
    if len(cards) != 1 or _NVIDIA not in next(iter(cards))[0].lower():
        return None
    if len({(len(n.devices), n.max_pods, n.tenant) for n in nodes}) != 1:
        return None
    total = sum(w.replicas for w in workloads)
    wl = workloads[0]
    # Equal node scores must mean equal pod counts: the float32 score has to grow with every pod a node
    # can take (it would not on a node with so many slots that one pod is below float32's resolution).
    ctr = next(c for c in wl.containers if c.gpus > 0)
    node, card = nodes[0], nodes[0].devices[0]
    most = min(node.max_pods, sum(d.count for d in node.devices) // max(ctr.gpus, 1))
    scores = [node_score(node, tuple((p * ctr.gpus, p * ctr.gpus * ctr.memreq(card), p * ctr.gpus * ctr.cores)
                                      if i == 0 else (0, 0, 0) for i in range(len(node.devices))))
              for p in range(most + 1)]
    if any(a >= b for a, b in pairwise(scores)):
        return None
    for quota in quotas:
        if quota is not None and (quota.gpumem is not None or quota.gpucores is not None):
            ctr = next(c for c in wl.containers if c.gpus > 0)
            mem = ctr.gpus * max(ctr.memreq(d) for n in nodes for d in n.devices) * total
            if (quota.gpumem is not None and mem > quota.gpumem) or (
                quota.gpucores is not None and ctr.gpus * ctr.coresreq * total > quota.gpucores
            ):
                return None
    names = {w.name for w in workloads}
    if declared is None:
        declared = plan(nodes, workloads, quotas[0], exact_device_order=False)
    # Every pod has the one shape, so the pods placed are those with no failure.
    placed = total - sum(1 for f in declared.failures if f.workload in names)
    if ordered:
        fixed, left = [], placed
        for w in workloads:
            fixed.append(min(w.replicas, left))
            left -= fixed[-1]
        return tuple(fixed), tuple(fixed)
    lo = tuple(max(0, placed - (total - w.replicas)) for w in workloads)
    hi = tuple(min(w.replicas, placed) for w in workloads)
    return lo, hi
