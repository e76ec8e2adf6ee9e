"""Reads (`<Resource>.get`) as the Pulumi engine runs them, and the stack's previews over them.

The double (tests/harness.LabMocks) is checked first against the engine behaviours it models; then the
program's two reads (the admin kubeconfig Secret, the GPU hosts' Nodes) through every preview a user
runs: a fresh stack's first one, one that adds a tenant, one that adds a GPU host, and one of an
unchanged deployed stack. Each preview must get through the engine and leave the whole policy pack
clean over what the engine would hand it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from harness import (
    PROJECT,
    LabMocks,
    ReadFailed,
    created,
    dev_config,
    gpu_config,
    nodeport_gpu_config,
    nvml_config,
    record_mocks,
    registered_gpus,
)
from policy_support import Recorded, record_engine_view, run_resource_policy, run_stack_policy
from pulumi.output import Unknown
from pulumi.runtime import MockResourceArgs
from pulumi.runtime.rpc import UNKNOWN
from pulumi_policy import StackValidationPolicy

import tenant_policies as tp  # isort: skip  (policies/ is put on sys.path by policy_support)

SECRET = "kubernetes:core/v1:Secret"
NODE = "kubernetes:core/v1:Node"
PROVIDER = "pulumi:providers:kubernetes"
MANAGEMENT_REF = f"urn:pulumi:t::{PROJECT}::{PROVIDER}::management::management-id"



STACKS = {"dev": dev_config, "dev-nvml": nvml_config, "gpu": gpu_config, "gpu-nodeport": nodeport_gpu_config}


def stack_name(variant: str) -> str:
    return variant.removesuffix("-nodeport")


def pack_violations(resources: list[Recorded], config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every resource and stack policy of the pack over the engine's view, the stack config in PULUMI_CONFIG."""
    monkeypatch.setenv(
        "PULUMI_CONFIG",
        json.dumps({f"{PROJECT}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}),
    )
    found: list[str] = []
    for policy in tp.ALL_POLICIES:
        if isinstance(policy, StackValidationPolicy):
            found += [f"{policy.name}: {message}" for message, _ in run_stack_policy(policy, resources)]
        else:
            found += [f"{policy.name}: {name}: {message}" for name, message, _ in run_resource_policy(policy, resources)]
    return found


def reads(resources: list[Recorded]) -> dict[str, dict[str, Any]]:
    return {r.name: r.outputs for r in resources if r.read}


# --------------------------------------------------------------------------- the double follows the engine


def provider(name: str, kubeconfig: Any) -> MockResourceArgs:
    return MockResourceArgs(PROVIDER, name, {"kubeconfig": kubeconfig}, custom=True)


def read(typ: str, object_id: str, provider_ref: str = MANAGEMENT_REF) -> MockResourceArgs:
    return MockResourceArgs(typ, "r", {}, provider=provider_ref, resource_id=object_id)


def test_a_read_through_a_provider_with_unknown_config_yields_an_empty_bag() -> None:
    mocks = LabMocks(preview=True, existing=set())
    mocks.new_resource(provider("management", Unknown()))
    assert mocks.new_resource(read(SECRET, "tenant-a/tenant-a-admin-kubeconfig")) == (None, {})
    assert mocks.provider_reads == []


def test_a_read_whose_id_is_unknown_is_skipped_with_empty_outputs() -> None:
    mocks = LabMocks(preview=True, existing=set())
    mocks.new_resource(provider("management", "apiVersion: v1\n"))
    assert mocks.new_resource(read(SECRET, UNKNOWN)) == (None, {})
    assert mocks.provider_reads == []


def test_a_planned_command_has_a_known_id_and_unknown_stdout_in_preview() -> None:
    # pulumi-command v1.2.1 local/commandController.go Create returns NewUniqueHex before `if preview`.
    mocks = LabMocks(preview=True, existing=set())
    command = MockResourceArgs("command:local:Command", "wait", {"create": "true"}, "", None, True)
    resource_id, outputs = mocks.new_resource(command)
    assert resource_id and outputs["stdout"] is UNKNOWN


def test_an_invoke_that_depends_on_a_planned_resource_is_unknown_and_never_sent() -> None:
    # pulumi/pulumi source_eval.go resmon.Invoke: dependsOn with an uncreated resource answers unknown.
    fresh = record_mocks(unknowns=True)
    assert "docker:index/getNetwork:getNetwork" not in [c.token for c in fresh.calls]
    deployed = record_mocks()
    assert "docker:index/getNetwork:getNetwork" in [c.token for c in deployed.calls]


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
def test_a_read_of_an_object_that_does_not_exist_fails_as_the_engine_does(preview: bool) -> None:
    mocks = LabMocks(preview=preview, existing=set())
    mocks.new_resource(provider("management", "apiVersion: v1\n"))
    with pytest.raises(ReadFailed, match=r"^resource 'tenant-a/tenant-a-admin-kubeconfig' does not exist$"):
        mocks.new_resource(read(SECRET, "tenant-a/tenant-a-admin-kubeconfig"))


def test_a_read_returns_the_live_object_kamaji_wrote() -> None:
    mocks = LabMocks()
    mocks.new_resource(provider("management", "apiVersion: v1\n"))
    metadata = {"name": "tenant-a", "namespace": "tenant-a"}
    tcp = MockResourceArgs("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane", "tcp", {"metadata": metadata},
                           custom=True)
    _, outputs = mocks.new_resource(tcp)
    assert outputs["status"]["kubeconfig"]["admin"]["secretName"] == "tenant-a-admin-kubeconfig"
    _, state = mocks.new_resource(read(SECRET, "tenant-a/tenant-a-admin-kubeconfig"))
    assert state["metadata"] == {"name": "tenant-a-admin-kubeconfig", "namespace": "tenant-a"}
    assert set(state["data"]) == {"admin.conf", "super-admin.conf"}


def test_the_sdk_sends_an_unknown_id_to_the_engine_as_the_unknown_sentinel() -> None:
    """What reaches ReadResource when `.get`'s id is an unknown output (pulumi/runtime/resource.py read_resource)."""
    mocks = LabMocks(preview=True, existing=set())
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="t", preview=True)

    @pulumi.runtime.test
    def program() -> None:
        management = k8s.Provider("management", kubeconfig="apiVersion: v1\n")
        pending = k8s.core.v1.Namespace("ns", metadata={"name": "tenant-a"})
        k8s.core.v1.Secret.get("s", pending.id, opts=pulumi.ResourceOptions(provider=management))

    program()
    (secret_read,) = [r for r in mocks.resources if r.resource_id]
    assert secret_read.resource_id == UNKNOWN
    assert mocks.provider_reads == []


# --------------------------------------------------------------------------- the program's reads


def test_the_admin_secret_id_is_what_kamaji_wrote_into_the_status() -> None:
    from components.tenant_control_plane import secret_id

    metadata = {"name": "tenant-a", "namespace": "tenant-a"}
    status = {"kubeconfig": {"admin": {"secretName": "tenant-a-admin-kubeconfig"}}}
    assert secret_id(metadata, status) == "tenant-a/tenant-a-admin-kubeconfig"
    with pytest.raises(pulumi.RunError, match=r"tenant-a/tenant-a exists but Kamaji has not written status.kubeconfig.admin.secretName"):
        secret_id(metadata, {"kubeconfig": {}})


@pytest.mark.parametrize("variant", sorted(STACKS))
def test_fresh_stack_preview_passes_the_whole_pack(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = STACKS[variant]()
    resources = record_engine_view(config, stack=stack_name(variant), unknowns=True)
    assert pack_violations(resources, config, monkeypatch) == []
    # The reads reach the pack as the engine leaves them: nothing read yet.
    assert reads(resources) and all(outputs == {} for outputs in reads(resources).values())


def deployed(config: dict[str, Any], stack: str) -> set[tuple[str, str]]:
    """The resources an `up` of `config` leaves in the stack (HAMi has registered the hosts' GPUs since)."""
    return created(record_mocks(config, stack=stack, node_register=registered_gpus(config)))


@pytest.mark.parametrize("variant", sorted(STACKS))
def test_preview_adding_a_tenant_to_a_deployed_stack(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = STACKS[variant]()
    before = copy.deepcopy(config)
    before["tenants"] = before["tenants"][:1]
    existing = deployed(before, stack_name(variant))
    resources = record_engine_view(
        config, stack=stack_name(variant), preview=True, existing=existing, node_register=registered_gpus(before)
    )
    assert pack_violations(resources, config, monkeypatch) == []
    seen = reads(resources)
    assert seen["tenant-a-control-plane-admin-kubeconfig"]["metadata"]["namespace"] == "tenant-a"
    assert seen["tenant-b-control-plane-admin-kubeconfig"] == {}


@pytest.mark.parametrize("variant", ["gpu", "gpu-nodeport"])
def test_preview_adding_a_gpu_host_to_a_deployed_stack(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = STACKS[variant]()
    existing = deployed(before, "gpu")
    config = copy.deepcopy(before)
    # A second A100 host: the tenant's gpus are the sum of its hosts', each host says which it has.
    a100 = {"model": "NVIDIA A100-SXM4-80GB", "count": 1}
    config["tenants"][0]["gpus"] = [{**a100, "count": 2}]
    config["tenants"][0]["workers"][0]["gpus"] = [a100]
    config["tenants"][0]["workers"].append(
        {"name": "gpu-a100-02", "address": "10.20.0.13", "user": "ubuntu", "gpus": [a100],
         "hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRUI7A4r2Oe3N9zclUpPKxk3Z7S4zqycdNpn5Rp/E8V"}
    )
    resources = record_engine_view(
        config, stack="gpu", preview=True, existing=existing, node_register=registered_gpus(before)
    )
    assert pack_violations(resources, config, monkeypatch) == []
    seen = reads(resources)
    assert seen["tenant-a-inventory-gpu-a100-01"]["metadata"]["name"] == "gpu-a100-01"
    assert seen["tenant-a-inventory-gpu-a100-02"] == {}


@pytest.mark.parametrize("variant", sorted(STACKS))
def test_preview_of_an_unchanged_deployed_stack_reads_the_live_objects(
    variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = STACKS[variant]()
    existing = deployed(config, stack_name(variant))
    resources = record_engine_view(
        config, stack=stack_name(variant), preview=True, existing=existing, node_register=registered_gpus(config)
    )
    assert pack_violations(resources, config, monkeypatch) == []
    assert all(outputs.get("metadata") for outputs in reads(resources).values()), reads(resources)
