"""Attribution by identity, not by label or name: a tenant's provider is that tenant's because its kubeconfig is an
output of that tenant's own control-plane component, as the dependency graph the engine records shows; and
nothing lives outside the program's components, where no policy could say whose it is.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from policy_common import MANDATORY, describe
from pulumi_policy import ReportViolation, StackValidationArgs, StackValidationPolicy
from resource_lib import (
    K8S_PROVIDER_TYPE,
    SECRET_TYPE,
    STACK_CONFIG_NAMESPACE,
    STACK_TYPE,
    TCP_COMPONENT_TYPE,
    TCP_TYPE,
    TENANT_TYPE,
    Provider,
    Res,
    from_policy_resources,
    urn_types,
)
from tenancy_lib import MANAGEMENT, _structural_cluster, ancestor_tenant

# What a tenant's kubeconfig may come from: its control plane and the read of its admin Secret, both made by that
# tenant's TenantControlPlane component (components/tenant_control_plane.py).
KUBECONFIG_SOURCES = (TCP_TYPE, SECRET_TYPE)
OWN_PLACE = [TENANT_TYPE, TCP_COMPONENT_TYPE]


def _made_by_tenant_control_plane(res: Res, tenant: str) -> bool:
    return urn_types(res.urn)[:-1] == OWN_PLACE and ancestor_tenant(res) == tenant


def _check_kubeconfig_origin(provider: Res, tenant: str, by_urn: dict[str, Res], report: ReportViolation) -> None:
    sources = provider.property_dependencies.get("kubeconfig") or []
    if not sources:
        report(
            f"provider {provider.name!r} of tenant {tenant!r} takes a kubeconfig that is no output of the stack's "
            "resources (a literal, an invoke or config): which cluster it reaches cannot be proven; pass the "
            "tenant's TenantControlPlane kubeconfig.",
            provider.urn,
        )
        return
    for urn in sorted(sources):
        source = by_urn.get(urn)
        if source is None or source.type not in KUBECONFIG_SOURCES or not _made_by_tenant_control_plane(source, tenant):
            what = describe(source) if source is not None else f"{urn} (not in the stack)"
            report(
                f"provider {provider.name!r} of tenant {tenant!r} takes its kubeconfig from {what}; only tenant "
                f"{tenant!r}'s own control plane and its admin Secret may give it (no StackReference, no other "
                "tenant's output).",
                provider.urn,
            )
            continue
        if source.type == SECRET_TYPE:
            tcp = [d for d in source.dependencies if d in by_urn and by_urn[d].type == TCP_TYPE]
            if not tcp or not all(_made_by_tenant_control_plane(by_urn[d], tenant) for d in tcp):
                report(
                    f"provider {provider.name!r} of tenant {tenant!r} reads {describe(source)}, which is not "
                    f"read after tenant {tenant!r}'s own TenantControlPlane, where its admin Secret comes from.",
                    provider.urn,
                )


def _loose(res: Res) -> bool:
    """A resource made outside every gpu-tenancy component (the stack, the program's own top-level ones aside)."""
    if res.type == STACK_TYPE:
        return False
    types = urn_types(res.urn)
    if any(t.startswith(f"{STACK_CONFIG_NAMESPACE}:") for t in types):
        return False
    if types == [K8S_PROVIDER_TYPE] and res.name == MANAGEMENT:
        return False
    # The engine's default providers (`default`, `default_<version>`): a Kubernetes one is refused where used.
    return not (res.type.startswith("pulumi:providers:") and res.name.startswith("default"))


def validate_attributed_by_identity(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    by_urn = {r.urn: r for r in resources}
    for res in resources:
        if _loose(res):
            report(
                f"{describe(res)} is made outside every gpu-tenancy component, so it belongs to no tenant and to no "
                "platform component; make it inside the component it serves.",
                res.urn,
            )
        if res.type != K8S_PROVIDER_TYPE:
            continue
        cluster = _structural_cluster(Provider(res.name, res.urn, res.props))
        if cluster is not None and cluster.kind == "tenant" and cluster.name:
            _check_kubeconfig_origin(res, cluster.name, by_urn, report)


attributed_by_identity = StackValidationPolicy(
    name="attributed-by-identity",
    description=(
        "A tenant's provider reaches that tenant's cluster because its kubeconfig is an output of that tenant's own "
        "TenantControlPlane component (its control plane and admin Secret), as the engine's dependency graph "
        "shows: no literal, invoke, StackReference or other tenant's output. Nothing is made outside the program's "
        "components."
    ),
    validate=validate_attributed_by_identity,
    enforcement_level=MANDATORY,
)
