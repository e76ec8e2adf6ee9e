"""Per replica: fits whatever order Kubernetes and HAMi take, fits in no order, or depends on the order.

``plan`` places replicas in one order with one tie-break. What decides the order live: a tenant's
Deployments are created at once and a ReplicaSet creates its pods back to back, so pods reach the
scheduler interleaved; HAMi's webhook admits a pod against a quota cache that only grows when the
scheduler filters a pod (scheduler.go ``Filter`` -> ``quotaManager.AddUsage``), so a pod can be admitted
before its siblings are counted; a pending pod is tried again whenever something changes; nodes of equal
score are scored in goroutines over a map and the last after ``sort.Sort`` wins (score.go
``calcScoreWithOptions``), so any of them; cards of equal score are ordered by NUMA node, then by their
previous place (gpu_policy.go ``Less``), which the plan only knows when both cards declare different
NUMA nodes. ``verdicts`` explores every such order per group of workloads that share nodes or a quota:

- exhaustively, when the group's distinct states stay within ``budget`` (identical pods, cards and
  nodes are merged: swapping them changes nothing): exact for the model above;
- else by symmetry, when every pod of the group has one shape with one GPU container and every card and
  node of the group is the same (then ties cannot matter, and only how many pods fit is certain);
- else, failing closed, every replica of the group ``depends``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gpu_tenancy.hami.planner.model import Node, Quota, Workload
from gpu_tenancy.hami.planner.report import PlanResult
from gpu_tenancy.hami.planner.symmetry import symmetric
from gpu_tenancy.hami.planner.ties import container_options, node_score

__all__ = ["DEFAULT_BUDGET", "OrderVerdicts", "ReplicaVerdict", "Verdict", "WorkloadVerdict", "verdicts"]

Verdict = Literal["fits", "never", "depends"]
# Distinct states explored per group before falling back: a tenant's example stack needs a few dozen.
DEFAULT_BUDGET = 20_000


@dataclass(frozen=True)
class ReplicaVerdict:
    workload: str
    replica: int
    verdict: Verdict
    #: For "depends": what it depends on; for "never": why no order places it; "" for "fits"
    because: str = ""


@dataclass(frozen=True)
class WorkloadVerdict:
    """How many of a workload's pods are placed in every order (``fewest``) and in some (``most``): replica r
    fits if r < fewest, never if r >= most, else depends."""

    workload: str
    replicas: int
    fewest: int
    most: int
    never_because: str
    depends_because: str


@dataclass(frozen=True)
class OrderVerdicts:
    workloads: tuple[WorkloadVerdict, ...]

    @property
    def replicas(self) -> tuple[ReplicaVerdict, ...]:
        """Per replica, in the workloads' order (built on demand: a large plan has one per pod)."""
        out = []
        for w in self.workloads:
            out += [ReplicaVerdict(w.workload, r, "fits") for r in range(min(w.fewest, w.replicas))]
            out += [ReplicaVerdict(w.workload, r, "depends", w.depends_because) for r in range(w.fewest, w.most)]
            out += [ReplicaVerdict(w.workload, r, "never", w.never_because) for r in range(w.most, w.replicas)]
        return tuple(out)

    def of(self, verdict: Verdict) -> tuple[ReplicaVerdict, ...]:
        return tuple(r for r in self.replicas if r.verdict == verdict)

    @property
    def verdict(self) -> Verdict:
        """The whole plan's: "never" if any replica fits in no order, else "depends" if any depends."""
        if any(w.most < w.replicas for w in self.workloads):
            return "never"
        return "depends" if any(w.fewest < w.most for w in self.workloads) else "fits"


class _TooBig(Exception):
    pass


@dataclass(frozen=True)
class _Group:
    nodes: tuple[Node, ...]
    workloads: tuple[Workload, ...]
    quotas: tuple[Quota | None, ...]  # per workload
    qkeys: tuple[int, ...]  # per workload: its quota's slot in the state
    scopes: tuple[tuple[int, ...], ...]  # per workload: the nodes it may use
    ordered: bool


