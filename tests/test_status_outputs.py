"""Stack outputs: what is not secret is readable without --show-secrets; kubeconfigs stay secret.

The outputs are what the root stack passes to RegisterResourceOutputs, recorded by
tests/policy_support.py's capturing monitor (pulumi.runtime.mocks.MockMonitor).
"""

from __future__ import annotations

import runpy
from typing import Any

import pulumi
import pytest
from harness import TEST_SECRETS, dev_config, gpu_config, is_secret, registered_gpus
from policy_support import record_engine_view, shared_recording
from pulumi.runtime.stack import Stack, massage


def _run_then_finish_stack(run_path: Any) -> Any:
    """runpy.run_path, then register the root stack's exports as pulumi.runtime.stack.run_in_stack does.

    pulumi 3.272 `run_in_stack` calls `Stack._finish()` after the program: `register_outputs(massage(
    stack.outputs, []))`. Under mocks `set_mocks` has already finished the root stack (with no
    outputs) before the program runs, so the exports are registered here the same way, once more.
    """

    def run(path: str, **kwargs: Any) -> Any:
        root = pulumi.runtime.get_root_resource()
        assert isinstance(root, Stack)
        # set_mocks keeps one root stack per process: start from no exports, as a fresh program does.
        root.outputs.clear()
        result = run_path(path, **kwargs)
        root.register_outputs(massage(root.outputs, []))
        return result

    return run


def stack_outputs(config: dict[str, Any], stack: str, **options: Any) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runpy, "run_path", _run_then_finish_stack(runpy.run_path))
        recorded = record_engine_view(config, stack=stack, **options)
    (root,) = [r for r in recorded if r.type == "pulumi:pulumi:Stack"]
    return root.registered_outputs or {}


def contains_secret(value: Any) -> bool:
    if is_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_secret(v) for v in value)
    return False


@pytest.fixture(params=["dev", "gpu"])
@shared_recording
def outputs(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "dev":
        return stack_outputs(dev_config(), "dev")
    config = gpu_config()
    return stack_outputs(config, "gpu", node_register=registered_gpus(config))


def test_endpoints_and_nodes_are_plain(outputs: dict[str, Any]) -> None:
    tenants = outputs["tenants"]
    assert not contains_secret(tenants), tenants
    for name, entry in tenants.items():
        assert set(entry) == {"endpoint", "nodes"}, name
        assert entry["endpoint"].rsplit(":", 1)[1].isdigit(), entry  # host:port, as kubeadm.server_endpoint
        assert entry["nodes"] and all(isinstance(n, str) for n in entry["nodes"]), entry
    assert not contains_secret(outputs["mode"])
    assert isinstance(outputs["metallbRange"], str)  # both stacks use MetalLB; a plain string


def test_kubeconfigs_are_secret_one_per_tenant(outputs: dict[str, Any]) -> None:
    kubeconfigs = outputs["tenantKubeconfigs"]
    assert is_secret(kubeconfigs) or all(is_secret(v) for v in kubeconfigs.values())
    plain = kubeconfigs["value"] if is_secret(kubeconfigs) else {k: v["value"] for k, v in kubeconfigs.items()}
    assert set(plain) == set(outputs["tenants"])
    for name, kubeconfig in plain.items():
        assert "kind: Config" in kubeconfig and f"secret-token-{name}" in kubeconfig
        assert f"server: https://{outputs['tenants'][name]['endpoint']}" in kubeconfig
    assert is_secret(outputs["managementKubeconfig"])


def test_only_the_programs_own_exports(outputs: dict[str, Any]) -> None:
    sim = outputs["mode"] == "sim"
    assert ("kindClusterName" in outputs) is sim


def test_real_management_kubeconfig_output_is_the_secret_config() -> None:
    config = gpu_config()
    outputs = stack_outputs(config, "gpu", node_register=registered_gpus(config))
    assert outputs["managementKubeconfig"]["value"] == TEST_SECRETS["managementKubeconfig"]
