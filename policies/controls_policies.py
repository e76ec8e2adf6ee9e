"""The controls the program installs in a tenant are the program's: the workload namespace's Pod Security labels,
the user identity's RoleBinding and quota, the admission policies and their bindings (and their actions) are
exactly what the program's builders make, and each tenant has them all.

A resource policy compares the inputs with the builders (gpu_tenancy/builders/gpu_access, tenant_access,
workloads, mock_gpu_agent): the API server adds defaults to what it stores, so outputs would never match. A stack
policy checks that none is missing. Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from gpu_lib import stack_device_layer
from policy_common import MANDATORY, describe
from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from resource_lib import (
    NAMESPACE_TYPE,
    TCP_TYPE,
    TENANT_TYPE,
    Res,
    from_policy_resources,
    from_resource_args,
    nearest_component,
)
from tenancy_lib import ancestor_tenant
from value_lib import as_dict, contains_unknown, dig

from gpu_tenancy.builders.gpu_access import gpu_access
from gpu_tenancy.builders.host_worker import fence
from gpu_tenancy.builders.mock_gpu_agent import agent_admission
from gpu_tenancy.builders.mock_nvml import cuda_control
from gpu_tenancy.builders.tenant_access import tenant_access
from gpu_tenancy.builders.workloads import network_policy, workloads

ADMISSION = "kubernetes:admissionregistration.k8s.io/v1:"
POLICY_TYPE = ADMISSION + "ValidatingAdmissionPolicy"
BINDING_TYPE = ADMISSION + "ValidatingAdmissionPolicyBinding"
MUTATING_TYPE = "kubernetes:admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicy"
MUTATING_BINDING_TYPE = MUTATING_TYPE + "Binding"
ROLE_BINDING_TYPE = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
QUOTA_TYPE = "kubernetes:core/v1:ResourceQuota"
NETWORK_POLICY_TYPE = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
GPU_ACCESS = "gpu-tenancy:gpu_access:GpuAccessPolicy"
TENANT_ACCESS = "gpu-tenancy:tenant_access:TenantAccess"
WORKLOADS = "gpu-tenancy:workloads:Workloads"
MOCK_AGENT = "gpu-tenancy:mock_gpu_agent:MockGpuAgent"
MOCK_NVML = "gpu-tenancy:mock_nvml:MockNvml"
HOST_WORKER = "gpu-tenancy:host_worker:HostWorker"
HOST_FENCES = "gpu-tenancy:host_fence:HostFences"
REMOTE_COMMAND = "command:remote:Command"
# A policy or binding the API server finds by name: renamed, its binding binds nothing (ValidatingAdmissionPolicy-
# BindingSpec.policyName: "If the referenced resource does not exist, this binding is considered invalid").
FIXED_NAMES = {
    (GPU_ACCESS, POLICY_TYPE): gpu_access.POLICY_NAME, (GPU_ACCESS, BINDING_TYPE): gpu_access.POLICY_NAME,
    (TENANT_ACCESS, POLICY_TYPE): tenant_access.SERVICES_POLICY,
    (TENANT_ACCESS, BINDING_TYPE): tenant_access.SERVICES_POLICY,
    (MOCK_NVML, MUTATING_TYPE): cuda_control.POLICY_NAME, (MOCK_NVML, MUTATING_BINDING_TYPE): cuda_control.POLICY_NAME,
}
PSA_PREFIX = "pod-security.kubernetes.io/"
_AGENT_NODE = re.compile(r"object\.spec\.nodeName == '([^']*)'")


def _psa(labels: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in labels.items() if isinstance(k, str) and k.startswith(PSA_PREFIX)}


def _agent_policy(res: Res) -> dict[str, Any] | None:
    """The mock agent's policy as agent_admission builds it for the agent and node this one names."""
    validations = dig(res.props, "spec", "validations")
    first = dig(validations, 0, "expression") if isinstance(validations, list) else None
    node = _AGENT_NODE.search(first) if isinstance(first, str) else None
    name = dig(res.props, "metadata", "name")
    if node is None or not isinstance(name, str):
        return None
    user = agent_admission.service_account_user("kube-system", name)
    return agent_admission.policy_spec(user, node.group(1))


