"""Tenant isolation by provider: every Kubernetes object reaches the cluster of the tenant it belongs to,
or the management cluster when a platform component made it, and no tenant uses another's outputs.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from pod_lib import chart_name
from policy_common import MANDATORY, describe, policy_config
from pulumi_policy import PolicyConfigSchema, ReportViolation, StackValidationArgs, StackValidationPolicy
from resource_lib import (
    DATASTORE_TYPE,
    HELM_TYPES,
    IPADDRESSPOOL_TYPE,
    K8S_COMPONENT_TYPES,
    K8S_PROVIDER_TYPE,
    KAMAJI_TYPE,
    L2ADVERTISEMENT_TYPE,
    METALLB_TYPE,
    NAMESPACE_TYPE,
    SECRET_TYPE,
    TCP_COMPONENT_TYPE,
    TCP_TYPE,
    TENANT_DATASTORE_TYPE,
    Provider,
    Res,
    from_policy_resources,
    nearest_component,
)
from tenancy_lib import ancestor_tenant, owner, provider_cluster
from value_lib import dig, is_unknown

# What each platform component may create on the management cluster (by resource type; a Helm release by
# `helm:<chart>`). Nothing else may go there: root on a management node, or a tenant's admin kubeconfig
# Secret in its namespace there, is every tenant.
DEFAULT_MANAGEMENT_COMPONENTS: dict[str, list[str]] = {
    # cert-manager, Kamaji, the shared DataStore and the self-signed ClusterIssuer dedicated etcds' CAs come from.
    KAMAJI_TYPE: ["helm:cert-manager", "helm:kamaji", DATASTORE_TYPE, "kubernetes:cert-manager.io/v1:ClusterIssuer"],
    METALLB_TYPE: ["helm:metallb", IPADDRESSPOOL_TYPE, L2ADVERTISEMENT_TYPE],
    # A tenant's namespace, control plane and the read of its admin kubeconfig, all in its own namespace.
    TCP_COMPONENT_TYPE: [NAMESPACE_TYPE, TCP_TYPE, SECRET_TYPE],
    # A tenant's own etcd (tenants[].dataStore: dedicated): the kamaji-etcd chart and its DataStore.
    TENANT_DATASTORE_TYPE: ["helm:kamaji-etcd", DATASTORE_TYPE],
}
# Components whose management objects belong to their tenant and stay in its namespace.
TENANT_SCOPED_COMPONENTS = (TCP_COMPONENT_TYPE, TENANT_DATASTORE_TYPE)

# --------------------------------------------------------------------------- 1 tenant-provider-isolation


def _provider_identity(resources: list[Res], report: ReportViolation) -> None:
    seen: dict[str, str] = {}
    for res in resources:
        if res.type != K8S_PROVIDER_TYPE:
            continue
        provider = Provider(res.name, res.urn, res.props)
        cluster = provider_cluster(provider)
        if not cluster.known:
            report(
                f"{cluster.describe()} reaches a cluster the pack cannot attribute to a tenant or to the platform; "
                "only the stack's `management` provider (clusterIdentifier 'management') and each tenant's own "
                "TenantControlPlane provider (clusterIdentifier 'tenant/<name>') may exist.",
                res.urn,
            )
            continue
        tenant = ancestor_tenant(res)
        if cluster.kind == "tenant" and tenant != cluster.name:
            report(
                f"provider {res.name!r} belongs to tenant {tenant!r} but reaches tenant {cluster.name!r}'s cluster; "
                f"set cluster_identifier='tenant/{tenant}' so it only ever targets that tenant's cluster.",
                res.urn,
            )
        identifier = res.props.get("clusterIdentifier")
        if not isinstance(identifier, str):  # not known yet: the pack's UNKNOWN is no string
            continue
        if identifier in seen:
            report(
                f"providers {seen[identifier]!r} and {res.name!r} both claim clusterIdentifier {identifier!r}; one "
                "provider per cluster, or the pack cannot tell which of them really reaches it.",
                res.urn,
            )
        seen[identifier] = res.name


def _management_kind(res: Res) -> str:
    return f"helm:{chart_name(res.props.get('chart')) or '?'}" if res.type in HELM_TYPES else res.type


def _check_management(
    res: Res, tenant: str | None, tenants: set[str], components: dict[str, list[str]], report: ReportViolation
) -> None:
    """An object on the management cluster: made by a platform component that needs that kind, and a
    tenant's only in that tenant's namespace."""
    component = nearest_component(res.urn)
    kind = _management_kind(res)
    allowed = components.get(component, []) if component else []
    if kind not in allowed:
        who = component or "the stack itself"
        report(
            f"{describe(res)} lands on the management cluster, made by {who}; only the platform's own components "
            f"create objects there, and only the kinds they need ({who}: {', '.join(allowed) or 'none'}). Deploy "
            "it through a tenant's own provider instead.",
            res.urn,
        )
        return
    if res.unread or component not in TENANT_SCOPED_COMPONENTS:
        return
    name = dig(res.props, "metadata", "name")
    # A release names its namespace at the top level.
    namespace = res.props.get("namespace") if res.type in HELM_TYPES else dig(res.props, "metadata", "namespace")
    if tenant is None:
        report(f"{describe(res)} made by {component} is under no tenant; it must sit under its Tenant.", res.urn)
    elif res.type == NAMESPACE_TYPE:
        if name != tenant and not is_unknown(name):
            report(
                f"{describe(res)} of tenant {tenant!r} creates management namespace {name!r}; "
                f"a tenant only gets its own namespace {tenant!r}.",
                res.urn,
            )
    elif res.type == DATASTORE_TYPE:
        if name != f"{tenant}-etcd" and not is_unknown(name):
            report(f"{describe(res)} of tenant {tenant!r} is DataStore {name!r}, not its own {tenant}-etcd.", res.urn)
    elif namespace != tenant and not is_unknown(namespace):
        where = "tenant " + repr(namespace) + "'s" if namespace in tenants else repr(namespace)
        report(
            f"{describe(res)} of tenant {tenant!r} reaches into {where} management namespace, where "
            "control-plane credentials live; use only the tenant's own namespace.",
            res.urn,
        )


def _cluster_owner(
    res: Res, tenant: str | None, tenants: set[str], components: dict[str, list[str]], report: ReportViolation
) -> str | None:
    """Whose a Kubernetes object is, by the provider it goes through; reports what does not add up."""
    cluster = provider_cluster(res.provider)
    if not cluster.known:
        report(
            f"{describe(res)} goes through {cluster.describe()}, which the pack cannot attribute to a tenant or to "
            "the platform; pass provider=<the tenant's TenantControlPlane>.provider (or the management provider "
            "for platform components).",
            res.urn,
        )
        return tenant
    if cluster.kind == "tenant":
        if tenant != cluster.name:
            owner_text = f"belongs to tenant {tenant!r}" if tenant else "is under no tenant"
            report(
                f"{describe(res)} {owner_text} but goes through {cluster.describe()}; only tenant "
                f"{cluster.name!r}'s own components (under its Tenant) create objects on its cluster.",
                res.urn,
            )
        return cluster.name
    _check_management(res, tenant, tenants, components, report)
    return tenant


def validate_tenant_provider_isolation(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    components = policy_config(args, "managementComponents", DEFAULT_MANAGEMENT_COMPONENTS)
    _provider_identity(resources, report)
    parents: dict[str, str | None] = {}
    for res in resources:
        tenant, conflicts = owner(res)
        parents[res.urn] = tenant
        for conflict in conflicts:
            report(f"{describe(res)} is claimed by more than one tenant: {conflict}.", res.urn)
    tenants = {t for t in parents.values() if t}
    owners: dict[str, str | None] = {}
    for res in resources:
        tenant = ancestor_tenant(res)
        if res.is_kubernetes and res.type != K8S_PROVIDER_TYPE and not (
            res.provider is None and res.type in K8S_COMPONENT_TYPES
        ):
            owners[res.urn] = _cluster_owner(res, tenant, tenants, components, report)
        else:
            owners[res.urn] = parents[res.urn]
    by_urn = {r.urn: r for r in resources}
    for res in resources:
        tenant = owners[res.urn]
        if tenant is None:
            continue
        # Never a second tenant's outputs, whatever the resource type.
        for dep in sorted(res.output_sources()):
            other = owners.get(dep)
            if other and other != tenant:
                report(
                    f"{describe(res)} of tenant {tenant!r} depends on {describe(by_urn[dep])} of tenant {other!r}; "
                    "a tenant's resources may only use its own tenant's outputs.",
                    res.urn,
                )


tenant_provider_isolation = StackValidationPolicy(
    name="tenant-provider-isolation",
    description=(
        "Every Kubernetes object is attributed by its provider to exactly one tenant or to the platform: a provider "
        "without a known cluster identity fails; a tenant's cluster gets only that tenant's own components' "
        "objects, never another tenant's outputs; the management cluster only the platform components' objects of "
        "the kinds they need, a tenant's only in its own namespace."
    ),
    validate=validate_tenant_provider_isolation,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "managementComponents": {
                "type": "object",
                "default": DEFAULT_MANAGEMENT_COMPONENTS,
                "description": "component type -> resource types (a Helm release as helm:<chart>) it may create on "
                "the management cluster.",
            }
        }
    ),
)
