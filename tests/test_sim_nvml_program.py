"""Mode sim-nvml under the engine-faithful mocks: the graph, its order, day two and a failing inventory."""

from __future__ import annotations

import copy

import pytest
import yaml
from policy_support import Recorded, nvml_stack, record_engine_view, shared_recording

from gpu_tenancy.builders.mock_nvml import nvml_mock
from gpu_tenancy.contract.config import load_config
from gpu_tenancy.hami import protocol as hami
from tests import hami_register
from tests.harness import nvml_config, record_mocks

TENANTS = ("tenant-a", "tenant-b")


def _one(resources: list[Recorded], name: str) -> Recorded:
    (match,) = [r for r in resources if r.name == name]
    return match


def _depends(resources: list[Recorded], name: str, on: str) -> bool:
    """`name` waits for `on`: an explicit or property dependency on it, or on its parent component."""
    target = _one(resources, on).urn
    resource = _one(resources, name)
    edges = set(resource.dependencies) | {u for deps in resource.property_dependencies.values() for u in deps}
    return target in edges


@pytest.fixture
@shared_recording
def stack() -> list[Recorded]:
    return nvml_stack()


def test_hamis_device_plugin_replaces_the_agent(stack: list[Recorded]) -> None:
    types = [r.type for r in stack]
    assert "gpu-tenancy:mock_gpu_agent:MockGpuAgent" not in types
    assert types.count("gpu-tenancy:nvml_mock_image:NvmlMockImage") == 1  # one build for every tenant
    assert types.count("gpu-tenancy:mock_nvml:MockNvml") == len(TENANTS)
    assert types.count("gpu-tenancy:inventory_check:InventoryCheck") == len(TENANTS)
    for tenant in TENANTS:
        values = _one(stack, f"{tenant}-hami-chart").inputs["values"]
        plugin = values["devicePlugin"]
        assert plugin["enabled"] is True and plugin["nvidiaDriverRoot"] == nvml_mock.DRIVER_ROOT
        assert "extender" not in values["scheduler"]  # HAMi's default lock timeout: its plugin releases locks


def test_the_mock_on_each_worker_serves_that_tenants_declared_gpus(stack: list[Recorded]) -> None:
    config = load_config(nvml_config())
    for tenant in config.tenants:
        config_map = _one(stack, f"{tenant.name}-mock-nvml-config")
        assert yaml.safe_load(config_map.inputs["data"]["config.yaml"]) == nvml_mock.mock_config(
            tenant.name, tenant.gpus
        )
        daemon_set = _one(stack, f"{tenant.name}-mock-nvml-daemonset")
        assert daemon_set.provider.startswith(_one(stack, f"{tenant.name}-kubernetes").urn)
        image_load = _one(stack, f"{tenant.name}-mock-nvml-image-load")
        assert image_load.inputs["environment"]["NODE_CONTAINER"] == f"gpu-tenancy-dev-nvml-{tenant.name}-worker"
        rules = _one(stack, f"{tenant.name}-mock-nvml-role").inputs["rules"]
        assert rules == [
            {"apiGroups": [""], "resources": ["nodes"], "resourceNames": [f"gpu-tenancy-dev-nvml-{tenant.name}-worker"],
             "verbs": ["get", "patch"]}
        ]


@pytest.mark.parametrize("tenant", TENANTS)
def test_order_build_then_load_then_mock_then_hami_then_inventory(stack: list[Recorded], tenant: str) -> None:
    assert _depends(stack, f"{tenant}-mock-nvml-image-load", "nvml-mock-image-build")
    assert _depends(stack, f"{tenant}-mock-nvml-image-load", f"{tenant}-worker-join")
    assert _depends(stack, f"{tenant}-mock-nvml-daemonset", f"{tenant}-mock-nvml-image-load")
    # HAMi's plugin panics without NVML: it waits for the mock's DaemonSet (Ready once setup.sh is done).
    assert _depends(stack, f"{tenant}-hami-chart", f"{tenant}-mock-nvml-daemonset")
    registered = f"{tenant}-inventory-gpu-tenancy-dev-nvml-{tenant}-worker-registered"
    assert _depends(stack, registered, f"{tenant}-hami-chart")
    # A GPU pod admitted before the CUDA-control policy is bound would be killed by HAMi's preload.
    assert _depends(stack, f"{tenant}-mock-nvml-cuda-control-binding", f"{tenant}-mock-nvml-cuda-control-policy")
    # The workloads' namespace comes first of the tenant's workloads (components/workloads.py).
    assert _depends(stack, f"{tenant}-workloads-namespace", f"{tenant}-mock-nvml-cuda-control-binding")


