"""Promotion between the three modes (dev: sim, dev-nvml: sim-nvml, gpu: real): only the device layer
(and the platform under it) may differ; the tenant layer is identical across all three."""

from __future__ import annotations

from pathlib import Path

import pytest
from policy_support import shared_recording

from gpu_tenancy.cli.promotion.layers import DEVICE, PLATFORM, TENANT, Record, format_diff, layer_of, promotion_diff
from tests.harness import dev_config, gpu_config, nvml_config, record_stack, registered_gpus, unwrap

STACKS = {"dev": dev_config, "dev-nvml": nvml_config, "gpu": gpu_config}
# Every promotion path a user can take: sim -> real, sim -> sim-nvml, sim-nvml -> real.
PROMOTIONS = [("dev", "gpu"), ("dev", "dev-nvml"), ("dev-nvml", "gpu")]


def _records(config: dict[str, object], stack: str) -> list[Record]:
    resources = record_stack(config, stack=stack, node_register=registered_gpus(config))
    return [Record(r.typ, r.name, unwrap(r.inputs)) for r in resources]


@pytest.fixture
@shared_recording
def records() -> dict[str, list[Record]]:
    return {stack: _records(config(), stack) for stack, config in STACKS.items()}


@pytest.fixture
@shared_recording
def diff_text(records: dict[str, list[Record]]) -> tuple[object, str]:
    diff = promotion_diff(records["dev"], records["gpu"])
    return diff, format_diff(diff)


@pytest.mark.parametrize(("source", "target"), PROMOTIONS, ids=[f"{s}->{t}" for s, t in PROMOTIONS])
def test_promotion_keeps_the_tenant_layer_identical(records: dict[str, list[Record]], source: str, target: str) -> None:
    diff = promotion_diff(records[source], records[target])
    text = format_diff(diff)
    print(f"\nPromotion {source} -> {target}:\n{text}")  # `make promotion-diff` shows these lists
    assert diff.tenant == [], text


def test_sim_to_sim_nvml_swaps_the_agent_for_hamis_device_plugin(records: dict[str, list[Record]]) -> None:
    diff = promotion_diff(records["dev"], records["dev-nvml"])
    device = "\n".join(diff.device)
    for expected in (
        "MockGpuAgent tenant-a-mock-gpu-agent: removed",
        "MockNvml tenant-b-mock-nvml: added",
        "NvmlMockImage nvml-mock-image: added",
        "Release tenant-a-hami-chart: values.devicePlugin.enabled: False -> True",
        "Release tenant-b-hami-chart: values.devicePlugin.nvidiaDriverRoot: (absent) -> '/var/lib/nvml-mock/driver'",
        "InventoryCheck tenant-a-inventory: added",
    ):
        assert expected in device, device
    # The same kind of worker in both simulated modes: no host joins, no bootstrap tokens.
    assert not any("HostWorker" in line or "BootstrapToken" in line for line in diff.device), device


def test_sim_nvml_to_real_changes_only_what_is_under_hamis_device_plugin(records: dict[str, list[Record]]) -> None:
    diff = promotion_diff(records["dev-nvml"], records["gpu"])
    device = "\n".join(diff.device)
    for expected in (
        "MockNvml tenant-a-mock-nvml: removed",
        "HostWorker tenant-a-gpu-a100-01: added",
        "Release tenant-a-hami-chart: values.devicePlugin.nvidiaDriverRoot: '/var/lib/nvml-mock/driver' -> (absent)",
    ):
        assert expected in device, device
    # HAMi's device plugin runs in both: enabled stays as it is, and so does the scheduler's lock timeout.
    assert "values.devicePlugin.enabled" not in device, device
    assert "values.scheduler.extender" not in device, device


def test_promotion_changes_workers_and_devices_only(diff_text: tuple[object, str]) -> None:
    diff, _ = diff_text
    device = "\n".join(diff.device)  # type: ignore[attr-defined]
    for expected in (
        "Worker tenant-a-worker: removed",
        "HostWorker tenant-a-gpu-a100-01: added",
        "MockGpuAgent tenant-b-mock-gpu-agent: removed",
        "Release tenant-a-hami-chart: values.devicePlugin.enabled: False -> True",
        "TenantControlPlane tenant-b-control-plane-tcp: spec.kubernetes.kubelet.configurationJSONPatches",
        "InventoryCheck tenant-b-inventory: added",
    ):
        assert expected in device, expected
    platform = "\n".join(diff.platform)  # type: ignore[attr-defined]
    assert "KindCluster management: removed" in platform


def test_a_tenant_layer_change_is_reported() -> None:
    drifted = gpu_config()
    drifted["tenants"][1]["quota"]["limits.nvidia.com/gpu"] = 8  # type: ignore[index]
    diff = promotion_diff(_records(gpu_config(), "gpu"), _records(drifted, "gpu"))
    assert "Tenant tenant-b: quota.limits.nvidia.com/gpu: 4.0 -> 8.0" in diff.tenant
    assert any(line.startswith("ResourceQuota tenant-b-workloads-quota: spec.hard.") and "'4' -> '8'" in line
               for line in diff.tenant), diff.tenant
    assert diff.device == [] and diff.platform == []


def test_layers_of_typical_resources() -> None:
    assert layer_of(Record("gpu-tenancy:kamaji:Kamaji", "kamaji", {})) == PLATFORM
    assert layer_of(Record("kubernetes:helm.sh/v3:Release", "x", {"chart": "hami"})) == TENANT
    assert layer_of(Record("kubernetes:helm.sh/v3:Release", "x", {"chart": "cert-manager"})) == PLATFORM
    assert layer_of(Record("command:remote:Command", "t-h-join", {})) == DEVICE
    labels = {"metadata": {"labels": {"gpu-tenancy.io/component": "mock-gpu-agent"}}}
    assert layer_of(Record("kubernetes:apps/v1:DaemonSet", "t-agent", labels)) == DEVICE


def test_the_excerpt_in_the_docs_is_the_dev_to_gpu_diff_in_its_order(diff_text: tuple[object, str]) -> None:
    """docs/modes-and-promotion.md shows an excerpt of `make promotion-diff`: each line shown is printed, in that order."""
    _, text = diff_text
    page = (Path(__file__).resolve().parents[1] / "docs" / "modes-and-promotion.md").read_text()
    block = page.split("An excerpt of `dev` → `gpu`:", 1)[1].split("```", 2)[1]
    shown = [line for line in block.splitlines() if line.strip() not in ("", "...") and not line.startswith("Promotion ")]
    printed, after = text.splitlines(), 0
    for line in shown:
        assert line in printed[after:], f"{line!r} is not printed after {printed[after - 1]!r}" if after else line
        after = printed.index(line, after) + 1
