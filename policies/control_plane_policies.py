"""Tenant control planes: each TenantControlPlane reaches its tenant's webhooks (konnectivity) and lives
alone in a management namespace named after its tenant, where its admin kubeconfig Secret is.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from collections import defaultdict

from policy_common import MANDATORY, policy_config
from pulumi_policy import (
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from resource_lib import TCP_TYPE, Res, from_policy_resources, from_resource_args
from tenancy_lib import owner
from value_lib import dig, is_unknown, known_str

DEFAULT_FORBIDDEN_TCP_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease", "kamaji-system"]

# --------------------------------------------------------------------------- 2 tcp-konnectivity-enabled


def validate_tcp_konnectivity(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != TCP_TYPE:
        return
    res = from_resource_args(args)
    konnectivity = dig(res.props, "spec", "addons", "konnectivity")
    if is_unknown(konnectivity):  # or any step to it: not known yet in a preview
        return
    if not isinstance(konnectivity, dict):
        name = known_str(dig(res.props, "metadata", "name")) or res.name
        report(
            f"TenantControlPlane {name!r} has no spec.addons.konnectivity; add `konnectivity: {{}}` "
            "(the CRD fills in port 8132 and a DaemonSet agent) or HAMi's webhook cannot be reached.", None
        )


tcp_konnectivity_enabled = ResourceValidationPolicy(
    name="tcp-konnectivity-enabled",
    description=(
        "Every TenantControlPlane must enable the konnectivity addon (spec.addons.konnectivity); without it "
        "the tenant API server cannot reach in-cluster webhooks and HAMi's admission webhook silently fails open."
    ),
    validate=validate_tcp_konnectivity,
    enforcement_level=MANDATORY,
)


# --------------------------------------------------------------------------- 3 tcp-dedicated-namespace


def validate_tcp_dedicated_namespace(args: StackValidationArgs, report: ReportViolation) -> None:
    forbidden = set(policy_config(args, "forbiddenNamespaces", DEFAULT_FORBIDDEN_TCP_NAMESPACES))
    per_namespace: dict[str, list[Res]] = defaultdict(list)
    for res in from_policy_resources(args.resources):
        if res.type != TCP_TYPE:
            continue
        name, namespace = dig(res.props, "metadata", "name"), dig(res.props, "metadata", "namespace")
        tenant, _ = owner(res)
        if is_unknown(name) or is_unknown(namespace):
            continue
        namespace = namespace or "default"
        per_namespace[namespace].append(res)
        if tenant and name != tenant:
            report(f"TenantControlPlane {name!r} belongs to tenant {tenant!r}; name it {tenant!r}.", res.urn)
        if namespace in forbidden:
            report(
                f"TenantControlPlane {name!r} is in shared namespace {namespace!r}; give it its own namespace "
                f"named after the tenant ({tenant or name!r}).",
                res.urn,
            )
        elif tenant and namespace != tenant:
            report(
                f"TenantControlPlane {name!r} of tenant {tenant!r} is in namespace {namespace!r}; "
                f"use the dedicated namespace {tenant!r}.",
                res.urn,
            )
    for namespace, tcps in sorted(per_namespace.items()):
        if len(tcps) > 1:
            names = ", ".join(sorted(repr(dig(t.props, "metadata", "name")) for t in tcps))
            for tcp in sorted(tcps, key=lambda t: t.urn):  # the engine's order varies between runs
                report(
                    f"management namespace {namespace!r} holds {len(tcps)} TenantControlPlanes ({names}); "
                    "each tenant needs its own namespace (its admin kubeconfig Secret lives there).",
                    tcp.urn,
                )


tcp_dedicated_namespace = StackValidationPolicy(
    name="tcp-dedicated-namespace",
    description=(
        "One TenantControlPlane per management namespace, named after its tenant and in a namespace named "
        "after it too, so no tenant can read another's admin kubeconfig Secret."
    ),
    validate=validate_tcp_dedicated_namespace,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "forbiddenNamespaces": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_FORBIDDEN_TCP_NAMESPACES,
                "description": "Shared management namespaces that must never hold a TenantControlPlane.",
            }
        }
    ),
)