def _groups(
    nodes: Sequence[Node], workloads: Sequence[Workload], quota: Quota | Mapping[str, Quota] | None,
    ordered: frozenset[str | None],
) -> list[_Group]:
    """Workloads that share nodes or a quota, with those nodes. Tenants are separate unless a workload
    without a tenant (it sees every node) or one quota for all joins them."""
    gpu = [w for w in workloads if w.replicas > 0 and sum(c.gpus for c in w.containers) > 0]
    joined = isinstance(quota, Quota) or any(w.tenant is None for w in gpu)
    keys = [None] if joined else sorted({w.tenant for w in gpu}, key=str)
    out = []
    for key in keys:
        wls = tuple(w for w in gpu if joined or w.tenant == key)
        nds = tuple(n for n in nodes if joined or n.tenant == key)
        qlist: list[str | None] = []
        quotas, qkeys, scopes = [], [], []
        scope_of: dict[str | None, tuple[int, ...]] = {}
        for w in wls:
            q = quota if isinstance(quota, Quota) or quota is None else quota.get(w.tenant) if w.tenant else None
            slot = None if isinstance(quota, Quota) else w.tenant
            if slot not in qlist:
                qlist.append(slot)
            quotas.append(q)
            qkeys.append(qlist.index(slot))
            if w.tenant not in scope_of:
                scope_of[w.tenant] = tuple(i for i, n in enumerate(nds) if w.tenant is None or n.tenant == w.tenant)
            scopes.append(scope_of[w.tenant])
        tenants = {w.tenant for w in wls}
        out.append(_Group(nds, wls, tuple(quotas), tuple(qkeys), tuple(scopes), tenants <= ordered))
    return out


# ------------------------------------------------------------------ one pod on one node, every tie-break

_Usage = tuple[tuple[int, int, int], ...]  # per card: used slots, MiB, cores


def _pod_options(
    node: Node, usage: _Usage, wl: Workload, quota: Quota | None, qmem: int, qcores: int, budget: list[int]
) -> tuple[list[tuple[_Usage, int, int, bool]], bool]:
    """Every distinct outcome of one pod on ``node`` over the card tie-breaks HAMi may take: (usage after,
    MiB, cores, whether a tie between cards that differ decided it), and whether some tie-break refuses it."""
    outcomes: dict[_Usage, tuple[int, int, bool]] = {}
    refused = [False]

    def walk(ci: int, cur: _Usage, mem: int, cores: int, tied: bool) -> None:
        if ci == len(wl.containers):
            if cur not in outcomes or (outcomes[cur][2] and not tied):
                outcomes[cur] = (mem, cores, tied)
            return
        req = wl.containers[ci]
        if req.gpus == 0:
            walk(ci + 1, cur, mem, cores, tied)
            return
        for got, was_tied in container_options(node.devices, cur, wl, req, quota, qmem + mem, qcores + cores,
                                               budget):
            if got is None:
                refused[0] = True
                continue
            nxt = list(cur)
            m = c = 0
            for i, dm, dc in got:
                u = nxt[i]
                nxt[i] = (u[0] + 1, u[1] + dm, u[2] + dc)
                m += dm
                c += dc
            walk(ci + 1, tuple(nxt), mem + m, cores + c, tied or was_tied)

    walk(0, usage, 0, 0, False)
    return [(u, m, c, t) for u, (m, c, t) in outcomes.items()], refused[0]


def _node_sig(node: Node, usage: _Usage, pods: int) -> tuple[object, ...]:
    """What makes two nodes interchangeable: the same cards (all but their ids) with the same usage."""
    return (node.tenant, node.max_pods, pods,
            tuple(sorted(((d.type, d.devmem, d.devcore, d.count, d.health, -1 if d.numa is None else d.numa), u)
                         for d, u in zip(node.devices, usage, strict=True))))


# ------------------------------------------------------------------ every order, exhaustively

_WState = tuple[tuple[int, int, int], ...]  # per workload: pods still to create, created unplaced, placed
_QState = tuple[tuple[int, int, int], ...]  # per quota: GPUs counted by the API server, MiB, cores placed


