"""Safe GPU use: fractional requests, no simulated GPUs on real stacks, unprivileged workloads, plans that fit.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from policy_common import ADVISORY, MANDATORY, describe, policy_config
from policy_lib import (
    COMPONENT_LABEL,
    CONTAINER_TYPE,
    GPU,
    GPUCORES,
    GPUMEM,
    GPUMEM_PERCENTAGE,
    HELM_RELEASE_TYPE,
    HELM_TYPES,
    MOCK_AGENT_TYPE,
    STACK_TYPE,
    TENANT_TYPE,
    Res,
    ancestor_tenant,
    as_dict,
    as_list,
    component_label,
    containers,
    contains_unknown,
    dig,
    from_policy_resources,
    from_resource_args,
    is_unknown,
    known_str,
    planner_inputs,
    pod_labels,
    pod_spec,
    quantity,
    resource_tenant,
    stack_config,
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

DEFAULT_PLATFORM_COMPONENTS = ["kindnet", "kube-proxy", "mock-gpu-agent", "worker", "control-plane"]
DEFAULT_SPLIT_COUNT = 10

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
            report(f"{describe(res)}: container {container.get('name')!r} {problem}.", None)


gpu_requests_fractional = ResourceValidationPolicy(
    name="gpu-requests-fractional",
    description=(
        f"A container asking for {GPU} also states its memory share ({GPUMEM} or {GPUMEM_PERCENTAGE}) and keeps "
        f"{GPUCORES} <= 100, so tenants share cards instead of silently taking whole GPUs."
    ),
    validate=validate_gpu_requests_fractional,
    enforcement_level=MANDATORY,
)


# --------------------------------------------------------------------------- 10 no-mock-gpus-in-real


def _stack_mode(args: StackValidationArgs, resources: list[Res], report: ReportViolation) -> str | None:
    configured = policy_config(args, "mode", None)
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
                    f"mode is 'real' but tenant {tenant!r} still runs the mock-GPU agent ({describe(res)}); remove it, "
                    "real GPUs are registered by HAMi's device plugin.",
                    res.urn,
                )
        for tenant, found in sorted(disabled_plugin.items(), key=lambda kv: str(kv[0])):
            for res in found:
                report(
                    f"mode is 'real' but tenant {tenant!r} installs HAMi with devicePlugin.enabled=false "
                    f"({describe(res)}); enable it so real GPUs are registered.",
                    res.urn,
                )
    elif mode == "sim":
        for tenant, found in sorted(real_plugin.items(), key=lambda kv: str(kv[0])):
            for res in found:
                report(
                    f"mode is 'sim' but tenant {tenant!r} installs a real GPU device plugin ({describe(res)}); "
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
    platform = set(policy_config(args, "platformComponents", DEFAULT_PLATFORM_COMPONENTS))
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
            report(f"tenant {tenant!r}: {describe(res)} sets {key}: true.", None)
    for volume in as_list(spec.get("volumes")):
        if isinstance(volume, dict) and volume.get("hostPath") is not None:
            report(f"tenant {tenant!r}: {describe(res)} mounts hostPath volume {volume.get('name')!r}.", None)
    for container in containers(spec):
        context = as_dict(container.get("securityContext"))
        if context.get("privileged") is True:
            report(f"tenant {tenant!r}: {describe(res)} container {container.get('name')!r} is privileged.", None)
        if context.get("allowPrivilegeEscalation") is True and context.get("privileged") is not True:
            report(
                f"tenant {tenant!r}: {describe(res)} container {container.get('name')!r} allows privilege escalation.",
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