def test_hami_registers_the_declaration_and_the_inventory_check_passes() -> None:
    mocks = record_mocks(nvml_config(), stack="dev-nvml")
    nodes = {name: state for (typ, name), state in mocks.live.items() if typ == "kubernetes:core/v1:Node"}
    devices = hami.parse_register_annotation(
        nodes["gpu-tenancy-dev-nvml-tenant-b-worker"]["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION]
    )
    # What an L4 registers on a real host: NVML's name and total (tests/fixtures/nvidia_smi/cards.json).
    assert [(d["type"], d["devmem"], d["count"]) for d in devices] == [("NVIDIA L4", 23034, 10)] * 2
    assert [d["id"] for d in devices] == [hami.device_id("tenant-b", 0), hami.device_id("tenant-b", 1)]


def test_a_worker_whose_gpus_differ_from_the_declaration_fails_up() -> None:
    wrong = hami_register.annotation(hami_register.register(hami_register.real_host_nvml("h", [{"model": "Tesla T4", "count": 1}])))
    with pytest.raises(
        Exception,
        match=r"tenant tenant-a: HAMi registered other GPUs than the plan counts: node gpu-tenancy-dev-nvml-tenant-a-worker: "
        r"declares 1 x NVIDIA A100-SXM4-80GB \(81920 MiB\), HAMi registered 0; node gpu-tenancy-dev-nvml-tenant-a-worker: "
        r"1 x NVIDIA-Tesla T4 \(15360 MiB\) registered but not declared on this node",
    ):
        record_mocks(nvml_config(), stack="dev-nvml", node_register={"gpu-tenancy-dev-nvml-tenant-a-worker": wrong})


def test_a_fresh_preview_registers_the_whole_mode() -> None:
    resources = record_engine_view(nvml_config(), stack="dev-nvml", unknowns=True)
    names = {r.name for r in resources}
    assert {"nvml-mock-image-build", "tenant-a-mock-nvml-daemonset", "tenant-b-hami-chart"} <= names


def test_day_two_a_changed_gpu_declaration_reconfigures_the_mock_and_restarts_the_plugin_only(
    stack: list[Recorded],
) -> None:
    config = copy.deepcopy(nvml_config())
    config["tenants"][1]["gpus"][0]["count"] = 3
    after = record_engine_view(config, stack="dev-nvml")
    before = {r.urn: r for r in stack}
    changed = {r.name for r in after if r.inputs != before[r.urn].inputs}
    assert {"tenant-b-mock-nvml-config", "tenant-b-mock-nvml-daemonset", "tenant-b-hami-chart"} <= changed
    # The worker, its join, the image and the other tenant stay as they are.
    assert not {n for n in changed if n.startswith("tenant-a") or n.endswith(("-join", "-container"))}, changed
    assert "nvml-mock-image-build" not in changed
    digest = _one(stack, "tenant-b-hami-chart").inputs["values"]["devicePlugin"]["podAnnotations"]
    assert _one(after, "tenant-b-hami-chart").inputs["values"]["devicePlugin"]["podAnnotations"] != digest


def test_nine_gpus_on_one_tenant_fail_before_anything_is_created() -> None:
    config = copy.deepcopy(nvml_config())
    config["tenants"][1]["gpus"][0]["count"] = 9
    with pytest.raises(Exception, match=r"gpu-tenancy:tenants\[1\]\.gpus: 9 GPUs on tenant tenant-b's one worker"):
        record_mocks(config, stack="dev-nvml", preview=True)
