"""Rule tests for the planner, gpu_tenancy.hami.planner (HAMi v2.10.0 Fit semantics)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Quota, Workload, node_from_register
from gpu_tenancy.hami.planner.schedule import plan

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


WEBHOOK_DENIED = 'ResourceQuotaNotFit at admission: admission webhook "vgpu.hami.io" denied the request: '


def test_quota() -> None:
    # Memory as a percentage is invisible to the webhook (Memreq 0): the scheduler's Fit refuses it.
    r = plan([node()], [wl(gpumem_percentage=1, replicas=3)], Quota(gpumem=1700))
    assert [f.reason for f in r.failures] == ["1/1 ResourceQuotaNotFit"]
    # In MiB the webhook already refuses the pod at creation.
    r = plan([node()], [wl(gpumem_mib=1000, replicas=3)], Quota(gpumem=2000))
    assert [f.reason for f in r.failures] == [
        WEBHOOK_DENIED + "exceeding resource quota (limits.nvidia.com/gpumem 2000+1000 > 2000)"]
    r2 = plan([node(n=2)], [wl(gpumem_mib=10, replicas=3)], Quota(gpu=2))
    assert r2.failures[0].reason.startswith("ResourceQuotaNotFit")


# --------------------------------------------------------------------------- fidelity to HAMi v2.10.0


def test_tied_devices_keep_registration_order_not_index_order() -> None:
    """gpu_policy.go Less has no index key and sort.Sort (insertion sort up to 12) keeps tied devices
    in the order buildNodeUsage registered them; device.go Fit walks the list from its last element."""
    card = {"devmem": 81920, "devcore": 100, "count": 10, "type": A100, "health": True}
    registered = node_from_register("n", [
        {"id": "GPU-second", "index": 1, **card},
        {"id": "GPU-first", "index": 0, **card},
    ])
    for policy in ("spread", "binpack"):
        w = Workload("w", (ContainerRequest(gpumem_mib=1000),), gpu_scheduler_policy=policy)  # type: ignore[arg-type]
        assert [p.device_id for p in plan([registered], [w]).placements] == ["GPU-first"], policy


def test_later_container_starts_from_the_previous_containers_order() -> None:
    """fitInDevices sorts the pod's one device list in place, container after container."""
    registered = Node("n", (
        Device("a", "NVIDIA-A", 10000, index=0),
        Device("b", "NVIDIA-B", 10000, index=1),
        Device("c", "NVIDIA-B", 10000, index=2),
    ))
    earlier = Workload("earlier", (ContainerRequest(gpumem_mib=6000),), use_gpu_type=("NVIDIA-A",))
    # Container 0 (binpack) sorts [b, c, a]: a is tried first but has 4000 MiB free, so c takes it and
    # then scores exactly as a does. Container 1 sorts that list again: a and c tie and keep [c, a], so
    # a is tried first (and fits); ordering ties by index would have tried c first.
    pod = Workload("pod", (ContainerRequest(gpumem_mib=6000), ContainerRequest(gpumem_mib=3000)),
                   gpu_scheduler_policy="binpack")
    placed = plan([registered], [earlier, pod]).placements
    assert [(p.workload, p.container, p.device_id) for p in placed] == [
        ("earlier", 0, "a"), ("pod", 0, "c"), ("pod", 1, "a")]


def test_node_score_is_usage_over_the_node_totals() -> None:
    """node_policy.go ComputeDefaultScore sums used slots, cores and memory over the node before
    dividing; a mean of per-card ratios ranks a node with one full small card too high."""
    big = Node("big", (Device("P", "NVIDIA-P", 81920, index=0),))
    mixed = Node("mixed", (Device("S", "NVIDIA-SMALL", 1000, index=0), Device("L", "NVIDIA-LARGE", 100000, index=1)))
    load = [
        Workload("on-p", (ContainerRequest(gpumem_mib=20000),), use_gpu_type=("NVIDIA-P",)),
        Workload("fill-small", (ContainerRequest(gpumem_mib=1000),), use_gpu_type=("SMALL",)),
        Workload("next", (ContainerRequest(gpumem_mib=100),), node_scheduler_policy="binpack"),
    ]
    result = plan([big, mixed], load)
    assert result.fits
    # big: 10 x (1/10 + 20000/81920) = 3.44; mixed: 10 x (1/20 + 1000/101000) = 0.60 -> binpack picks big.
    assert [p.node for p in result.placements if p.workload == "next"] == ["big"]


