"""Offline tests of tests/integration/support.py and of the e2e skip path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.support import (
    E2E_STACKS,
    NVML_MOCK_DRIVER_ROOT,
    STACK_ENV,
    STAGE_BY_COMPONENT_TYPE,
    TENANT_COMPONENT_TYPE,
    TENANT_STAGES,
    Footprint,
    StageTimings,
    UpProgress,
    WaitTimeout,
    allocation_consumed,
    bytes_size,
    conflicting_clusters,
    container_memory,
    filtering_failed_messages,
    hami_device_type,
    ipv4_in_range,
    memory_in_use,
    missing_prerequisites,
    mode_skip_reason,
    nvidia_smi_gpus,
    nvml_inventory,
    nvml_mock_image,
    opted_in,
    parse_devices_allocated,
    parse_register_annotation,
    recorded_card_memory,
    register_problems,
    select_stack,
    stack_resources_left,
    stage_for_urn,
    stages_for_urn,
    wait_for,
    worker_nodes,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
# tests/integration/conftest.py registers the suite's markers (e2e_mode, e2e_last); importing the check modules
# here, without that conftest, would warn about them.
pytestmark = pytest.mark.filterwarnings(r"ignore:Unknown pytest\.mark\.e2e_:pytest.PytestUnknownMarkWarning")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_wait_for_returns_first_truthy_value() -> None:
    clock = FakeClock()
    answers = iter([None, "", "ready"])
    assert wait_for(lambda: next(answers), timeout_s=10, message="x", clock=clock, sleep=clock.sleep) == "ready"


def test_wait_for_times_out_with_message_and_last_error() -> None:
    clock = FakeClock()

    def failing() -> None:
        raise RuntimeError("connection refused")

    with pytest.raises(WaitTimeout, match=r"timed out after 5s waiting for pod x.*connection refused"):
        wait_for(failing, timeout_s=5, message="pod x", clock=clock, sleep=clock.sleep)


def test_parse_register_annotation() -> None:
    value = json.dumps([{"id": "GPU-0", "count": 10, "devmem": 81920, "type": "NVIDIA-A100-SXM4-80GB", "health": True}])
    assert parse_register_annotation(value)[0]["devmem"] == 81920
    with pytest.raises(ValueError, match="node-nvidia-register"):
        parse_register_annotation("{}")


def test_parse_devices_allocated_per_container() -> None:
    parsed = parse_devices_allocated("GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;GPU-c,NVIDIA,100,0:;")
    assert [[d["uuid"] for d in c] for c in parsed] == [["GPU-a", "GPU-b"], ["GPU-c"]]
    assert parsed[0][0] == {"uuid": "GPU-a", "type": "NVIDIA", "usedmem": 3000, "usedcores": 30}
    assert parse_devices_allocated("") == []
    with pytest.raises(ValueError, match="malformed"):
        parse_devices_allocated("GPU-a,NVIDIA:;")


def test_filtering_failed_messages_selects_reason_and_pod() -> None:
    events = [
        {"reason": "FilteringFailed", "involved_object": {"name": "p"}, "message": "1 nodes CardInsufficientMemory(n)"},
        {"reason": "FilteringFailed", "involvedObject": {"name": "other"}, "message": "no"},
        {"reason": "Scheduled", "involvedObject": {"name": "p"}, "message": "no"},
    ]
    assert filtering_failed_messages(events, "p") == ["1 nodes CardInsufficientMemory(n)"]


def test_ipv4_in_range_accepts_host_port() -> None:
    assert ipv4_in_range("172.18.255.201:6443", "172.18.255.200-172.18.255.250")
    assert not ipv4_in_range("172.18.0.5", "172.18.255.200-172.18.255.250")


def test_stage_timings_table_and_json() -> None:
    clock = FakeClock()
    timings = StageTimings(clock=clock)
    timings.measure("cluster", lambda: clock.sleep(12.5))
    timings.record("destroy", 3)
    timings.record("tenant tenant-a ready", 40, finished_at=95.25)
    assert json.loads(timings.to_json()) == {
        "unit": "seconds",
        "stages": {
            "cluster": {"seconds": 12.5, "finished_at_s": None},
            "destroy": {"seconds": 3, "finished_at_s": None},
            "tenant tenant-a ready": {"seconds": 40, "finished_at_s": 95.25},
        },
    }
    table = timings.summary_table()
    assert "cluster                   12.5" in table and "40.0     95.2" in table


def urn(type_chain: str, name: str) -> str:
    return f"urn:pulumi:e2e-1a2b3c::gpu-tenancy::{type_chain}::{name}"


def test_stages_come_from_the_component_types_in_the_urn() -> None:
    tenants = ["tenant-a", "tenant-b", "tenant-a-2"]
    tcp = "gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_control_plane:TenantControlPlane"
    cases = {
        urn("gpu-tenancy:kind_cluster:KindCluster$command:local:Command", "management-create"): ["kind cluster"],
        urn("pulumi:providers:kubernetes", "management"): ["kind cluster"],
        urn("gpu-tenancy:metallb:MetalLB$kubernetes:helm.sh/v3:Release", "metallb-chart"): ["MetalLB"],
        urn("gpu-tenancy:kamaji:Kamaji$kubernetes:kamaji.clastix.io/v1alpha1:DataStore", "kamaji-datastore"): ["Kamaji"],
        urn("gpu-tenancy:nvml_mock_image:NvmlMockImage$command:local:Command", "nvml-mock-image-build"): [
            "mock NVML image built"
        ],
        # A tenant's TenantControlPlane and kindnet mention "kamaji"/"kind" but belong to the tenant.
        urn(f"{tcp}$kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane", "tenant-a-control-plane-tcp"): [
            "tenant tenant-a ready", "tenant-a control plane Ready"
        ],
        urn("gpu-tenancy:tenant:Tenant$gpu-tenancy:worker:Worker$command:local:Command", "tenant-b-worker-join"): [
            "tenant tenant-b ready", "tenant-b worker joined"
        ],
        urn("gpu-tenancy:tenant:Tenant$gpu-tenancy:host_worker:HostWorker", "tenant-a-2-host-gpu1"): [
            "tenant tenant-a-2 ready", "tenant-a-2 worker joined"
        ],
        urn("gpu-tenancy:tenant:Tenant$gpu-tenancy:hami:Hami$kubernetes:helm.sh/v3:Release", "tenant-a-hami-chart"): [
            "tenant tenant-a ready", "tenant-a HAMi Ready"
        ],
        urn("gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_network:TenantNetwork", "tenant-b-network-kindnet"): [
            "tenant tenant-b ready"
        ],
        urn("gpu-tenancy:tenant:Tenant", "tenant-a-2"): ["tenant tenant-a-2 ready"],
        urn("gpu-tenancy:tenant:Tenant$pulumi:providers:kubernetes", "tenant-a-2-kubernetes"): ["tenant tenant-a-2 ready"],
        urn("pulumi:pulumi:Stack", "gpu-tenancy-e2e-1a2b3c"): [],
        "not-a-urn": [],
    }
    for value, stages in cases.items():
        assert stages_for_urn(value, tenants) == stages, value
        assert stage_for_urn(value, tenants) == (stages[0] if stages else None), value


def test_component_types_the_stages_rely_on_exist() -> None:
    sources = "\n".join(p.read_text() for p in (REPO_ROOT / "components").glob("*.py"))
    for component_type in [*STAGE_BY_COMPONENT_TYPE, TENANT_COMPONENT_TYPE, *TENANT_STAGES]:
        assert f'"{component_type}"' in sources, f"component type {component_type} no longer exists; update support.py"
    # The Tenant creates them as its children, itself or through its device layer (components/device_layers/).
    tenant = "\n".join(p.read_text() for p in [REPO_ROOT / "components" / "tenant.py",
                                               *(REPO_ROOT / "components" / "device_layers").glob("*.py")])
    for component_type in TENANT_STAGES:
        assert component_type.rsplit(":", 1)[1] + "(" in tenant, component_type


def test_up_progress_records_first_start_to_last_finish() -> None:
    from types import SimpleNamespace

    clock = FakeClock()
    progress = UpProgress(["tenant-a"], clock=clock)

    def event(kind: str, value: str) -> SimpleNamespace:
        step = SimpleNamespace(metadata=SimpleNamespace(urn=value))
        return SimpleNamespace(
            resource_pre_event=step if kind == "pre" else None, res_outputs_event=step if kind == "out" else None
        )

    kind_urn = urn("gpu-tenancy:kind_cluster:KindCluster$command:local:Command", "management-create")
    tcp_urn = urn("gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_control_plane:TenantControlPlane", "tenant-a-control-plane")
    agent_urn = urn("gpu-tenancy:tenant:Tenant$kubernetes:apps/v1:DaemonSet", "tenant-a-mock-gpu-agent-daemonset")
    clock.sleep(1)
    progress(event("pre", kind_urn))
    clock.sleep(60)
    progress(event("out", kind_urn))
    progress(event("pre", tcp_urn))
    clock.sleep(30)
    progress(event("out", tcp_urn))
    progress(event("pre", agent_urn))
    clock.sleep(70)
    progress(event("out", agent_urn))
    progress(SimpleNamespace(resource_pre_event=None, res_outputs_event=None))
    timings = StageTimings()
    progress.record_into(timings)
    assert timings.seconds_by_stage == {"kind cluster": 60, "tenant-a control plane Ready": 30, "tenant tenant-a ready": 100}
    assert timings.finished_at_by_stage == {
        "kind cluster": 61, "tenant-a control plane Ready": 91, "tenant tenant-a ready": 161
    }


def go_bytes_size(size: float) -> str:
    """docker/go-units size.go BytesSize: CustomSize("%.4g%s", size, 1024.0, binaryAbbrs), as docker stats prints."""
    units, index = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"], 0
    while size >= 1024 and index < len(units) - 1:
        size, index = size / 1024, index + 1
    return "%.4g%s" % (size, units[index])  # noqa: UP031 (Go's %g, not a format spec)


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1536, 500 * 2**20, 1234567890, 3 * 2**30 + 7, 2**40 + 2**38])
def test_docker_memory_sizes_are_read_back(size: int) -> None:
    text = go_bytes_size(size)
    assert abs(bytes_size(text) - size) <= size * 5e-4, (size, text)


def test_docker_stats_and_meminfo_are_read_for_the_footprint() -> None:
    assert go_bytes_size(1536 * 2**20) == "1.5GiB" and bytes_size("1.5GiB") == 1536 * 2**20
    with pytest.raises(ValueError, match="not a docker memory size"):
        bytes_size("1.5GB")  # decimal units are HumanSize's, not what docker stats prints
    stats = (
        f"gpu-tenancy-e2e-1a2b3c-control-plane\t{go_bytes_size(1.25 * 2**30)} / {go_bytes_size(15.6 * 2**30)}\n"
        f"gpu-tenancy-e2e-1a2b3c-tenant-a-worker\t{go_bytes_size(700 * 2**20)} / {go_bytes_size(15.6 * 2**30)}\n"
        "gpu-tenancy-e2e-1a2b3c-gone\t-- / --\n"
        f"buildx_buildkit_default\t{go_bytes_size(80 * 2**20)} / {go_bytes_size(15.6 * 2**30)}\n"
    )
    assert container_memory(stats, "gpu-tenancy-e2e-1a2b3c") == {
        "gpu-tenancy-e2e-1a2b3c-control-plane": round(1.25 * 2**30),
        "gpu-tenancy-e2e-1a2b3c-tenant-a-worker": 700 * 2**20,
    }
    meminfo = "MemTotal:       24683664 kB\nMemFree:        19802800 kB\nMemAvailable:   23643612 kB\n"  # this machine's
    assert memory_in_use(meminfo) == (24683664 - 23643612) * 1024
    footprint = Footprint()
    footprint.sample("before", 10 * 2**30, 2 * 2**30)
    footprint.sample("after up", 19 * 2**30, 7 * 2**30)
    footprint.sample("after destroy", 13 * 2**30, None)
    footprint.containers = {"a": 2**30, "b": 2**29}
    assert footprint.to_dict()["lab"] == {
        "disk_after_up": 9 * 2**30, "memory_after_up": 5 * 2**30, "disk_kept_after_destroy": 3 * 2**30,
        "containers_memory": 3 * 2**29,
    }


def test_opted_in_reads_the_marker_expression() -> None:
    assert opted_in("e2e", None) and opted_in("e2e and not slow", "") and opted_in("", "1")
    assert not opted_in("not e2e", None) and not opted_in("", None) and not opted_in("", "0")


def test_worker_nodes_come_from_the_tenants_output() -> None:
    assert worker_nodes({"tenants": {"a": {"nodes": ["n1"]}}}, "a") == ["n1"]
    with pytest.raises(AssertionError, match="no node for tenant 'a'"):
        worker_nodes({"tenants": {"a": {}}}, "a")
    with pytest.raises(AssertionError, match="no node for tenant 'b'"):
        worker_nodes({"tenants": {}}, "b")


def test_leftovers_and_conflicts_are_named_after_the_cluster() -> None:
    cluster = "gpu-tenancy-e2e-1a2b3c"
    containers = [f"{cluster}-control-plane", f"{cluster}-tenant-a-worker", "gpu-tenancy-dev-control-plane", "other"]
    assert stack_resources_left(containers, ["kind", "bridge", f"{cluster}-net"], cluster) == [
        f"container {cluster}-control-plane",
        f"container {cluster}-tenant-a-worker",
        f"network {cluster}-net",
    ]
    assert conflicting_clusters(["kind", "gpu-tenancy-dev", "gpu-tenancy-e2e-9"]) == [
        "gpu-tenancy-dev",
        "gpu-tenancy-e2e-9",
    ]


def test_missing_prerequisites_names_each_tool() -> None:
    missing = missing_prerequisites(lambda tool: None if tool in {"docker", "pulumi"} else f"/bin/{tool}", lambda: True)
    assert missing == ["docker (CLI not on PATH)", "pulumi"]
    assert missing_prerequisites(lambda tool: f"/bin/{tool}", lambda: False) == [
        "docker (engine not reachable via `docker info`)"
    ]
    assert missing_prerequisites(lambda tool: f"/bin/{tool}", lambda: True) == []


def test_e2e_stack_is_the_dev_stack_in_sim_with_idle_gpus() -> None:
    import yaml

    from gpu_tenancy.contract.config import load_config
    from tests.integration.conftest import e2e_stack_config
    from tests.integration.test_lab import EXPECTED_INVENTORY, SPLIT_COUNT

    config = e2e_stack_config()
    dev = yaml.safe_load((REPO_ROOT / "Pulumi.dev.yaml").read_text())["config"]
    assert config["gpu-tenancy:mode"] == "sim"
    assert [t["gpus"] for t in config["gpu-tenancy:tenants"]] == [t["gpus"] for t in dev["gpu-tenancy:tenants"]]
    assert all(w["replicas"] == 0 for t in config["gpu-tenancy:tenants"] for w in t.get("workloads", []))
    stack = load_config({key.split(":", 1)[1]: value for key, value in config.items()})
    inventory = {
        t.name: {"type": t.gpus[0].model, "devmem": t.gpus[0].memory_mib, "devices": sum(g.count for g in t.gpus)}
        for t in stack.tenants
    }
    assert inventory == EXPECTED_INVENTORY, (
        "Pulumi.dev.yaml changed: update EXPECTED_INVENTORY and the checks' pod sizes"
    )
    assert SPLIT_COUNT == 10
    assert stack.cluster_name("e2e-1a2b3c") == "gpu-tenancy-e2e-1a2b3c"


def test_e2e_stack_never_reuses_a_configured_cluster_name(tmp_path: Path) -> None:
    import yaml

    from tests.integration.conftest import e2e_stack_config

    dev = yaml.safe_load((REPO_ROOT / "Pulumi.dev.yaml").read_text())
    dev["config"]["gpu-tenancy:kind"] = {"clusterName": "my-lab", "network": "kind"}
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump(dev))
    assert e2e_stack_config(stack_file)["gpu-tenancy:kind"] == {"network": "kind"}


# ------------------------------------------------------------------ which example stack, and mode sim-nvml


def test_the_stack_is_chosen_by_env_and_defaults_to_dev() -> None:
    for unset in (None, "", "  "):
        assert select_stack(unset) is E2E_STACKS["dev"]
    dev, nvml = select_stack("dev"), select_stack("dev-nvml")
    assert (dev.stack_file, dev.mode, dev.prefix) == ("Pulumi.dev.yaml", "sim", "e2e")
    assert (nvml.stack_file, nvml.mode, nvml.prefix) == ("Pulumi.dev-nvml.yaml", "sim-nvml", "e2e-nvml")
    for stack in E2E_STACKS.values():
        assert (REPO_ROOT / stack.stack_file).is_file(), stack
    with pytest.raises(ValueError, match=rf"^{STACK_ENV}='gpu' names no e2e stack; choose one of dev, dev-nvml$"):
        select_stack("gpu")


def test_mode_specific_checks_name_the_mode_they_need() -> None:
    dev, nvml = E2E_STACKS["dev"], E2E_STACKS["dev-nvml"]
    assert mode_skip_reason(["sim"], dev) is None and mode_skip_reason(["sim", "sim-nvml"], nvml) is None
    assert mode_skip_reason(["sim"], nvml, "reads the mock-GPU agent's annotation") == (
        "mode sim only; GPU_TENANCY_E2E_STACK=dev-nvml deploys mode sim-nvml: reads the mock-GPU agent's annotation"
    )
    assert mode_skip_reason(["sim-nvml"], dev) == "mode sim-nvml only; GPU_TENANCY_E2E_STACK=dev deploys mode sim"


def test_e2e_nvml_stack_is_the_dev_nvml_stack_with_idle_gpus() -> None:
    import yaml

    from tests.integration.conftest import e2e_stack_config
    from tests.integration.test_lab import EXPECTED_INVENTORY

    stack = E2E_STACKS["dev-nvml"]
    config = e2e_stack_config(REPO_ROOT / stack.stack_file, stack.mode)
    declared = yaml.safe_load((REPO_ROOT / stack.stack_file).read_text())["config"]
    assert config["gpu-tenancy:mode"] == "sim-nvml"
    assert [t["gpus"] for t in config["gpu-tenancy:tenants"]] == [t["gpus"] for t in declared["gpu-tenancy:tenants"]]
    assert all(w["replicas"] == 0 for t in config["gpu-tenancy:tenants"] for w in t.get("workloads", []))
    # The shared checks (2-13) are parametrized by EXPECTED_INVENTORY's tenants and size pods for its GPUs.
    assert {t["name"] for t in config["gpu-tenancy:tenants"]} == set(EXPECTED_INVENTORY)


def test_nvml_inventory_of_the_dev_nvml_stack() -> None:
    from tests.integration.conftest import e2e_stack_config

    stack = E2E_STACKS["dev-nvml"]
    inventory = nvml_inventory(e2e_stack_config(REPO_ROOT / stack.stack_file, stack.mode)["gpu-tenancy:tenants"])
    assert inventory == {
        "tenant-a": {("NVIDIA A100-SXM4-80GB", 81920): 1},
        "tenant-b": {("NVIDIA L4", 23034): 2},
    }, "Pulumi.dev-nvml.yaml changed: check the sim-nvml checks' pod sizes and this table"


def test_hami_device_types_follow_register_go() -> None:
    # HAMi v2.10.0 register.go: the NVML name as is when it starts with "NVIDIA", else prefixed "NVIDIA-".
    assert hami_device_type("NVIDIA L4") == "NVIDIA L4"
    assert hami_device_type("Tesla T4") == "NVIDIA-Tesla T4"


def test_the_checks_agree_with_the_program_on_the_mock() -> None:
    """Only once gpu_tenancy/builders/mock_nvml/nvml_mock.py exists: the names, image and driver root the checks expect."""
    nvml_mock = pytest.importorskip("gpu_tenancy.builders.mock_nvml.nvml_mock", reason="gpu_tenancy.builders.mock_nvml.nvml_mock (mode sim-nvml) is not there yet")
    from gpu_tenancy.contract import versions
    from gpu_tenancy.contract.tenant_config import GpuConfig

    assert nvml_mock.image_name() == nvml_mock_image(versions.NVML_MOCK_COMMIT)
    assert nvml_mock.DRIVER_ROOT == NVML_MOCK_DRIVER_ROOT and nvml_mock.COMPONENT == "nvml-mock"
    gpus = [GpuConfig.model_validate({"model": "NVIDIA L4", "count": 2})]
    devices = nvml_mock.mock_config("tenant-b", gpus)["devices"]
    # The checks expect the recorded real card's name and total from the mock.
    assert {(d["name"], d["memory"]["total_bytes"] // 2**20) for d in devices} == {("NVIDIA L4", recorded_card_memory()["NVIDIA L4"])}


def test_the_mock_image_is_named_after_the_pinned_commit() -> None:
    assert nvml_mock_image("204019fb69e4d49285625a6829ff0e5b143bba3b") == "gpu-tenancy/nvml-mock:204019fb69e4"
    for unusable in (None, "", "v0.3.0", "204019fb69e4"):
        assert nvml_mock_image(unusable) is None, unusable


def _register(*devices: dict[str, Any]) -> list[dict[str, Any]]:
    """As HAMi v2.10.0 writes it (device.MarshalNodeDevices: omitempty drops index 0, numa 0 and health false)."""
    return gpu_parse_register(json.dumps(list(devices), separators=(",", ":")))


def gpu_parse_register(value: str) -> list[dict[str, Any]]:
    from gpu_tenancy.hami.protocol import parse_register_annotation as parse

    return parse(value)


def _l4(uuid: str, **changes: Any) -> dict[str, Any]:
    device = {"id": uuid, "count": 10, "devmem": 24576, "devcore": 100, "type": "NVIDIA L4", "mode": "hami-core", "health": True}
    return {key: value for key, value in {**device, **changes}.items() if value is not None}


def test_register_problems_accepts_exactly_the_declared_gpus() -> None:
    wanted = {("NVIDIA L4", 24576): 2}
    assert register_problems(_register(_l4("GPU-a"), _l4("GPU-b", index=1)), wanted, 10) == []


def test_register_problems_names_every_difference() -> None:
    wanted = {("NVIDIA L4", 24576): 2}
    assert register_problems(_register(_l4("GPU-a")), wanted, 10) == [
        "registered 1 x NVIDIA L4 (24576 MiB), declared 2 x NVIDIA L4 (24576 MiB)"
    ]
    # A real L4's driver reserves memory; the mock reports exactly the declared MiB, so nothing is tolerated.
    assert register_problems(_register(_l4("GPU-a"), _l4("GPU-b", devmem=23034)), wanted, 10) == [
        "registered 1 x NVIDIA L4 (23034 MiB) + 1 x NVIDIA L4 (24576 MiB), declared 2 x NVIDIA L4 (24576 MiB)"
    ]
    # The declared form is not the NVML name: HAMi registers what NVML reports.
    assert register_problems(_register(_l4("GPU-a", type="NVIDIA-L4"), _l4("GPU-b")), wanted, 10)[0].startswith(
        "registered 1 x NVIDIA L4 (24576 MiB) + 1 x NVIDIA-L4 (24576 MiB)"
    )
    assert register_problems(_register(_l4("GPU-a", health=None), _l4("GPU-b", count=5)), wanted, 10) == [
        "GPU GPU-a is not healthy",
        "GPU GPU-b offers 5 slots (deviceSplitCount), expected 10",
    ]
    assert register_problems(_register(_l4("GPU-a"), _l4("GPU-a")), wanted, 10) == ["GPU ids registered twice: GPU-a"]


def test_allocation_consumed_tells_the_device_plugin_from_the_scheduler() -> None:
    # The scheduler writes the devices to allocate; HAMi's Allocate erases each container's entry it serves and
    # re-encodes the list, trailing empty entry included: ';;' for one container.
    assert allocation_consumed(";;") and allocation_consumed(";")
    assert not allocation_consumed("GPU-a,NVIDIA,4000,5:;")
    assert not allocation_consumed(";GPU-a,NVIDIA,4000,5:;")
    assert not allocation_consumed(None) and not allocation_consumed("")


def test_nvidia_smi_list_is_parsed() -> None:
    output = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1b9c8f4e-3c1d-5b8f-9a0e-2f4d6c8b0a12)\n"
        "  MIG 1g.10gb     Device  0: (UUID: MIG-7d1e6a2b-5c4f-4e9a-8b3d-1f2e3a4b5c6d)\n"
        "GPU 1: NVIDIA L4 (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
        "No devices were found\n"
    )
    assert nvidia_smi_gpus(output) == [
        (0, "NVIDIA A100-SXM4-80GB", "GPU-1b9c8f4e-3c1d-5b8f-9a0e-2f4d6c8b0a12"),
        (1, "NVIDIA L4", "GPU-00000000-0000-0000-0000-000000000001"),
    ]
    assert nvidia_smi_gpus("Failed to initialize NVML: Unknown Error\n") == []


def test_the_pod_mounts_the_mock_driver_root_and_runs_its_nvidia_smi() -> None:
    from tests.integration.test_nvml import nvidia_smi_pod

    pod = nvidia_smi_pod("gpu-tenancy/nvml-mock:204019fb69e4")
    (container,) = pod.spec.containers
    assert container.image == "gpu-tenancy/nvml-mock:204019fb69e4" and container.image_pull_policy == "Never"
    assert container.command == [f"{NVML_MOCK_DRIVER_ROOT}/usr/bin/nvidia-smi", "-L"]
    assert container.resources.limits == {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"}
    assert {(env.name, env.value) for env in container.env} == {("CUDA_DISABLE_CONTROL", "true")}
    (mount,) = container.volume_mounts
    (volume,) = pod.spec.volumes
    assert (mount.mount_path, mount.read_only, mount.name) == (NVML_MOCK_DRIVER_ROOT, True, volume.name)
    assert volume.host_path.path == NVML_MOCK_DRIVER_ROOT
    assert pod.spec.scheduler_name == "hami-scheduler" and pod.spec.restart_policy == "Never"


# ----------------------------------------------------------------------------------- the skip path

FAULT_TESTS = 9  # test_faults.py's (F1-F7, F5 and F6 in two cases each)
E2E_TESTS = 32 + FAULT_TESTS  # test_lab.py, test_lab_gpu_access.py, test_lab_network.py, test_nvml.py and test_faults.py items, parametrized ones per case
NVML_TESTS = 6  # test_nvml.py's: they skip against the default (dev, mode sim) stack
REAL_ONLY_TESTS = 1  # test_lab_gpu_access.py's check on a real host
NOT_SIM_TESTS = 1  # test_09b: modes sim-nvml and real only (no HAMi-core to preload in sim)
SIM_SKIPPED = NVML_TESTS + 1 + NOT_SIM_TESTS  # and the real-hosts check of test_lab_gpu_access.py


def fake_bin(tmp_path: Path, tools: dict[str, str]) -> str:
    """A PATH holding only the given fake tools (name -> shell body)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in tools.items():
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    return str(bin_dir)


