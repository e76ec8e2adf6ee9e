"""Attacks found by red-team passes on the fail-closed pack, admission and host firewall, each a test; one still
open is an xfail(strict) test naming why, which fails as soon as the attack is closed.

Driven as tests/test_policy_controls_grpc.py and tests/test_policy_allowlist_grpc.py drive the pack (its analyzer
process over gRPC, each attack added to an example stack's real registrations).
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import stack_config
from policy_support import EXAMPLE_STACKS, Recorded, copy_stack, craft, find, record_engine_view, set_both
from test_policy_bypasses_grpc import tenant_component
from test_policy_pack_grpc import (  # noqa: F401  (fixtures: the pack's analyzer process, its configuration)
    MANDATORY,
    analyze,
    analyze_stack,
    analyzer,
    default_configuration,
    running_pack,
)
from test_tenant_access import with_user_access

from gpu_tenancy.builders.host_worker import fence
from gpu_tenancy.builders.mock_nvml import cuda_control

ADMISSION = "kubernetes:admissionregistration.k8s.io/v1:"
POLICY = ADMISSION + "ValidatingAdmissionPolicy"
MAP = "kubernetes:admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicy"
PROVIDER = "pulumi:providers:kubernetes"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
REMOTE = "command:remote:Command"


def refusals(pack: Any, stack: list[Recorded]) -> list[str]:
    """Every mandatory diagnostic of every policy, resource and stack policies alike."""
    found = analyze(pack, stack) + analyze_stack(pack, stack)
    return [f"{d.policyName}: {d.message}" for d in found if d.enforcementLevel == MANDATORY]


def refused(messages: list[str], *names: str) -> bool:
    return any(name in m for m in messages for name in names)


def pack_config(name: str, **overrides: Any) -> dict[str, Any]:
    """The stack's config as the engine hands it to the pack (PULUMI_CONFIG), with overrides."""
    config = stack_config(name) | overrides
    return {f"gpu-tenancy:{k}": v for k, v in config.items()}


# --------------------------------------------------------------------------- controls renamed


def test_the_gpu_access_policy_renamed_away_from_its_binding(pack: Any, stack: list[Recorded]) -> None:
    policy = find(stack, POLICY, "tenant-a-gpu-access-policy")
    set_both(policy, ["metadata", "name"], "gpu-tenancy-gpu-access-v2")
    assert refused(refusals(pack, stack), "'tenant-a-gpu-access-policy'")


def test_the_users_service_policy_renamed_away_from_its_binding(pack: Any) -> None:
    stack = record_engine_view(with_user_access())
    policy = find(stack, POLICY, "tenant-a-user-access-services-policy")
    set_both(policy, ["metadata", "name"], "gpu-tenancy-user-services-v2")
    assert refused(refusals(pack, stack), "'tenant-a-user-access-services-policy'")


# --------------------------------------------------------------------------- the marker unlocked by config


def test_a_real_stack_whose_config_says_sim_nvml_unlocks_the_cuda_control_marker() -> None:
    stack = copy_stack(EXAMPLE_STACKS["gpu"](False))
    assert any(r.type == "gpu-tenancy:host_worker:HostWorker" for r in stack)  # real GPU hosts, by what is registered
    for policy in (r for r in stack if r.type == POLICY and r.name.endswith("-gpu-access-policy")):
        set_both(policy, ["spec", "variables", 0, "expression"], f"'{cuda_control.MARKER}'")
    with running_pack(pack_config("gpu", mode="sim-nvml")) as pack:
        assert refused(refusals(pack, stack), "'tenant-a-gpu-access-policy'")


# --------------------------------------------------------------------------- host fence and commands


def _fence_emptied(stack: list[Recorded]) -> list[Recorded]:
    set_both(find(stack, REMOTE, "host-fences-tenant-a-gpu-a100-01"), ["stdin"], f"table inet {fence.TABLE} {{}}\n")
    return stack


def _fence_not_run(stack: list[Recorded]) -> list[Recorded]:
    set_both(find(stack, REMOTE, "host-fences-tenant-a-gpu-a100-01"), ["create"], "true")
    return stack


def _fences_removed(stack: list[Recorded]) -> list[Recorded]:
    return [r for r in stack if not r.name.startswith("host-fences")]


@pytest.mark.parametrize("weaken", [_fence_emptied, _fence_not_run, _fences_removed],
                         ids=["rules-emptied", "script-replaced", "removed"])
