"""Tenant isolation: providers, control planes, namespaces, addresses and joins stay each tenant's own.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from collections import defaultdict

from policy_common import MANDATORY, describe, policy_config
from policy_lib import (
    COMMAND_TYPE,
    CONTAINER_TYPE,
    HOST_WORKER_TYPE,
    IPADDRESSPOOL_TYPE,
    K8S_COMPONENT_TYPES,
    K8S_PROVIDER_TYPE,
    MANAGEMENT,
    METALLB_TYPE,
    NAMESPACE_TYPE,
    REMOTE_COMMAND_TYPE,
    TCP_TYPE,
    TENANT_TYPE,
    Network,
    Res,
    ancestor_tenant,
    as_list,
    component_label,
    dig,
    from_policy_resources,
    from_resource_args,
    is_unknown,
    known_str,
    network,
    overlaps,
    owner,
    provider_cluster,
    range_networks,
    tenant_component_name,
)
from pulumi_policy import (
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

DEFAULT_MANAGEMENT_TYPES = [TCP_TYPE, NAMESPACE_TYPE]
DEFAULT_FORBIDDEN_TCP_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease", "kamaji-system"]
# kind's own pod and service CIDRs of the management cluster (kind defaults).
DEFAULT_RESERVED_CIDRS = ["10.244.0.0/16", "10.96.0.0/16"]

# --------------------------------------------------------------------------- 1 tenant-provider-isolation


def _provider_identity(resources: list[Res], report: ReportViolation) -> None:
    seen: dict[str, str] = {}
    for res in resources:
        if res.type != K8S_PROVIDER_TYPE:
            continue
        identifier = res.props.get("clusterIdentifier")
        if is_unknown(identifier) or identifier is None:
            continue
        tenant = ancestor_tenant(res)
        named = res.name.removesuffix("-kubernetes") if res.name.endswith("-kubernetes") else None
        if tenant and identifier != f"tenant/{tenant}":
            report(
                f"provider {res.name!r} belongs to tenant {tenant!r} but has clusterIdentifier {identifier!r}; "
                f"set cluster_identifier='tenant/{tenant}' so it only ever targets that tenant's cluster.",
                res.urn,
            )
        elif named and not tenant and identifier.startswith("tenant/") and identifier != f"tenant/{named}":
            report(f"provider {res.name!r} has clusterIdentifier {identifier!r}, not 'tenant/{named}'.", res.urn)
        if identifier in seen:
            report(
                f"providers {seen[identifier]!r} and {res.name!r} share clusterIdentifier {identifier!r}: "
                "two tenants would reach the same cluster.",
                res.urn,
            )
        seen[identifier] = res.name


def validate_tenant_provider_isolation(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    allowed_on_management = set(policy_config(args, "allowedManagementTypes", DEFAULT_MANAGEMENT_TYPES))
    owners: dict[str, str | None] = {}
    for res in resources:
        tenant, conflicts = owner(res)
        owners[res.urn] = tenant
        for conflict in conflicts:
            report(f"{describe(res)} is claimed by more than one tenant: {conflict}.", res.urn)
    _provider_identity(resources, report)
    by_urn = {r.urn: r for r in resources}
    tenants = {t for t in owners.values() if t}
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
        if not res.is_kubernetes or res.type == K8S_PROVIDER_TYPE:
            continue
        if res.provider is None and res.type in K8S_COMPONENT_TYPES:
            continue  # a component: its children carry the provider and are checked themselves
        cluster = provider_cluster(res.provider)
        if cluster.kind == "tenant":
            if cluster.name != tenant:
                report(
                    f"{describe(res)} belongs to tenant {tenant!r} but goes through {cluster.describe()}; "
                    f"pass provider=<{tenant}'s TenantControlPlane>.provider.",
                    res.urn,
                )
        elif cluster.kind == MANAGEMENT:
            if res.unread:
                continue  # where it lives is not known yet (an empty read during preview)
            namespace = known_str(dig(res.props, "metadata", "namespace"))
            name = dig(res.props, "metadata", "name")
            if is_unknown(name) or is_unknown(dig(res.props, "metadata", "namespace")):
                continue
            if res.type == NAMESPACE_TYPE and name not in (None, tenant):
                report(
                    f"{describe(res)} of tenant {tenant!r} creates management namespace {name!r}; "
                    f"a tenant only gets its own namespace {tenant!r}.",
                    res.urn,
                )
            elif res.type in allowed_on_management or namespace == tenant:
                continue
            elif namespace in tenants:
                report(
                    f"{describe(res)} of tenant {tenant!r} reaches into tenant {namespace!r}'s management namespace, "
                    "where that tenant's control-plane credentials live; use only the tenant's own namespace.",
                    res.urn,
                )
            else:
                report(
                    f"{describe(res)} belongs to tenant {tenant!r} but lands on the management cluster "
                    f"(namespace {namespace!r}); only its TenantControlPlane, its namespace and objects in that "
                    "namespace may. Deploy it through the tenant's provider instead.",
                    res.urn,
                )
        else:
            report(
                f"{describe(res)} belongs to tenant {tenant!r} but goes through {cluster.describe()}; "
                f"use {tenant!r}'s own provider (clusterIdentifier 'tenant/{tenant}').",
                res.urn,
            )


tenant_provider_isolation = StackValidationPolicy(
    name="tenant-provider-isolation",
    description=(
        "A tenant's Kubernetes resources must go through that tenant's own provider, never use another "
        "tenant's outputs, and reach the management cluster only as its TenantControlPlane and namespace."
    ),
    validate=validate_tenant_provider_isolation,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "allowedManagementTypes": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_MANAGEMENT_TYPES,
                "description": "Types a tenant may create on the management provider outside its own namespace.",
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
