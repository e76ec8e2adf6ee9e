"""The controls the program installs in a tenant stay the program's, over the analyzer gRPC protocol: a change to
the workload namespace's Pod Security labels, the user identity's RoleBinding or quota, an admission policy, its
binding or the binding's actions is refused (`installed-controls`), and so is a control removed
(`controls-present`). The expected values are written here from Kubernetes' semantics, not read from the builders.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import stack_config
from policy_support import EXAMPLE_STACKS, Recorded, copy_stack, find, record_engine_view, set_both
from test_policy_bypasses_grpc import expect, mandatory
from test_policy_pack_grpc import (  # noqa: F401  (fixtures: the pack's analyzer process, its configuration)
    analyze,
    analyze_stack,
    analyzer,
    default_configuration,
    running_pack,
)
from test_tenant_access import with_user_access

ADMISSION = "kubernetes:admissionregistration.k8s.io/v1:"
BINDING = ADMISSION + "ValidatingAdmissionPolicyBinding"
POLICY = ADMISSION + "ValidatingAdmissionPolicy"
CONTROLS = ("installed-controls", "controls-present")


@pytest.fixture(scope="module")
def user_stack() -> list[Recorded]:
    return record_engine_view(with_user_access())


def both(pack: Any, resources: list[Recorded]) -> list[str]:
    found = analyze(pack, resources) + analyze_stack(pack, resources)
    return [m for policy in CONTROLS for m in mandatory(found, policy)]


@pytest.mark.parametrize("name", sorted(EXAMPLE_STACKS))
def test_the_example_stacks_keep_their_controls(name: str) -> None:
    with running_pack({"gpu-tenancy:mode": stack_config(name)["mode"]}) as own:
        for unknowns in (False, True):
            assert both(own, EXAMPLE_STACKS[name](unknowns)) == []


def test_a_stack_with_user_access_keeps_its_controls(pack: Any, user_stack: list[Recorded]) -> None:
    assert both(pack, user_stack) == []


def test_the_workload_namespace_relabelled_privileged(pack: Any, stack: list[Recorded]) -> None:
    namespace = find(stack, "kubernetes:core/v1:Namespace", "tenant-a-workloads-namespace")
    set_both(namespace, ["metadata", "labels", "pod-security.kubernetes.io/enforce"], "privileged")
    expect(both(pack, stack), "'tenant-a-workloads-namespace'", "Pod Security labels", "'privileged'")


def test_the_workload_namespace_without_its_enforce_label(pack: Any, stack: list[Recorded]) -> None:
    """No enforce label is Pod Security `privileged` (the admission plugin's default)."""
    namespace = find(stack, "kubernetes:core/v1:Namespace", "tenant-a-workloads-namespace")
    for props in (namespace.inputs, namespace.state):
        del props["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    expect(both(pack, stack), "'tenant-a-workloads-namespace'", "Pod Security labels")


@pytest.mark.parametrize(
    ("path", "value"),
    [(["spec", "validationActions"], ["Warn"]), (["spec", "validationActions"], ["Audit"]),
     (["spec", "policyName"], "something-else"),
     (["spec", "matchResources"], {"namespaceSelector": {"matchLabels": {"team": "none"}}})],
    ids=["warn", "audit", "other-policy", "narrowed"],
)
def test_the_gpu_access_binding_weakened(pack: Any, stack: list[Recorded], path: list[str], value: Any) -> None:
    set_both(find(stack, BINDING, "tenant-a-gpu-access-binding"), path, value)
    expect(both(pack, stack), "'tenant-a-gpu-access-binding'", "other than the program builds")


def test_the_gpu_access_policy_emptied(pack: Any, stack: list[Recorded]) -> None:
    set_both(find(stack, POLICY, "tenant-a-gpu-access-policy"), ["spec", "validations"], [])
    expect(both(pack, stack), "'tenant-a-gpu-access-policy'", "other than the program builds")


def test_the_cuda_control_marker_outside_sim_nvml(pack: Any, stack: list[Recorded]) -> None:
    """In sim (and real) a marker would let any GPU pod set CUDA_DISABLE_CONTROL to it: HAMi's device plugin reads
    `T` as true (strconv.ParseBool) and leaves HAMi-core out."""
    set_both(find(stack, POLICY, "tenant-a-gpu-access-policy"), ["spec", "variables", 0, "expression"], "'T'")
    expect(both(pack, stack), "'tenant-a-gpu-access-policy'", "other than the program builds")


def test_the_gpu_access_policy_removed(pack: Any, stack: list[Recorded]) -> None:
    gone = {r.urn for r in stack if "tenant-a-gpu-access" in r.name}
    kept = [r for r in stack if r.urn not in gone]
    expect(both(pack, kept), "gpu-tenancy:tenant:Tenant 'tenant-a' has no gpu-tenancy:gpu_access:GpuAccessPolicy")


def test_the_gpu_access_binding_removed(pack: Any, stack: list[Recorded]) -> None:
    kept = [r for r in stack if r.name != "tenant-a-gpu-access-binding"]
    expect(both(pack, kept), "'tenant-a-gpu-access'", "lacks its " + BINDING)


def test_the_mock_agents_binding_only_audits(pack: Any, stack: list[Recorded]) -> None:
    binding = next(r for r in stack if r.type == BINDING and "mock-gpu-agent" in r.name and "tenant-a" in r.name)
    set_both(binding, ["spec", "validationActions"], ["Audit"])
    expect(both(pack, stack), repr(binding.name), "other than the program builds")


def test_the_users_role_binding_switched_to_admin(pack: Any, user_stack: list[Recorded]) -> None:
    resources = copy_stack(user_stack)
    binding = find(resources, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "tenant-a-user-access-edit")
    set_both(binding, ["roleRef", "name"], "admin")
    expect(both(pack, resources), "'tenant-a-user-access-edit'", "'admin'")


def test_the_users_quota_deleted_or_opened(pack: Any, user_stack: list[Recorded]) -> None:
    resources = copy_stack(user_stack)
    quota = find(resources, "kubernetes:core/v1:ResourceQuota", "tenant-a-user-access-quota")
    set_both(quota, ["spec", "hard", "services.nodeports"], "5")
    expect(both(pack, resources), "'tenant-a-user-access-quota'", "other than the program builds")
    kept = [r for r in resources if r.urn != quota.urn]
    expect(both(pack, kept), "'tenant-a-user-access'", "lacks its kubernetes:core/v1:ResourceQuota")


def test_the_users_service_binding_only_warns(pack: Any, user_stack: list[Recorded]) -> None:
    resources = copy_stack(user_stack)
    set_both(find(resources, BINDING, "tenant-a-user-access-services-policy-binding"), ["spec", "validationActions"],
             ["Warn"])
    expect(both(pack, resources), "'tenant-a-user-access-services-policy-binding'", "other than the program builds")


def test_the_mock_agents_policy_removed(pack: Any, stack: list[Recorded]) -> None:
    """Without it the agent's ClusterRole patches any pod (RBAC cannot narrow it to its node's bind phase)."""
    kept = [r for r in stack if not (r.type == POLICY and "mock-gpu-agent" in r.name and "tenant-a" in r.name)]
    expect(both(pack, kept), "MockGpuAgent", "lacks its " + POLICY)


def test_the_workload_namespace_opened(pack: Any, stack: list[Recorded]) -> None:
    isolation = find(stack, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "tenant-a-workloads-isolation")
    set_both(isolation, ["spec", "egress"], [{}])
    expect(both(pack, stack), "'tenant-a-workloads-isolation'", "other than the program builds")
    kept = [r for r in stack if r.urn != isolation.urn]
    expect(both(pack, kept), "'tenant-a-workloads'", "lacks its kubernetes:networking.k8s.io/v1:NetworkPolicy")


# --------------------------------------------------------------------------- RBAC the program grants

CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"


def rbac(pack: Any, resources: list[Recorded]) -> list[str]:
    return mandatory(analyze_stack(pack, resources), "rbac-contained")


def test_the_example_rbac_is_contained(pack: Any, stack: list[Recorded], user_stack: list[Recorded]) -> None:
    assert rbac(pack, stack) == [] and rbac(pack, user_stack) == []


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [(["subjects"], [{"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}],
      "binds Group 'system:authenticated'"),
     (["subjects"], [{"kind": "ServiceAccount", "name": "tenant-user", "namespace": "workloads"}],
      "binds ServiceAccount 'tenant-user'"),
     (["roleRef", "name"], "cluster-admin", "binds ClusterRole 'cluster-admin'"),
     # A user named like the account (a client certificate's CN can be anything) is no ServiceAccount.
     (["subjects"], [{"kind": "User", "name": "tenant-a-mock-gpu-agent", "namespace": "kube-system",
                      "apiGroup": "rbac.authorization.k8s.io"}], "binds User 'tenant-a-mock-gpu-agent'")],
    ids=["every-user", "the-tenant-user", "cluster-admin", "a-user-named-like-it"],
)
def test_the_agents_binding_widened(pack: Any, stack: list[Recorded], path: list[str], value: Any,
                                    fragment: str) -> None:
    set_both(find(stack, CLUSTER_ROLE_BINDING, "tenant-a-mock-gpu-agent-binding"), path, value)
    expect(rbac(pack, stack), "'tenant-a-mock-gpu-agent-binding'", fragment)


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}, "on secrets"),
     ({"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}, "on pods/exec"),
     ({"apiGroups": ["*"], "resources": ["pods"], "verbs": ["list"]}, "on ['*']"),
     ({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["escalate"]},
      "grants ['escalate']")],
    ids=["secrets", "exec", "wildcard", "escalate"],
)
def test_the_agents_role_widened(pack: Any, stack: list[Recorded], rule: dict[str, Any], fragment: str) -> None:
    role = find(stack, CLUSTER_ROLE, "tenant-a-mock-gpu-agent-role")
    set_both(role, ["rules"], [*role.inputs["rules"], rule])
    expect(rbac(pack, stack), "'tenant-a-mock-gpu-agent-role'", fragment)


def test_a_role_that_aggregates_others(pack: Any, stack: list[Recorded]) -> None:
    role = find(stack, CLUSTER_ROLE, "tenant-a-network-kindnet")
    set_both(role, ["aggregationRule"], {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/agg": "true"}}]})
    expect(rbac(pack, stack), "'tenant-a-network-kindnet'", "aggregates other roles")
