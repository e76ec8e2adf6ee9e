"""The planner's three verdicts: fits whatever order Kubernetes and HAMi take, fits in none, or depends.

Six cases read against HAMi v2.10.0, each with the verdict it must get, and a property checked against a
brute-force oracle written apart (tests/planner_orders_oracle.py): "fits" holds in every order and
tie-break, "never" in none, and "depends" means the oracle sees both.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_tenancy.builders.gpu_nodes import NODE_DAEMONSETS, workload_pods_per_node
from gpu_tenancy.builders.workloads.workloads import pod_annotations
from gpu_tenancy.contract.tenant_config import WorkloadConfig
from gpu_tenancy.hami.planner.model import KUBELET_MAX_PODS, ContainerRequest, Device, Node, Quota, Workload
from gpu_tenancy.hami.planner.orders import verdicts
from gpu_tenancy.hami.planner.schedule import plan
from tests.planner_orders_oracle import outcomes

A100 = "NVIDIA-NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA-NVIDIA L4"
H100 = "NVIDIA-NVIDIA H100 80GB HBM3"


def _of(result, workload):  # type: ignore[no-untyped-def]
    return [r.verdict for r in result.replicas if r.workload == workload]


# ------------------------------------------------------------------ the six cases


def _numa_case(numa: tuple[int | None, int | None]) -> tuple[list[Node], list[Workload]]:
    nodes = [Node("h", (Device("g0", A100, 81920, numa=numa[0]), Device("g1", A100, 81920, numa=numa[1], index=1)))]
    workloads = [
        Workload("w0", (ContainerRequest(1, 20480, None, 60), ContainerRequest(1, 8192, None, 20))),
        Workload("w1", (ContainerRequest(1, 20480, None, 20), ContainerRequest(1, 40960, None, 20),
                        ContainerRequest(1, 8192, None, 60))),
    ]
    return nodes, workloads


def test_numa_tie_break_declared_fits_unknown_depends() -> None:
    nodes, workloads = _numa_case((0, 1))
    assert _of(verdicts(nodes, workloads), "w1") == ["fits"]
    assert outcomes(nodes, workloads, None, False) == {(1, 1)}
    nodes, workloads = _numa_case((None, None))
    found = verdicts(nodes, workloads)
    assert _of(found, "w1") == ["depends"]
    assert "equal card scores on h" in found.replicas[1].because
    assert {o[1] for o in outcomes(nodes, workloads, None, False)} == {0, 1}


def test_tied_nodes_l4_h100_depends() -> None:
    nodes = [Node("gpu-l4-01", (Device("l", L4, 23034, numa=None),), "t"),
             Node("gpu-h100-01", (Device("h", H100, 81559, numa=None),), "t")]
    workloads = [Workload("small", (ContainerRequest(1, 20000),), tenant="t"),
                 Workload("big", (ContainerRequest(1, 70000),), tenant="t")]
    for ordered in (frozenset(), frozenset({"t"})):  # creating them in order does not decide a node tie
        found = verdicts(nodes, workloads, ordered=ordered)
        assert _of(found, "small") == ["fits"]
        assert _of(found, "big") == ["depends"]
        assert "equal node scores between gpu-l4-01, gpu-h100-01" in found.replicas[1].because
    assert outcomes(nodes, workloads, None, True) == {(1, 0), (1, 1)}


def test_kubelet_pod_limit_115_replicas() -> None:
    # The program's own DaemonSet pods on a real GPU node, CoreDNS' two and HAMi's scheduler come off the kubelet's 110.
    assert KUBELET_MAX_PODS == 110
    assert workload_pods_per_node("nvidia") == 110 - len(NODE_DAEMONSETS["nvidia"]) - 3 == 103
    devices = tuple(Device(f"g{i}", A100, 81920, index=i) for i in range(12))
    node = Node("gpu-a100-01", devices, max_pods=workload_pods_per_node("nvidia"))
    workloads = [Workload("w", (ContainerRequest(1, 1024),), replicas=115)]
    declared = plan([node], workloads)
    assert len(declared.placements) == 103
    assert declared.failures[0].reason == "Too many pods"
    found = verdicts([node], workloads, declared=declared)
    assert [r.verdict for r in found.replicas] == ["fits"] * 103 + ["never"] * 12
    assert found.replicas[103].because == "Too many pods"


def test_creation_order_on_one_l4_depends_unless_ordered() -> None:
    nodes = [Node("l4", (Device("l", L4, 23034),))]
    workloads = [Workload("w0", (ContainerRequest(1, 11517),)),
                 Workload("w1", (ContainerRequest(1, 2048, None, 50),), replicas=2)]
    found = verdicts(nodes, workloads)
    assert _of(found, "w0") == ["depends"] and _of(found, "w1") == ["fits", "fits"]
    assert "the order pods are created and scheduled in" in found.replicas[0].because
    assert outcomes(nodes, workloads, None, False) == {(0, 2), (1, 2)}
    ordered = verdicts(nodes, workloads, ordered=frozenset({None}))
    assert [r.verdict for r in ordered.replicas] == ["fits"] * 3
    assert outcomes(nodes, workloads, None, True) == {(1, 2)}


def test_quota_admission_race_depends() -> None:
    # Two pods of 12000 MiB against a 20000 MiB gpumem quota and 3 GPUs: created back to back, both pass
    # the webhook before either is filtered, the second is refused by Fit (ResourceQuotaNotFit) and stays
    # Pending holding its requests.nvidia.com/gpu, so "late" (2 GPUs) no longer passes the API server.
    nodes = [Node("n", (Device("g0", A100, 81920), Device("g1", A100, 81920, index=1)))]
    workloads = [Workload("w", (ContainerRequest(1, 12000),), replicas=2),
                 Workload("late", (ContainerRequest(2, 1000),))]
    quota = Quota(gpu=3, gpumem=20000)
    found = verdicts(nodes, workloads, quota, ordered=frozenset({None}))
    assert _of(found, "w") == ["fits", "never"]
    assert _of(found, "late") == ["never"]  # ordered: w never becomes ready, so late is never created
    found = verdicts(nodes, workloads, quota)
    assert _of(found, "w") == ["fits", "never"]
    assert _of(found, "late") == ["depends"]
    seen = outcomes(nodes, workloads, quota, False)
    assert {o[1] for o in seen} == {0, 1} and {o[0] for o in seen} == {1}
    # With room for "late" in the GPU quota only when the webhook denies w's second pod outright (created
    # after the first is filtered, it never exists and holds no GPU): depends, not never.
    tight = Quota(gpu=2, gpumem=20000)
    late = [Workload("w", (ContainerRequest(1, 12000),), replicas=2), Workload("late", (ContainerRequest(1, 1000),))]
    assert _of(verdicts(nodes, late, tight), "late") == ["depends"]
    assert {o[1] for o in outcomes(nodes, late, tight, False)} == {0, 1}


def test_commas_in_type_filters_are_split_and_trimmed() -> None:
    nodes = [Node("n", (Device("l", L4, 23034),))]
    workloads = [Workload("w", (ContainerRequest(1, 1024),), nouse_gpu_type=("A100, L4",))]
    declared = plan(nodes, workloads)
    assert declared.failures[0].reason == "1/1 CardTypeMismatch"
    assert [r.verdict for r in verdicts(nodes, workloads, declared=declared).replicas] == ["never"]
    assert outcomes(nodes, workloads, None, False) == {(0,)}
    use = [Workload("w", (ContainerRequest(1, 1024),), use_gpu_type=(" h100 ,L4",))]
    assert [r.verdict for r in verdicts(nodes, use).replicas] == ["fits"]
    # The annotation the program writes carries the same terms.
    config = WorkloadConfig.model_validate(
        {"name": "w", "containers": [{"gpumemMiB": 1024}], "noUseGpuType": ["A100, L4", " "]})
    assert pod_annotations(config)["nvidia.com/nouse-gputype"] == "A100, L4"


def test_a_preferred_node_that_may_refuse_lets_a_worse_one_take_the_pod() -> None:
    """Binpack prefers node a once w0 is on it; under one card tie-break a refuses w1 (the NUMA case), so w1
    may land on the empty node b, which w2's two whole cards then miss."""
    nodes = [Node(n, (Device(f"{n}0", A100, 81920, numa=None), Device(f"{n}1", A100, 81920, numa=None, index=1)))
             for n in ("a", "b")]
    _, (w0, w1) = _numa_case((None, None))
    workloads = [w0, w1, Workload("w2", (ContainerRequest(2),))]
    found = verdicts(nodes, workloads, ordered=frozenset({None}))
    assert [r.verdict for r in found.replicas] == ["fits", "fits", "depends"]
    assert outcomes(nodes, workloads, None, True) == {(1, 1, 0), (1, 1, 1)}


