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
    STAGE_BY_COMPONENT_TYPE,
    TENANT_COMPONENT_TYPE,
    StageTimings,
    UpProgress,
    WaitTimeout,
    conflicting_clusters,
    filtering_failed_messages,
    ipv4_in_range,
    missing_prerequisites,
    opted_in,
    parse_devices_allocated,
    parse_register_annotation,
    stack_resources_left,
    stage_for_urn,
    wait_for,
    worker_nodes,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


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


def test_stage_for_urn_uses_the_top_level_component() -> None:
    tenants = ["tenant-a", "tenant-b", "tenant-a-2"]
    cases = {
        urn("gpu-tenancy:kind_cluster:KindCluster$command:local:Command", "management-create"): "cluster",
        urn("pulumi:providers:kubernetes", "management"): "cluster",
        urn("gpu-tenancy:metallb:MetalLB$kubernetes:helm.sh/v3:Release", "metallb-chart"): "MetalLB",
        urn("gpu-tenancy:kamaji:Kamaji$kubernetes:kamaji.clastix.io/v1alpha1:DataStore", "kamaji-datastore"): "Kamaji",
        # A tenant's TenantControlPlane and kindnet mention "kamaji"/"kind" but belong to the tenant.
        urn(
            "gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_control_plane:TenantControlPlane"
            "$kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane",
            "tenant-a-control-plane-tcp",
        ): "tenant tenant-a ready",
        urn("gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_network:TenantNetwork", "tenant-b-network-kindnet"): (
            "tenant tenant-b ready"
        ),
        urn("gpu-tenancy:tenant:Tenant", "tenant-a-2"): "tenant tenant-a-2 ready",
        urn(
            "gpu-tenancy:tenant:Tenant$pulumi:providers:kubernetes", "tenant-a-2-kubernetes"
        ): "tenant tenant-a-2 ready",
        urn("pulumi:pulumi:Stack", "gpu-tenancy-e2e-1a2b3c"): None,
        "not-a-urn": None,
    }
    for value, stage in cases.items():
        assert stage_for_urn(value, tenants) == stage, value


def test_component_types_the_stages_rely_on_exist() -> None:
    sources = "\n".join(p.read_text() for p in (REPO_ROOT / "components").glob("*.py"))
    for component_type in [*STAGE_BY_COMPONENT_TYPE, TENANT_COMPONENT_TYPE]:
        assert f'"{component_type}"' in sources, f"component type {component_type} no longer exists; update support.py"


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
    tenant_urn = urn("gpu-tenancy:tenant:Tenant$kubernetes:apps/v1:DaemonSet", "tenant-a-mock-gpu-agent-daemonset")
    clock.sleep(1)
    progress(event("pre", kind_urn))
    clock.sleep(60)
    progress(event("out", kind_urn))
    progress(event("pre", tenant_urn))
    clock.sleep(100)
    progress(event("out", tenant_urn))
    progress(SimpleNamespace(resource_pre_event=None, res_outputs_event=None))
    timings = StageTimings()
    progress.record_into(timings)
    assert timings.seconds_by_stage == {"cluster": 60, "tenant tenant-a ready": 100}
    assert timings.finished_at_by_stage == {"cluster": 61, "tenant tenant-a ready": 161}


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

    from gpu_tenancy.config import load_config
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


# ----------------------------------------------------------------------------------- the skip path

E2E_TESTS = 18  # test_lab.py items, parametrized ones counted per case


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
    for number in range(1, 14):
        assert f"test_{number:02d}_" in output, f"check {number} is missing from test_lab.py"


def test_without_opt_in_every_check_skips_with_the_reason(tmp_path: Path) -> None:
    path = fake_bin(tmp_path, {"docker": "exit 0", "pulumi": "exit 0", "kind": "exit 0", "kubectl": "exit 0"})
    assert_all_skipped(run_suite(path), "e2e tests are opt-in: run `make e2e`")


def test_opt_in_names_missing_tools(tmp_path: Path) -> None:
    path = fake_bin(tmp_path, {"kind": "exit 0", "kubectl": "exit 0"})
    result = run_suite(path, "-m", "e2e")
    assert_all_skipped(result, "e2e prerequisites missing: docker (CLI not on PATH), pulumi")
    assert "kind" not in result.stdout.split("prerequisites missing:")[1].splitlines()[0]


def test_opt_in_names_an_unreachable_docker_engine(tmp_path: Path) -> None:
    path = fake_bin(tmp_path, {"docker": "exit 1", "pulumi": "exit 0", "kind": "exit 0"})
    assert_all_skipped(
        run_suite(path, GPU_TENANCY_E2E="1"),
        "e2e prerequisites missing: docker (engine not reachable via `docker info`), kubectl",
    )


def test_opt_in_refuses_to_share_the_host_with_another_stack(tmp_path: Path) -> None:
    tools = {"docker": "exit 0", "pulumi": "exit 0", "kubectl": "exit 0", "kind": 'echo "gpu-tenancy-dev"'}
    assert_all_skipped(
        run_suite(fake_bin(tmp_path, tools), GPU_TENANCY_E2E="1"),
        "another gpu-tenancy stack runs on this host (kind clusters: gpu-tenancy-dev)",
    )