def test_whole_card_request_without_cores_gets_the_webhooks_100_cores() -> None:
    """device.go defaultExclusiveCoreIfNeeded: nvidia.com/gpu without gpucores and without a memory
    limit (or with gpumem-percentage 100) gets gpucores 100, which quota and exclusivity then see."""
    for request in (ContainerRequest(), ContainerRequest(gpumem_percentage=100)):
        placed = plan([node()], [Workload("w", (request,))]).placements
        assert [(p.mem_mib, p.cores) for p in placed] == [(81920, 100)]
        assert plan([node()], [Workload("w", (request,))], Quota(gpucores=50)).failures[0].reason == (
            WEBHOOK_DENIED + "exceeding resource quota (limits.nvidia.com/gpucores 0+100 > 50)"
        )
    # A memory limit (even gpumem 0) or an explicit gpucores keeps the webhook out of it.
    assert plan([node()], [wl(gpumem_mib=1000)]).placements[0].cores == 0
    assert plan([node()], [wl(gpucores=0)]).placements[0].cores == 0


def test_zero_percentage_is_ignored_like_generate_resource_requests() -> None:
    """gpumem-percentage 0 is ignored (101, "unset"): with no gpumem the container takes the whole
    card (defaultMemory 0), and it is not exclusive, so gpucores stays 0."""
    placed = plan([node()], [wl(gpumem_percentage=0)]).placements
    assert [(p.mem_mib, p.cores) for p in placed] == [(81920, 0)]
    # With gpumem set, the MiB decide.
    assert plan([node()], [wl(gpumem_mib=5000, gpumem_percentage=0)]).placements[0].mem_mib == 5000


def test_percentage_outside_0_to_100_is_refused() -> None:
    """device.go validateMemoryPercentage: the webhook denies such a pod, nothing is scheduled."""
    for pct in (-1, 101):
        with pytest.raises(ValueError, match="gpumem_percentage must be between 0 and 100"):
            ContainerRequest(gpumem_percentage=pct)


def test_register_entries_absent_keys_are_gos_zero_values() -> None:
    """pkg/device/devices.go: DeviceInfo fields are omitempty, read back with json.Unmarshal."""
    (device,) = node_from_register("n", [{"id": "g", "devmem": 81920, "type": A100}]).devices
    assert (device.health, device.count, device.devcore, device.index, device.numa) == (False, 0, 0, 0, 0)
    assert plan([Node("n", (device,))], [wl(gpumem_mib=10)]).failures[0].reason == "1/1 CardNotHealth"


def test_unmodelled_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="MIG mode is not modelled"):
        node_from_register("n", [{"id": "g", "devmem": 81920, "type": A100, "mode": "mig"}])
    with pytest.raises(ValueError, match="13 GPUs"):
        plan([node(n=13)], [wl()])
    assert plan([node(n=12)], [wl()]).fits
    with pytest.raises(ValueError, match="gpu_scheduler_policy"):
        Workload("w", (ContainerRequest(),), gpu_scheduler_policy="mutex")  # type: ignore[arg-type]


def test_pending_replicas_keep_their_gpu_quota() -> None:
    """The API server admits pods against requests.nvidia.com/gpu when they are created; a pod HAMi
    cannot place stays Pending and still counts, so it blocks later replicas."""
    too_big = Workload("too-big", (ContainerRequest(gpumem_mib=90000),), replicas=2)
    small = Workload("small", (ContainerRequest(gpumem_mib=1000),))
    result = plan([node()], [too_big, small], Quota(gpu=2))
    assert [(f.workload, f.reason) for f in result.failures] == [
        ("too-big", "1/1 CardInsufficientMemory"),
        ("too-big", "1/1 CardInsufficientMemory"),
        ("small", "ResourceQuotaNotFit: limits.nvidia.com/gpu 2+1 > 2"),
    ]


def test_scores_compare_in_float32_as_hami_computes_them() -> None:
    """ComputeScore works in float32: these two cards score 8.1752278645 and 8.1752279239 in exact
    arithmetic but the same 8.175228 in float32, so they tie and keep registration order (b is tried
    first); in float64 spread would try the lower-scoring a first."""
    cards = Node("n", (Device("a", "NVIDIA-A", 12288, index=0), Device("b", "NVIDIA-B", 46068, index=1)))
    load = [
        Workload("on-a", (ContainerRequest(gpumem_mib=7711, gpucores=9),), use_gpu_type=("NVIDIA-A",)),
        Workload("on-b1", (ContainerRequest(gpumem_mib=2016, gpucores=26),), use_gpu_type=("NVIDIA-B",)),
        Workload("on-b2", (ContainerRequest(gpumem_mib=2016, gpucores=27),), use_gpu_type=("NVIDIA-B",)),
        Workload("next", (ContainerRequest(gpumem_mib=100, gpucores=1),), gpu_scheduler_policy="spread"),
    ]
    placed = plan([cards], load).placements
    assert [p.device_id for p in placed if p.workload == "next"] == ["b"]


