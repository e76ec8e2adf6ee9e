"""The resource options that decide what `up` deletes, and when: written out per stack, not derived.

Delete-first (`deleteBeforeReplace`): the engine replaces create-before-delete unless the option says
otherwise (pulumi/pulumi `pkg/resource/deploy/step_generator.go`); a command whose create adopts or joins
(`kind create cluster` behind `kind get clusters`, `kubeadm join` behind a kubelet.conf check) would
otherwise be undone by its old delete right after, and a real host's `prepare` would change its packages
while it is still joined. Background deletion (`pulumi.com/deletionPropagationPolicy: background`,
pulumi-kubernetes `provider/pkg/await`): the foreground default waits for every pod to go, which on a
tenant whose workers are already gone never happens.
"""

from __future__ import annotations

from typing import Any

import pytest
from policy_support import EXAMPLE_STACKS, Recorded, gpu_stack

KIND_WORKERS_DELETE_FIRST = {
    "management-create",  # the kind cluster: its create adopts a running cluster of that name
    "tenant-a-worker-container", "tenant-a-worker-join", "tenant-a-worker-node",
    "tenant-b-worker-container", "tenant-b-worker-join", "tenant-b-worker-node",
}
DELETE_FIRST = {
    "dev": KIND_WORKERS_DELETE_FIRST,
    "dev-nvml": KIND_WORKERS_DELETE_FIRST,
    "gpu": {
        f"{host}-{step}"
        for host in ("tenant-a-gpu-a100-01", "tenant-b-gpu-l4-01")
        for step in ("prepare", "node", "join", "bootstrap-token-mint")
    } | {
        # The host firewall: the old delete removes the table the new create would load.
        "host-fences-tenant-a-gpu-a100-01", "host-fences-tenant-b-gpu-l4-01",
    },
}

TENANT_DAEMONSETS = {f"{t}-network-{n}" for t in ("tenant-a", "tenant-b") for n in ("kindnet", "kube-proxy")}
DEPLOYMENTS = {"tenant-a-workloads-a-infer", "tenant-b-workloads-b-notebook"}
BACKGROUND_DELETION = {
    "dev": TENANT_DAEMONSETS | DEPLOYMENTS | {"tenant-a-mock-gpu-agent-daemonset", "tenant-b-mock-gpu-agent-daemonset"},
    "dev-nvml": TENANT_DAEMONSETS | DEPLOYMENTS | {"tenant-a-mock-nvml-daemonset", "tenant-b-mock-nvml-daemonset"},
    "gpu": TENANT_DAEMONSETS | DEPLOYMENTS,
}


def _annotations(resource: Recorded) -> dict[str, Any]:
    metadata = resource.inputs.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return annotations if isinstance(annotations, dict) else {}


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_exactly_these_resources_are_replaced_delete_first(stack: str) -> None:
    resources = EXAMPLE_STACKS[stack]()
    assert {r.name for r in resources if r.delete_before_replace} == DELETE_FIRST[stack]
    # Every other resource leaves it to its provider (the option unset, not set false).
    assert [r.name for r in resources if r.delete_before_replace is False] == []


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_exactly_these_objects_are_deleted_in_the_background(stack: str) -> None:
    resources = EXAMPLE_STACKS[stack]()
    policies = {r.name: _annotations(r).get("pulumi.com/deletionPropagationPolicy") for r in resources}
    assert {name for name, policy in policies.items() if policy is not None} == BACKGROUND_DELETION[stack]
    assert {policies[name] for name in BACKGROUND_DELETION[stack]} == {"background"}


def test_a_real_hosts_prepare_is_replaced_delete_first_so_it_leaves_its_tenant_before_its_packages_change() -> None:
    prepares = [r for r in gpu_stack() if r.type == "command:remote:Command" and r.name.endswith("-prepare")]
    assert len(prepares) == 2
    assert all(r.delete_before_replace is True for r in prepares), [(r.name, r.delete_before_replace) for r in prepares]