def _expected(res: Res, component: str | None) -> tuple[str, Any] | None:
    """(what is compared, its value as the program builds it) for a control, or None for anything else."""
    name = dig(res.props, "metadata", "name")
    if component == GPU_ACCESS:
        if res.type == POLICY_TYPE:
            # Only sim-nvml's own mutation writes the marker; elsewhere a marker lets a pod set
            # CUDA_DISABLE_CONTROL to it, which HAMi's device plugin reads as "no HAMi-core" (strconv.ParseBool).
            layer = stack_device_layer()
            marker = cuda_control.MARKER if layer and layer.cuda_control else ""
            return "spec", gpu_access.validating_admission_policy_spec(marker)
        if res.type == BINDING_TYPE:
            return "spec", gpu_access.binding_spec()
    elif component == TENANT_ACCESS:
        if res.type == ROLE_BINDING_TYPE:
            built = tenant_access.role_binding("", workloads.WORKLOAD_NAMESPACE)
            return "binding", {"namespace": workloads.WORKLOAD_NAMESPACE, "roleRef": built["roleRef"],
                               "subjects": built["subjects"]}
        if res.type == QUOTA_TYPE:
            return "spec", {"hard": tenant_access.quota_hard()}
        if res.type == POLICY_TYPE:
            return "spec", tenant_access.services_policy_spec(workloads.WORKLOAD_NAMESPACE)
        if res.type == BINDING_TYPE:
            return "spec", {"policyName": tenant_access.SERVICES_POLICY, "validationActions": ["Deny"]}
    elif component == WORKLOADS and res.type == NAMESPACE_TYPE:
        return "Pod Security labels", _psa(workloads.namespace_metadata("")["labels"])
    elif component == WORKLOADS and res.type == NETWORK_POLICY_TYPE:
        return "spec", network_policy.spec()
    elif component == MOCK_NVML:
        if res.type == MUTATING_TYPE:
            return "spec", cuda_control.policy_spec()
        if res.type == MUTATING_BINDING_TYPE:
            return "spec", cuda_control.binding_spec()
    elif component == MOCK_AGENT:
        if res.type == BINDING_TYPE and isinstance(name, str):
            return "spec", agent_admission.binding_spec(name)
        if res.type == POLICY_TYPE:
            return "spec", _agent_policy(res)
    return None


def _actual(res: Res, what: str) -> Any:
    if what == "Pod Security labels":
        return _psa(as_dict(dig(res.props, "metadata", "labels")))
    if what == "binding":
        return {"namespace": dig(res.props, "metadata", "namespace"), "roleRef": res.props.get("roleRef"),
                "subjects": res.props.get("subjects")}
    return res.props.get(what)


def validate_installed_controls(args: ResourceValidationArgs, report: ReportViolation) -> None:
    res = from_resource_args(args)
    component = nearest_component(res.urn)
    if res.type in (MUTATING_TYPE, MUTATING_BINDING_TYPE) and component != MOCK_NVML:
        report(f"{describe(res)}: a MutatingAdmissionPolicy rewrites pods after every check of their spec; the "
               "program installs one only, sim-nvml's CUDA-control mutation (gpu-tenancy:mock_nvml:MockNvml).", None)
        return
    name, fixed = dig(res.props, "metadata", "name"), FIXED_NAMES.get((component or "", res.type))
    if fixed is not None and not contains_unknown(name) and name != fixed:
        report(f"{describe(res)} (made by {component}) is named {name!r}, not {fixed!r}: its binding and policy find "
               "each other by that name.", None)
    expected = _expected(res, component)
    if expected is None:
        return
    what, value = expected
    actual = _actual(res, what)
    if contains_unknown(actual):
        return  # checked when known, before the step runs
    if actual != value:
        report(
            f"{describe(res)} (made by {component}) has {what} other than the program builds: a tenant's controls "
            f"(Pod Security, RBAC, quota, admission policies and their actions) are the program's; got {actual!r}.",
            None,
        )


