"""The inventory wait runs again whenever what it waited for can have changed: a node that rejoined (a fresh
Node, without HAMi's registration) or new devices behind it. pulumi-command v1.2.1 reruns a command only when
its `triggers` change (`common/inputs.go`, replaceOnChanges); before, a rejoined node kept the old wait's
result and the Node read right after it found no registration (or the one from before the change).

The replacements are worked out by tests/replacement_model.py as the engine would; the wait script itself
runs against a `kubectl` stand-in that answers the node's annotation as HAMi v2.10.0's device plugin writes
it (plugin/register.go: a JSON list of devices, one `"id"` each).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import gpu_config, nvml_config, registered_gpus
from policy_support import Recorded, gpu_stack, nvml_stack, record_engine_view
from replacement_model import replacements

from components.inventory_check import SETTLE_SECONDS, WAIT_SCRIPT


def _replaced(before: list[Recorded], after: list[Recorded]) -> set[str]:
    return {r.name for r in replacements(before, after).values()}


def _nvml(config: dict[str, Any]) -> list[Recorded]:
    return record_engine_view(config, stack="dev-nvml")


def test_a_replaced_kind_worker_re_arms_its_inventory_wait() -> None:
    config = nvml_config()
    config["versions"] = {"kubernetes": "v1.35.6", "workerImage": "kindest/node:v1.35.6@sha256:" + "1" * 64}
    replaced = _replaced(nvml_stack(), _nvml(config))
    assert "tenant-a-worker-join" in replaced
    assert "tenant-a-inventory-gpu-tenancy-dev-nvml-tenant-a-worker-registered" in replaced


def test_new_mock_devices_re_arm_the_wait_of_that_tenant_only() -> None:
    config = nvml_config()
    config["tenants"][1]["gpus"] = [{"model": "NVIDIA L4", "count": 1}]
    replaced = _replaced(nvml_stack(), _nvml(config))
    assert "tenant-b-inventory-gpu-tenancy-dev-nvml-tenant-b-worker-registered" in replaced
    assert not any(name.startswith("tenant-a-inventory") for name in replaced), replaced
    assert not any(name.endswith(("-join", "-container")) for name in replaced), replaced


def test_a_rejoined_gpu_host_re_arms_its_inventory_wait() -> None:
    config = gpu_config()
    config["versions"] = {"kubernetes": "v1.35.6", "workerImage": "kindest/node:v1.35.6@sha256:" + "1" * 64}
    after = record_engine_view(config, stack="gpu", node_register=registered_gpus(config))
    replaced = _replaced(gpu_stack(), after)
    assert {"tenant-a-gpu-a100-01-join", "tenant-a-inventory-gpu-a100-01-registered"} <= replaced


def test_a_change_that_leaves_the_nodes_alone_does_not_wait_again() -> None:
    config = nvml_config()
    config["versions"] = {"hami": "2.10.1", "hamiImageTag": "v2.10.1"}
    replaced = _replaced(nvml_stack(), _nvml(config))
    assert not any(name.endswith("-registered") for name in replaced), replaced


def test_every_wait_is_armed_by_the_join_that_registered_its_node() -> None:
    for stack in (nvml_stack(), gpu_stack()):
        waits = [r for r in stack if r.name.endswith("-registered")]
        joins = {r.urn for r in stack if r.name.endswith("-join")}
        assert waits
        for wait in waits:
            assert joins & set(wait.property_dependencies.get("triggers", [])), wait.name


# --------------------------------------------------------------------------- the wait script


def _device(index: int) -> dict[str, Any]:
    return {"id": f"GPU-{index}", "index": index, "count": 10, "devmem": 23034, "devcore": 100,
            "type": "NVIDIA L4", "numa": 0, "mode": "hami-core", "health": True}


def _wait(tmp_path: Path, answers: list[str], expected: str | None) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the wait with `kubectl` answering `answers` in turn (the last one from then on); `sleep` is instant."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "calls"
    state.write_text("0")
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    (bin_dir / "kubectl").write_text(
        "#!/usr/bin/env python3\nimport json\n"
        f"n = int(open({str(state)!r}).read()); open({str(state)!r}, 'w').write(str(n + 1))\n"
        f"answers = json.load(open({str(tmp_path / 'answers.json')!r}))\n"
        "print(answers[min(n, len(answers) - 1)], end='')\n"
    )
    (bin_dir / "sleep").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "NODE": "worker-1"}
    if expected is not None:
        env["GPU_TENANCY_EXPECTED_GPUS"] = expected
    result = subprocess.run(["/bin/sh", "-c", WAIT_SCRIPT], input="kubeconfig", env=env,
                            capture_output=True, text=True, timeout=60)
    return result, int(state.read_text())


def test_the_wait_returns_once_the_node_is_registered(tmp_path: Path) -> None:
    registration = json.dumps([_device(0), _device(1)])
    result, polls = _wait(tmp_path, ["", "", registration], "2")
    assert result.returncode == 0 and polls == 3


def test_a_registration_from_before_the_change_is_not_taken_for_the_new_one(tmp_path: Path) -> None:
    old, new = json.dumps([_device(0), _device(1)]), json.dumps([_device(0)])
    result, polls = _wait(tmp_path, [old, old, old, new], "1")
    assert result.returncode == 0 and polls == 4


def test_a_registration_that_never_matches_is_handed_to_the_comparison_after_settling(tmp_path: Path) -> None:
    result, polls = _wait(tmp_path, [json.dumps([_device(0)])], "2")
    assert result.returncode == 0
    assert polls == SETTLE_SECONDS // 5  # then the Node read and the comparison name what differs


def test_without_an_expectation_any_registration_will_do(tmp_path: Path) -> None:
    result, polls = _wait(tmp_path, ["", json.dumps([_device(0)])], None)
    assert result.returncode == 0 and polls == 2


@pytest.mark.parametrize("expected", ["2", None])
def test_no_registration_at_all_fails_after_ten_minutes(tmp_path: Path, expected: str | None) -> None:
    result, polls = _wait(tmp_path, [""], expected)
    assert result.returncode == 1 and polls == 120
    assert "registered no GPUs with HAMi in 10 minutes" in result.stderr
