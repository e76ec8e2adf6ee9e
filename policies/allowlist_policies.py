"""Fail closed on what the pack does not know: every resource is of a type the program registers (or one the stack
allows, with a reason the preview prints), and on the types that can run code or reach a host, every field is one
the program itself sets there (fields_lib, allowed_fields.json), with the values the program gives the few fields
whose value alone reaches another tenant or a host.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from fields_lib import allowlist_key, field_checked, unknown_fields
from gpu_lib import stack_config_in, stack_device_layer
from pod_lib import cached_chart_problem
from policy_common import ADVISORY, MANDATORY, describe
from pulumi_policy import (
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from resource_lib import HELM_RELEASE_TYPE, TCP_TYPE, Res, from_policy_resources, from_resource_args
from tenancy_lib import TENANT_LABEL, resource_tenant
from value_lib import as_list, dig, known_str

from gpu_tenancy.builders.mock_nvml import cuda_control
from gpu_tenancy.contract import versions
from gpu_tenancy.hami.protocol import NVIDIA

# Every type the program registers, in any mode and configuration (components, providers and reads included).
KNOWN_TYPES = frozenset(
    {
        "pulumi:pulumi:Stack",
        "pulumi:providers:kubernetes", "pulumi:providers:command", "pulumi:providers:docker",
        *(f"gpu-tenancy:{module}:{name}" for module, name in (
            ("bootstrap_token", "BootstrapToken"), ("gpu_access", "GpuAccessPolicy"), ("hami", "Hami"),
            ("host_fence", "HostFences"), ("host_identity", "HostIdentities"),
            ("host_worker", "HostWorker"), ("inventory_check", "InventoryCheck"),
            ("kamaji", "Kamaji"), ("kind_cluster", "KindCluster"), ("metallb", "MetalLB"),
            ("mock_gpu_agent", "MockGpuAgent"), ("mock_nvml", "MockNvml"), ("nvml_mock_image", "NvmlMockImage"),
            ("tenant", "Tenant"), ("tenant_access", "TenantAccess"), ("tenant_control_plane", "TenantControlPlane"),
            ("tenant_datastore", "TenantDataStore"), ("tenant_network", "TenantNetwork"), ("worker", "Worker"),
            ("workloads", "Workloads"),
        )),
        "command:local:Command", "command:remote:Command",
        "docker:index/container:Container", "docker:index/image:Image", "docker:index/remoteImage:RemoteImage",
        *(f"kubernetes:{kind}" for kind in (
            "admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
            "admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
            "admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicy",
            "admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicyBinding",
            "apps/v1:DaemonSet", "apps/v1:Deployment",
            "core/v1:ConfigMap", "core/v1:Namespace", "core/v1:Node", "core/v1:ResourceQuota", "core/v1:Secret",
            "core/v1:ServiceAccount",
            "helm.sh/v3:Release",
            "kamaji.clastix.io/v1alpha1:DataStore", "kamaji.clastix.io/v1alpha1:TenantControlPlane",
            "metallb.io/v1beta1:IPAddressPool", "metallb.io/v1beta1:L2Advertisement",
            "cert-manager.io/v1:ClusterIssuer", "monitoring.coreos.com/v1:ServiceMonitor",
            "rbac.authorization.k8s.io/v1:ClusterRole", "rbac.authorization.k8s.io/v1:ClusterRoleBinding",
            "rbac.authorization.k8s.io/v1:RoleBinding", "networking.k8s.io/v1:NetworkPolicy",
        )),
    }
)
# Where the stack allows further types: `gpu-tenancy-policy:allowedTypes` in its config (Pulumi.<stack>.yaml).
ALLOWANCES_KEY = "gpu-tenancy-policy:allowedTypes"
# Each chart comes from the one repository the program pins for it (gpu_tenancy/contract/versions.py).
CHART_REPOSITORIES = {
    "hami": versions.HAMI_CHART_REPO,
    "cert-manager": versions.CERT_MANAGER_CHART_REPO,
    "kamaji": versions.KAMAJI_CHART_REPO,
    "kamaji-etcd": versions.KAMAJI_CHART_REPO,
    "metallb": versions.METALLB_CHART_REPO,
}
SHARED_DATASTORE = "default"  # gpu_tenancy/builders/kamaji: the shared etcd's DataStore


class TypeAllowance(BaseModel):
    """One type a stack registers beyond the program's own, and why."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    type: str = Field(pattern=r"^[A-Za-z0-9_-]+:[^:]*:[A-Za-z0-9]+$")
    reason: str = Field(min_length=10)