installed_controls = ResourceValidationPolicy(
    name="installed-controls",
    description=(
        "The controls the program installs in a tenant are exactly as its builders make them: the workload "
        "namespace's Pod Security labels and NetworkPolicy, the user identity's RoleBinding and quota, the GPU-access, "
        "Service and mock-agent admission policies, their bindings and validationActions."
    ),
    validate=validate_installed_controls,
    enforcement_level=MANDATORY,
)


# --------------------------------------------------------------------------- none missing

# component -> the resource types it must contain, each once at least.
REQUIRED: dict[str, tuple[str, ...]] = {
    GPU_ACCESS: (POLICY_TYPE, BINDING_TYPE),
    TENANT_ACCESS: (ROLE_BINDING_TYPE, QUOTA_TYPE, POLICY_TYPE, BINDING_TYPE),
    WORKLOADS: (NAMESPACE_TYPE, NETWORK_POLICY_TYPE),
    MOCK_AGENT: (POLICY_TYPE, BINDING_TYPE),
}


def _bindings_resolve(resources: list[Res]) -> list[tuple[Res, str]]:
    """A control's binding must name a policy of its own component: one naming none binds nothing."""
    policy_of = {BINDING_TYPE: POLICY_TYPE, MUTATING_BINDING_TYPE: MUTATING_TYPE}
    names: dict[tuple[str | None, str], set[Any]] = defaultdict(set)
    for res in resources:
        if res.type in policy_of.values():
            names[res.parent.urn if res.parent else None, res.type].add(dig(res.props, "metadata", "name"))
    problems = []
    for res in resources:
        if res.type in policy_of and nearest_component(res.urn) in (GPU_ACCESS, TENANT_ACCESS, MOCK_AGENT, MOCK_NVML):
            wanted = dig(res.props, "spec", "policyName")
            known = names[res.parent.urn if res.parent else None, policy_of[res.type]]
            if not contains_unknown(wanted) and not any(contains_unknown(n) for n in known) and wanted not in known:
                problems.append((res, f"binds policy {wanted!r}, which its component does not make; it binds nothing"))
    return problems


def _marker_problems(resources: list[Res]) -> list[tuple[Res, str]]:
    """The CUDA-control marker only where sim-nvml's mutation writes it: a tenant with MockNvml, in a stack without
    real hosts, whatever the stack config says the mode is."""
    real = any(r.type == HOST_WORKER for r in resources)
    with_mock = {ancestor_tenant(r) for r in resources if r.type == MOCK_NVML}
    problems = []
    for res in resources:
        if res.type == MOCK_NVML and real:
            problems.append((res, "is sim-nvml's mock NVML in a stack of real GPU hosts"))
        if res.type != POLICY_TYPE or nearest_component(res.urn) != GPU_ACCESS:
            continue
        variables = dig(res.props, "spec", "variables")
        first = dig(variables, 0) if isinstance(variables, list) and variables else None
        marker = dig(first, "expression") if isinstance(first, dict) else None
        if contains_unknown(marker) or marker == "''":
            continue
        if real or ancestor_tenant(res) not in with_mock:
            problems.append((res, f"lets pods set CUDA_DISABLE_CONTROL to {marker}, which only sim-nvml's own "
                            "mutation may write (a tenant with gpu-tenancy:mock_nvml:MockNvml and no real host)"))
    return problems