def test_beyond_the_exploration_a_mixed_tenant_depends_and_ordered_creation_settles_it() -> None:
    """Five workloads of different shapes on one node of L4s and A100s: too many interleavings to explore,
    and no symmetry, so every replica depends (fail closed); created in order, every replica fits."""
    node = Node("h", tuple(Device(f"g{i}", A100 if i % 2 else L4, 81920 if i % 2 else 23034, numa=None, index=i)
                           for i in range(8)), "t")
    workloads = [Workload(f"w{k}", (ContainerRequest(1, 1024 * (k + 1), None, 10 * (k % 3)),), replicas=10,
                          tenant="t") for k in range(5)]
    found = verdicts([node], workloads)
    assert {r.verdict for r in found.replicas} == {"depends"}
    assert found.replicas[0].because.startswith("not established: more than 20000 states to explore")
    assert {r.verdict for r in verdicts([node], workloads, ordered=frozenset({"t"})).replicas} == {"fits"}


def test_identical_pods_on_identical_cards_are_settled_by_symmetry() -> None:
    """No exploration at all (budget 0): two nodes of one L4 with two slots, two workloads of three identical
    pods. Four places: in any order four pods fit, and which ones depends on the order they are created in."""
    nodes = [Node(f"n{i}", (Device(f"g{i}", L4, 23034, 100, 2, numa=None),)) for i in range(2)]
    workloads = [Workload(f"w{k}", (ContainerRequest(1, 8000),), replicas=3) for k in range(2)]
    found = verdicts(nodes, workloads, budget=0)
    assert [r.verdict for r in found.replicas] == ["fits", "depends", "depends"] * 2
    assert "which pods of identical shape get the places" in found.replicas[1].because
    seen = outcomes(nodes, workloads, None, False)
    assert min(o[0] for o in seen) == 1 and max(o[0] for o in seen) == 3
    ordered = verdicts(nodes, workloads, ordered=frozenset({None}), budget=0)
    assert [r.verdict for r in ordered.replicas] == ["fits"] * 4 + ["never"] * 2
    assert outcomes(nodes, workloads, None, True) == {(3, 1)}


