"""Rule tests for gpu_tenancy.planner (HAMi v2.10.0 Fit semantics)."""

from __future__ import annotations

from gpu_tenancy.planner import (
    ContainerRequest,
    Device,
    Node,
    Quota,
    Workload,
    plan,
)

A100 = "NVIDIA-A100-SXM4-80GB"


def node(name: str = "n", n: int = 1, mem: int = 81920, count: int = 10, typ: str = A100) -> Node:
    return Node(name, tuple(Device(f"{name}-g{i}", typ, mem, 100, count, index=i) for i in range(n)))


def wl(name: str = "w", replicas: int = 1, **kw: object) -> Workload:
    c = ContainerRequest(**kw)  # type: ignore[arg-type]
    return Workload(name, (c,), replicas=replicas)


def test_memory_insufficient() -> None:
    r = plan([node()], [wl(gpumem_mib=90000)])
    assert r.failures[0].reason == "1/1 CardInsufficientMemory"


def test_default_whole_card_and_percentage() -> None:
    r = plan([node()], [wl(gpumem_percentage=25, replicas=4), wl("x", gpumem_mib=1)])
    assert [p.mem_mib for p in r.placements[:4]] == [20480] * 4
    assert r.failures[0].reason == "1/1 CardInsufficientMemory"
    r2 = plan([node()], [wl()])
    assert r2.placements[0].mem_mib == 81920


def test_cores_100_needs_idle_card() -> None:
    r = plan([node()], [wl("a", gpumem_mib=1000), wl("b", gpumem_mib=1000, gpucores=150)])
    assert r.failures[0].reason == "1/1 ExclusiveDeviceAllocateConflict"


def test_two_gpu_container_one_free_card() -> None:
    r = plan([node(n=2)], [wl("a", gpumem_mib=81920), wl("b", gpus=2, gpumem_mib=1000)])
    assert r.failures[0].reason == "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory"
    r2 = plan([node(n=1)], [wl(gpus=2)])
    assert r2.failures[0].reason == "NodeInsufficientDevice"


def test_split_count_exhausted() -> None:
    r = plan([node(count=2)], [wl(gpumem_mib=10, replicas=3)])
    assert r.failures[0].reason == "1/1 CardTimeSlicingExhausted"


def test_type_filters() -> None:
    assert plan([node()], [Workload("w", (ContainerRequest(),), use_gpu_type=("l4",))]).failures[0].reason == (
        "1/1 CardTypeMismatch"
    )
    assert plan([node()], [Workload("w", (ContainerRequest(),), nouse_gpu_type=("a100",))]).failures
    assert plan([node()], [Workload("w", (ContainerRequest(),), use_gpu_type=("A100",))]).fits


def test_binpack_vs_spread() -> None:
    c = (ContainerRequest(gpumem_mib=1000),)
    spread = plan([node(n=2)], [Workload("w", c, replicas=2, gpu_scheduler_policy="spread")])
    assert len({p.device_id for p in spread.placements}) == 2
    binpack = plan([node(n=2)], [Workload("w", c, replicas=2, gpu_scheduler_policy="binpack")])
    assert len({p.device_id for p in binpack.placements}) == 1


def test_quota() -> None:
    r = plan([node()], [wl(gpumem_mib=1000, replicas=3)], Quota(gpumem=2000))
    assert r.failures[0].reason == "1/1 ResourceQuotaNotFit"
    r2 = plan([node(n=2)], [wl(gpumem_mib=10, replicas=3)], Quota(gpu=2))
    assert r2.failures[0].reason.startswith("ResourceQuotaNotFit")