def _fence_problems(resources: list[Res]) -> list[tuple[Res, str]]:
    """Each real GPU host has its firewall (gpu_tenancy/builders/host_worker/fence.py) as the program builds it
    from the registered hosts: its script, and its rules against the other tenants' control planes and hosts."""
    hosts = [r for r in resources if r.type == HOST_WORKER]
    if not hosts:
        return []
    fences = {r.name: r for r in resources if r.type == REMOTE_COMMAND and r.parent and r.parent.type == HOST_FENCES}
    # NodePort control planes listen on every management node's address: their ports are fenced everywhere.
    node_ports = any(dig(r.props, "spec", "controlPlane", "service", "serviceType") == "NodePort"
                     for r in resources if r.type == TCP_TYPE)
    groups = [r.name for r in resources if r.type == HOST_FENCES]
    problems = []
    for host in hosts:
        tenant, node = host.props.get("tenant"), host.props.get("nodeName")
        found = [fences[f"{group}-{tenant}-{node}"] for group in groups if f"{group}-{tenant}-{node}" in fences]
        if len(found) != 1:
            problems.append((host, f"has {len(found)} host firewalls ({HOST_FENCES}), not one"))
            continue
        (command,) = found
        if (command.props.get("create"), command.props.get("delete")) != (fence.fence_command(),
                                                                          fence.unfence_command()):
            problems.append((command, "runs another script than the host firewall's"))
        others = [h for h in hosts if h.props.get("tenant") != tenant]
        values = [host.props.get("controlPlaneEndpoint"), command.props.get("stdin"),
                  *(h.props.get("controlPlaneEndpoint") for h in others), *(h.props.get("address") for h in others)]
        if contains_unknown(values):
            continue
        try:
            rules = fence.fence_rules(host.props["controlPlaneEndpoint"],
                                      [h.props["controlPlaneEndpoint"] for h in others],
                                      [h.props["address"] for h in others], node_ports=node_ports)
        except (KeyError, ValueError) as error:
            problems.append((host, f"cannot be fenced: {error}"))
            continue
        if command.props.get("stdin") != rules:
            problems.append((command, "loads other rules than the other tenants' control planes and hosts ask"))
    return problems


