"""Tenant isolation: providers, control planes, namespaces, addresses and joins stay each tenant's own.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from collections import defaultdict

from pod_lib import chart_name
from policy_common import MANDATORY, describe, policy_config
from pulumi_policy import (
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from resource_lib import (
    COMMAND_TYPE,
    CONTAINER_TYPE,
    DATASTORE_TYPE,
    HELM_TYPES,
    HOST_WORKER_TYPE,
    IPADDRESSPOOL_TYPE,
    K8S_COMPONENT_TYPES,
    K8S_PROVIDER_TYPE,
    KAMAJI_TYPE,
    L2ADVERTISEMENT_TYPE,
    METALLB_TYPE,
    NAMESPACE_TYPE,
    REMOTE_COMMAND_TYPE,
    SECRET_TYPE,
    TCP_COMPONENT_TYPE,
    TCP_TYPE,
    TENANT_DATASTORE_TYPE,
    TENANT_TYPE,
    Provider,
    Res,
    from_policy_resources,
    from_resource_args,
    nearest_component,
)
from tenancy_lib import ancestor_tenant, component_label, owner, provider_cluster, tenant_component_name
from value_lib import Network, as_list, dig, is_unknown, known_str, network, overlaps, range_networks

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
DEFAULT_FORBIDDEN_TCP_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease", "kamaji-system"]
# kind's own pod and service CIDRs of the management cluster (kind defaults).
DEFAULT_RESERVED_CIDRS = ["10.244.0.0/16", "10.96.0.0/16"]

# --------------------------------------------------------------------------- 1 tenant-provider-isolation


def _provider_identity(resources: list[Res], report: ReportViolation) -> None:
    seen: dict[str, str] = {}
    for res in resources:
        if res.type != K8S_PROVIDER_TYPE:
            continue
        provider = Provider(res.type, res.name, res.urn, res.props)
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
        if not isinstance(identifier, str) or is_unknown(identifier):
            continue
        if identifier in seen:
            report(
                f"providers {seen[identifier]!r} and {res.name!r} share clusterIdentifier {identifier!r}: "
                "two tenants would reach the same cluster.",
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
    if component not in components or kind not in components[component]:
        report(
            f"{describe(res)} lands on the management cluster, made by {component or 'the stack itself'}; only the "
            "platform's own components create objects there, and only the kinds they need "
            f"({component}: {', '.join(components.get(component or '', [])) or 'none'}). Deploy it through a "
            "tenant's own provider instead.",
            res.urn,
        )
        return
    if res.unread or component not in TENANT_SCOPED_COMPONENTS:
        return
    if res.type in HELM_TYPES:  # a release names its namespace and name at the top level
        namespace, name = res.props.get("namespace"), res.props.get("name")
    else:
        namespace, name = dig(res.props, "metadata", "namespace"), dig(res.props, "metadata", "name")
    if is_unknown(name) or is_unknown(namespace):
        return
    if tenant is None:
        report(f"{describe(res)} made by {component} is under no tenant; it must sit under its Tenant.", res.urn)
    elif res.type == NAMESPACE_TYPE:
        if name != tenant:
            report(
                f"{describe(res)} of tenant {tenant!r} creates management namespace {name!r}; "
                f"a tenant only gets its own namespace {tenant!r}.",
                res.urn,
            )
    elif res.type == DATASTORE_TYPE:
        if name != f"{tenant}-etcd":
            report(f"{describe(res)} of tenant {tenant!r} is DataStore {name!r}, not its own {tenant}-etcd.", res.urn)
    elif namespace != tenant:
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


# --------------------------------------------------------------------------- 2 tcp-konnectivity-enabled


def validate_tcp_konnectivity(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type != TCP_TYPE:
        return
    res = from_resource_args(args)
    addons = dig(res.props, "spec", "addons")
    if is_unknown(addons):
        return
    konnectivity = dig(res.props, "spec", "addons", "konnectivity")
    if is_unknown(konnectivity):
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
            for tcp in tcps:
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


# --------------------------------------------------------------------------- 8 tenant-cidrs-disjoint


def _docker_networks(resources: list[Res]) -> list[tuple[str, Network]]:
    found: list[tuple[str, Network]] = []
    for res in resources:
        if res.type == METALLB_TYPE:
            net = network(res.props.get("subnet"))
            if net:
                found.append((f"the Docker network {net} that MetalLB's pool comes from", net))
        elif res.type == IPADDRESSPOOL_TYPE:
            for entry in as_list(dig(res.props, "spec", "addresses")):
                for net in range_networks(entry):
                    found.append((f"MetalLB pool {entry}", net))
        elif res.type == HOST_WORKER_TYPE:
            # A GPU host's own address: a tenant range covering it would shadow the host in every pod.
            net = network(res.props.get("address"))
            if net:
                found.append((f"GPU host {res.name!r} at {net.network_address}", net))
    return found


def validate_tenant_cidrs_disjoint(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    reserved: list[tuple[str, Network]] = []
    for cidr in policy_config(args, "reservedCidrs", DEFAULT_RESERVED_CIDRS):
        net = network(cidr)
        if net:
            reserved.append((f"reserved range {cidr}", net))
    reserved.extend(_docker_networks(resources))
    ranges: list[tuple[str, str, Network, Res]] = []
    for res in resources:
        if res.type != TCP_TYPE:
            continue
        tenant = owner(res)[0] or known_str(dig(res.props, "metadata", "name")) or res.name
        for key, label in (("podCidrs", "pod"), ("serviceCidrs", "service")):
            for cidr in as_list(dig(res.props, "spec", "networkProfile", key)):
                net = network(cidr)
                if net:
                    ranges.append((tenant, f"{label} CIDR {cidr}", net, res))
    for index, (tenant, what, net, res) in enumerate(ranges):
        for other_tenant, other_what, other_net, _ in ranges[index + 1 :]:
            if overlaps(net, other_net) and (tenant != other_tenant or what != other_what):
                report(
                    f"tenant {tenant!r} {what} overlaps tenant {other_tenant!r} {other_what}; "
                    "give every tenant disjoint podCidr/serviceCidr.",
                    res.urn,
                )
        for reserved_what, reserved_net in reserved:
            if overlaps(net, reserved_net):
                report(f"tenant {tenant!r} {what} overlaps {reserved_what}; pick another podCidr/serviceCidr.", res.urn)


tenant_cidrs_disjoint = StackValidationPolicy(
    name="tenant-cidrs-disjoint",
    description=(
        "Tenants' pod and service CIDRs overlap neither each other, nor the Docker network MetalLB hands "
        "addresses from (or its pool), nor GPU hosts' addresses, nor the management cluster's ranges (reservedCidrs)."
    ),
    validate=validate_tenant_cidrs_disjoint,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "reservedCidrs": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_RESERVED_CIDRS,
                "description": "Further ranges no tenant may use (default: kind's pod and service CIDRs).",
            }
        }
    ),
)


# --------------------------------------------------------------------------- 9 worker-joins-own-tenant


def _tenant_endpoints(resources: list[Res]) -> dict[str, str]:
    endpoints: dict[str, str] = {}
    for res in resources:
        if res.type == TENANT_TYPE:
            endpoint = known_str(res.props.get("endpoint"))
            if endpoint:
                endpoints[tenant_component_name(res)] = endpoint
    return endpoints


def _check_endpoint(
    res: Res, tenant: str, endpoint: str, endpoints: dict[str, str], report: ReportViolation
) -> None:
    others = sorted(t for t, e in endpoints.items() if t != tenant and e == endpoint)
    own = endpoints.get(tenant)
    if others:
        report(
            f"worker join {res.name!r} of tenant {tenant!r} targets {endpoint}, the control plane of "
            f"{', '.join(repr(o) for o in others)}; use {tenant!r}'s TenantControlPlane endpoint.",
            res.urn,
        )
    elif own and own != endpoint:
        report(f"worker join {res.name!r} of tenant {tenant!r} targets {endpoint}, not its own {own}.", res.urn)


def _check_local_join(
    res: Res, endpoints: dict[str, str], containers_by_name: dict[str, Res], report: ReportViolation
) -> None:
    """A kind worker's join: a local Command whose environment names tenant, endpoint and container."""
    environment = res.props.get("environment")
    if not isinstance(environment, dict) or "CONTROL_PLANE_TENANT" not in environment:
        return
    keys = ("GPU_TENANCY_TENANT", "CONTROL_PLANE_TENANT")
    claimed = {key: environment.get(key) for key in keys if known_str(environment.get(key))}
    tenant = ancestor_tenant(res) or claimed.get("GPU_TENANCY_TENANT")
    if not tenant:
        return
    for key, value in claimed.items():
        if value != tenant:
            report(
                f"worker join {res.name!r} of tenant {tenant!r} has {key}={value!r}; a worker joins only its "
                "own tenant's control plane.",
                res.urn,
            )
    endpoint = known_str(environment.get("CONTROL_PLANE_ENDPOINT"))
    if endpoint:
        _check_endpoint(res, tenant, endpoint, endpoints, report)
    worker = known_str(environment.get("GPU_TENANCY_WORKER"))
    container = containers_by_name.get(worker) if worker else None
    container_tenant = owner(container)[0] if container else None
    if container_tenant and container_tenant != tenant:
        report(
            f"worker join {res.name!r} of tenant {tenant!r} joins container {worker!r} of tenant {container_tenant!r}.",
            res.urn,
        )


