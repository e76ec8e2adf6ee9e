"""Tenant data planes: each tenant's pod and service ranges are its own, and each worker machine joins
its own tenant's control plane only.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from collections import defaultdict

from policy_common import MANDATORY, policy_config
from pulumi_policy import PolicyConfigSchema, ReportViolation, StackValidationArgs, StackValidationPolicy
from resource_lib import (
    COMMAND_TYPE,
    CONTAINER_TYPE,
    HOST_WORKER_TYPE,
    IPADDRESSPOOL_TYPE,
    METALLB_TYPE,
    REMOTE_COMMAND_TYPE,
    TCP_TYPE,
    TENANT_TYPE,
    Res,
    from_policy_resources,
)
from tenancy_lib import ancestor_tenant, component_label, owner, tenant_component_name
from value_lib import Network, as_list, dig, is_unknown, known_str, network, overlaps, range_networks

# kind's own pod and service CIDRs of the management cluster (kind defaults).
DEFAULT_RESERVED_CIDRS = ["10.244.0.0/16", "10.96.0.0/16"]

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
    # The engine lists resources in the order they registered, which varies between runs: sorted, a preview
    # names an overlap the same way every time.
    ranges.sort(key=lambda entry: (entry[0], entry[1]))
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
    stated = res.props.get("controlPlaneEndpoint")
    endpoint = known_str(stated)
    if endpoint:
        _check_endpoint(res, tenant, endpoint, endpoints, report)
    elif not is_unknown(stated):  # not known yet in a preview: checked when it is
        report(
            f"GPU host {res.name!r} of tenant {tenant!r} states no controlPlaneEndpoint, so which control plane it "
            "joins cannot be checked; a HostWorker registers the endpoint it joins as an output.",
            res.urn,
        )


def _host_keys(res: Res) -> list[str]:
    """Names a worker machine goes by: node name / host address (HostWorker, remote Command), container name."""
    if res.type == HOST_WORKER_TYPE:
        named = [("node", res.props.get("nodeName")), ("host", res.props.get("address"))]
    elif res.type == REMOTE_COMMAND_TYPE:
        named = [("host", dig(res.props, "connection", "host"))]
    elif res.type == CONTAINER_TYPE and component_label(res) == "worker":
        named = [("container", res.props.get("name"))]
    else:
        return []
    return [f"{kind} {value}" for kind, value in named if value]  # a value not known yet is the falsy UNKNOWN


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
