"""The gpu-tenancy policies: tenant isolation and safe GPU use, checked at `pulumi preview`.

Every policy has a stable name, a description that says what to change, a default enforcement level
(mandatory unless noted) and, where it has a tunable, a config schema. Per stack, any of them can be
overridden with `pulumi preview --policy-pack policies --policy-pack-config <file.json>`, e.g.
``{"no-privileged-tenant-workloads": "mandatory", "tenant-cidrs-disjoint": {"reservedCidrs": []}}``.

Resource policies see a resource's inputs; stack policies see every resource's outputs (for a component:
what it passed to register_outputs), its provider and its parent chain. Values unknown during preview
are skipped, never touched raw (see policy_lib.plain), so a first preview does not crash a policy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from policy_lib import (
    COMMAND_TYPE,
    COMPONENT_LABEL,
    CONTAINER_TYPE,
    DOCKER_IMAGE_TYPE,
    GPU,
    GPUCORES,
    GPUMEM,
    GPUMEM_PERCENTAGE,
    HELM_RELEASE_TYPE,
    HELM_TYPES,
    HOST_WORKER_TYPE,
    IPADDRESSPOOL_TYPE,
    K8S_COMPONENT_TYPES,
    K8S_PROVIDER_TYPE,
    MANAGEMENT,
    METALLB_TYPE,
    MOCK_AGENT_TYPE,
    NAMESPACE_TYPE,
    REMOTE_COMMAND_TYPE,
    REMOTE_IMAGE_TYPE,
    STACK_TYPE,
    TCP_TYPE,
    TENANT_TYPE,
    Network,
    Res,
    ancestor_tenant,
    as_dict,
    as_list,
    component_label,
    containers,
    contains_unknown,
    dig,
    exact_kubernetes_version,
    from_policy_resources,
    from_resource_args,
    helm_value_image_problems,
    image_problem,
    is_unknown,
    known_str,
    network,
    overlaps,
    owner,
    planner_inputs,
    pod_labels,
    pod_spec,
    provider_cluster,
    quantity,
    range_networks,
    resource_tenant,
    stack_config,
    tenant_component_name,
)
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpu_tenancy import chart_pins, versions
from gpu_tenancy.config import image_tag

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY

DEFAULT_MANAGEMENT_TYPES = [TCP_TYPE, NAMESPACE_TYPE]
DEFAULT_FORBIDDEN_TCP_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease", "kamaji-system"]
# kind's own pod and service CIDRs of the management cluster (kind defaults).
DEFAULT_RESERVED_CIDRS = ["10.244.0.0/16", "10.96.0.0/16"]
DEFAULT_PLATFORM_COMPONENTS = ["kindnet", "kube-proxy", "mock-gpu-agent", "worker", "control-plane"]
DEFAULT_SPLIT_COUNT = 10


def _config(args: Any, key: str, default: Any) -> Any:
    config = args.get_config() or {}
    value = config.get(key) if isinstance(config, Mapping) else None
    return default if value is None else value


def _label(res: Res) -> str:
    return f"{res.type} {res.name!r}"


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
    allowed_on_management = set(_config(args, "allowedManagementTypes", DEFAULT_MANAGEMENT_TYPES))
    owners: dict[str, str | None] = {}
    for res in resources:
        tenant, conflicts = owner(res)
        owners[res.urn] = tenant
        for conflict in conflicts:
            report(f"{_label(res)} is claimed by more than one tenant: {conflict}.", res.urn)
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
                    f"{_label(res)} of tenant {tenant!r} depends on {_label(by_urn[dep])} of tenant {other!r}; "
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
                    f"{_label(res)} belongs to tenant {tenant!r} but goes through {cluster.describe()}; "
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
                    f"{_label(res)} of tenant {tenant!r} creates management namespace {name!r}; "
                    f"a tenant only gets its own namespace {tenant!r}.",
                    res.urn,
                )
            elif res.type in allowed_on_management or namespace == tenant:
                continue
            elif namespace in tenants:
                report(
                    f"{_label(res)} of tenant {tenant!r} reaches into tenant {namespace!r}'s management namespace, "
                    "where that tenant's control-plane credentials live; use only the tenant's own namespace.",
                    res.urn,
                )
            else:
                report(
                    f"{_label(res)} belongs to tenant {tenant!r} but lands on the management cluster "
                    f"(namespace {namespace!r}); only its TenantControlPlane, its namespace and objects in that "
                    "namespace may. Deploy it through the tenant's provider instead.",
                    res.urn,
                )
        else:
            report(
                f"{_label(res)} belongs to tenant {tenant!r} but goes through {cluster.describe()}; "
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
    forbidden = set(_config(args, "forbiddenNamespaces", DEFAULT_FORBIDDEN_TCP_NAMESPACES))
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


# --------------------------------------------------------------------------- 4 tcp-version-pinned


def _worker_images(resources: list[Res]) -> dict[str, list[tuple[Res, str]]]:
    images: dict[str, list[tuple[Res, str]]] = defaultdict(list)
    for res in resources:
        tenant = ancestor_tenant(res)
        if not tenant:
            continue
        ref = None
        if res.type == REMOTE_IMAGE_TYPE:
            ref = known_str(res.props.get("name"))
        elif res.type == CONTAINER_TYPE and component_label(res) == "worker":
            image = known_str(res.props.get("image"))
            ref = image if image and not image.startswith("sha256:") else None
        elif res.type == REMOTE_COMMAND_TYPE:
            # A real GPU host is (re)prepared for the version it carries in its triggers.
            versions = [t for t in as_list(res.props.get("triggers")) if exact_kubernetes_version(t)]
            ref = f"kubelet:{versions[0]}" if versions else None
        if ref:
            images[tenant].append((res, ref))
    return images


def validate_tcp_version_pinned(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    worker_images = _worker_images(resources)
    for res in resources:
        if res.type != TCP_TYPE:
            continue
        version = dig(res.props, "spec", "kubernetes", "version")
        if is_unknown(version):
            continue
        tenant, _ = owner(res)
        name = dig(res.props, "metadata", "name")
        if not exact_kubernetes_version(version):
            report(
                f"TenantControlPlane {name!r} has spec.kubernetes.version {version!r}; pin an exact "
                "version like 'v1.35.5' (gpu-tenancy:versions.kubernetes).",
                res.urn,
            )
            continue
        for image_res, ref in worker_images.get(tenant or "", []):
            tag = image_tag(ref)
            if tag != version:
                what = f"host {image_res.name!r} is prepared for {tag}" if ref.startswith("kubelet:") else (
                    f"worker image {ref!r} ({image_res.name!r})"
                )
                report(
                    f"tenant {tenant!r}: {what}, which does not match its control plane version {version!r}; "
                    "the worker kubelet must run the control plane's version (workerImage / versions.kubernetes).",
                    image_res.urn,
                )


tcp_version_pinned = StackValidationPolicy(
    name="tcp-version-pinned",
    description=(
        "Every TenantControlPlane pins an exact Kubernetes version (vX.Y.Z) and its tenant's workers run the same "
        "version (kind workers: the kindest/node image tag; GPU hosts: the version they are prepared for)."
    ),
    validate=validate_tcp_version_pinned,
    enforcement_level=MANDATORY,
)


# --------------------------------------------------------------------------- 5 images-pinned


def validate_images_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    res = from_resource_args(args)
    found: list[tuple[str, Any]] = []
    spec = pod_spec(res)
    if spec is not None:
        for container in containers(spec):
            found.append((f"container {container.get('name')!r}", container.get("image")))
    elif res.type == REMOTE_IMAGE_TYPE:
        found.append(("name", res.props.get("name")))
    elif res.type == DOCKER_IMAGE_TYPE:
        found.append(("imageName", res.props.get("imageName")))
    elif res.type == CONTAINER_TYPE:
        found.append(("image", res.props.get("image")))
    elif res.type in HELM_TYPES:
        for path, problem in helm_value_image_problems(res.props.get("values")):
            report(f"{_label(res)}: {path} {problem}; pin an explicit version tag.", None)
        return
    for where, ref in found:
        if ref is None and spec is not None:
            report(f"{_label(res)}: {where} has no image.", None)
            continue
        why = image_problem(ref)
        if why:
            report(f"{_label(res)}: {where} image {ref!r} {why}; pin a tag or digest, never 'latest'.", None)


images_pinned = ResourceValidationPolicy(
    name="images-pinned",
    description=(
        "Every container image carries an explicit tag other than 'latest' (or a digest): pods in any workload, "
        "Docker images and containers, and image tags in Helm values."
    ),
    validate=validate_images_pinned,
    enforcement_level=MANDATORY,
)


# --------------------------------------------------------------------------- 6 charts-pinned

_RANGE_CHARACTERS = set("^~*<>|= xX")
# Moving builds deployed knowingly (gpu_tenancy/versions.py UNPINNED_CHARTS); any other one is refused.
DEFAULT_ACCEPTED_MOVING_BUILDS = sorted(chart_pins.chart_key(c, v) for c, v in versions.UNPINNED_CHARTS.items())


def validate_charts_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in HELM_TYPES:
        return
    res = from_resource_args(args)
    chart, version = res.props.get("chart"), res.props.get("version")
    repo = dig(res.props, "repositoryOpts", "repo")
    if is_unknown(chart) or is_unknown(version) or is_unknown(repo):
        return
    if not isinstance(version, str) or not version.strip():
        report(f"{_label(res)}: chart {chart!r} has no version; set version= to an exact chart version.", None)
    elif any(ch in _RANGE_CHARACTERS for ch in version) or version.lower() in ("latest", "stable"):
        report(f"{_label(res)}: chart {chart!r} version {version!r} is a range; pin an exact version.", None)
    elif (label := chart_pins.moving_build_label(version)) and isinstance(chart, str) and chart_pins.chart_key(
        chart, version
    ) not in _config(args, "acceptMovingBuilds", DEFAULT_ACCEPTED_MOVING_BUILDS):
        report(
            f"{_label(res)}: chart {chart!r} version {version!r} is a moving build ({label!r} is republished "
            "from a branch), not a pin; pin a released version.", None
        )
    is_url = isinstance(chart, str) and chart.startswith(("oci://", "https://", "http://"))
    if not is_url and not (isinstance(repo, str) and repo.strip()):
        report(
            f"{_label(res)}: chart {chart!r} has no repository; set repository_opts=RepositoryOptsArgs(repo=...) "
            "or use an oci:// chart reference.", None
        )


charts_pinned = ResourceValidationPolicy(
    name="charts-pinned",
    description=(
        "Every Helm chart names an exact version, not a range or a moving build such as 0.0.0+latest, and its "
        "repository (repositoryOpts.repo or an oci:// URL)."
    ),
    validate=validate_charts_pinned,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "acceptMovingBuilds": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_ACCEPTED_MOVING_BUILDS,
                "description": "chart@version moving builds deployed knowingly (no pinnable release exists).",
            }
        }
    ),
)


# --------------------------------------------------------------------------- 7 gpu-requests-fractional


def _container_gpu_problems(container: Mapping[str, Any]) -> list[str]:
    resources = as_dict(container.get("resources"))
    merged: dict[str, Any] = {}
    for section in ("requests", "limits"):
        merged.update(as_dict(resources.get(section)))
    gpus = quantity(merged.get(GPU))
    if not gpus:
        return []
    problems = []
    if merged.get(GPUMEM) is None and merged.get(GPUMEM_PERCENTAGE) is None:
        problems.append(
            f"asks for {GPU}={gpus} without {GPUMEM} or {GPUMEM_PERCENTAGE}, i.e. whole cards; state the memory share"
        )
    cores = quantity(merged.get(GPUCORES))
    if cores is not None and cores > 100:
        problems.append(f"asks for {GPUCORES}={cores}; HAMi's gpucores is a percentage of one card (<= 100)")
    return problems


def _declared_gpu_problems(workload: Mapping[str, Any]) -> list[str]:
    problems = []
    for index, container in enumerate(as_list(workload.get("containers"))):
        if not isinstance(container, dict) or contains_unknown(container):
            continue
        gpus = quantity(container.get("gpus", 1))
        if not gpus:
            continue
        if container.get("gpumemMiB") is None and container.get("gpumemPercentage") is None:
            problems.append(f"container #{index} asks for GPUs without gpumemMiB or gpumemPercentage")
        cores = quantity(container.get("gpucores"))
        if cores is not None and cores > 100:
            problems.append(f"container #{index} asks for gpucores={cores} (> 100)")
    return problems


def validate_gpu_requests_fractional(args: ResourceValidationArgs, report: ReportViolation) -> None:
    res = from_resource_args(args)
    if res.type == TENANT_TYPE:
        for workload in as_list(res.props.get("workloads")):
            if isinstance(workload, dict):
                for problem in _declared_gpu_problems(workload):
                    name = tenant_component_name(res)
                    report(f"tenant {name!r}, workload {workload.get('name')!r}: {problem}.", None)
        return
    spec = pod_spec(res)
    if spec is None:
        return
    for container in containers(spec):
        for problem in _container_gpu_problems(container):
            report(f"{_label(res)}: container {container.get('name')!r} {problem}.", None)


gpu_requests_fractional = ResourceValidationPolicy(
    name="gpu-requests-fractional",
    description=(
        f"A container asking for {GPU} also states its memory share ({GPUMEM} or {GPUMEM_PERCENTAGE}) and keeps "
        f"{GPUCORES} <= 100, so tenants share cards instead of silently taking whole GPUs."
    ),
    validate=validate_gpu_requests_fractional,
    enforcement_level=MANDATORY,
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
    for cidr in _config(args, "reservedCidrs", DEFAULT_RESERVED_CIDRS):
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


# --------------------------------------------------------------------------- 10 no-mock-gpus-in-real


def _stack_mode(args: StackValidationArgs, resources: list[Res], report: ReportViolation) -> str | None:
    configured = _config(args, "mode", None)
    if configured in ("sim", "real"):
        return str(configured)
    modes: dict[str, list[str]] = defaultdict(list)
    for res in resources:
        if res.type in (TENANT_TYPE, STACK_TYPE):
            mode = known_str(res.props.get("mode"))
            if mode:
                modes[mode].append(res.name)
    if len(modes) > 1:
        report("the stack mixes modes: " + "; ".join(f"{m}: {', '.join(n)}" for m, n in sorted(modes.items())), None)
        return None
    if modes:
        return next(iter(modes))
    mode = stack_config("mode")
    return mode if mode in ("sim", "real") else None


def _device_plugin_enabled(release: Res) -> bool | None:
    """HAMi's devicePlugin.enabled (the chart enables it unless told otherwise); None if not HAMi or unknown."""
    chart = release.props.get("chart")
    if not (isinstance(chart, str) and chart.rsplit("/", 1)[-1] == "hami"):
        return None
    enabled = dig(release.props, "values", "devicePlugin", "enabled", default=True)
    return None if is_unknown(enabled) else bool(enabled)