def test_webhook_denies_over_quota_pods_at_creation_and_they_hold_no_gpu_quota() -> None:
    """scheduler/webhook.go fitResourceQuota: Memreq x Nums and Coresreq x Nums against what the quota has
    left, before the pod exists; a denied pod never reaches the API server's quota, unlike a pending one."""
    fill = Workload("fill", (ContainerRequest(gpumem_mib=1000),), replicas=3)
    small = Workload("small", (ContainerRequest(gpumem_percentage=1),))  # Memreq 0: passes the webhook
    result = plan([node()], [fill, small], Quota(gpu=3, gpumem=2000))
    assert [(f.workload, f.replica, f.admitted) for f in result.failures] == [
        ("fill", 2, False), ("small", 0, True)]
    assert result.failures[0].reason == (
        WEBHOOK_DENIED + "exceeding resource quota (limits.nvidia.com/gpumem 2000+1000 > 2000)")
    # fill-2 holds no GPU, so small is admitted (3 of 3) and then refused by the scheduler's Fit.
    assert result.failures[1].reason == "1/1 ResourceQuotaNotFit"
    # The webhook counts cores unclamped and per GPU: 2 x 150.
    two = Workload("two", (ContainerRequest(gpus=2, gpumem_mib=10, gpucores=150),))
    assert "limits.nvidia.com/gpucores 0+300 > 250" in plan([node(n=2)], [two], Quota(gpucores=250)).failures[0].reason


def test_the_webhook_denies_a_pod_asking_one_mib_or_one_core_past_a_used_up_quota() -> None:
    """fitResourceQuota compares used + request with the limit for any non-zero request: a single MiB or a
    single core past the limit is denied at creation, not left to the scheduler's Fit."""
    fill = Workload("fill", (ContainerRequest(gpumem_mib=1000),))
    one_mib = Workload("one-mib", (ContainerRequest(gpumem_mib=1),))
    assert [f.reason for f in plan([node()], [fill, one_mib], Quota(gpumem=1000)).failures] == [
        WEBHOOK_DENIED + "exceeding resource quota (limits.nvidia.com/gpumem 1000+1 > 1000)"]
    # A percentage is Memreq 0 to the webhook, so only the core counts.
    cores = Workload("cores", (ContainerRequest(gpumem_percentage=10, gpucores=100),))
    one_core = Workload("one-core", (ContainerRequest(gpumem_percentage=10, gpucores=1),))
    assert [f.reason for f in plan([node()], [cores, one_core], Quota(gpucores=100)).failures] == [
        WEBHOOK_DENIED + "exceeding resource quota (limits.nvidia.com/gpucores 100+1 > 100)"]


def test_a_node_refused_under_a_memory_quota_fits_a_later_replica() -> None:
    """Fit takes cards greedily against what the quota has left (device.go fitQuota, checked per card), so
    a node refused with more quota left can fit once less is left. Node a's cards are walked 70000, 30000,
    30000 (all idle: spread keeps registration order and Fit walks from the end); each replica takes 2 cards
    at 10% of their memory. Replica 0, 9000 MiB left: a takes 7000, then 7000+3000 > 9000 twice: refused;
    b takes 1500+1500. Replica 1, 6000 left: a skips the 7000 card and takes 3000+3000 (spread: a's score 0
    is below b's)."""
    a = Node("a", tuple(Device(f"a-g{i}", A100, mem, index=i) for i, mem in enumerate((30000, 30000, 70000))))
    b = Node("b", tuple(Device(f"b-g{i}", A100, 15000, index=i) for i in range(2)))
    pods = Workload("w", (ContainerRequest(gpus=2, gpumem_percentage=10),), replicas=2, node_scheduler_policy="spread")
    result = plan([a, b], [pods], Quota(gpumem=9000))
    assert result.fits
    assert [(p.replica, p.device_id, p.mem_mib) for p in result.placements] == [
        (0, "b-g1", 1500), (0, "b-g0", 1500), (1, "a-g1", 3000), (1, "a-g0", 3000)]


