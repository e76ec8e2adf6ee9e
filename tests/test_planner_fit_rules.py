"""Fit rules of HAMi v2.10.0 that the planner must reproduce, each with the request that reaches it.

Expected reasons are HAMi's (pkg/device/nvidia/device.go `Fit`, pkg/device/devices.go `CheckType`,
pkg/device/common/common.go `GenReason`: "<n>/<cards> <Reason>"), written out here.
"""

from __future__ import annotations

from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Workload
from gpu_tenancy.hami.planner.schedule import plan

A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"


def card(typ: str = A100, mem: int = 81920, name: str = "g0") -> Device:
    return Device(name, typ, mem, 100, 10)


def one(name: str, replicas: int = 1, use: tuple[str, ...] = (), nouse: tuple[str, ...] = (), **request: int) -> Workload:
    return Workload(name, (ContainerRequest(**request),), replicas=replicas, use_gpu_type=use, nouse_gpu_type=nouse)  # type: ignore[arg-type]


def test_a_zero_core_slice_does_not_fit_on_a_card_whose_cores_are_all_taken() -> None:
    # device.go Fit: `dev.Totalcore != 0 && dev.Usedcores == dev.Totalcore && k.Coresreq == 0`.
    result = plan([Node("n", (card(),))], [one("fill", replicas=2, gpumem_mib=1000, gpucores=50),
                                           one("zero-cores", gpumem_mib=1000, gpucores=0)])
    assert [p.workload for p in result.placements] == ["fill", "fill"]
    assert [(f.workload, f.reason) for f in result.failures] == [("zero-cores", "1/1 CardComputeUnitsExhausted")]


def test_a_zero_core_slice_fits_while_one_core_is_left() -> None:
    result = plan([Node("n", (card(),))], [one("fill", gpumem_mib=1000, gpucores=99),
                                           one("zero-cores", gpumem_mib=1000, gpucores=0)])
    assert result.fits


def test_a_card_of_no_cores_takes_zero_core_slices() -> None:
    # Totalcore 0 (a card registered without cores) is exempt from the rule.
    result = plan([Node("n", (Device("g0", A100, 81920, 0, 10),))], [one("zero-cores", replicas=3, gpumem_mib=1000, gpucores=0)])
    assert result.fits


def test_no_use_gpu_type_refuses_a_card_that_matches_any_entry() -> None:
    # devices.go CheckType: excluded when any listed type is contained in the card's type (case-insensitive).
    result = plan([Node("n", (card(),))], [one("w", nouse=("L4", "a100"), gpumem_mib=1000)])
    assert [f.reason for f in result.failures] == ["1/1 CardTypeMismatch"]


def test_no_use_gpu_type_that_matches_no_entry_leaves_the_card() -> None:
    assert plan([Node("n", (card(),))], [one("w", nouse=("L4", "H100"), gpumem_mib=1000)]).fits


def test_use_gpu_type_takes_a_card_that_matches_any_entry() -> None:
    result = plan([Node("n", (card(L4, 23034),))], [one("w", use=("A100", "l4"), gpumem_mib=1000)])
    assert result.fits and result.placements[0].device_id == "g0"


def test_use_gpu_type_refuses_a_card_that_matches_no_entry() -> None:
    result = plan([Node("n", (card(L4, 23034),))], [one("w", use=("A100", "H100"), gpumem_mib=1000)])
    assert [f.reason for f in result.failures] == ["1/1 CardTypeMismatch"]


def test_blank_type_entries_are_ignored() -> None:
    # CheckType trims each entry and skips empty ones; an all-blank list filters nothing.
    assert plan([Node("n", (card(),))], [one("w", use=(" ", ""), nouse=("",), gpumem_mib=1000)]).fits
    assert plan([Node("n", (card(),))], [one("w", use=(" A100 ",), gpumem_mib=1000)]).fits
    assert not plan([Node("n", (card(),))], [one("w", nouse=(" a100 ", ""), gpumem_mib=1000)]).fits


def test_type_filters_pick_the_matching_card_on_a_mixed_node() -> None:
    node = Node("n", (card(A100, 81920, "a100"), card(L4, 23034, "l4")))
    to_l4 = plan([node], [one("w", nouse=("A100",), gpumem_mib=1000)])
    to_a100 = plan([node], [one("w", use=("a100", "h100"), gpumem_mib=1000)])
    assert [p.device_id for p in to_l4.placements] == ["l4"]
    assert [p.device_id for p in to_a100.placements] == ["a100"]