def run_suite(path: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GPU_TENANCY_E2E")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/integration", "-rs", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO_ROOT,
        env={**clean, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_all_skipped(result: subprocess.CompletedProcess[str], reason: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(rf"\b{E2E_TESTS} skipped\b", output), output
    assert not re.search(r"\b\d+ (passed|failed|errors?|xpassed)\b", output), output
    assert output.count("SKIPPED [") >= 1 and reason in output, output


def test_suite_collects_every_check(tmp_path: Path) -> None:
    result = run_suite(fake_bin(tmp_path, {}), "--collect-only")
    output = result.stdout + result.stderr
    assert f"{E2E_TESTS} tests collected" in output, output
    for number in range(1, 18):
        assert f"test_{number:02d}_" in output, f"check {number} is missing from tests/integration"


def test_teardown_runs_last_whatever_the_file_order(tmp_path: Path) -> None:
    result = run_suite(fake_bin(tmp_path, {}), "--collect-only")  # run_suite passes -q: one node id a line
    ids = [line for line in result.stdout.splitlines() if "::test_" in line]
    assert len(ids) == E2E_TESTS and ids[-1].endswith("::test_13_teardown_leaves_nothing"), ids
    assert ids.index(next(i for i in ids if "test_nvml.py" in i)) > ids.index(next(i for i in ids if "test_12_" in i))
    faults = [index for index, i in enumerate(ids) if "test_faults.py" in i]
    assert len(faults) == FAULT_TESTS and faults == list(range(len(ids) - 1 - FAULT_TESTS, len(ids) - 1)), ids


def test_without_opt_in_every_check_skips_with_the_reason(tmp_path: Path) -> None:
    path = fake_bin(tmp_path, {"docker": "exit 0", "pulumi": "exit 0", "kind": "exit 0", "kubectl": "exit 0"})
    assert_all_skipped(run_suite(path), "e2e tests are opt-in: run `make e2e`")


DRY_RUN = {"GPU_TENANCY_E2E_STRICT": "0"}  # `make e2e E2E_STRICT=0`: skips instead of failing


def test_opt_in_names_missing_tools(tmp_path: Path) -> None:
    path = fake_bin(tmp_path, {"kind": "exit 0", "kubectl": "exit 0"})
    result = run_suite(path, "-m", "e2e", **DRY_RUN)
    assert_all_skipped(result, "e2e prerequisites missing: docker (CLI not on PATH), pulumi")
    assert "kind" not in result.stdout.split("prerequisites missing:")[1].splitlines()[0]


def test_opt_in_names_an_unreachable_docker_engine(tmp_path: Path) -> None:
    path = fake_bin(tmp_path, {"docker": "exit 1", "pulumi": "exit 0", "kind": "exit 0"})
    assert_all_skipped(
        run_suite(path, GPU_TENANCY_E2E="1", **DRY_RUN),
        "e2e prerequisites missing: docker (engine not reachable via `docker info`), kubectl",
    )


def test_opt_in_refuses_to_share_the_host_with_another_stack(tmp_path: Path) -> None:
    tools = {"docker": "exit 0", "pulumi": "exit 0", "kubectl": "exit 0", "kind": 'echo "gpu-tenancy-dev"'}
    assert_all_skipped(
        run_suite(fake_bin(tmp_path, tools), GPU_TENANCY_E2E="1", **DRY_RUN),
        "another gpu-tenancy stack runs on this host (kind clusters: gpu-tenancy-dev)",
    )


def test_an_unknown_stack_is_named_instead_of_deployed(tmp_path: Path) -> None:
    tools = {"docker": "exit 0", "pulumi": "exit 0", "kubectl": "exit 0", "kind": "exit 0"}
    reason = "GPU_TENANCY_E2E_STACK='gpu' names no e2e stack; choose one of dev, dev-nvml"
    path = fake_bin(tmp_path, tools)
    assert_all_skipped(run_suite(path, GPU_TENANCY_E2E="1", GPU_TENANCY_E2E_STACK="gpu", **DRY_RUN), reason)
    strict = run_suite(path, GPU_TENANCY_E2E="1", GPU_TENANCY_E2E_STACK="gpu")
    assert strict.returncode == 4 and reason in strict.stdout + strict.stderr, strict.stdout + strict.stderr


@pytest.mark.parametrize("strict", [{}, {"GPU_TENANCY_E2E_STRICT": "1"}], ids=["default", "explicit"])
def test_a_live_run_is_strict_by_default(tmp_path: Path, strict: dict[str, str]) -> None:
    result = run_suite(fake_bin(tmp_path, {}), GPU_TENANCY_E2E="1", **strict)
    output = result.stdout + result.stderr
    assert result.returncode == 4, output  # pytest's usage-error exit code: CI fails, never green by skipping
    assert "the e2e suite cannot run: e2e prerequisites missing" in output and "pulumi" in output, output
    assert "GPU_TENANCY_E2E_STRICT=0" in output, "the error names the opt-out"


def test_api_clients_from_stack_kubeconfigs_never_wait_forever() -> None:
    import ssl

    from kubernetes import client

    from tests.integration.conftest import API_TIMEOUT, TimeoutApiClient

    kubeconfig = _admin_kubeconfig()

    seen: list[tuple[str, Any, bool]] = []

    def fake_request(
        method: str,
        url: str,
        headers: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        seen.append(
            (
                url,
                _request_timeout,
                bool(api.rest_client.pool_manager.connection_pool_kw.get("cert_reqs") == ssl.CERT_NONE),
            )
        )
        raise RuntimeError("stop")

    for verify in (True, False):
        api = TimeoutApiClient.from_kubeconfig(kubeconfig, verify_ssl=verify)
        api.rest_client.request = fake_request
        with pytest.raises(RuntimeError, match="stop"):
            client.CoreV1Api(api).list_node()
        with pytest.raises(RuntimeError, match="stop"):
            client.CoreV1Api(api).list_node(_request_timeout=5)
    assert [timeout for _, timeout, _ in seen] == [API_TIMEOUT, 5, API_TIMEOUT, 5]
    assert all(url.startswith("https://") and url.endswith(":6443/api/v1/nodes") for url, _, _ in seen), seen
    assert [insecure for _, _, insecure in seen] == [False, False, True, True]
    with pytest.raises(AssertionError, match="not a kubeconfig"):
        TimeoutApiClient.from_kubeconfig("")


# ------------------------------------------------------- the lab fixture's teardown, with a fake Automation API

FAKE_AUTOMATION = '''
"""pytest plugin: replaces pulumi.automation.create_or_select_stack with a recording fake.

FakeStack follows pulumi 3.272.0 ``pulumi/automation/_stack.py``: ``Stack.preview`` hands every engine
event to ``on_event`` (parsed by the real ``EngineEvent.from_json`` from the JSON the engine writes,
pulumi/pulumi ``sdk/go/common/apitype/events.go`` ``PolicyEvent``), and a mandatory violation makes
the CLI exit non-zero, which it raises as ``CommandError``; ``Stack.up`` runs
``pulumi up --yes --skip-preview`` and so reports no policy preview of its own.
"""
import json
import os
from pathlib import Path

from pulumi import automation as auto
from pulumi.automation._cmd import CommandResult

import gpu_tenancy.cli.charts.pull as chart_pull

RECORD = Path(os.environ["FAKE_AUTO_RECORD"])


def fake_pull(root, charts, stack=None, **_):
    """`make charts` as the fixture runs it, without the network: recorded, nothing pulled."""
    record(["charts", stack, sorted(c.name for c in charts)])
    return [], []


chart_pull.pull = fake_pull  # before tests/integration/conftest.py imports it


def record(entry):
    with RECORD.open("a") as out:
        out.write(json.dumps(entry) + "\\n")


class Result:
    def __init__(self, outputs):
        self.outputs = {k: auto.OutputValue(v, True) for k, v in outputs.items()}


POLICY_EVENT = {
    "resourceUrn": "urn:pulumi:e2e::gpu-tenancy::pulumi:pulumi:Stack::gpu-tenancy-e2e",
    "message": "tenant-provider-isolation: tenant-a reads its kubeconfig from namespace None\\n",
    "color": "raw",
    "policyName": "tenant-provider-isolation",
    "policyPackName": "gpu-tenancy",
    "policyPackVersion": "0.1.0",
    "enforcementLevel": "mandatory",
}


class FakeStack:
    def preview(self, on_output=None, on_event=None, policy_packs=None, **kwargs):
        record(["preview", policy_packs])
        on_output("fake preview output")
        if os.environ.get("FAKE_PREVIEW_VIOLATION") == "1":
            on_event(auto.EngineEvent.from_json({"sequence": 1, "timestamp": 0, "policyEvent": POLICY_EVENT}))
            raise auto.CommandError(CommandResult("", "error: preview failed", 255))
        on_event(auto.EngineEvent.from_json({"sequence": 1, "timestamp": 0, "summaryEvent": {"resourceChanges": {}}}))

    def up(self, on_output=None, on_event=None, policy_packs=None, **kwargs):
        on_output("fake up output")
        record(["up", policy_packs])
        if os.environ.get("FAKE_UP_FAILS") == "1":
            raise RuntimeError("deploy failed in the fake")
        # Stack outputs are secrets where they hold credentials (kubeconfigs); the suite reads them in plain text.
        return Result({"kindClusterName": "gpu-tenancy-e2e-fake", "managementKubeconfig": "SECRET-KUBECONFIG-FAKE"})

    def destroy(self, on_output=None, remove=None, **kwargs):
        # Whether the diagnostics were already written when destroy began (they must be: afterwards there is
        # no lab left to read them from).
        reports = Path(os.environ["GPU_TENANCY_E2E_REPORTS"])
        record(["destroy", remove, sorted(path.name for path in reports.rglob("diagnostics.md"))])
        if os.environ.get("FAKE_DESTROY_FAILS") == "1":
            raise RuntimeError("destroy failed in the fake")


def create_or_select_stack(name, work_dir=None, opts=None):
    config = opts.stack_settings[name].config
    record(["create", name, opts.env_vars["PULUMI_BACKEND_URL"], sorted(opts.stack_settings), config["gpu-tenancy:mode"],
            opts.env_vars["PULUMI_CONFIG_PASSPHRASE"]])
    return FakeStack()


auto.create_or_select_stack = create_or_select_stack
'''


# A check that skips while it runs (what pytest.skip inside a test does), to see what strictness makes of it.
SKIP_ONE = """
import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if "test_01_" in item.nodeid:
            item.add_marker(pytest.mark.skip(reason="skipped by the test plugin"))
"""


def run_with_fake_automation(tmp_path: Path, *args: str, **env: str) -> tuple[str, list[Any], Path]:
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "fake_automation.py").write_text(FAKE_AUTOMATION)
    (plugin_dir / "skip_one.py").write_text(SKIP_ONE)
    record, reports = tmp_path / "record.jsonl", tmp_path / "reports"
    tools = {"docker": "exit 0", "pulumi": "exit 0", "kind": "exit 0", "kubectl": "exit 0"}
    result = run_suite(
        fake_bin(tmp_path, tools),
        "-p",
        "fake_automation",
        "-m",
        "e2e",
        *args,
        PYTHONPATH=f"{plugin_dir}{os.pathsep}{REPO_ROOT}",
        FAKE_AUTO_RECORD=str(record),
        GPU_TENANCY_E2E_REPORTS=str(reports),
        **env,
    )
    entries = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    if entries:
        # What `make up` does first: the stack's charts into the chart cache, once, before any stack exists.
        assert entries[0][0] == "charts" and [e[0] for e in entries].count("charts") == 1, entries
        assert set(entries[0][2]) >= {"cert-manager", "hami", "kamaji", "metallb"}, entries
        entries = entries[1:]
    return result.stdout + result.stderr, entries, reports


def test_failed_deploy_errors_every_check_and_still_destroys_keeping_logs(tmp_path: Path) -> None:
    output, entries, reports = run_with_fake_automation(tmp_path, FAKE_UP_FAILS="1")
    not_for_sim = NVML_TESTS + REAL_ONLY_TESTS + NOT_SIM_TESTS
    assert re.search(rf"\b{not_for_sim} deselected, {E2E_TESTS - not_for_sim} errors\b", output), output
    assert f"not for this mode {not_for_sim}" in output, output
    assert not re.search(r"\d+ passed", output) and f"checks: passed 0, failed 0, errors {E2E_TESTS - not_for_sim}" in output, output
    assert "deploy failed in the fake" in output
    assert [entry[0] for entry in entries] == ["create", "preview", "up", "destroy"], entries
    create, preview, up, destroy = entries
    assert create[1].startswith("e2e-") and create[2].startswith("file://") and create[3] == [create[1]]
    assert not re.search(r"\d+ skipped", output), "the sim-nvml checks are not part of the dev stack's run: deselected"
    assert not create[1].startswith("e2e-nvml-") and create[4] == "sim", "the default is the dev stack in mode sim"
    assert preview[1] == up[1] == [str(REPO_ROOT / "policies")], "the policy pack must gate the preview and up"
    assert destroy[1] is True, "destroy must remove the stack"
    (run_dir,) = [d for d in reports.iterdir() if d.is_dir()]
    assert "fake up output" in (run_dir / "pulumi.log").read_text()
    assert destroy[2] == ["diagnostics.md"], "a failed deploy is diagnosed before destroy"
    index = (run_dir / "diagnostics.md").read_text()
    assert index.startswith("Diagnostics collected after the deploy failed, before anything was destroyed.")
    # The fake kind prints no kubeconfig: the collection says so instead of passing silently.
    assert "management: unreachable" in index and (run_dir / "management-unreachable.txt").exists(), index
    assert "destroy" in json.loads((run_dir / "timings.json").read_text())["stages"]
    state = Path(create[2].removeprefix("file://"))
    assert not state.exists(), "the state backend of a destroyed stack is removed"
    assert not (REPO_ROOT / f"Pulumi.{create[1]}.yaml").exists()


def test_destroy_runs_once_and_diagnostics_are_kept_for_failures(tmp_path: Path) -> None:
    output, entries, reports = run_with_fake_automation(tmp_path, "-k", "test_01 or test_13")
    assert re.search(r"\b1 failed\b", output) and re.search(r"\b1 passed\b", output), output
    assert [entry[0] for entry in entries] == ["create", "preview", "up", "destroy"], (
        "test_13 destroys; teardown must not repeat"
    )
    assert entries[-1][2] == ["diagnostics.md"], "test_13 destroys: the diagnostics come first"
    (run_dir,) = [d for d in reports.iterdir() if d.is_dir()]
    index = (run_dir / "diagnostics.md").read_text()
    assert index.startswith("Diagnostics collected after 1 failed check(s) (test_01_kamaji_and_datastore_ready)"), index
    assert (run_dir / "management-unreachable.txt").exists(), sorted(p.name for p in run_dir.iterdir())
    # The stage table reaches the terminal even though pytest captures fixture output.
    assert "e2e stage timings, footprint and artifacts" in output and re.search(r"destroy\s+\d+\.\d", output), output


def test_the_dev_nvml_stack_leaves_out_the_agent_checks_and_runs_its_own(tmp_path: Path) -> None:
    output, entries, reports = run_with_fake_automation(
        tmp_path, "-rsf", "-k", "test_06 or test_07 or test_14 or test_13", GPU_TENANCY_E2E_STACK="dev-nvml"
    )
    create = entries[0]
    assert create[0] == "create" and re.fullmatch(r"e2e-nvml-[0-9a-f]{6}", create[1]) and create[4] == "sim-nvml", entries
    # test_06 (2 tenants) is not for mode sim-nvml: deselected and named; test_07 is shared and runs (fails: the
    # fake has no tenants); test_14 runs too.
    assert re.search(r"NOT RUN +tests/integration/test_lab.py::test_06_\S+\[tenant-a\] \(mode sim\): not for", output), output
    assert re.search(r"\b1 passed\b", output) and "not for this mode 2 (strict)" in output, output
    assert "FAILED tests/integration/test_lab.py::test_07_fractional_sharing_on_a100" in output, output
    assert "FAILED tests/integration/test_nvml.py::test_14_" in output and re.search(r"\b3 failed\b", output), output
    (run_dir,) = [d for d in reports.iterdir() if d.is_dir()]
    assert run_dir.name == create[1]


def test_the_dev_stack_leaves_out_the_sim_nvml_checks(tmp_path: Path) -> None:
    output, entries, _ = run_with_fake_automation(tmp_path, "-k", "test_nvml or test_13")
    assert entries[0][4] == "sim", entries
    assert re.search(r"NOT RUN +tests/integration/test_nvml.py::test_14_\S+ \(mode sim-nvml\)", output), output
    assert re.search(r"\b1 passed, \d+ deselected\b", output), output
    assert "skipped 0, not for this mode 6 (strict)" in output, output


def test_a_run_of_nothing_deploys_nothing_and_fails(tmp_path: Path) -> None:
    output, entries, _ = run_with_fake_automation(tmp_path, "-k", "test_nvml")
    assert entries == [] and re.search(rf"\b{E2E_TESTS} deselected\b", output), (entries, output)
    assert not re.search(r"\b\d+ (passed|failed|skipped)", output), output


def test_a_check_that_skips_fails_a_strict_run(tmp_path: Path) -> None:
    output, _, reports = run_with_fake_automation(tmp_path, "-p", "skip_one", "-k", "test_01 or test_13")
    assert re.search(r"\b1 passed, 1 skipped\b", output), output
    assert "FAILED: 1 check(s) skipped and a live run is strict" in output, output
    assert re.search(r"SKIPPED +tests/integration/test_lab.py::test_01_\S+ \(skipped by the test plugin\)", output), output
    summary = json.loads((reports / "timings.json").read_text())["checks"]
    assert summary == {"passed": 1, "failed": 0, "errors": 0, "skipped": 1, "not for this mode": 0}, summary


def test_a_dry_run_may_skip(tmp_path: Path) -> None:
    output, _, _ = run_with_fake_automation(tmp_path, "-p", "skip_one", "-k", "test_01 or test_13", **DRY_RUN)
    assert re.search(r"\b1 passed, 1 skipped\b", output) and "FAILED" not in output, output
    assert "(not strict)" in output


def test_the_report_says_what_ran_where_and_how_long_each_stage_took(tmp_path: Path) -> None:
    output, entries, reports = run_with_fake_automation(tmp_path, "-k", "test_01 or test_13", ImageOS="ubuntu24",
                                                        ImageVersion="20260816.277.1", RUNNER_ENVIRONMENT="github-hosted")
    (run_dir,) = [d for d in reports.iterdir() if d.is_dir()]
    report = json.loads((run_dir / "timings.json").read_text())
    assert report == json.loads((reports / "timings.json").read_text()), "the latest run is also at the top"
    assert list(report["stages"])[:2] == ["prerequisites", "pulumi preview + up"] and "destroy" in report["stages"]
    run = report["run"]
    assert (run["example"], run["mode"], run["stack"]) == ("dev", "sim", entries[0][1])
    assert run["runner"] == "GitHub-hosted ubuntu24 image 20260816.277.1" and run["cpus"] == os.cpu_count()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", run["date"])
    assert report["checks"] == {"passed": 1, "failed": 1, "errors": 0, "skipped": 0, "not for this mode": 0}
    assert set(report["footprint"]["samples"]) == {"before", "after up", "after destroy"}
    summary = (run_dir / "summary.md").read_text()
    assert summary.startswith("#### `make e2e`: copy of `dev`, mode sim, on GitHub-hosted ubuntu24 image 20260816.277.1")
    assert "| `test_lab.py::test_01_kamaji_and_datastore_ready` | failed |" in summary, summary
    assert re.search(r"PASSED +tests/integration/test_lab.py::test_13_teardown_leaves_nothing", output), output


UPLOADED_FILES = {  # what a run can leave under reports/e2e/, which CI uploads
    "timings.json", "summary.md", "pulumi.log", "docker-ps.txt", "diagnostics.md", "management-tenantcontrolplanes.yaml",
    *(f"{cluster}-{part}.txt" for cluster in ("management", "tenant-a", "tenant-b")
      for part in ("nodes", "pods", "events", "helm-releases", "logs", "unreachable")),
    "test_17-nvidia-smi.log",
}


def test_diagnostics_cover_the_management_clusters_charts() -> None:
    from components import metallb
    from gpu_tenancy.builders.kamaji import kamaji_chart
    from tests.integration.diagnostics import MANAGEMENT_LOG_NAMESPACES

    kamaji = (REPO_ROOT / "components" / "kamaji.py").read_text()
    assert 'namespace="cert-manager"' in kamaji and "namespace=kamaji_chart.KAMAJI_NAMESPACE" in kamaji
    assert set(MANAGEMENT_LOG_NAMESPACES) == {kamaji_chart.KAMAJI_NAMESPACE, "cert-manager", metallb.NAMESPACE}


def test_nothing_secret_reaches_the_uploaded_reports(tmp_path: Path) -> None:
    """Everything the upload path (reports/e2e, .github/workflows/e2e.yml) can hold after the worst run: failed
    checks (diagnostics) and a destroy that fails twice (state and passphrase kept)."""
    output, entries, reports = run_with_fake_automation(tmp_path, "-k", "test_01 or test_02", FAKE_DESTROY_FAILS="1")
    passphrase = entries[0][5]
    state = Path(entries[0][2].removeprefix("file://"))
    try:
        uploaded = [path for path in reports.rglob("*") if path.is_file()]
        names = {path.name for path in uploaded}
        assert names <= UPLOADED_FILES, sorted(names)
        assert {"pulumi.log", "timings.json", "summary.md", "docker-ps.txt", "diagnostics.md"} <= names, names
        for path in uploaded:
            text = path.read_text(errors="replace")
            assert passphrase not in text and "SECRET-KUBECONFIG-FAKE" not in text, path
        assert (state / "passphrase").read_text() == passphrase, "kept next to the state it decrypts"
        assert passphrase not in output
    finally:
        import shutil

        shutil.rmtree(state, ignore_errors=True)
        (REPO_ROOT / f"Pulumi.{entries[0][1]}.yaml").unlink(missing_ok=True)


def test_failed_destroy_keeps_the_state_and_says_how_to_retry(tmp_path: Path) -> None:
    output, entries, _ = run_with_fake_automation(tmp_path, "-k", "test_01", FAKE_DESTROY_FAILS="1")
    assert [entry[0] for entry in entries] == ["create", "preview", "up", "destroy", "destroy"], "one retry"
    state = Path(entries[0][2].removeprefix("file://"))
    assert state.exists(), "state must be kept when destroy failed"
    assert f"PULUMI_BACKEND_URL=file://{state} pulumi destroy --stack {entries[0][1]}" in output, output
    assert (state / "passphrase").stat().st_mode & 0o077 == 0
    assert f"PULUMI_CONFIG_PASSPHRASE=$(cat {state / 'passphrase'})" in output
    assert "kept Pulumi." in output
    import shutil

    shutil.rmtree(state)
    (REPO_ROOT / f"Pulumi.{entries[0][1]}.yaml").unlink(missing_ok=True)


def test_a_mandatory_violation_in_the_preview_deploys_nothing(tmp_path: Path) -> None:
    output, entries, _ = run_with_fake_automation(tmp_path, FAKE_PREVIEW_VIOLATION="1")
    assert [entry[0] for entry in entries] == ["create", "preview", "destroy"], entries
    assert re.search(rf"\b{E2E_TESTS - SIM_SKIPPED} errors\b", output), output
    assert "gpu-tenancy/tenant-provider-isolation: tenant-provider-isolation: tenant-a reads" in output, output


# ------------------------------------------------------------------ preview_then_up, in process


class RecordingStack:
    """Stack.preview/up as in pulumi/automation/_stack.py (3.272.0): events to on_event, CommandError on failure."""

    def __init__(self, policy_events: list[dict[str, Any]], preview_exit: int = 0) -> None:
        self.policy_events = policy_events
        self.preview_exit = preview_exit
        self.calls: list[tuple[str, Any]] = []

    def preview(self, on_output: Any, on_event: Any, policy_packs: list[str], color: str) -> None:
        from pulumi import automation as auto
        from pulumi.automation._cmd import CommandResult

        self.calls.append(("preview", policy_packs))
        for number, policy in enumerate(self.policy_events):
            on_event(auto.EngineEvent.from_json({"sequence": number, "timestamp": 0, "policyEvent": policy}))
        if self.preview_exit:
            raise auto.CommandError(CommandResult("", "error: preview failed", self.preview_exit))

    def up(self, on_output: Any, on_event: Any, policy_packs: list[str], color: str) -> str:
        self.calls.append(("up", policy_packs))
        return "up-result"


def _policy(level: str, name: str = "tcp-konnectivity-enabled", urn: str | None = "urn:x") -> dict[str, Any]:
    event = {"message": f"{name} says no\n", "policyName": name, "policyPackName": "gpu-tenancy"}
    return {**event, "enforcementLevel": level, **({"resourceUrn": urn} if urn else {})}


def test_preview_then_up_deploys_only_after_a_clean_preview() -> None:
    from tests.integration.support import preview_then_up

    stack = RecordingStack([_policy("advisory")])
    assert preview_then_up(stack, ["policies"], on_output=print) == "up-result"
    assert stack.calls == [("preview", ["policies"]), ("up", ["policies"])]


def test_preview_then_up_stops_on_a_mandatory_violation() -> None:
    from tests.integration.support import PolicyGateError, preview_then_up

    stack = RecordingStack([_policy("advisory", "other"), _policy("mandatory", urn=None)], preview_exit=255)
    with pytest.raises(PolicyGateError, match=r"gpu-tenancy/tcp-konnectivity-enabled: tcp-konnectivity-enabled says no$"):
        preview_then_up(stack, ["policies"], on_output=print)
    assert stack.calls == [("preview", ["policies"])]


def test_preview_then_up_stops_when_the_preview_fails_without_a_violation() -> None:
    from tests.integration.support import PolicyGateError, preview_then_up

    stack = RecordingStack([], preview_exit=255)
    with pytest.raises(PolicyGateError, match="nothing deployed"):
        preview_then_up(stack, ["policies"], on_output=print)
    assert stack.calls == [("preview", ["policies"])]


# --------------------------------------------- the sim-nvml checks (14-17) against an in-memory tenant API

A100_UUID = "GPU-4f1d7c3a-9b2e-5d6f-8a1c-3e5b7d9f1a2c"
# As HAMi v2.10.0's device plugin writes it over the mock (register.go getAPIDevices, MarshalNodeDevices: no
# index/numa when 0): the NVML name as the type, the declared MiB exactly.
NVML_A100_REGISTER = json.dumps(
    [{"id": A100_UUID, "count": 10, "devmem": 81920, "devcore": 100, "type": "NVIDIA A100-SXM4-80GB", "mode": "hami-core", "health": True}],
    separators=(",", ":"),
)
# What the mock-GPU agent registers in mode sim: the declared model as the type.
AGENT_A100_REGISTER = NVML_A100_REGISTER.replace("NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB")


def _admin_kubeconfig() -> str:
    """Shaped like Kamaji's admin.conf: one cluster, one context, current-context set."""
    import base64

    import yaml

    from tests.harness import CA_PEM

    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "tenant-a",
                    "cluster": {
                        "server": "https://172.18.255.200:6443",
                        "certificate-authority-data": base64.b64encode(CA_PEM).decode(),
                    },
                }
            ],
            "contexts": [{"name": "admin@tenant-a", "context": {"cluster": "tenant-a", "user": "admin"}}],
            "current-context": "admin@tenant-a",
            "users": [{"name": "admin", "user": {"token": "t"}}],
        }
    )


