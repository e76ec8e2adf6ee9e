"""Hypothesis: placements never exceed a card's memory, cores or split count."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Workload
from gpu_tenancy.hami.planner.schedule import plan

containers = st.builds(
    ContainerRequest,
    gpus=st.integers(1, 3),
    gpumem_mib=st.one_of(st.none(), st.integers(1, 30000)),
    # HAMi's webhook denies percentages outside 0..100; the planner refuses them (test_planner).
    gpumem_percentage=st.one_of(st.none(), st.integers(0, 100)),
    gpucores=st.one_of(st.none(), st.integers(0, 150)),
)


@settings(max_examples=150, deadline=None)
@given(
    cards=st.lists(st.tuples(st.integers(1000, 81920), st.integers(1, 10)), min_size=1, max_size=6),
    wls=st.lists(
        st.tuples(st.lists(containers, min_size=1, max_size=3), st.integers(1, 6), st.booleans()),
        min_size=1,
        max_size=5,
    ),
)
def test_capacity_never_exceeded(
    cards: list[tuple[int, int]], wls: list[tuple[list[ContainerRequest], int, bool]]
) -> None:
    devs = [Device(f"g{i}", "NVIDIA-X", m, 100, c, index=i) for i, (m, c) in enumerate(cards)]
    nodes = [Node("n0", tuple(devs[::2])), Node("n1", tuple(devs[1::2]))]
    workloads = [
        Workload(f"w{i}", tuple(cs), replicas=r, gpu_scheduler_policy="binpack" if b else "spread")
        for i, (cs, r, b) in enumerate(wls)
    ]
    res = plan(nodes, workloads)
    mem: dict[str, int] = defaultdict(int)
    cores: dict[str, int] = defaultdict(int)
    slots: dict[str, int] = defaultdict(int)
    for p in res.placements:
        mem[p.device_id] += p.mem_mib
        cores[p.device_id] += p.cores
        slots[p.device_id] += 1
    for d in devs:
        assert mem[d.id] <= d.devmem and cores[d.id] <= d.devcore and slots[d.id] <= d.count
    # a container's GPUs are on distinct cards
    seen: set[tuple[str, int, int, str]] = set()
    for p in res.placements:
        key = (p.workload, p.replica, p.container, p.device_id)
        assert key not in seen
        seen.add(key)


@settings(max_examples=150, deadline=None)
@given(
    cards=st.lists(st.tuples(st.integers(1000, 81920), st.integers(1, 10)), min_size=1, max_size=6),
    wls=st.lists(st.tuples(st.lists(containers, min_size=1, max_size=3), st.integers(1, 6)), min_size=1, max_size=5),
    limits=st.tuples(st.one_of(st.none(), st.integers(0, 12)), st.one_of(st.none(), st.integers(1, 100000)),
                     st.one_of(st.none(), st.integers(1, 400))),
)
def test_quota_never_exceeded(
    cards: list[tuple[int, int]], wls: list[tuple[list[ContainerRequest], int]], limits: tuple[int | None, ...]
) -> None:
    """Placed memory and cores stay within gpumem/gpucores; admitted pods' GPUs within the GPU count."""
    from gpu_tenancy.hami.planner.model import Quota

    gpu, gpumem, gpucores = limits
    quota = Quota(gpu=gpu, gpumem=gpumem, gpucores=gpucores)
    node = Node("n", tuple(Device(f"g{i}", "NVIDIA-X", m, 100, c, index=i) for i, (m, c) in enumerate(cards)))
    workloads = [Workload(f"w{i}", tuple(cs), replicas=r) for i, (cs, r) in enumerate(wls)]
    res = plan([node], workloads, quota)
    assert gpumem is None or sum(p.mem_mib for p in res.placements) <= gpumem
    assert gpucores is None or sum(p.cores for p in res.placements) <= gpucores
    pod_gpus = {w.name: sum(c.gpus for c in w.containers) for w in workloads}
    admitted = sum(pod_gpus[w.name] * w.replicas for w in workloads) - sum(
        pod_gpus[f.workload] for f in res.failures if not f.admitted)
    assert gpu is None or admitted <= gpu