def test_two_tenants_may_name_a_workload_alike() -> None:
    nodes = [Node("a", (Device("ga", L4, 23034),), "tenant-a"), Node("b", (Device("gb", L4, 23034),), "tenant-b")]
    workloads = [Workload("infer", (ContainerRequest(1, 20000),), tenant="tenant-a"),
                 Workload("infer", (ContainerRequest(1, 30000),), tenant="tenant-b")]
    assert [r.verdict for r in verdicts(nodes, workloads).replicas] == ["fits", "never"]


# ------------------------------------------------------------------ against the brute force

# A card registered as exactly "NVIDIA" (the request's own type) also counts the request in its score.
_CARDS = [(A100, 81920), (L4, 23034), (H100, 81559), ("NVIDIA", 16000)]
_requests = st.builds(
    ContainerRequest,
    gpus=st.integers(1, 2),
    gpumem_mib=st.one_of(st.none(), st.sampled_from([1024, 8192, 11517, 20000, 40960, 70000])),
    gpumem_percentage=st.one_of(st.none(), st.sampled_from([25, 50])),
    gpucores=st.one_of(st.none(), st.sampled_from([0, 20, 50, 60])),
)


@st.composite
def _instances(draw: st.DrawFn) -> tuple[list[Node], list[Workload], Quota | None, bool]:
    nodes = []
    for n in range(draw(st.integers(1, 2))):
        cards = draw(st.lists(st.sampled_from(_CARDS), min_size=1, max_size=2))
        numa = draw(st.sampled_from(["unknown", "distinct", "zero"]))
        devs = tuple(
            Device(f"n{n}g{i}", t, mem, 100, draw(st.sampled_from([2, 10])), index=i,
                   numa=None if numa == "unknown" else i if numa == "distinct" else 0)
            for i, (t, mem) in enumerate(cards)
        )
        nodes.append(Node(f"n{n}", devs, max_pods=draw(st.sampled_from([1, 2, 110]))))
    workloads = [
        Workload(f"w{k}", tuple(draw(st.lists(_requests, min_size=1, max_size=2))), replicas=draw(st.integers(1, 2)),
                 gpu_scheduler_policy=draw(st.sampled_from(["spread", "binpack"])),
                 node_scheduler_policy=draw(st.sampled_from(["spread", "binpack"])),
                 nouse_gpu_type=draw(st.sampled_from([(), ("H100, L4",)])))
        for k in range(draw(st.integers(1, 2)))
    ]
    quota = draw(st.one_of(st.none(), st.builds(Quota, gpu=st.sampled_from([None, 2, 3]),
                                                gpumem=st.sampled_from([None, 20000, 50000]))))
    return nodes, workloads, quota, draw(st.booleans())


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_instances())
def test_verdicts_agree_with_every_order_and_tie_break(
    instance: tuple[list[Node], list[Workload], Quota | None, bool]
) -> None:
    nodes, workloads, quota, ordered = instance
    found = verdicts(nodes, workloads, quota, ordered=frozenset({None}) if ordered else frozenset())
    seen = outcomes(nodes, workloads, quota, ordered)
    assert seen
    for k, w in enumerate(workloads):
        fewest = min(o[k] for o in seen)
        most = max(o[k] for o in seen)
        for r in (x for x in found.replicas if x.workload == w.name):
            if r.verdict == "fits":
                assert r.replica < fewest, (r, seen)  # placed in every order and tie-break
            elif r.verdict == "never":
                assert r.replica >= most, (r, seen)  # placed in none
            else:
                assert fewest <= r.replica < most, (r, seen)  # the brute force sees both


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_instances())
def test_without_exploration_the_verdicts_stay_sound(
    instance: tuple[list[Node], list[Workload], Quota | None, bool]
) -> None:
    """With no room to explore, the symmetry argument or "depends" for all: never a wrong certain verdict."""
    nodes, workloads, quota, ordered = instance
    found = verdicts(nodes, workloads, quota, ordered=frozenset({None}) if ordered else frozenset(), budget=0)
    seen = outcomes(nodes, workloads, quota, ordered)
    for k, w in enumerate(workloads):
        for r in (x for x in found.replicas if x.workload == w.name):
            if r.verdict == "fits":
                assert all(r.replica < o[k] for o in seen)
            elif r.verdict == "never":
                assert all(r.replica >= o[k] for o in seen)
