"""Changing a pinned version must not replace anything in a way whose old delete undoes the new create.

For each example stack and each versioned input, the program is registered before and after the change
(tests/policy_support.record_engine_view, with the resource options the engine receives) and
tests/replacement_model.py works out, as the engine would, which resources are replaced and in which order.
A create-before-delete replacement of a command with a `delete` (or of a named Kubernetes object) runs the
old delete after the new create: for the kind cluster that is `kind delete cluster` right after the new
create adopted the running cluster, for a real host `kubeadm reset` right after the new join found it joined.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import dev_config, gpu_config, nvml_config, registered_gpus
from policy_support import EXAMPLE_STACKS, Recorded, record_engine_view
from replacement_model import deleted_first_with, replacements, undoing_replacements

OTHER_DIGEST = "sha256:" + "1" * 64
# One changed versioned input per case: (config key under `versions`, new values).
CHANGES: dict[str, dict[str, str]] = {
    "kind node image": {"kindNodeImage": f"kindest/node:v1.35.6@{OTHER_DIGEST}"},
    "kubernetes version": {"kubernetes": "v1.35.6", "workerImage": f"kindest/node:v1.35.6@{OTHER_DIGEST}"},
    "hami version": {"hami": "2.10.1", "hamiImageTag": "v2.10.1"},
    "kamaji image tag": {"kamajiImageTag": "26.8.3-edge"},
    # The other pins, so that no versioned input goes unchecked.
    "kamaji chart": {"kamajiChart": "0.0.1"},
    "cert-manager version": {"certManager": "v1.21.2"},
    "metallb version": {"metallb": "0.16.2"},
    "kindnetd image": {"kindnetdImage": "docker.io/kindest/kindnetd:v20260601-11111111"},
    "nvml mock commit": {"nvmlMockCommit": "204019fb69e4d49285625a6829ff0e5b143bba3b"},  # tag v0.3.0
}
STACKS = ("dev", "dev-nvml", "gpu")


def _config(stack: str) -> dict[str, Any]:
    return {"dev": dev_config, "dev-nvml": nvml_config, "gpu": gpu_config}[stack]()


def _record(stack: str, config: dict[str, Any]) -> list[Recorded]:
    if stack == "dev":
        return record_engine_view(config)
    if stack == "dev-nvml":
        return record_engine_view(config, stack="dev-nvml")
    return record_engine_view(config, stack="gpu", node_register=registered_gpus(config))


def _baseline(stack: str) -> list[Recorded]:
    return EXAMPLE_STACKS[stack]()


_CHANGED: dict[tuple[str, str], list[Recorded]] = {}


def _changed(stack: str, change: str) -> list[Recorded]:
    if (stack, change) not in _CHANGED:
        config = _config(stack)
        config["versions"] = {**(config.get("versions") or {}), **CHANGES[change]}
        _CHANGED[stack, change] = _record(stack, config)
    return _CHANGED[stack, change]


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("stack", STACKS)
def test_no_replacement_deletes_what_its_new_create_adopted(stack: str, change: str) -> None:
    assert undoing_replacements(_baseline(stack), _changed(stack, change)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_command_with_a_delete_is_replaced_delete_first(stack: str) -> None:
    """Such a command here either adopts or joins on create (`grep -qx || kind create`, `kubelet.conf`
    checks), removes what a rejoin needs gone (a real host's Node), or costs nothing to delete first (a
    bootstrap token's revoke): delete-first for all of them covers any replacement, not only the version
    changes above."""
    commands = [r for r in _baseline(stack) if r.type.startswith("command:") and r.inputs.get("delete")]
    assert commands
    assert {r.name: r.delete_before_replace for r in commands} == dict.fromkeys((r.name for r in commands), True)


def _replaced(stack: str, change: str) -> dict[str, bool]:
    """name -> deleted first, for every replaced resource."""
    return {r.name: r.delete_first for r in replacements(_baseline(stack), _changed(stack, change)).values()}


def test_a_new_kind_node_image_replaces_the_cluster_deleting_it_first() -> None:
    replaced = _replaced("dev", "kind node image")
    assert replaced["management-create"] is True
    assert replaced["management-kubeconfig"] is True


def test_a_replaced_kind_cluster_takes_the_management_provider_and_its_resources_down_first() -> None:
    """Deleted with the old cluster, while it still answers, not after it is gone."""
    replaced = _replaced("dev", "kind node image")
    assert replaced["management"] is True, "the management provider"
    (management,) = [r for r in _baseline("dev") if r.type == "pulumi:providers:kubernetes" and r.name == "management"]
    on_management = [r.name for r in _baseline("dev") if r.provider.startswith(f"{management.urn}::") and not r.read]
    assert on_management
    assert {name: replaced.get(name) for name in on_management} == dict.fromkeys(on_management, True)


@pytest.mark.parametrize("stack", STACKS)
def test_the_management_provider_keeps_the_identifier_existing_stacks_have(stack: str) -> None:
    """A new text would replace the provider on every existing stack, and every resource on it
    create-before-delete against the same cluster (a provider-caused replacement carries no delete-first
    request): the old deletes would remove the new objects. The identifier changes only by being unknown
    while the cluster is replaced (tests above)."""
    (management,) = [r for r in _baseline(stack) if r.type == "pulumi:providers:kubernetes" and r.name == "management"]
    assert management.inputs["clusterIdentifier"] == "management"


def test_a_replaced_tenant_control_plane_takes_what_runs_in_it_and_what_joined_it_down_first() -> None:
    """The management cluster holds the tenants' control planes (Kamaji) and their datastore: replacing it
    replaces every tenant control plane, so everything inside a tenant (resources through its provider)
    and every worker joined to it must be deleted while the old one still answers, and then recreated.
    Otherwise they stay in the state but not in the new tenant (the next `up` sees no change), and the
    workers stay joined to a control plane that is gone."""
    replaced = _replaced("dev", "kind node image")
    tenant_providers = {
        r.urn for r in _baseline("dev") if r.type == "pulumi:providers:kubernetes" and r.name != "management"
    }
    assert len(tenant_providers) == 2
    in_tenants = [
        r.name for r in _baseline("dev")
        if r.provider.rsplit("::", 1)[0] in tenant_providers or r.urn in tenant_providers
    ]
    joins = [r.name for r in _baseline("dev") if r.type.startswith("command:") and r.name.endswith("-join")]
    assert in_tenants and len(joins) == 2
    expected = [*in_tenants, *joins]
    assert {name: replaced.get(name) for name in expected} == dict.fromkeys(expected, True)


@pytest.mark.parametrize("stack", STACKS)
def test_a_tenant_control_plane_replaced_for_any_reason_takes_its_tenant_and_its_workers_down_first(
    stack: str,
) -> None:
    """A TCP is named, so pulumi-kubernetes replaces it delete-first (provider.go `Diff`): whatever runs in
    that tenant or joined it goes first, and comes back against the new control plane."""
    resources = _baseline(stack)
    tcps = [r for r in resources if r.type == "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"]
    assert len(tcps) == 2
    for tcp in tcps:
        tenant = tcp.inputs["metadata"]["name"]
        (provider,) = [r for r in resources if r.type == "pulumi:providers:kubernetes" and r.name == f"{tenant}-kubernetes"]
        expected = {provider.urn} | {
            r.urn for r in resources if r.provider.startswith(f"{provider.urn}::") and not r.read  # reads re-read
        }
        expected |= {r.urn for r in resources if r.type.startswith("command:") and r.name.endswith("-join")
                     and r.name.startswith(f"{tenant}-")}
        assert expected - set(deleted_first_with(resources, tcp.urn)) == set(), tenant


def test_a_new_kubernetes_version_rejoins_a_real_host_by_resetting_it_first() -> None:
    replaced = _replaced("gpu", "kubernetes version")
    joins = {name: first for name, first in replaced.items() if name.endswith("-join")}
    assert joins and all(joins.values()), joins


def test_a_real_host_leaves_its_tenant_before_it_is_prepared_again() -> None:
    """Deleted in reverse of this order: `kubeadm reset` on the host, then its Node removed from the tenant
    (`kubeadm join` refuses a name whose Node is still Ready), and only then new packages and a new join.
    The inventory wait, armed by that join, goes with it (it has no delete) and waits again for the rejoined
    node's registration."""
    resources = _baseline("gpu")
    prepares = [r for r in resources if r.type == "command:remote:Command" and r.name.endswith("-prepare")]
    assert len(prepares) == 2
    for prepare in prepares:
        host = prepare.name.removesuffix("-prepare")
        tenant, node_name = host.split("-", 2)[:2], host.split("-", 2)[2]
        first = [urn.rsplit("::", 1)[-1] for urn in deleted_first_with(resources, prepare.urn)]
        wait = f"{'-'.join(tenant)}-inventory-{node_name}-registered"
        assert first == [f"{host}-node", f"{host}-join", wait], first
        (node,) = [r for r in resources if r.name == f"{host}-node"]
        assert "delete node" in node.inputs["delete"] and node.delete_before_replace is True


def test_a_new_worker_image_rejoins_a_kind_worker_in_a_new_container() -> None:
    replaced = _replaced("dev", "kubernetes version")
    containers = {n: first for n, first in replaced.items() if n.endswith("-container")}
    joins = {n: first for n, first in replaced.items() if n.endswith("-join")}
    assert containers and all(containers.values()), containers
    assert joins and all(joins.values()), joins


def test_a_new_mock_nvml_commit_rebuilds_the_image_and_loads_it_into_every_worker() -> None:
    replaced = _replaced("dev-nvml", "nvml mock commit")
    assert "nvml-mock-image-build" in replaced  # the new tag is built
    assert {n for n in replaced if n.endswith("-mock-nvml-image-load")} == {
        "tenant-a-mock-nvml-image-load", "tenant-b-mock-nvml-image-load"
    }
    # The workers, their joins and the tenants' control planes stay.
    assert not any(n.endswith(("-join", "-container", "-tcp")) for n in replaced), replaced


def test_a_replaced_kind_worker_gets_the_mock_nvml_image_again() -> None:
    replaced = _replaced("dev-nvml", "kubernetes version")
    assert {"tenant-a-worker-container", "tenant-a-mock-nvml-image-load"} <= set(replaced), replaced


def test_the_changes_are_real() -> None:
    """Each case changes what it names (a typo in CHANGES would make the tests above vacuous)."""
    for stack in STACKS:
        for change in CHANGES:
            if change == "nvml mock commit" and stack != "dev-nvml":
                continue  # only sim-nvml builds the mock
            before, after = _baseline(stack), _changed(stack, change)
            assert [r.inputs for r in before] != [r.inputs for r in after], (stack, change)