def allowances() -> tuple[dict[str, str], list[str]]:
    """(type -> reason, problems) from the stack config; a problem is one line naming the key and the fix."""
    raw = stack_config_in(ALLOWANCES_KEY)
    if raw is None:
        return {}, []
    if not isinstance(raw, list):
        return {}, [f"{ALLOWANCES_KEY} must be a list of {{type, reason}}, not {type(raw).__name__}"]
    allowed: dict[str, str] = {}
    problems = []
    for index, item in enumerate(raw):
        try:
            entry = TypeAllowance.model_validate(item)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "entry"
            problems.append(f"{ALLOWANCES_KEY}[{index}].{where}: {first['msg']} (give `type: <pulumi type>` and "
                            "`reason: <why this stack needs it>`)")
            continue
        if entry.type.endswith("Patch"):
            problems.append(f"{ALLOWANCES_KEY}[{index}].type: {entry.type} patches objects the program does not "
                            "own and cannot be allowed; remove it")
            continue
        allowed[entry.type] = entry.reason
    return allowed, problems


# --------------------------------------------------------------------------- known-types


def validate_known_types(args: ResourceValidationArgs, report: ReportViolation) -> None:
    # A resource policy: the engine asks it before each resource's step, in `up --skip-preview` too
    # (pulumi/pulumi pkg/resource/deploy/step_generator.go: analyzers run before the resource is operated on).
    res = from_resource_args(args)
    allowed, problems = allowances()
    if res.type == "pulumi:pulumi:Stack":
        for problem in problems:  # the stack is registered first: a bad allowance stops everything
            report(problem, None)
    if res.type not in KNOWN_TYPES and res.type not in allowed:
        report(
            f"{describe(res)} is of type {res.type}, which the program never registers, so no policy reads it; "
            f"remove it, or allow the type in the stack config ({ALLOWANCES_KEY}: [{{type, reason}}]).",
            None,
        )


known_types = ResourceValidationPolicy(
    name="known-types",
    description=(
        "Every resource is of a type the program registers (the pack reads those), or of a type the stack allows "
        f"with a reason ({ALLOWANCES_KEY}); anything else, e.g. a *Patch kind or a custom resource with a pod "
        "template, is refused by its type before it is created."
    ),
    validate=validate_known_types,
    enforcement_level=MANDATORY,
)


def validate_known_types_in_stack(args: StackValidationArgs, report: ReportViolation) -> None:
    # The engine sends a resource read with `get` to stack policies only (pulumi/pulumi
    # pkg/resource/deploy/step_generator.go GenerateReadSteps asks no analyzer): reads of an unknown type are
    # refused here, with every other resource of an unknown type once more.
    allowed, _ = allowances()
    for res in from_policy_resources(args.resources):
        if res.type not in KNOWN_TYPES and res.type not in allowed:
            report(f"{describe(res)} is of type {res.type}, which the program never registers or reads; remove it, "
                   f"or allow the type in the stack config ({ALLOWANCES_KEY}: [{{type, reason}}]).", res.urn)


known_types_in_stack = StackValidationPolicy(
    name="known-types-in-stack",
    description=(
        "The same rule as known-types over the whole stack at the end of a preview or update, reads (`get`) "
        "included, which the engine asks of no resource policy."
    ),
    validate=validate_known_types_in_stack,
    enforcement_level=MANDATORY,
)


def validate_type_allowances(args: StackValidationArgs, report: ReportViolation) -> None:
    allowed, _ = allowances()
    for res in from_policy_resources(args.resources):
        if res.type in allowed and res.type not in KNOWN_TYPES:
            report(f"{describe(res)}: type allowed by the stack config ({ALLOWANCES_KEY}): {allowed[res.type]}",
                   res.urn)


