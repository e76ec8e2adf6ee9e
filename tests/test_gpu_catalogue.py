"""The GPU catalogue against what real cards report (tests/fixtures/nvidia_smi/cards.json, recorded by hand from
published nvidia-smi and HAMi register output)."""

from __future__ import annotations

import logging

import pytest

from gpu_tenancy.hami import gpu_catalogue
from tests import hami_register
from tests.harness import dev_config, record_stack


@pytest.mark.parametrize(("name", "mib"), sorted(hami_register.recorded_cards().items()))
def test_recorded_cards_are_catalogued_with_their_nvml_total(name: str, mib: int) -> None:
    entry = gpu_catalogue.lookup(name)
    assert entry is not None and entry.memory_mib == mib


def test_the_issue_models_are_all_there() -> None:
    names = {entry.nvml_name for entry in gpu_catalogue.CATALOGUE}
    assert {
        "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe",
        "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA L4", "NVIDIA L40S", "NVIDIA A10", "Tesla T4",
    } <= names


def test_every_entry_is_sourced_and_fits_hamis_int32() -> None:
    for entry in gpu_catalogue.CATALOGUE:
        assert "https://" in entry.source or "captures" in entry.source, entry
        assert 0 < entry.memory_mib <= 2**31 - 1
    normalised = [gpu_catalogue.suggestion(e.nvml_name) for e in gpu_catalogue.CATALOGUE]
    assert normalised == list(gpu_catalogue.CATALOGUE), "two entries would answer the same near-miss spelling"


@pytest.mark.parametrize(
    ("spelling", "meant"),
    [("NVIDIA-L4", "NVIDIA L4"), ("nvidia a100 sxm4 80gb", "NVIDIA A100-SXM4-80GB"), ("NVIDIA-Tesla T4", "Tesla T4"),
     ("NVIDIA-A100-80GB-PCIe", "NVIDIA A100 80GB PCIe")],
)
def test_a_near_miss_spelling_names_the_card_meant(spelling: str, meant: str) -> None:
    found = gpu_catalogue.suggestion(spelling)
    assert found is not None and found.nvml_name == meant
    assert gpu_catalogue.lookup(spelling) is None


def test_hami_types_follow_register_go() -> None:
    assert gpu_catalogue.lookup("Tesla T4").hami_type == "NVIDIA-Tesla T4"  # type: ignore[union-attr]
    assert gpu_catalogue.lookup("NVIDIA H200").hami_type == "NVIDIA H200"  # type: ignore[union-attr]


def test_registered_memory_names_the_real_value_or_asks_for_one() -> None:
    assert gpu_catalogue.registered_memory("NVIDIA H100 80GB HBM3", None) == 81559
    assert gpu_catalogue.registered_memory("NVIDIA H100 80GB HBM3", 81559) == 81559
    assert gpu_catalogue.registered_memory("NVIDIA RTX 9000", 98304) == 98304
    with pytest.raises(ValueError, match=r"^81920 MiB is not what an NVIDIA H100 80GB HBM3 registers: NVML reports 81559 MiB"):
        gpu_catalogue.registered_memory("NVIDIA H100 80GB HBM3", 81920)
    with pytest.raises(ValueError, match=r"^is required for 'NVIDIA RTX 9000', which the GPU catalogue does not know"):
        gpu_catalogue.registered_memory("NVIDIA RTX 9000", None)


def test_the_program_warns_about_an_uncatalogued_card(caplog: pytest.LogCaptureFixture) -> None:
    config = dev_config()
    config["tenants"][0]["gpus"] = [{"model": "NVIDIA RTX 9000", "memoryMiB": 98304, "count": 1}]
    with caplog.at_level(logging.WARNING):
        record_stack(config)
    assert [r.getMessage() for r in caplog.records if "GPU catalogue" in r.getMessage()] == [
        "tenant tenant-a: 'NVIDIA RTX 9000' is not in the GPU catalogue: its 98304 MiB are the stack's word, which "
        "plans, simulations and the inventory check then hold the hosts to"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        record_stack(dev_config())
    assert not [r for r in caplog.records if "GPU catalogue" in r.getMessage()]