def _daemon_set(name: str, labels: dict[str, str], ready: int, desired: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "kube-system", "labels": labels},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {"containers": []}}},
        "status": {"desiredNumberScheduled": desired, "numberReady": ready, "currentNumberScheduled": desired, "numberMisscheduled": 0},
    }


class FakeTenantApi:
    """The few kube-apiserver calls checks 14-17 make, answered from memory through the real kubernetes client
    (its ``rest_client.request`` replaced). A created pod gets what ``pod_outcome`` says: status, annotations."""

    def __init__(self, node: dict[str, Any], daemon_sets: list[dict[str, Any]], pod_outcome: Any, log: str = "") -> None:
        self.node, self.daemon_sets, self.pod_outcome, self.log = node, daemon_sets, pod_outcome, log
        self.pods: dict[str, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []
        self.namespaces: list[str] = []  # where pods were created

    def request(self, method: str, url: str, headers: Any = None, body: Any = None, post_params: Any = None, _request_timeout: Any = None) -> Any:
        from types import SimpleNamespace
        from urllib.parse import parse_qs, urlsplit

        from kubernetes.client import rest

        def answer(status: int, payload: Any) -> Any:
            text = payload if isinstance(payload, str) else json.dumps(payload)
            kind = "text/plain" if isinstance(payload, str) else "application/json"
            response = rest.RESTResponse(SimpleNamespace(status=status, reason="", data=text.encode(), headers={"content-type": kind}))
            response.read()
            return response

        parts = urlsplit(url)
        path, query = parts.path, parse_qs(parts.query)
        # Pods in any namespace (check 17 runs in kube-system, outside the GPU-access admission policy).
        pod_path = re.fullmatch(r"/api/v1/namespaces/[^/]+/pods/([^/]+)(/log)?", path)
        pods_path = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods", path)
        if method == "GET" and path == "/apis/apps/v1/daemonsets":
            key, value = query["labelSelector"][0].split("=")
            items = [d for d in self.daemon_sets if d["metadata"]["labels"].get(key) == value]
            return answer(200, {"apiVersion": "apps/v1", "kind": "DaemonSetList", "metadata": {}, "items": items})
        if method == "GET" and path == f"/api/v1/nodes/{self.node['metadata']['name']}":
            return answer(200, self.node)
        if method == "POST" and pods_path:
            self.created.append(body)
            self.namespaces.append(pods_path[1])
            status, annotations = self.pod_outcome(body)
            pod = {**body, "metadata": {**body["metadata"], "namespace": pods_path[1], "annotations": annotations}, "status": status}
            self.pods[body["metadata"]["name"]] = pod
            return answer(201, pod)
        if method == "GET" and pods_path:
            return answer(200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": list(self.pods.values())})
        if pod_path and pod_path[1] in self.pods:
            if method == "DELETE":
                return answer(200, self.pods.pop(pod_path[1]))
            return answer(200, self.log if pod_path[2] else self.pods[pod_path[1]])
        return answer(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})


def _running(annotations: dict[str, str]) -> Any:
    return lambda pod: ({"phase": "Running"}, annotations)


def _fake_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: FakeTenantApi) -> Any:
    from tests.integration import support, test_nvml
    from tests.integration.conftest import DeployedLab, TimeoutApiClient, e2e_stack_config

    stack = E2E_STACKS["dev-nvml"]
    lab = DeployedLab(None, {"tenants": {"tenant-a": {"nodes": ["tenant-a-worker"]}}}, StageTimings(), tmp_path,
                      mode=stack.mode, config=e2e_stack_config(REPO_ROOT / stack.stack_file, stack.mode))
    client = TimeoutApiClient.from_kubeconfig(_admin_kubeconfig())
    client.rest_client.request = api.request
    monkeypatch.setattr(lab, "tenant_client", lambda tenant, verify_ssl=True: client)
    # A failing check polls until its deadline: on a fake clock here.
    clock = FakeClock()
    monkeypatch.setattr(test_nvml, "wait_for", lambda probe, **kw: support.wait_for(probe, **kw, clock=clock, sleep=clock.sleep))
    return lab


