"""One container on one node under every card tie-break HAMi may take (for ``orders``).

fitInDevices sorts a node's cards by score (gpu_policy.go ``Less``: binpack ascending, spread descending,
NUMA ascending on equal scores, then ``sort.Sort`` keeps the previous order), and Fit walks the list from
its end, taking the first cards that pass (device.go ``Fit``). Between cards of equal score the plan knows
the order only when both declare their NUMA node and the nodes differ; otherwise either may come first.
Identical cards with identical usage are interchangeable, so only one of them is tried at each step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gpu_tenancy.hami.planner.fit import _NVIDIA, _REQUEST_TYPE, _score, _type_ok
from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Quota, Workload

__all__ = ["container_options", "node_score"]

_Usage = tuple[tuple[int, int, int], ...]


def _passes(d: Device, u: tuple[int, int, int], req: ContainerRequest, type_ok: bool, quota: Quota | None,
            qmem: int, qcores: int) -> int | None:
    """Fit's checks on one card, in Fit's order; the MiB it takes, or None when it refuses."""
    used, usedmem, usedcores = u
    cores = req.cores
    memreq = req.memreq(d)
    if not d.health or not type_ok or d.count <= used:
        return None
    if quota is not None and ((quota.gpumem is not None and qmem + memreq > quota.gpumem)
                              or (quota.gpucores is not None and qcores + cores > quota.gpucores)):
        return None
    if d.devmem - usedmem < memreq or d.devcore - usedcores < cores:
        return None
    if d.devcore == 100 and cores == 100 and used > 0:
        return None
    if d.devcore != 0 and usedcores == d.devcore and cores == 0:
        return None
    return memreq


def _card_score(d: Device, u: tuple[int, int, int], req: ContainerRequest) -> float:
    """ComputeScore: the container's own request only counts on a card whose type is exactly "NVIDIA"."""
    used, usedmem, usedcores = u
    if d.type != _REQUEST_TYPE:
        return _score(d.count, d.devcore, d.devmem, used, usedcores, usedmem)
    pct = req.mem_percentagereq
    mem = d.devmem * pct // 100 if pct not in (0, 101) else (req.gpumem_mib or 0)
    return _score(d.count, d.devcore, d.devmem, 1 + used, req.coresreq + usedcores, mem + usedmem)


def container_options(
    devices: Sequence[Device], cur: _Usage, wl: Workload, req: ContainerRequest, quota: Quota | None,
    qmem: int, qcores: int, budget: list[int],
) -> Iterator[tuple[list[tuple[int, int, int]] | None, bool]]:
    """Each distinct set of cards (index, MiB, cores) Fit may take for ``req``, None for a tie-break under
    which Fit refuses, each with whether a tie between cards that differ decided it. ``budget[0]`` counts
    the branches left; raises OverflowError at 0."""
    devs = [i for i, d in enumerate(devices) if _NVIDIA in d.type.lower()]
    if req.gpus > len(devs):
        yield None, False  # NodeInsufficientDevice
        return
    binpack = wl.gpu_scheduler_policy == "binpack"
    key = {i: (_card_score(devices[i], cur[i], req) * (1 if binpack else -1)) for i in devs}
    # Fit's walk: the highest key first; equal keys form a group whose order the NUMA nodes may decide.
    groups: list[list[int]] = []
    for i in sorted(devs, key=lambda i: -key[i]):
        if groups and key[groups[-1][0]] == key[i]:
            groups[-1].append(i)
        else:
            groups.append([i])
    ok = {d.type: _type_ok(d.type, wl.use_gpu_type, wl.nouse_gpu_type) for d in devices}

    def sig(i: int) -> tuple[object, ...]:
        d = devices[i]
        return (d.type, d.devmem, d.devcore, d.count, d.health, d.numa, cur[i])

    def heads(rest: list[int]) -> list[int]:
        """Cards of a tie group that may be tried next: none with a known, higher NUMA node still waits
        (Less sorts NUMA ascending and Fit walks from the end), one per interchangeable kind."""
        out: dict[tuple[object, ...], int] = {}
        for x in rest:
            nx = devices[x].numa
            if nx is not None and any((ny := devices[y].numa) is not None and ny > nx for y in rest):
                continue
            out.setdefault(sig(x), x)
        return list(out.values())

    def walk(gi: int, rest: list[int], chosen: list[tuple[int, int, int]], mem: int, cores: int,
             tied: bool) -> Iterator[tuple[list[tuple[int, int, int]] | None, bool]]:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError("tie-breaks")

        def fits(y: int) -> int | None:
            return _passes(devices[y], cur[y], req, ok[devices[y].type], quota, qmem + mem, qcores + cores)

        # A card refused now stays refused for this container (the quota's remainder only shrinks), and
        # Fit skips it wherever it stands: only the cards that pass are ordered.
        rest = [y for y in rest if fits(y) is not None]
        while not rest:
            gi += 1
            if gi >= len(groups):
                yield None, tied  # the walk ends short: AllocatedCardsInsufficientRequest or a card's reason
                return
            rest = [y for y in groups[gi] if fits(y) is not None]
        options = heads(rest)
        now_tied = tied or len(options) > 1
        for x in options:
            memreq = fits(x)
            assert memreq is not None
            got = [*chosen, (x, memreq, req.cores)]
            if len(got) == req.gpus:
                yield got, now_tied
            else:
                yield from walk(gi, [y for y in rest if y != x], got, mem + memreq, cores + req.cores, now_tied)

    yield from walk(-1, [], [], 0, 0, False)


def node_score(node: Node, usage: _Usage) -> float:
    """ComputeDefaultScore over the node's cards, from the usage before the pod."""
    d = node.devices
    return _score(sum(x.count for x in d), sum(x.devcore for x in d), sum(x.devmem for x in d),
                  sum(u[0] for u in usage), sum(u[2] for u in usage), sum(u[1] for u in usage))