type_allowances = StackValidationPolicy(
    name="type-allowances",
    description=f"Prints each resource of a type the stack allows ({ALLOWANCES_KEY}), with the stack's reason.",
    validate=validate_type_allowances,
    enforcement_level=ADVISORY,
)


# --------------------------------------------------------------------------- field-allowlist


def _value_problems(res: Res) -> list[str]:
    """Fields the program sets whose value alone would reach another tenant or a host."""
    problems = []
    if res.type == HELM_RELEASE_TYPE:
        # Exactly the program's charts: an archive of the chart cache (chart_lock), which `make charts` pulled from
        # the chart's pinned repository and verified; no repository, so Helm reads nothing else.
        chart, repo = res.props.get("chart"), res.props.get("repositoryOpts")
        problem = cached_chart_problem(chart, res.props.get("version"))
        if problem or repo not in (None, {}):
            where = f" from {dig(repo, 'repo')!r}" if repo not in (None, {}) else ""
            problems.append(f"installs chart {chart!r}{where}, which {problem or 'names a repository'}; charts come "
                            "only from the chart cache, pulled from the repositories gpu_tenancy/contract/versions.py "
                            f"pins ({', '.join(sorted(CHART_REPOSITORIES))}) by `make charts`")
    elif res.type == TCP_TYPE:
        # A resource policy sees no parent, so the label (or the tenant's provider) is all that names the tenant.
        tenant = resource_tenant(res)
        store = dig(res.props, "spec", "dataStore")
        if isinstance(store, str) and store != SHARED_DATASTORE and (tenant is None or store != f"{tenant}-etcd"):
            own = f"its own '{tenant}-etcd'" if tenant else f"a tenant's own (it has no {TENANT_LABEL} label)"
            problems.append(f"names DataStore {store!r}, neither the shared {SHARED_DATASTORE!r} nor {own}")
        # MutatingAdmissionPolicy's API only for sim-nvml's own mutation (gpu_tenancy.builders.mock_nvml).
        layer = stack_device_layer()
        own_args = set(cuda_control.api_server_args("v1.35.0")) if layer and layer.cuda_control else set()
        for component, flags in (dig(res.props, "spec", "controlPlane", "deployment", "extraArgs") or {}).items():
            for flag in as_list(flags):
                if isinstance(flag, str) and flag not in own_args:
                    problems.append(f"passes {component} flag {flag!r}, which the program never sets")
    elif res.type == "kubernetes:node.k8s.io/v1:RuntimeClass" and (
        known_str(res.props.get("handler")) == NVIDIA.runtime_handler
    ):
        problems.append(f"uses handler {NVIDIA.runtime_handler!r} (GPUs by runtime, around HAMi) under any class name")
    return problems


def validate_field_allowlist(args: ResourceValidationArgs, report: ReportViolation) -> None:
    res = from_resource_args(args)
    if not field_checked(res):
        return
    fields = unknown_fields(res)
    if fields:
        maker = allowlist_key(res).split("|", 1)[0]
        report(
            f"{describe(res)} (made by {maker}) sets fields the program never sets on it: {', '.join(fields)}; "
            "on a type that runs code or reaches a host only the program's own fields pass.",
            None,
        )
    for problem in _value_problems(res):
        report(f"{describe(res)} {problem}.", None)


field_allowlist = ResourceValidationPolicy(
    name="field-allowlist",
    description=(
        "On the types that run code or reach a host (pod-bearing kinds and their *Patch kinds, TenantControlPlane, "
        "DataStore, Docker containers, Helm releases, commands, RuntimeClasses) only the fields the program itself "
        "sets there, by the component that makes them, pass; Helm charts come only from the chart cache (pulled "
        "from their pinned repository and verified); a control plane names only the shared or its own DataStore and "
        "no API-server flag of its own."
    ),
    validate=validate_field_allowlist,
    enforcement_level=MANDATORY,
)
