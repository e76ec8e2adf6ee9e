"""The day after: what breaks a deployed lab without any change to the stack, and the one command (or none) that
recovers it. Each case is checked against what the providers store and diff (tests/provider_state.py) on the
resources the program really registers (tests/policy_support.py), and against `make doctor`'s stubbed tools
(tests/doctor_stubs.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from doctor_stubs import HostCase
from policy_support import Recorded, dev_stack, nvml_stack
from provider_state import COMMANDS, IMAGE, provider_diff, stored_state

NVML_BUILD = "gpu-tenancy:nvml_mock_image:NvmlMockImage$command:local:Command::"


def _export(resources: list[Recorded]) -> dict[str, Any]:
    """`pulumi stack export` of a deployed stack: each custom resource with its inputs and outputs."""
    return {"version": 3, "deployment": {"resources": [
        json.loads(json.dumps({"urn": r.urn, "type": r.type, "inputs": r.inputs, "outputs": r.state}, default=str))
        for r in resources if r.custom]}}


def _built(resources: list[Recorded]) -> dict[str, str]:
    """URN -> image of what the program builds locally, read from its own registrations."""
    images = {r.urn: str(r.inputs["imageName"]) for r in resources if r.type == IMAGE}
    images |= {r.urn: str(r.inputs["environment"]["IMAGE"]) for r in resources
               if r.type in COMMANDS and NVML_BUILD in r.urn}
    return images


@pytest.mark.parametrize("stack", [dev_stack, nvml_stack], ids=["sim", "sim-nvml"])
def test_after_an_image_prune_no_provider_rebuilds_what_the_stack_built(stack: Any) -> None:
    """pulumi-docker's Image diffs its stored checked inputs (unchanged by a prune) and a build command has no
    Read: the next `up` would change nothing, so the image stays gone until something loads it again."""
    resources = stack()
    built = [r for r in resources if r.urn in _built(resources)]
    assert built, "the stack builds an image"
    for resource in built:
        changes = provider_diff(resource, stored_state(resource), resource.inputs)
        assert (changes.replaces, changes.updates) == ([], []), resource.urn


@pytest.mark.parametrize("stack", [dev_stack, nvml_stack], ids=["sim", "sim-nvml"])
def test_make_up_replaces_exactly_the_built_images_docker_no_longer_has(tmp_path: Any, stack: Any) -> None:
    resources = stack()
    built = _built(resources)
    gone = sorted(built)[0]
    case = HostCase().deployed({"mode": "sim"}, ["gpu-tenancy-dev"], _export(resources))
    case.answer("docker", ["image", "inspect"], "sha256:0123\n")
    case.answer("docker", ["image", "inspect", built[gone]], "",
                f"Error response from daemon: No such image: {built[gone]}\n", 1)
    result, _ = case.run(tmp_path, "--stack", "dev", "--missing-images")
    assert result.returncode == 0, result.stderr
    # Every resource that built that image (each tenant's agent builds the same one), and nothing else.
    assert result.stdout.splitlines() == [f"--replace {u}" for u in sorted(built) if built[u] == built[gone]]
    assert f"image {built[gone]} is gone from Docker" in result.stderr


def test_with_docker_down_nothing_is_replaced(tmp_path: Any) -> None:
    case = HostCase().deployed({"mode": "sim"}, ["gpu-tenancy-dev"], _export(dev_stack()))
    case.answer("docker", ["image", "inspect"], "", "Cannot connect to the Docker daemon\n", 1)
    result, _ = case.run(tmp_path, "--stack", "dev", "--missing-images")
    assert result.returncode == 0 and result.stdout == ""


# --------------------------------------------------------------------------- a GPU host powered off


def _host_deletes(resources: list[Recorded], tenant: str, host: str) -> list[str]:
    """The program's remote commands for `host` that have a delete: pulumi-command v1.2.1 remote
    `Command.Delete` returns at once without one and connects to the host only to run one."""
    return sorted(r.urn for r in resources if r.type == "command:remote:Command" and r.inputs.get("delete")
                  and r.name.startswith(f"{tenant}-{host}-"))


def test_a_powered_off_host_blocks_only_its_reset(tmp_path: Any) -> None:
    from policy_support import gpu_stack

    from gpu_tenancy.contract.stack_file import load_stack_file

    resources = gpu_stack()
    config = load_stack_file("Pulumi.gpu.yaml")
    (tenant,) = [t for t in config.tenants if any(w.name == "gpu-l4-01" for w in t.workers)]
    expected = _host_deletes(resources, tenant.name, "gpu-l4-01")
    assert [urn.rsplit("::", 1)[-1] for urn in expected] == [f"{tenant.name}-gpu-l4-01-join"]
    case = HostCase().deployed({"mode": "real"}, [], _export(resources))
    result, _ = case.run(tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml", "--hosts-off", "gpu-l4-01")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected


def test_an_unknown_host_is_refused_in_one_line(tmp_path: Any) -> None:
    case = HostCase().deployed({"mode": "real"}, [], _export([]))
    result, _ = case.run(tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml", "--hosts-off", "gpu-l4-99")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == ("doctor: gpu-l4-99: no such worker in Pulumi.gpu.yaml (workers: gpu-a100-01, "
                                     "gpu-l4-01)")