@dataclass
class _State:
    usage: tuple[_Usage, ...]
    pods: tuple[int, ...]
    w: _WState
    q: _QState


class _Explorer:
    """Depth-first over every order of creations and schedulings and every tie, memoised on the state up
    to swapping interchangeable nodes; ``fixed_ties`` takes the first tie-break only (to tell order from ties)."""

    def __init__(self, group: _Group, budget: int, fixed_ties: bool = False) -> None:
        self.g = group
        self.budget = [budget]
        self.fixed_ties = fixed_ties
        self.memo: dict[object, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.ties: dict[str, None] = {}  # ties met that could matter, in order

    def key(self, st: _State) -> object:
        nodes = tuple(sorted(_node_sig(n, u, p) for n, u, p in zip(self.g.nodes, st.usage, st.pods, strict=True)))
        return nodes, st.w, st.q

    def spend(self) -> None:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise _TooBig

    def run(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        g = self.g
        st = _State(tuple(tuple((0, 0, 0) for _ in n.devices) for n in g.nodes), tuple(0 for _ in g.nodes),
                    tuple((w.replicas, 0, 0) for w in g.workloads), tuple((0, 0, 0) for _ in set(g.qkeys)))
        try:
            return self.explore(st)
        except OverflowError:
            raise _TooBig from None

    def explore(self, st: _State) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(fewest, most) placed per workload from ``st`` on (``_witness`` replays an order to the fewest)."""
        k = self.key(st)
        found = self.memo.get(k)
        if found is not None:
            return found
        self.spend()
        lo: list[int] | None = None
        hi: list[int] = [0] * len(self.g.workloads)
        steps, can_stop = self.moves(st)
        if can_stop or not steps:
            lo = [w[2] for w in st.w]
            hi = list(lo)
        for _label, nxt in steps:
            clo, chi = self.explore(nxt)
            lo = list(clo) if lo is None else [min(a, b) for a, b in zip(lo, clo, strict=True)]
            hi = [max(a, b) for a, b in zip(hi, chi, strict=True)]
        assert lo is not None
        result = (tuple(lo), tuple(hi))
        self.memo[k] = result
        return result

    def moves(self, st: _State) -> tuple[list[tuple[str, _State]], bool]:
        """Every next step, and whether the run may end here: nothing left to create and every pod left
        pending may stay so (the scheduler retries pending pods, so one that must fit will)."""
        g = self.g
        out: list[tuple[str, _State]] = []
        can_stop = True
        for wi, wl in enumerate(g.workloads):
            if st.w[wi][0] and self.may_create(st, wi):
                out.append((f"create {wl.name}", self.create(st, wi)))
                can_stop = False
        for wi in range(len(g.workloads)):
            if st.w[wi][1]:
                steps, may_stay = self.schedule(st, wi)
                out.extend(steps)
                can_stop = can_stop and may_stay
        return out, can_stop

    def may_create(self, st: _State, wi: int) -> bool:
        """With ordered creation a Deployment is created once the previous one is ready (all its pods
        placed); one that never is stops the rest."""
        if not self.g.ordered:
            return True
        return all(st.w[j][2] == self.g.workloads[j].replicas for j in range(wi))

    def create(self, st: _State, wi: int) -> _State:
        wl, quota, qk = self.g.workloads[wi], self.g.quotas[wi], self.g.qkeys[wi]
        to_create, unplaced, placed = st.w[wi]
        gpu, mem, cores = st.q[qk]
        admitted = True
        if quota is not None:
            # HAMi's webhook against its cache (placed pods only), then the API server's GPU count.
            want_mem = sum(c.gpus * (c.gpumem_mib or 0) for c in wl.containers if c.gpus > 0)
            want_cores = sum(c.gpus * c.coresreq for c in wl.containers if c.gpus > 0)
            if (want_mem or want_cores) and (
                (quota.gpumem is not None and mem + want_mem > quota.gpumem)
                or (quota.gpucores is not None and cores + want_cores > quota.gpucores)
            ):
                admitted = False
            pod_gpus = sum(c.gpus for c in wl.containers)
            if admitted and quota.gpu is not None and gpu + pod_gpus > quota.gpu:
                admitted = False
            if admitted:
                gpu += pod_gpus
        w = list(st.w)
        w[wi] = (to_create - 1, unplaced + admitted, placed)
        q = list(st.q)
        q[qk] = (gpu, mem, cores)
        return _State(st.usage, st.pods, tuple(w), tuple(q))

    def schedule(self, st: _State, wi: int) -> tuple[list[tuple[str, _State]], bool]:
        """Where the next pod of workload ``wi`` may land, and whether it may stay pending (every node
        refuses it under some tie-break)."""
        g = self.g
        wl, quota, qk = g.workloads[wi], g.quotas[wi], g.qkeys[wi]
        gpu, qmem, qcores = st.q[qk]
        sign = -1.0 if wl.node_scheduler_policy == "binpack" else 1.0
        cands = []
        for ni in g.scopes[wi]:
            node = g.nodes[ni]
            if st.pods[ni] >= node.max_pods:
                continue  # kube-scheduler's NodeResourcesFit: Too many pods
            options, may_refuse = _pod_options(node, st.usage[ni], wl, quota, qmem, qcores, self.budget)
            if options:
                cands.append((sign * node_score(node, st.usage[ni]), ni, options, may_refuse))
        # HAMi takes the best score among the nodes that fit: a node is chosen when every better one may
        # refuse the pod, and among equal scores any of them.
        reachable = [c for c in cands if all(o[3] for o in cands if o[0] < c[0])]
        if self.fixed_ties:
            reachable = reachable[:1]
        out: list[tuple[str, _State]] = []
        seen: set[object] = set()
        for score, ni, options, _ in reachable:
            node = g.nodes[ni]
            rivals = [c[1] for c in reachable if c[0] == score]
            if len({self.key_node(st, r) for r in rivals}) > 1:
                self.ties.setdefault(f"equal node scores between {', '.join(g.nodes[r].name for r in rivals)}")
            for usage, m, c, card_tie in options[:1] if self.fixed_ties else options:
                u = list(st.usage)
                u[ni] = usage
                p = list(st.pods)
                p[ni] += 1
                w = list(st.w)
                tc, un, pl = w[wi]
                w[wi] = (tc, un - 1, pl + 1)
                q = list(st.q)
                q[qk] = (gpu, qmem + m, qcores + c)
                nxt = _State(tuple(u), tuple(p), tuple(w), tuple(q))
                k = self.key(nxt)
                if k in seen:
                    continue
                seen.add(k)
                if card_tie:
                    self.ties.setdefault(f"equal card scores on {node.name} (NUMA nodes not declared or equal)")
                out.append((f"schedule {wl.name} on {node.name}", nxt))
        return out, all(c[3] for c in cands)

    def key_node(self, st: _State, ni: int) -> object:
        return _node_sig(self.g.nodes[ni], st.usage[ni], st.pods[ni])


# ------------------------------------------------------------------ the verdicts


# Steps of a witness order shown, in runs ("schedule w1 on l4 x2"); a longer order ends with "...".
_WITNESS_RUNS = 12


def _compress(path: Sequence[str]) -> str:
    runs: list[tuple[str, int]] = []
    for step in path:
        if runs and runs[-1][0] == step:
            runs[-1] = (step, runs[-1][1] + 1)
        else:
            runs.append((step, 1))
    shown = [f"{s} x{n}" if n != 1 else s for s, n in runs[:_WITNESS_RUNS]]
    return ", ".join(shown) + (", ..." if len(runs) > _WITNESS_RUNS else "")


def _failure_reasons(declared: PlanResult | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in declared.failures if declared else ():
        out.setdefault(f.workload, f.reason)
    return out


def verdicts(
    nodes: Sequence[Node],
    workloads: Sequence[Workload],
    quota: Quota | Mapping[str, Quota] | None = None,
    *,
    ordered: frozenset[str | None] = frozenset(),
    budget: int = DEFAULT_BUDGET,
    declared: PlanResult | None = None,
) -> OrderVerdicts:
    """Each replica's verdict over every order and tie-break (module docstring). ``ordered`` names the
    tenants whose Deployments are created one after the other (None: workloads without a tenant);
    ``declared`` is ``plan``'s result for the same input, for HAMi's reasons and to spare re-planning."""
    reasons = _failure_reasons(declared)
    groups = _groups(nodes, workloads, quota, ordered)
    # By tenant and name: two tenants may each have a workload of the same name.
    by_name: dict[tuple[str | None, str], WorkloadVerdict] = {}
    for g in groups:
        lo: tuple[int, ...]
        hi: tuple[int, ...]
        why: dict[int, str] = {}  # by the workload's place in the group
        # The symmetry argument first: it costs one plan, where exploring a large group would spend the budget.
        found = symmetric(g.nodes, g.workloads, g.quotas, g.ordered, declared if len(groups) == 1 else None)
        if found is not None:
            lo, hi = found
            for i, w in enumerate(g.workloads):
                why[i] = ("which pods of identical shape get the places depends on the order they are "
                          f"created in: {lo[i]} to {hi[i]} of {w.replicas} placed")
        else:
            try:
                lo, hi = _explore(g, budget, why)
            except _TooBig:
                lo = tuple(0 for _ in g.workloads)
                hi = tuple(w.replicas for w in g.workloads)
                for i in range(len(g.workloads)):
                    why[i] = (f"not established: more than {budget} states to explore and no symmetry "
                              "argument applies (pods of several shapes or cards that differ)")
        for i, w in enumerate(g.workloads):
            by_name[(w.tenant, w.name)] = WorkloadVerdict(w.name, w.replicas, lo[i], hi[i],
                                              reasons.get(w.name, "no order places it"), why.get(i, ""))
    return OrderVerdicts(tuple(by_name[(w.tenant, w.name)] for w in workloads if (w.tenant, w.name) in by_name))


def _explore(g: _Group, budget: int, why: dict[int, str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Exhaustive exploration of one group; ``why`` gets, per workload that varies, what it depends on."""
    explorer = _Explorer(g, budget)
    lo, hi = explorer.run()
    varies = [i for i in range(len(lo)) if lo[i] < hi[i]]
    if varies:
        olo, ohi = _Explorer(g, budget, fixed_ties=True).run()
        ties = "; ".join(list(explorer.ties)[:3])
        for i in varies:
            factors = []
            if olo[i] < ohi[i]:
                factors.append("the order pods are created and scheduled in")
            if ties:
                factors.append(f"tie-breaks ({ties})")
            explorer.budget[0] = budget
            witness = _witness(explorer, g, i)
            why[i] = (
                f"{' and '.join(factors) or 'the order and the tie-breaks together'}: "
                f"{lo[i]} to {hi[i]} of {g.workloads[i].replicas} placed; fewest when: {witness}"
            )
    return lo, hi


def _witness(explorer: _Explorer, g: _Group, wi: int) -> str:
    """The recorded path to the fewest placements of workload ``wi``, replayed from the start."""
    st = _State(tuple(tuple((0, 0, 0) for _ in n.devices) for n in g.nodes), tuple(0 for _ in g.nodes),
                tuple((w.replicas, 0, 0) for w in g.workloads), tuple((0, 0, 0) for _ in set(g.qkeys)))
    path: list[str] = []
    for _ in range(sum(w.replicas for w in g.workloads) * 2 + 1):
        best: tuple[int, str, _State] | None = None
        steps, can_stop = explorer.moves(st)
        for label, nxt in steps:
            lo = explorer.explore(nxt)[0][wi]
            if best is None or lo < best[0]:
                best = (lo, label, nxt)
        if best is None or (can_stop and st.w[wi][2] <= best[0]):
            break
        path.append(best[1])
        st = best[2]
    return _compress(path)