def validate_controls_present(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    for res, problem in _bindings_resolve(resources) + _marker_problems(resources) + _fence_problems(resources):
        report(f"{describe(res)} {problem}.", res.urn)
    contents: dict[str, set[str]] = defaultdict(set)
    for res in resources:
        if res.parent is not None:
            contents[res.parent.urn].add(res.type)
    tenants_with_gpu_access = set()
    for res in resources:
        if res.type == GPU_ACCESS:
            tenants_with_gpu_access.add(ancestor_tenant(res))
        for missing in sorted(set(REQUIRED.get(res.type, ())) - contents[res.urn]):
            report(f"{describe(res)} lacks its {missing}; the program installs it and it may not be removed.", res.urn)
    for res in resources:
        if res.type == TENANT_TYPE and ancestor_tenant(res) not in tenants_with_gpu_access:
            report(f"{describe(res)} has no {GPU_ACCESS}: its GPUs would be reachable around HAMi.", res.urn)


controls_present = StackValidationPolicy(
    name="controls-present",
    description=(
        "Every tenant has its GPU-access admission policy and binding, each binding names a policy of its own "
        "component, the CUDA-control marker only in a sim-nvml tenant, and each real GPU host its host firewall "
        "as fence.py builds it; a user identity its RoleBinding, "
        "quota and Service policy with binding; a workload namespace; a mock-GPU agent its admission policy and "
        "binding: none of the controls the program installs is removed."
    ),
    validate=validate_controls_present,
    enforcement_level=MANDATORY,
)


# --------------------------------------------------------------------------- RBAC the program grants

CLUSTER_ROLE_TYPE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_ROLE_BINDING_TYPE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
SERVICE_ACCOUNT_TYPE = "kubernetes:core/v1:ServiceAccount"
TENANT_NETWORK = "gpu-tenancy:tenant_network:TenantNetwork"
# Built-in roles a component binds (kind's kube-proxy binds system:node-proxier, as kubeadm does).
BUILT_IN_ROLES: dict[str, frozenset[str]] = {TENANT_NETWORK: frozenset({"system:node-proxier"})}
# What no role of the program grants: anything by wildcard, rights over RBAC, admission and identities, and the
# subresources that run commands in pods or on nodes.
FORBIDDEN_VERBS = frozenset({"*", "escalate", "bind", "impersonate"})
FORBIDDEN_RESOURCES = frozenset(
    {
        "*", "secrets", "pods/exec", "pods/attach", "pods/portforward", "nodes/proxy", "serviceaccounts/token",
        "clusterroles", "clusterrolebindings", "roles", "rolebindings", "validatingadmissionpolicies",
        "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
        "validatingwebhookconfigurations", "mutatingwebhookconfigurations", "certificatesigningrequests/approval",
    }
)


def _role_problems(role: Res) -> list[str]:
    problems = []
    if role.props.get("aggregationRule") is not None:
        problems.append("aggregates other roles (aggregationRule)")
    for rule in (r for r in (role.props.get("rules") or []) if isinstance(r, dict)):
        if "*" in (rule.get("apiGroups") or []) or FORBIDDEN_VERBS & set(rule.get("verbs") or []):
            problems.append(f"grants {rule.get('verbs')} on {rule.get('apiGroups')}")
        for resource in sorted(FORBIDDEN_RESOURCES & set(rule.get("resources") or [])):
            problems.append(f"grants {rule.get('verbs')} on {resource}")
    return problems


def _binding_problems(binding: Res, siblings: list[Res]) -> list[str]:
    component = nearest_component(binding.urn) or ""
    roles = {dig(r.props, "metadata", "name") for r in siblings if r.type == CLUSTER_ROLE_TYPE}
    accounts = {(dig(r.props, "metadata", "namespace"), dig(r.props, "metadata", "name"))
                for r in siblings if r.type == SERVICE_ACCOUNT_TYPE}
    problems = []
    role = as_dict(binding.props.get("roleRef"))
    if role.get("kind") != "ClusterRole" or role.get("name") not in roles | BUILT_IN_ROLES.get(component, frozenset()):
        problems.append(f"binds {role.get('kind')} {role.get('name')!r}, not a role its own component makes")
    for subject in (s for s in (binding.props.get("subjects") or []) if isinstance(s, dict)):
        if subject.get("kind") != "ServiceAccount" or (subject.get("namespace"), subject.get("name")) not in accounts:
            problems.append(f"binds {subject.get('kind')} {subject.get('name')!r}, not a ServiceAccount its own "
                            "component makes")
    return problems


def validate_rbac_contained(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    by_parent: dict[str, list[Res]] = defaultdict(list)
    for res in resources:
        if res.parent is not None:
            by_parent[res.parent.urn].append(res)
    for res in resources:
        if res.unread or contains_unknown(res.props):
            continue
        if res.type == CLUSTER_ROLE_TYPE:
            problems = _role_problems(res)
        elif res.type == CLUSTER_ROLE_BINDING_TYPE:
            problems = _binding_problems(res, by_parent[res.parent.urn] if res.parent else [])
        else:
            continue
        for problem in problems:
            report(f"{describe(res)} {problem}; the program's roles grant what its components use, to their own "
                   "service accounts.", res.urn)


rbac_contained = StackValidationPolicy(
    name="rbac-contained",
    description=(
        "A ClusterRoleBinding binds a role its own component makes (or the built-in one it needs) to service "
        "accounts its own component makes, never a user or group; no ClusterRole grants wildcards, escalate, bind, "
        "impersonate, secrets, exec or attach, or rights over RBAC, admission or webhooks, or aggregates roles."
    ),
    validate=validate_rbac_contained,
    enforcement_level=MANDATORY,
)