def _node(register: str, allocatable: str = "10") -> dict[str, Any]:
    return {
        "metadata": {"name": "tenant-a-worker", "annotations": {"hami.io/node-nvidia-register": register}},
        "status": {"allocatable": {"nvidia.com/gpu": allocatable}, "capacity": {"nvidia.com/gpu": allocatable}},
    }


PLUGIN_DS = _daemon_set("hami-device-plugin", {"app.kubernetes.io/component": "hami-device-plugin"}, ready=1)
MOCK_DS = _daemon_set("tenant-a-mock-nvml", {"gpu-tenancy.io/component": "nvml-mock"}, ready=1)
AGENT_DS = _daemon_set("tenant-a-mock-gpu-agent", {"gpu-tenancy.io/component": "mock-gpu-agent"}, ready=1)


def test_check_14_wants_the_plugin_and_the_mock_ready_and_no_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.integration.test_nvml import test_14_device_plugin_and_mock_nvml_ready_without_the_agent as check

    check(_fake_lab(tmp_path, monkeypatch, FakeTenantApi(_node(NVML_A100_REGISTER), [PLUGIN_DS, MOCK_DS], None)), "tenant-a")
    with pytest.raises(AssertionError, match=r"tenant-a runs the mock-GPU agent \(\['kube-system/tenant-a-mock-gpu-agent'\]\)"):
        check(_fake_lab(tmp_path, monkeypatch, FakeTenantApi(_node(NVML_A100_REGISTER), [PLUGIN_DS, MOCK_DS, AGENT_DS], None)), "tenant-a")
    unscheduled = _daemon_set("hami-device-plugin", {"app.kubernetes.io/component": "hami-device-plugin"}, ready=0, desired=0)
    with pytest.raises(AssertionError, match=r"HAMi's device plugin .* Ready.*last seen: kube-system/hami-device-plugin ready 0/0$"):
        check(_fake_lab(tmp_path, monkeypatch, FakeTenantApi(_node(NVML_A100_REGISTER), [unscheduled, MOCK_DS], None)), "tenant-a")
    crashing = _daemon_set("hami-device-plugin", {"app.kubernetes.io/component": "hami-device-plugin"}, ready=0)
    with pytest.raises(AssertionError, match=r"panics when it finds no libnvidia-ml.*last seen: kube-system/hami-device-plugin ready 0/1$"):
        check(_fake_lab(tmp_path, monkeypatch, FakeTenantApi(_node(NVML_A100_REGISTER), [crashing, MOCK_DS], None)), "tenant-a")
    with pytest.raises(AssertionError, match=r"the mock NVML \(kube-system/tenant-a-mock-nvml\).*last seen: no DaemonSet labelled"):
        check(_fake_lab(tmp_path, monkeypatch, FakeTenantApi(_node(NVML_A100_REGISTER), [PLUGIN_DS], None)), "tenant-a")