def test_node_reasons_follow_the_node_order_when_the_pod_fails() -> None:
    """A failed pod lists every node's reason in the order the scheduler tried them. binpack: n0 (1 slot)
    takes replica 0 (score 10 x (1/1 + 1000/81920)); replica 1 and 2 go to n1 (2 slots); n1 then scores
    10 x (2/2 + 2000/81920), above n0, so replica 3 tries n1 first."""
    n0 = Node("n0", (Device("n0-g0", A100, 81920, 100, 1),))
    n1 = Node("n1", (Device("n1-g0", A100, 81920, 100, 2),))
    result = plan([n0, n1], [wl(replicas=4, gpumem_mib=1000)])
    assert [p.device_id for p in result.placements] == ["n0-g0", "n1-g0", "n1-g0"]
    (failure,) = result.failures
    assert list(failure.node_reasons.items()) == [
        ("n1", "1/1 CardTimeSlicingExhausted"), ("n0", "1/1 CardTimeSlicingExhausted")]
    assert failure.reason == "n0: 1/1 CardTimeSlicingExhausted; n1: 1/1 CardTimeSlicingExhausted"


def test_a_quota_is_read_from_hamis_keys_and_refuses_any_other() -> None:
    quota = Quota.from_dict({"limits.nvidia.com/gpu": "2", "limits.nvidia.com/gpumem": 4096})
    assert quota == Quota(gpu=2, gpumem=4096, gpucores=None)
    assert quota.to_dict() == {"limits.nvidia.com/gpu": 2, "limits.nvidia.com/gpumem": 4096}
    with pytest.raises(ValueError, match=r"^unknown quota keys: \['limits\.cpu', 'requests\.nvidia\.com/gpu'\]$"):
        Quota.from_dict({"requests.nvidia.com/gpu": 1, "limits.cpu": 2, "limits.nvidia.com/gpu": 1})


def test_a_register_entry_reads_as_go_decodes_hamis_omitempty_fields() -> None:
    (device,) = node_from_register("n", [{"id": "GPU-a", "devmem": 1024}]).devices
    # Every field but id and devmem absent: Go's zero values, so an unhealthy card with no slots and no cores.
    assert device == Device(id="GPU-a", type="", devmem=1024, devcore=0, count=0, numa=0, health=False, index=0, mode="")
    (device,) = node_from_register("n", [{"id": "GPU-b", "devmem": 1, "numa": 1, "index": 3, "health": True}]).devices
    assert (device.numa, device.index, device.health) == (1, 3, True)


@pytest.mark.parametrize(("health", "healthy"), [(" True ", True), ("yes", True), ("1", True), ("false", False), ("", False)])
def test_a_register_entrys_health_written_as_text(health: str, healthy: bool) -> None:
    (device,) = node_from_register("n", [{"id": "GPU-a", "devmem": 1, "health": health}]).devices
    assert device.health is healthy


@pytest.mark.parametrize("entry", [{"id": "GPU-a"}, {"devmem": 1024}])
def test_a_register_entry_without_its_id_or_memory_is_refused(entry: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"^node 'n': device #1 needs 'id' and 'devmem'$"):
        node_from_register("n", [{"id": "GPU-0", "devmem": 1}, entry])


def test_a_request_counts_in_the_score_of_a_card_of_type_exactly_nvidia() -> None:
    """HAMi's ComputeScore adds the container's own request on a device whose type is the request type
    "NVIDIA" (pkg/scheduler/policy/gpu_policy.go): memory as asked in MiB, or a percentage of the card's total
    in Go's int32 arithmetic (`Totalmem * MemPercentagereq / 100`, truncated)."""
    def cards(first: int, second: int) -> list[Node]:
        return [Node("n", (Device("n-first", "NVIDIA", first, 100, 10, index=0),
                           Device("n-second", "NVIDIA", second, 100, 10, index=1)))]

    def placed(nodes: list[Node], policy: str, **request: int) -> str:
        workload = Workload("w", (ContainerRequest(**request),), gpu_scheduler_policy=policy)  # type: ignore[arg-type]
        return plan(nodes, [workload]).placements[0].device_id

    # 1000 MiB is 5 % of the 20000 MiB card and 10 % of the 10000 MiB one: binpack takes the fuller score.
    assert placed(cards(20000, 10000), "binpack", gpumem_mib=1000) == "n-second"
    assert placed(cards(20000, 10000), "spread", gpumem_mib=1000) == "n-first"
    # 7 % of 10001 MiB is 700 MiB (700.07 truncated): 700/10001 scores below 700/10000, and spread takes it.
    assert placed(cards(10001, 10000), "spread", gpumem_percentage=7) == "n-first"
    assert placed(cards(10000, 10001), "spread", gpumem_percentage=7) == "n-second"
    # 1 % is a percentage like any other (only 0 and 101 mean "none"): 100 MiB of 10001 against 100 of 10000.
    assert placed(cards(10000, 10001), "spread", gpumem_percentage=1) == "n-second"
    assert placed(cards(10001, 10000), "spread", gpumem_percentage=1) == "n-first"