_REAL_PLUGIN_CHARTS = ("nvidia-device-plugin", "gpu-operator")


def validate_no_mock_gpus_in_real(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    mode = _stack_mode(args, resources, report)
    mock: dict[str | None, list[Res]] = defaultdict(list)
    real_plugin: dict[str | None, list[Res]] = defaultdict(list)
    disabled_plugin: dict[str | None, list[Res]] = defaultdict(list)
    for res in resources:
        tenant = ancestor_tenant(res) or resource_tenant(res)
        is_agent_daemonset = res.kind == "DaemonSet" and component_label(res) == "mock-gpu-agent"
        if res.type == MOCK_AGENT_TYPE or (res.is_kubernetes and is_agent_daemonset):
            mock[tenant].append(res)
        if res.type == HELM_RELEASE_TYPE or res.type in HELM_TYPES:
            enabled = _device_plugin_enabled(res)
            chart = known_str(res.props.get("chart")) or ""
            if enabled is True or chart.rsplit("/", 1)[-1] in _REAL_PLUGIN_CHARTS:
                real_plugin[tenant].append(res)
            elif enabled is False:
                disabled_plugin[tenant].append(res)
    if mode == "real":
        for tenant, found in sorted(mock.items(), key=lambda kv: str(kv[0])):
            for res in found:
                report(
                    f"mode is 'real' but tenant {tenant!r} still runs the mock-GPU agent ({_label(res)}); remove it, "
                    "real GPUs are registered by HAMi's device plugin.",
                    res.urn,
                )
        for tenant, found in sorted(disabled_plugin.items(), key=lambda kv: str(kv[0])):
            for res in found:
                report(
                    f"mode is 'real' but tenant {tenant!r} installs HAMi with devicePlugin.enabled=false "
                    f"({_label(res)}); enable it so real GPUs are registered.",
                    res.urn,
                )
    elif mode == "sim":
        for tenant, found in sorted(real_plugin.items(), key=lambda kv: str(kv[0])):
            for res in found:
                report(
                    f"mode is 'sim' but tenant {tenant!r} installs a real GPU device plugin ({_label(res)}); "
                    "set HAMi devicePlugin.enabled=false, the mock-GPU agent simulates the devices.",
                    res.urn,
                )
    else:
        for tenant in sorted(set(mock) & set(real_plugin), key=str):
            report(
                f"tenant {tenant!r} runs both the mock-GPU agent and a real device plugin; pick one "
                "(gpu-tenancy:mode sim or real).",
                mock[tenant][0].urn,
            )


no_mock_gpus_in_real = StackValidationPolicy(
    name="no-mock-gpus-in-real",
    description=(
        "In mode 'real' no mock-GPU agent runs and HAMi's device plugin is enabled; in mode 'sim' no real "
        "device plugin is installed. The mode is this policy's `mode` setting, else the Tenant components' or the "
        "stack's `mode` output, else the stack config gpu-tenancy:mode."
    ),
    validate=validate_no_mock_gpus_in_real,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "mode": {
                "type": "string",
                "enum": ["sim", "real"],
                "description": "Force the mode to check against (default: read from the stack).",
            }
        }
    ),
)