def test_strict_mode_errors_instead_of_skipping(tmp_path: Path) -> None:
    result = run_suite(fake_bin(tmp_path, {}), GPU_TENANCY_E2E="1", GPU_TENANCY_E2E_STRICT="1")
    output = result.stdout + result.stderr
    assert result.returncode == 4, output  # pytest's usage-error exit code: CI fails, never green by skipping
    assert "GPU_TENANCY_E2E_STRICT=1 and the e2e suite cannot run" in output and "pulumi" in output, output


def test_ci_job_runs_the_suite_strictly_on_a_self_hosted_runner() -> None:
    import yaml

    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "e2e.yml").read_text())
    job = workflow["jobs"]["e2e"]
    assert "self-hosted" in job["runs-on"]
    assert job["env"]["GPU_TENANCY_E2E"] == "1" and job["env"]["GPU_TENANCY_E2E_STRICT"] == "1"
    steps = job["steps"]
    assert any(step.get("run") == "make e2e" for step in steps)
    always = [step for step in steps if step.get("if") == "always()"]
    assert any("reports/e2e" in str(step.get("with", {}).get("path")) for step in always), "reports must be uploaded"
    assert any("kind delete cluster" in step.get("run", "") for step in always), "leftovers must be removed"
    assert workflow["concurrency"]["group"] == "gpu-tenancy-e2e", "one e2e run per Docker host"


def test_api_clients_from_stack_kubeconfigs_never_wait_forever() -> None:
    import base64
    import ssl

    import yaml
    from kubernetes import client

    from tests.harness import CA_PEM
    from tests.integration.conftest import API_TIMEOUT, TimeoutApiClient

    # Shaped like Kamaji's admin.conf: one cluster, one context, current-context set.
    kubeconfig = yaml.safe_dump(
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

RECORD = Path(os.environ["FAKE_AUTO_RECORD"])


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
        return Result({"kindClusterName": "gpu-tenancy-e2e-fake"})

    def destroy(self, on_output=None, remove=None, **kwargs):
        record(["destroy", remove])
        if os.environ.get("FAKE_DESTROY_FAILS") == "1":
            raise RuntimeError("destroy failed in the fake")


def create_or_select_stack(name, work_dir=None, opts=None):
    record(["create", name, opts.env_vars["PULUMI_BACKEND_URL"], sorted(opts.stack_settings)])
    return FakeStack()


auto.create_or_select_stack = create_or_select_stack
'''


def run_with_fake_automation(tmp_path: Path, *args: str, **env: str) -> tuple[str, list[Any], Path]:
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "fake_automation.py").write_text(FAKE_AUTOMATION)
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
    return result.stdout + result.stderr, entries, reports


def test_failed_deploy_errors_every_check_and_still_destroys_keeping_logs(tmp_path: Path) -> None:
    output, entries, reports = run_with_fake_automation(tmp_path, FAKE_UP_FAILS="1")
    assert re.search(rf"\b{E2E_TESTS} errors?\b", output) and " passed" not in output, output
    assert "deploy failed in the fake" in output
    assert [entry[0] for entry in entries] == ["create", "preview", "up", "destroy"], entries
    create, preview, up, destroy = entries
    assert create[1].startswith("e2e-") and create[2].startswith("file://") and create[3] == [create[1]]
    assert preview[1] == up[1] == [str(REPO_ROOT / "policies")], "the policy pack must gate the preview and up"
    assert destroy[1] is True, "destroy must remove the stack"
    (run_dir,) = [d for d in reports.iterdir() if d.is_dir()]
    assert "fake up output" in (run_dir / "pulumi.log").read_text()
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
    (run_dir,) = [d for d in reports.iterdir() if d.is_dir()]
    assert (run_dir / "management-tenantcontrolplanes.yaml").exists(), sorted(p.name for p in run_dir.iterdir())
    # The stage table reaches the terminal even though pytest captures fixture output.
    assert "e2e stage timings and artifacts" in output and re.search(r"destroy\s+\d+\.\d", output), output


def test_failed_destroy_keeps_the_state_and_says_how_to_retry(tmp_path: Path) -> None:
    output, entries, reports = run_with_fake_automation(tmp_path, "-k", "test_01", FAKE_DESTROY_FAILS="1")
    assert [entry[0] for entry in entries] == ["create", "preview", "up", "destroy", "destroy"], "one retry"
    state = Path(entries[0][2].removeprefix("file://"))
    assert state.exists(), "state must be kept when destroy failed"
    assert f"PULUMI_BACKEND_URL=file://{state} pulumi destroy --stack {entries[0][1]}" in output, output
    (run_dir,) = [d for d in reports.iterdir() if d.is_dir()]
    assert (run_dir / "passphrase").stat().st_mode & 0o077 == 0
    assert "kept Pulumi." in output
    import shutil

    shutil.rmtree(state)
    (REPO_ROOT / f"Pulumi.{entries[0][1]}.yaml").unlink(missing_ok=True)


def test_a_mandatory_violation_in_the_preview_deploys_nothing(tmp_path: Path) -> None:
    output, entries, _ = run_with_fake_automation(tmp_path, FAKE_PREVIEW_VIOLATION="1")
    assert [entry[0] for entry in entries] == ["create", "preview", "destroy"], entries
    assert re.search(rf"\b{E2E_TESTS} errors?\b", output), output
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