def _check_host_worker(res: Res, endpoints: dict[str, str], report: ReportViolation) -> None:
    """A real GPU host (mode real): its HostWorker names tenant and endpoint (inputs; outputs may omit them)."""
    tenant = ancestor_tenant(res) or known_str(res.props.get("tenant"))
    if not tenant:
        return
    claimed = known_str(res.props.get("tenant"))
    if claimed and claimed != tenant:
        report(f"GPU host {res.name!r} under tenant {tenant!r} says tenant={claimed!r}.", res.urn)
    endpoint = known_str(res.props.get("controlPlaneEndpoint"))
    if endpoint:
        _check_endpoint(res, tenant, endpoint, endpoints, report)


def _host_keys(res: Res) -> list[str]:
    """Names a worker machine goes by: node name / host address (HostWorker, remote Command), container name."""
    keys: list[str] = []
    if res.type == HOST_WORKER_TYPE:
        keys += [f"node {v}" for v in [known_str(res.props.get("nodeName"))] if v]
        keys += [f"host {v}" for v in [known_str(res.props.get("address"))] if v]
    elif res.type == REMOTE_COMMAND_TYPE:
        keys += [f"host {v}" for v in [known_str(dig(res.props, "connection", "host"))] if v]
    elif res.type == CONTAINER_TYPE and component_label(res) == "worker":
        keys += [f"container {v}" for v in [known_str(res.props.get("name"))] if v]
    return keys


