"""Promotion from the dev (sim) stack to the gpu (real) stack: only the device layer may differ."""

from __future__ import annotations

import pytest

from gpu_tenancy.promotion import DEVICE, PLATFORM, TENANT, Record, format_diff, layer_of, promotion_diff
from tests.harness import dev_config, gpu_config, record_stack, registered_gpus, unwrap


def _records(config: dict[str, object], stack: str) -> list[Record]:
    resources = record_stack(config, stack=stack, node_register=registered_gpus(config))
    return [Record(r.typ, r.name, unwrap(r.inputs)) for r in resources]


@pytest.fixture(scope="module")
def diff_text() -> tuple[object, str]:
    diff = promotion_diff(_records(dev_config(), "dev"), _records(gpu_config(), "gpu"))
    return diff, format_diff(diff)


def test_promotion_keeps_the_tenant_layer_identical(diff_text: tuple[object, str]) -> None:
    diff, text = diff_text
    print(f"\nPromotion dev -> gpu:\n{text}")  # `make promotion-diff` shows this list
    assert diff.tenant == [], text  # type: ignore[attr-defined]


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
