"""A brute-force oracle for the planner's order verdicts, written apart from gpu_tenancy.hami.planner.orders.

It enumerates, without merging anything, every run of the model HAMi v2.10.0 and Kubernetes allow:
- pods are created one at a time, in any interleaving of the workloads (or workload after workload, each
  once the previous one has all its pods placed, when creation is ordered); HAMi's webhook admits a pod
  against the usage of the pods placed so far (scheduler.go Filter -> quotaManager.AddUsage), the API
  server against the GPUs of the pods created so far;
- any created pod not yet placed may be scheduled next (a pending pod is retried whenever anything
  changes); the run may end only when nothing is left to create and every pending pod may be refused;
- a node's cards are tried in every order Fit could walk them: by score (binpack: the highest first,
  spread: the lowest first), equal scores in any order unless both cards declare different NUMA nodes
  (then the higher NUMA node first: Less sorts NUMA ascending and Fit walks from the end);
- a node that fits under some card order may refuse under another; among the nodes that fit, the best
  node score wins, equal scores any of them; a node running max_pods pods refuses (kube-scheduler).
Scores are recomputed here in float32 with numpy, from gpu_policy.go ComputeScore and node_policy.go
ComputeDefaultScore.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import cache

import numpy as np

from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Quota, Workload

F = np.float32


def _score(count: int, cores: int, mem: int, used: int, ucores: int, umem: int) -> float:
    if count == 0 or cores == 0 or mem == 0:
        return 0.0
    a = F(F(used) / F(count))
    b = F(F(ucores) / F(cores))
    c = F(F(umem) / F(mem))
    return float(F(F(10) * F(F(a + b) + c)))


def _cores(c: ContainerRequest) -> int:
    if c.gpucores is not None:
        return min(c.gpucores, 100)
    exclusive = c.gpumem_percentage == 100 if c.gpumem_percentage is not None else c.gpumem_mib is None
    return 100 if exclusive else 0


def _coresreq(c: ContainerRequest) -> int:
    """GenerateResourceRequests' Coresreq: gpucores as written (not clamped), else the webhook's 100 or 0."""
    return c.gpucores if c.gpucores is not None else _cores(c)


def _score_mem(c: ContainerRequest, d: Device) -> int:
    """ComputeScore's mem: the percentage of the card when MemPercentagereq is not 0 or 101, else Memreq.
    MemPercentagereq is the percentage if > 0, else 101, and 100 when there is no gpumem either."""
    pct = c.gpumem_percentage if c.gpumem_percentage else 101
    if pct == 101 and not c.gpumem_mib:
        pct = 100
    return d.devmem * pct // 100 if pct not in (0, 101) else (c.gpumem_mib or 0)


def _memreq(c: ContainerRequest, d: Device) -> int:
    if c.gpumem_mib:
        return c.gpumem_mib
    pct = c.gpumem_percentage if c.gpumem_percentage else 100
    return d.devmem * pct // 100


def _type_ok(t: str, use: Sequence[str], nouse: Sequence[str]) -> bool:
    def terms(xs: Sequence[str]) -> list[str]:
        return [p.strip().upper() for x in xs for p in x.split(",") if p.strip()]

    if terms(use) and not any(u in t.upper() for u in terms(use)):
        return False
    return not any(u in t.upper() for u in terms(nouse))


def outcomes(nodes: Sequence[Node], workloads: Sequence[Workload], quota: Quota | None,
             ordered: bool) -> set[tuple[int, ...]]:
    """Every reachable final count of placed pods per workload. One quota for every workload."""
    wls = [w for w in workloads if w.replicas and sum(c.gpus for c in w.containers)]

    def card_walks(node: Node, usage: tuple, w: Workload, c: ContainerRequest) -> list[list[int]]:
        idx = [i for i, d in enumerate(node.devices) if "nvidia" in d.type.lower()]
        sign = 1 if w.gpu_scheduler_policy == "binpack" else -1

        def key(i: int) -> float:
            d, (used, umem, ucores) = node.devices[i], usage[i]
            if d.type == "NVIDIA":  # ComputeScore adds the container's own request on a card of its type
                used, ucores, umem = used + 1, ucores + _coresreq(c), umem + _score_mem(c, d)
            return sign * _score(d.count, d.devcore, d.devmem, used, ucores, umem)

        walks = []
        for perm in itertools.permutations(idx):
            ok = True
            for a, b in itertools.combinations(perm, 2):  # a is walked before b
                ka, kb = key(a), key(b)
                na, nb = node.devices[a].numa, node.devices[b].numa
                if ka < kb or (ka == kb and na is not None and nb is not None and na < nb):
                    ok = False
                    break
            if ok:
                walks.append(list(perm))
        return walks

    def pod_on_node(node: Node, usage: tuple, w: Workload, qmem: int, qcores: int) -> tuple[set, bool]:
        results: set = set()
        refused = False

        def go(ci: int, u: tuple, mem: int, cores: int) -> None:
            nonlocal refused
            if ci == len(w.containers):
                results.add((u, mem, cores))
                return
            c = w.containers[ci]
            if c.gpus == 0:
                go(ci + 1, u, mem, cores)
                return
            nv = [i for i, d in enumerate(node.devices) if "nvidia" in d.type.lower()]
            if c.gpus > len(nv):
                refused = True
                return
            for walk in card_walks(node, u, w, c):
                taken, m_acc, c_acc = [], 0, 0
                for i in walk:
                    d, (used, umem, ucores) = node.devices[i], u[i]
                    m, k = _memreq(c, d), _cores(c)
                    if not d.health or not _type_ok(d.type, w.use_gpu_type, w.nouse_gpu_type) or d.count <= used:
                        continue
                    if quota is not None and (
                        (quota.gpumem is not None and qmem + mem + m_acc + m > quota.gpumem)
                        or (quota.gpucores is not None and qcores + cores + c_acc + k > quota.gpucores)
                    ):
                        continue
                    if d.devmem - umem < m or d.devcore - ucores < k:
                        continue
                    if d.devcore == 100 and k == 100 and used > 0:
                        continue
                    if d.devcore != 0 and ucores == d.devcore and k == 0:
                        continue
                    taken.append((i, m, k))
                    m_acc += m
                    c_acc += k
                    if len(taken) == c.gpus:
                        break
                if len(taken) < c.gpus:
                    refused = True
                    continue
                nu = list(u)
                for i, m, k in taken:
                    nu[i] = (nu[i][0] + 1, nu[i][1] + m, nu[i][2] + k)
                go(ci + 1, tuple(nu), mem + m_acc, cores + c_acc)

        go(0, usage, 0, 0)
        return results, refused

    def node_score(node: Node, usage: tuple) -> float:
        ds = node.devices
        return _score(sum(d.count for d in ds), sum(d.devcore for d in ds), sum(d.devmem for d in ds),
                      sum(x[0] for x in usage), sum(x[2] for x in usage), sum(x[1] for x in usage))

    @cache
    def run(usages: tuple, pods: tuple, ws: tuple, q: tuple) -> frozenset:
        finals: set = set()
        can_end = True
        gpu_used, mem_used, cores_used = q
        for wi, w in enumerate(wls):
            to_create, pending, placed = ws[wi]
            if not to_create:
                continue
            if ordered and any(ws[j][2] < wls[j].replicas for j in range(wi)):
                continue
            can_end = False
            g = sum(c.gpus for c in w.containers)
            wm = sum(c.gpus * (c.gpumem_mib or 0) for c in w.containers)
            wc = sum(c.gpus * (c.gpucores if c.gpucores is not None else _cores(c)) for c in w.containers)
            admit = True
            if quota is not None and (wm or wc) and (
                (quota.gpumem is not None and mem_used + wm > quota.gpumem)
                or (quota.gpucores is not None and cores_used + wc > quota.gpucores)
            ):
                admit = False
            if admit and quota is not None and quota.gpu is not None and gpu_used + g > quota.gpu:
                admit = False
            nws = list(ws)
            nws[wi] = (to_create - 1, pending + admit, placed)
            finals |= run(usages, pods, tuple(nws), (gpu_used + g * admit, mem_used, cores_used))
        for wi, w in enumerate(wls):
            to_create, pending, placed = ws[wi]
            if not pending:
                continue
            per_node = []
            for ni, node in enumerate(nodes):
                if w.tenant is not None and node.tenant != w.tenant:
                    continue
                if pods[ni] >= node.max_pods:
                    continue
                res, refused = pod_on_node(node, usages[ni], w, mem_used, cores_used)
                choices = [(ni, r) for r in res] + ([None] if refused or not res else [])
                per_node.append((node_score(node, usages[ni]), choices))
            binpack = w.node_scheduler_policy == "binpack"
            may_pend = False
            for pick in itertools.product(*[c for _, c in per_node]):
                fit = [(per_node[k][0], p) for k, p in enumerate(pick) if p is not None]
                if not fit:
                    may_pend = True
                    continue
                best = (max if binpack else min)(s for s, _ in fit)
                for s, (ni, (u, m, k)) in fit:
                    if s != best:
                        continue
                    nu, np_ = list(usages), list(pods)
                    nu[ni] = u
                    np_[ni] += 1
                    nws = list(ws)
                    nws[wi] = (to_create, pending - 1, placed + 1)
                    finals |= run(tuple(nu), tuple(np_), tuple(nws), (gpu_used, mem_used + m, cores_used + k))
            can_end = can_end and may_pend
        if can_end:
            finals.add(tuple(w[2] for w in ws))
        return frozenset(finals)

    start = (tuple(tuple((0, 0, 0) for _ in n.devices) for n in nodes), tuple(0 for _ in nodes),
             tuple((w.replicas, 0, 0) for w in wls), (0, 0, 0))
    names = [w.name for w in wls]
    found = run(*start)
    # Workloads without GPUs are not HAMi's: report them as all placed.
    full = []
    for vec in found:
        by = dict(zip(names, vec, strict=True))
        full.append(tuple(by.get(w.name, w.replicas) for w in workloads))
    return set(full)
