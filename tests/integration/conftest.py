"""E2E fixtures: opt-in gate, prerequisite check, and a throwaway stack deployed with the Automation API.

Runs only with ``-m e2e`` or ``GPU_TENANCY_E2E=1``; otherwise every test here is skipped, so the
normal ``pytest tests`` run stays offline. When opted in but prerequisites are missing, tests are
skipped with a reason naming exactly what is missing.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.support import StageTimings, missing_prerequisites

REPO_ROOT = Path(__file__).resolve().parents[2]
REPORTS_DIR = REPO_ROOT / "reports" / "e2e"
POLICY_PACK_DIR = REPO_ROOT / "policies"


def _docker_reachable() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _opted_in(config: pytest.Config) -> bool:
    return "e2e" in (config.getoption("-m") or "") or os.environ.get("GPU_TENANCY_E2E") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    integration_dir = Path(__file__).resolve().parent
    e2e_items = [item for item in items if integration_dir in Path(str(item.path)).resolve().parents]
    for item in e2e_items:
        item.add_marker(pytest.mark.e2e)
    if not e2e_items:
        return
    if not _opted_in(config):
        reason = "e2e tests are opt-in: run `make e2e`, `pytest -m e2e` or set GPU_TENANCY_E2E=1"
    else:
        missing = missing_prerequisites(shutil.which, _docker_reachable)
        if not missing:
            return
        reason = "e2e prerequisites missing: " + ", ".join(missing)
    for item in e2e_items:
        item.add_marker(pytest.mark.skip(reason=reason))


class DeployedLab:
    """A deployed throwaway stack plus the timings and log file it produced."""

    def __init__(self, stack: Any, outputs: dict[str, Any], timings: StageTimings, log_path: Path) -> None:
        self.stack = stack
        self.outputs = outputs
        self.timings = timings
        self.log_path = log_path

    def output(self, name: str) -> Any:
        assert name in self.outputs, f"stack output {name!r} missing; got {sorted(self.outputs)}"
        return self.outputs[name]

    def api_client(self, kubeconfig_yaml: str) -> Any:
        from kubernetes import client, config

        loaded = yaml.safe_load(kubeconfig_yaml)
        return config.new_client_from_config_dict(loaded) if loaded else client.ApiClient()

    def tenant_client(self, tenant: str) -> Any:
        return self.api_client(self.output("tenants")[tenant]["kubeconfig"])

    def management_client(self) -> Any:
        return self.api_client(self.output("managementKubeconfig"))

    def pulumi_log(self, line: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(line.rstrip("\n") + "\n")


def _plain_outputs(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value.value for key, value in raw.items()}


@pytest.fixture(scope="session")
def lab() -> Iterator[DeployedLab]:
    from pulumi import automation as auto

    REPORTS_DIR.mkdir(parents=True, exist_ok=True)
    stack_name = f"e2e-{secrets.token_hex(3)}"
    state_dir = Path(tempfile.mkdtemp(prefix="gpu-tenancy-e2e-state-"))
    env = {
        "PULUMI_BACKEND_URL": f"file://{state_dir}",
        "PULUMI_CONFIG_PASSPHRASE": base64.b16encode(secrets.token_bytes(8)).decode(),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }
    log_path = REPORTS_DIR / f"{stack_name}.log"
    timings = StageTimings()
    dev_config = yaml.safe_load((REPO_ROOT / "Pulumi.dev.yaml").read_text())["config"]
    tenant_names = [tenant["name"] for tenant in dev_config.get("gpu-tenancy:tenants", [])]
    stage_markers: dict[str, tuple[str, ...]] = {
        "cluster": ("kind", "Kind"),
        "MetalLB": ("metallb", "MetalLB"),
        "Kamaji": ("kamaji", "Kamaji"),
    }
    stage_markers |= {f"tenant {name} ready": (name,) for name in tenant_names}
    stack = auto.create_or_select_stack(
        stack_name,
        work_dir=str(REPO_ROOT),
        opts=auto.LocalWorkspaceOptions(
            env_vars=env, stack_settings={stack_name: auto.StackSettings(config=dev_config)}
        ),
    )
    lab = DeployedLab(stack, {}, timings, log_path)
    try:
        started = time.monotonic()

        def record_stage_progress(event: Any) -> None:
            outputs_event = getattr(event, "res_outputs_event", None)
            if outputs_event is None:
                return
            urn = outputs_event.metadata.urn
            for stage, markers in stage_markers.items():
                if any(marker in urn for marker in markers):
                    timings.record(stage, time.monotonic() - started)

        result = stack.up(on_output=lab.pulumi_log, on_event=record_stage_progress, policy_packs=[str(POLICY_PACK_DIR)])
        timings.record("pulumi up (cluster, MetalLB, Kamaji, tenants)", time.monotonic() - started)
        lab.outputs = _plain_outputs(result.outputs)
        yield lab
    finally:
        started = time.monotonic()
        try:
            stack.destroy(on_output=lab.pulumi_log, remove=True)
        finally:
            timings.record("destroy", time.monotonic() - started)
            (REPORTS_DIR / "timings.json").write_text(timings.to_json())
            print("\n" + timings.summary_table())
            shutil.rmtree(state_dir, ignore_errors=True)
            (REPO_ROOT / f"Pulumi.{stack_name}.yaml").unlink(missing_ok=True)