def test_check_15_wants_the_nvml_names_and_exact_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.integration.test_nvml import test_15_device_plugin_registers_exactly_the_declared_gpus as check

    check(_fake_lab(tmp_path, monkeypatch, FakeTenantApi(_node(NVML_A100_REGISTER), [], None)), "tenant-a")
    with pytest.raises(AssertionError, match=r"last seen: registered 1 x NVIDIA-A100-SXM4-80GB \(81920 MiB\), declared 1 x NVIDIA A100-SXM4-80GB"):
        check(_fake_lab(tmp_path, monkeypatch, FakeTenantApi(_node(AGENT_A100_REGISTER), [], None)), "tenant-a")
    with pytest.raises(AssertionError, match=r"last seen: allocatable nvidia.com/gpu is '0', expected 10$"):
        check(_fake_lab(tmp_path, monkeypatch, FakeTenantApi(_node(NVML_A100_REGISTER, "0"), [], None)), "tenant-a")


def test_check_16_wants_hami_to_have_allocated_every_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.integration.test_nvml import test_16_device_plugin_completes_ten_binds_within_60s as check

    allocated = {"hami.io/bind-phase": "success", "hami.io/vgpu-devices-to-allocate": ";;"}
    api = FakeTenantApi(_node(NVML_A100_REGISTER), [], _running(allocated))
    check(_fake_lab(tmp_path, monkeypatch, api))
    assert len(api.created) == 10 and not api.pods, "ten pods created, all deleted again"
    assert all(not any(e["name"] == "CUDA_DISABLE_CONTROL" for e in p["spec"]["containers"][0].get("env") or []) for p in api.created)
    # What the mock-GPU agent leaves: success, but the scheduler's devices still to allocate.
    by_agent = {"hami.io/bind-phase": "success", "hami.io/vgpu-devices-to-allocate": f"{A100_UUID},NVIDIA,4000,5:;"}
    api = FakeTenantApi(_node(NVML_A100_REGISTER), [], _running(by_agent))
    with pytest.raises(AssertionError, match=r"no device left to allocate.*e2e-nvml-burst-0: hami.io/bind-phase='success'"):
        check(_fake_lab(tmp_path, monkeypatch, api))
    assert not api.pods, "pods are deleted when the check fails"