def test_the_host_fence_weakened_or_removed(weaken: Any) -> None:
    stack = weaken(copy_stack(EXAMPLE_STACKS["gpu"](False)))
    with running_pack(pack_config("gpu")) as pack:
        assert refused(refusals(pack, stack), "host-fences", "HostFences")


@pytest.mark.xfail(strict=True, reason="field-allowlist checks a command's field names, not its script: a known "
                   "command inside its own component runs anything with the deployer's credentials")
def test_a_workers_join_script_replaced(pack: Any, stack: list[Recorded]) -> None:
    join = find(stack, "command:local:Command", "tenant-a-worker-join")
    set_both(join, ["create"], 'kubectl --kubeconfig "$HOME/.kube/config" delete namespace kube-system')
    assert refused(refusals(pack, stack), "'tenant-a-worker-join'")


# --------------------------------------------------------------------------- reads


def test_a_read_of_a_type_the_program_never_registers(pack: Any, stack: list[Recorded]) -> None:
    workloads = tenant_component(stack, "tenant-a", "gpu-tenancy:workloads:Workloads")
    read = craft(stack, "kubernetes:core/v1:Pod", "tenant-a-read-pod",
                 {"metadata": {"name": "x", "namespace": "workloads"}},
                 parent=workloads, provider=find(stack, PROVIDER, "tenant-a-kubernetes"))
    read.read = True
    assert refused(refusals(pack, stack), "'tenant-a-read-pod'")


# --------------------------------------------------------------------------- mutating admission


# Every pod created, in any namespace (kube-system included, where Pod Security is privileged and the GPU-access
# policy does not look): hostPID, the node's / mounted, every container privileged.
ROOT_MUTATION = (
    'Object{spec: Object.spec{hostPID: true, volumes: [Object.spec.volumes{name: "root", '
    'hostPath: Object.spec.volumes.hostPath{path: "/"}}], containers: object.spec.containers.map(c, '
    "Object.spec.containers{name: c.name, securityContext: Object.spec.containers.securityContext{"
    "privileged: true}})}}"
)


def _root_map(stack: list[Recorded], tenant: str) -> str:
    """A MutatingAdmissionPolicy and its binding, in the tenant's Workloads component, through its own provider."""
    workloads = tenant_component(stack, tenant, "gpu-tenancy:workloads:Workloads")
    provider = find(stack, PROVIDER, f"{tenant}-kubernetes")
    spec = {"failurePolicy": "Fail", "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE"], "resources": ["pods"]}]},
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": ROOT_MUTATION}}]}
    version = "admissionregistration.k8s.io/v1beta1"
    craft(stack, MAP, f"{tenant}-workload-defaults", {"apiVersion": version, "kind": "MutatingAdmissionPolicy",
          "metadata": {"name": "workload-defaults"}, "spec": spec}, parent=workloads, provider=provider)
    craft(stack, MAP + "Binding", f"{tenant}-workload-defaults-binding",
          {"apiVersion": version, "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "workload-defaults"},
           "spec": {"policyName": "workload-defaults"}}, parent=workloads, provider=provider)
    return f"'{tenant}-workload-defaults'"


def test_a_mutating_policy_that_roots_every_pod_in_sim(pack: Any, stack: list[Recorded]) -> None:
    name = _root_map(stack, "tenant-a")
    assert refused(refusals(pack, stack), name)


def test_a_mutating_policy_that_roots_every_pod_in_real() -> None:
    stack = copy_stack(EXAMPLE_STACKS["gpu"](False))
    tcp = next(r for r in stack if r.type == TCP and r.name.startswith("tenant-a"))
    set_both(tcp, ["spec", "controlPlane", "deployment", "extraArgs"],
             {"apiServer": cuda_control.api_server_args("v1.35.0")})
    name = _root_map(stack, "tenant-a")
    with running_pack(pack_config("gpu")) as pack:
        assert refused(refusals(pack, stack), name, "'tenant-a-control-plane-tcp'")


def test_the_cuda_control_mutation_rewritten_in_sim_nvml() -> None:
    stack = copy_stack(EXAMPLE_STACKS["dev-nvml"](False))
    mutation = find(stack, MAP, "tenant-a-mock-nvml-cuda-control-policy")
    set_both(mutation, ["spec", "matchConditions"], [])
    set_both(mutation, ["spec", "mutations", 0, "applyConfiguration", "expression"], ROOT_MUTATION)
    with running_pack(pack_config("dev-nvml")) as pack:
        assert refused(refusals(pack, stack), "'tenant-a-mock-nvml-cuda-control-policy'")