# --------------------------------------------------------------------------- 11 no-privileged-tenant-workloads


def validate_no_privileged_tenant_workloads(args: ResourceValidationArgs, report: ReportViolation) -> None:
    res = from_resource_args(args)
    tenant = resource_tenant(res)
    if tenant is None:
        return
    platform = set(_config(args, "platformComponents", DEFAULT_PLATFORM_COMPONENTS))
    component = component_label(res) or known_str(pod_labels(res).get(COMPONENT_LABEL))
    if component in platform:
        return
    if res.type == CONTAINER_TYPE:
        if res.props.get("privileged") is True:
            report(f"tenant {tenant!r}: Docker container {res.name!r} is privileged.", None)
        return
    spec = pod_spec(res)
    if spec is None:
        return
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            report(f"tenant {tenant!r}: {_label(res)} sets {key}: true.", None)
    for volume in as_list(spec.get("volumes")):
        if isinstance(volume, dict) and volume.get("hostPath") is not None:
            report(f"tenant {tenant!r}: {_label(res)} mounts hostPath volume {volume.get('name')!r}.", None)
    for container in containers(spec):
        context = as_dict(container.get("securityContext"))
        if context.get("privileged") is True:
            report(f"tenant {tenant!r}: {_label(res)} container {container.get('name')!r} is privileged.", None)
        if context.get("allowPrivilegeEscalation") is True and context.get("privileged") is not True:
            report(
                f"tenant {tenant!r}: {_label(res)} container {container.get('name')!r} allows privilege escalation.",
                None,
            )