def _nvidia_smi_outcome(phase: str, exit_code: int) -> Any:
    status = {
        "phase": phase,
        "containerStatuses": [
            {"name": "main", "ready": False, "restartCount": 0, "image": "i", "imageID": "", "state": {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}}}
        ],
    }
    return lambda pod: (status, {"hami.io/vgpu-devices-allocated": f"{A100_UUID},NVIDIA,1024,0:;", "hami.io/bind-phase": "success"})


def test_check_17_runs_the_mock_nvidia_smi_and_keeps_its_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_tenancy.contract import versions
    from tests.integration.test_nvml import NVIDIA_SMI_LOG
    from tests.integration.test_nvml import test_17_nvidia_smi_in_a_pod_lists_the_mock_gpu as check

    monkeypatch.setattr(versions, "NVML_MOCK_COMMIT", "204019fb69e4d49285625a6829ff0e5b143bba3b", raising=False)
    listed = f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {A100_UUID})\n"
    api = FakeTenantApi(_node(NVML_A100_REGISTER), [], _nvidia_smi_outcome("Succeeded", 0), log=listed)
    check(_fake_lab(tmp_path, monkeypatch, api))
    (created,) = api.created
    assert created["spec"]["containers"][0]["image"] == "gpu-tenancy/nvml-mock:204019fb69e4"
    assert (tmp_path / NVIDIA_SMI_LOG).read_text() == listed and not api.pods
    assert api.namespaces == ["kube-system"], "CUDA_DISABLE_CONTROL is refused outside kube-system"

    other = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
    api = FakeTenantApi(_node(NVML_A100_REGISTER), [], _nvidia_smi_outcome("Succeeded", 0), log=other)
    with pytest.raises(AssertionError, match=rf"the GPU HAMi registered and allocated to the pod, \['{A100_UUID}'\], should be among"):
        check(_fake_lab(tmp_path, monkeypatch, api))
    failed = "Failed to initialize NVML: Driver Not Loaded\n"
    api = FakeTenantApi(_node(NVML_A100_REGISTER), [], _nvidia_smi_outcome("Failed", 9), log=failed)
    with pytest.raises(AssertionError, match=r"nvidia-smi -L failed in the pod \(main exited 9 \(Error\)\)"):
        check(_fake_lab(tmp_path, monkeypatch, api))
    assert (tmp_path / NVIDIA_SMI_LOG).read_text() == failed, "the output is kept for the report"

    monkeypatch.delattr(versions, "NVML_MOCK_COMMIT")
    with pytest.raises(pytest.skip.Exception, match=r"gpu_tenancy\.contract\.versions has no NVML_MOCK_COMMIT"):
        check(_fake_lab(tmp_path, monkeypatch, api))