def validate_worker_joins_own_tenant(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    endpoints = _tenant_endpoints(resources)
    containers_by_name = {
        name: r for r in resources if r.type == CONTAINER_TYPE and (name := known_str(r.props.get("name")))
    }
    machines: dict[str, dict[str, Res]] = defaultdict(dict)
    for res in resources:
        if res.type == COMMAND_TYPE:
            _check_local_join(res, endpoints, containers_by_name, report)
        elif res.type == HOST_WORKER_TYPE:
            _check_host_worker(res, endpoints, report)
        tenant = ancestor_tenant(res)
        if tenant:
            for key in _host_keys(res):
                machines[key].setdefault(tenant, res)
    for key, by_tenant in sorted(machines.items()):
        if len(by_tenant) > 1:
            tenants = ", ".join(repr(t) for t in sorted(by_tenant))
            first = by_tenant[sorted(by_tenant)[1]]
            report(f"{key} is a worker of several tenants ({tenants}); a GPU machine joins one tenant only.", first.urn)


worker_joins_own_tenant = StackValidationPolicy(
    name="worker-joins-own-tenant",
    description=(
        "Each worker joins its own tenant's control plane only: a kind worker's join (GPU_TENANCY_TENANT, "
        "CONTROL_PLANE_TENANT, CONTROL_PLANE_ENDPOINT, its container) and a real GPU host (HostWorker) name one "
        "tenant, and no machine is a worker of two tenants."
    ),
    validate=validate_worker_joins_own_tenant,
    enforcement_level=MANDATORY,
)