no_privileged_tenant_workloads = ResourceValidationPolicy(
    name="no-privileged-tenant-workloads",
    description=(
        "Tenant workloads other than platform components (label gpu-tenancy.io/component in platformComponents) "
        "run neither privileged nor with hostPath, hostNetwork, hostPID or hostIPC, which hand them the node itself."
    ),
    validate=validate_no_privileged_tenant_workloads,
    enforcement_level=ADVISORY,
    config_schema=PolicyConfigSchema(
        properties={
            "platformComponents": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_PLATFORM_COMPONENTS,
                "description": f"Values of {COMPONENT_LABEL} that mark platform components (exempt).",
            }
        }
    ),
)


# --------------------------------------------------------------------------- 12 gpu-plan-fits (issue 7)


def _declaration(tenant_res: Res) -> tuple[dict[str, Any] | None, str]:
    """(gpus/workloads/quota of a tenant, where they came from); None when neither source has them."""
    props = tenant_res.props
    if isinstance(props.get("gpus"), list) and not contains_unknown(
        [props.get("gpus"), props.get("workloads"), props.get("quota")]
    ):
        return {
            "gpus": props["gpus"],
            "workloads": as_list(props.get("workloads")),
            "quota": as_dict(props.get("quota")),
        }, "Tenant component"
    # The engine's stack view of a component is what it passed to register_outputs; until the Tenant
    # registers its declaration there, fall back to the stack config the engine hands to the pack.
    name = tenant_component_name(tenant_res)
    for tenant in as_list(stack_config("tenants")):
        if isinstance(tenant, dict) and tenant.get("name") == name and isinstance(tenant.get("gpus"), list):
            return {
                "gpus": tenant["gpus"],
                "workloads": as_list(tenant.get("workloads")),
                "quota": as_dict(tenant.get("quota")),
            }, "stack config"
    return None, ""


