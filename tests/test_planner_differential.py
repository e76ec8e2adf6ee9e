"""The planner against its reference (tests/planner_reference.py, the engine that walked every node for every
replica): same placements, failures, reasons, node reasons in the same order, admission verdicts.

Inputs are drawn to reach every branch the two engines could disagree on: tied scores, full nodes ahead
of free ones, unhealthy and non-NVIDIA cards, the exact "NVIDIA" type (the only one whose score counts the
request), type filters, multi-container pods, pods with no GPU, tenants' nodes, quotas on GPUs, memory and
cores (one for all, or per tenant), and workloads that share a pod shape.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from gpu_tenancy.hami.planner import schedule
from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Quota, Workload
from gpu_tenancy.hami.planner.report import PlanResult
from tests import planner_reference

TYPES = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-L4", "NVIDIA", "nvidia-tesla-t4", "AMD-MI300X"]
TENANTS = [None, "a", "b"]
FILTERS = ["a100", "L4", "t4", "nvidia", " ", "mi300"]


def _comparable(result: PlanResult) -> tuple[Any, ...]:
    """Everything a caller can observe, node reasons in their iteration order (cli.plan prints them so)."""
    return (
        result.placements,
        tuple((f.workload, f.replica, f.reason, tuple(f.node_reasons.items()), f.admitted) for f in result.failures),
    )


def assert_same_plan(
    nodes: list[Node], workloads: list[Workload], quota: Quota | Mapping[str, Quota] | None, exact: bool = True
) -> None:
    expected = planner_reference.plan(nodes, workloads, quota, exact_device_order=exact)
    actual = schedule.plan(nodes, workloads, quota, exact_device_order=exact)
    assert _comparable(actual) == _comparable(expected)
    assert actual == expected


# Mostly cards that can take pods (so nodes fill up and scores tie and differ), with the edge cases mixed in:
# zero capacities, unhealthy cards, types Fit skips or filters out.
devices = st.tuples(
    st.sampled_from(TYPES[:3] * 3 + TYPES[3:]),
    st.one_of(st.sampled_from([0, 8192, 24576, 24576, 81920, 81920]), st.integers(1, 81920)),
    st.sampled_from([0, 50, 100, 100, 100, 100, 200]),
    st.sampled_from([0, 1, 2, 2, 4, 4, 10]),
    st.integers(0, 1),
    st.sampled_from([True] * 9 + [False]),
)
nodes_strategy = st.lists(
    st.tuples(st.lists(devices, min_size=0, max_size=6), st.sampled_from(TENANTS)), min_size=1, max_size=6
)
containers = st.builds(
    ContainerRequest,
    gpus=st.sampled_from([0, 1, 1, 1, 2, 3]),
    gpumem_mib=st.one_of(st.none(), st.just(0), st.integers(1, 30000)),
    gpumem_percentage=st.one_of(st.none(), st.sampled_from([0, 10, 25, 50, 100]), st.integers(0, 100)),
    gpucores=st.one_of(st.none(), st.sampled_from([0, 10, 50, 100]), st.integers(0, 150)),
)
pods = st.lists(containers, min_size=1, max_size=3).map(tuple)
type_filters = st.one_of(st.just(()), st.lists(st.sampled_from(FILTERS), max_size=2).map(tuple))
policies = st.sampled_from(["binpack", "spread"])
# Tight enough to bind within a few replicas: the quota's usage then decides fits.
quotas = st.builds(
    Quota,
    gpu=st.one_of(st.none(), st.integers(0, 12)),
    gpumem=st.one_of(st.none(), st.sampled_from([0, 3000, 9000, 20000, 60000]), st.integers(0, 120000)),
    gpucores=st.one_of(st.none(), st.sampled_from([0, 30, 100, 250]), st.integers(0, 400)),
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Node], list[Workload], Quota | dict[str, Quota] | None]:
    nodes = [
        Node(
            f"node-{k}",
            tuple(
                Device(f"n{k}-g{i}", typ, mem, core, count, numa=numa, health=healthy, index=i)
                for i, (typ, mem, core, count, numa, healthy) in enumerate(devs)
            ),
            tenant,
        )
        for k, (devs, tenant) in enumerate(draw(nodes_strategy))
    ]
    # A few pod shapes shared by several workloads: the planner remembers refusals per shape.
    shapes = draw(st.lists(pods, min_size=1, max_size=3))
    workloads = [
        Workload(
            f"w{i}",
            draw(st.sampled_from(shapes)),
            replicas=draw(st.integers(0, 8)),
            use_gpu_type=draw(type_filters),
            nouse_gpu_type=draw(type_filters),
            gpu_scheduler_policy=draw(policies),
            node_scheduler_policy=draw(policies),
            tenant=draw(st.sampled_from(TENANTS)),
        )
        for i in range(draw(st.integers(1, 6)))
    ]
    quota = draw(st.one_of(st.none(), quotas, st.dictionaries(st.sampled_from(["a", "b"]), quotas)))
    return nodes, workloads, quota


@settings(max_examples=400, deadline=None)
@given(cases())
def test_planner_matches_the_reference(case: tuple[list[Node], list[Workload], Any]) -> None:
    assert_same_plan(*case)


@st.composite
def quota_cases(draw: st.DrawFn) -> tuple[list[Node], list[Workload], Quota]:
    """One namespace quota filling up over several workloads of percentage requests (which the admission
    webhook does not see, so Fit's quota check decides), on nodes of mixed card sizes."""
    sizes = st.sampled_from([15000, 30000, 70000, 81920])
    nodes = [
        Node(f"node-{k}", tuple(Device(f"n{k}-g{i}", TYPES[0], mem, 100, count, index=i)
                                for i, (mem, count) in enumerate(cards)))
        for k, cards in enumerate(
            draw(st.lists(st.lists(st.tuples(sizes, st.sampled_from([2, 4, 10])), min_size=1, max_size=4),
                          min_size=1, max_size=5))
        )
    ]
    requests = st.builds(
        ContainerRequest,
        gpus=st.integers(1, 2),
        gpumem_percentage=st.sampled_from([10, 20, 30, 50]),
        gpucores=st.one_of(st.none(), st.sampled_from([5, 10, 30])),
    )
    workloads = [
        Workload(f"w{i}", (draw(requests),), replicas=draw(st.integers(1, 10)),
                 gpu_scheduler_policy=draw(policies), node_scheduler_policy=draw(policies))
        for i in range(draw(st.integers(1, 4)))
    ]
    quota = Quota(gpumem=draw(st.integers(20000, 150000)), gpucores=draw(st.one_of(st.none(), st.integers(50, 400))))
    return nodes, workloads, quota


@settings(max_examples=300, deadline=None)
@given(quota_cases())
def test_planner_matches_the_reference_as_a_quota_fills(case: tuple[list[Node], list[Workload], Quota]) -> None:
    assert_same_plan(*case)


def _random_inventory(rng: random.Random, nodes: int) -> list[Node]:
    out = []
    for k in range(nodes):
        model = rng.choice(TYPES[:3])
        cards = rng.choice([1, 2, 4, 8])
        out.append(
            Node(
                f"node-{k:04d}",
                tuple(
                    Device(f"n{k}-g{i}", model, rng.choice([24576, 81920]), 100, rng.choice([4, 10]),
                           numa=i * 2 // cards, health=rng.random() > 0.02, index=i)
                    for i in range(cards)
                ),
                rng.choice(TENANTS),
            )
        )
    return out


def _random_workloads(rng: random.Random, count: int) -> list[Workload]:
    shapes = [
        (ContainerRequest(gpumem_mib=8192, gpucores=10),),
        (ContainerRequest(gpumem_percentage=25),),
        (ContainerRequest(gpus=2, gpumem_mib=20000, gpucores=30),),
        (ContainerRequest(),),
        (ContainerRequest(gpumem_mib=4096), ContainerRequest(gpus=2, gpucores=40, gpumem_mib=1000)),
    ]
    return [
        Workload(
            f"w{i}", rng.choice(shapes), replicas=rng.randint(1, 120),
            use_gpu_type=rng.choice([(), ("a100",), ("l4", "a100")]),
            gpu_scheduler_policy=rng.choice(["binpack", "spread"]),
            node_scheduler_policy=rng.choice(["binpack", "spread"]), tenant=rng.choice(TENANTS),
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("seed", range(6))
def test_planner_matches_the_reference_on_hundreds_of_nodes(seed: int) -> None:
    """Larger inventories than Hypothesis draws: many tied nodes, nodes filling up, tenants' quotas."""
    rng = random.Random(seed)
    nodes = _random_inventory(rng, 150)
    workloads = _random_workloads(rng, 25)
    quota: Quota | dict[str, Quota] | None = [
        None,
        {"a": Quota(gpu=300, gpumem=900000), "b": Quota(gpucores=2500)},
        Quota(gpumem=2_000_000, gpucores=9000),
    ][seed % 3]
    assert_same_plan(nodes, workloads, quota)


def test_nodes_beyond_twelve_cards_match_when_device_order_is_not_exact() -> None:
    rng = random.Random(7)
    nodes = [
        Node(f"big-{k}", tuple(Device(f"b{k}-g{i}", TYPES[0], 81920, 100, 4, index=i) for i in range(16)))
        for k in range(5)
    ]
    assert_same_plan(nodes, _random_workloads(rng, 12), None, exact=False)


# --------------------------------------------------------------------------- the test catches a broken planner


def _tied_nodes_in_reverse_order(score: float, idx: int, binpack: bool) -> tuple[float, int]:
    return (score, idx) if binpack else (-score, idx)


def _refusals_ignore_the_quota(quota: Quota | None) -> bool:
    return False


def _shape_without_type_filters(wl: Workload) -> tuple[Any, ...]:
    return (wl.containers, wl.gpu_scheduler_policy)


# name -> (attribute of planner.schedule, broken replacement, the differential cases that reach it)
BROKEN: dict[str, tuple[str, Callable[..., Any], Callable[[], st.SearchStrategy[Any]]]] = {
    # Ties between nodes broken by the last node instead of the first.
    "node tie-break": ("_NodeIndex.key", staticmethod(_tied_nodes_in_reverse_order), cases),
    # A refusal under a gpumem/gpucores quota taken as final, like one without a quota.
    "quota refusals kept": ("_quota_decides", _refusals_ignore_the_quota, quota_cases),
    # A refusal remembered for pods of the same containers whatever their type filters.
    "refusals shared across type filters": ("_pod_shape", _shape_without_type_filters, cases),
}


def _first_difference(strategy: st.SearchStrategy[Any], examples: int) -> None:
    """Draw examples as the differential tests do (derandomised), stop at the first difference: no shrinking."""

    @settings(max_examples=examples, phases=[Phase.generate], deadline=None, derandomize=True, database=None)
    @given(strategy)
    def differential(case: tuple[Any, ...]) -> None:
        assert_same_plan(*case)

    differential()


@pytest.mark.parametrize("mutation", sorted(BROKEN))
def test_the_differential_test_fails_on_a_broken_planner(mutation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target, replacement, strategy = BROKEN[mutation]
    owner: Any = schedule
    *path, name = target.split(".")
    for part in path:
        owner = getattr(owner, part)
    monkeypatch.setattr(owner, name, replacement)
    with pytest.raises(AssertionError):
        _first_difference(strategy(), 400)