def test_a_pods_containers_add_up_on_the_card_they_share() -> None:
    """fitInDevices (pkg/scheduler/score.go) adds each container's allocation to the device's usage before the
    next container of the same pod is fitted: three 30000 MiB containers do not fit one 81920 MiB card, nor three
    40 % ones its 100 cores; two do."""
    def containers(n: int, **request: int) -> Workload:
        return Workload("w", (ContainerRequest(**request),) * n)  # type: ignore[arg-type]

    assert plan([node()], [containers(2, gpumem_mib=30000)]).fits
    assert [f.reason for f in plan([node()], [containers(3, gpumem_mib=30000)]).failures] == [
        "1/1 CardInsufficientMemory"]
    assert plan([node()], [containers(2, gpumem_mib=1000, gpucores=40)]).fits
    assert [f.reason for f in plan([node()], [containers(3, gpumem_mib=1000, gpucores=40)]).failures] == [
        "1/1 CardInsufficientCore"]


def test_a_pods_percentage_memory_adds_up_against_the_quota() -> None:
    """Memory asked as a percentage is invisible to the webhook (Memreq 0), so Fit's fitQuota decides, counting
    what the pod's earlier containers already took: 3 x 10 % of 81920 MiB is 24576 MiB > 20000."""
    def containers(n: int) -> Workload:
        return Workload("w", (ContainerRequest(gpumem_percentage=10),) * n)

    assert plan([node()], [containers(2)], Quota(gpumem=20000)).fits
    assert [f.reason for f in plan([node()], [containers(3)], Quota(gpumem=20000)).failures] == [
        "1/1 ResourceQuotaNotFit"]


def test_two_nodes_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^duplicate node names$"):
        plan([node("n"), node("n")], [wl()])


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Device("GPU-0", "NVIDIA L4", devmem=-1), "device 'GPU-0': devmem, devcore and count must be >= 0"),
    (lambda: Device("GPU-0", "NVIDIA L4", devmem=1, devcore=-1), "device 'GPU-0': devmem, devcore and count must be >= 0"),
    (lambda: Device("GPU-0", "NVIDIA L4", devmem=1, count=-1), "device 'GPU-0': devmem, devcore and count must be >= 0"),
    (lambda: Node("n", (Device("GPU-0", "NVIDIA L4", 1), Device("GPU-0", "NVIDIA L4", 1))), "node 'n': duplicate device ids"),
    (lambda: ContainerRequest(gpus=-1), "gpus must be >= 0"),
    (lambda: ContainerRequest(gpumem_mib=-1), "gpumem_mib must be >= 0"),
    (lambda: ContainerRequest(gpumem_percentage=101),
     "gpumem_percentage must be between 0 and 100 (HAMi's webhook denies the pod otherwise)"),
    (lambda: ContainerRequest(gpucores=-1), "gpucores must be >= 0"),
    (lambda: Workload("w", (), replicas=-1), "workload 'w': replicas must be >= 0"),
    (lambda: Workload("w", (), node_scheduler_policy="random"),  # type: ignore[arg-type]
     "workload 'w': node_scheduler_policy must be binpack|spread"),
])
def test_an_impossible_model_input_is_refused_saying_which_and_why(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError) as error:
        make()
    assert str(error.value) == message


def test_model_inputs_given_as_lists_are_kept_as_tuples() -> None:
    """Frozen, hashable values: the planner keys its memos by them."""
    device = Device("GPU-0", "NVIDIA L4", 1)
    node = Node("n", [device])  # type: ignore[arg-type]
    workload = Workload("w", [ContainerRequest()], use_gpu_type=["L4"], nouse_gpu_type=["A100"])  # type: ignore[arg-type]
    assert (node.devices, workload.containers, workload.use_gpu_type, workload.nouse_gpu_type) == (
        (device,), (ContainerRequest(),), ("L4",), ("A100",))
    assert hash(node) == hash(Node("n", (device,))) and hash(workload) == hash(
        Workload("w", (ContainerRequest(),), use_gpu_type=("L4",), nouse_gpu_type=("A100",)))