def _split_count(resources: list[Res], tenant: str) -> int:
    for res in resources:
        if res.kind == "DaemonSet" and res.is_kubernetes and ancestor_tenant(res) == tenant:
            for container in containers(pod_spec(res) or {}):
                for env in as_list(container.get("env")):
                    if isinstance(env, dict) and env.get("name") == "SPLIT_COUNT":
                        count = quantity(env.get("value"))
                        if count:
                            return count
        if res.type == HELM_RELEASE_TYPE and ancestor_tenant(res) == tenant:
            count = quantity(dig(res.props, "values", "devicePlugin", "deviceSplitCount"))
            if count:
                return count
    return DEFAULT_SPLIT_COUNT


def _node_name(resources: list[Res], tenant: str) -> str:
    for res in resources:
        if res.type == CONTAINER_TYPE and ancestor_tenant(res) == tenant:
            name = known_str(res.props.get("name"))
            if name:
                return name
    return f"{tenant}-worker"


def validate_gpu_plan_fits(args: StackValidationArgs, report: ReportViolation) -> None:
    from gpu_tenancy import planner

    resources = from_policy_resources(args.resources)
    for res in resources:
        if res.type != TENANT_TYPE:
            continue
        tenant = tenant_component_name(res)
        declaration, _source = _declaration(res)
        if declaration is None:
            report(
                f"tenant {tenant!r}: cannot check its GPU plan, the Tenant component exposes no gpus/workloads/"
                "quota and the stack config has none for it; register them as Tenant outputs.",
                res.urn,
            )
            continue
        try:
            nodes, workloads, quota = planner_inputs(
                tenant,
                _node_name(resources, tenant),
                declaration["gpus"],
                declaration["workloads"],
                declaration["quota"],
                _split_count(resources, tenant),
            )
            # A verdict, not a card-by-card prediction: large nodes are planned with ties in registration order.
            result = planner.plan(nodes, workloads, quota, exact_device_order=False)
        except ValueError as error:
            report(f"tenant {tenant!r}: its GPU declaration cannot be planned: {error}.", res.urn)
            continue
        for failure in result.failures:
            report(
                f"tenant {tenant!r}: workload {failure.workload!r} replica {failure.replica} cannot be placed "
                f"on its declared GPUs: {failure.reason}.",
                res.urn,
            )


gpu_plan_fits = StackValidationPolicy(
    name="gpu-plan-fits",
    description=(
        "Every replica of a tenant's declared workloads fits its declared GPU inventory and quota as HAMi would "
        "schedule it (gpu_tenancy.planner); reasons are HAMi's own. Add GPUs, lower requests or raise the quota."
    ),
    validate=validate_gpu_plan_fits,
    enforcement_level=MANDATORY,
)


ALL_POLICIES: list[Policy] = [
    tenant_provider_isolation,
    tcp_konnectivity_enabled,
    tcp_dedicated_namespace,
    tcp_version_pinned,
    images_pinned,
    charts_pinned,
    gpu_requests_fractional,
    tenant_cidrs_disjoint,
    worker_joins_own_tenant,
    no_mock_gpus_in_real,
    no_privileged_tenant_workloads,
    gpu_plan_fits,
]

POLICIES_BY_NAME: dict[str, Policy] = {p.name: p for p in ALL_POLICIES}

Validate = Callable[[Any, ReportViolation], None]
