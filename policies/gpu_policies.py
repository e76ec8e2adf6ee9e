"""Safe GPU use: fractional requests, no simulated GPUs on real stacks, unprivileged workloads, plans that fit.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpu_lib import (
    GPU,
    GPUCORES,
    GPUMEM,
    GPUMEM_PERCENTAGE,
    MOCK_AGENT_COMPONENT,
    MOCK_NVML_COMPONENT,
    MOCK_NVML_DRIVER_ROOT,
    stack_config,
)
from pod_lib import chart_name, containers, pod_spec
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
    HELM_TYPES,
    MOCK_AGENT_TYPE,
    MOCK_NVML_TYPE,
    STACK_TYPE,
    TENANT_TYPE,
    Res,
    from_policy_resources,
    from_resource_args,
)
from tenancy_lib import COMPONENT_LABEL, ancestor_tenant, resource_tenant, tenant_component_name
from value_lib import as_dict, as_list, contains_unknown, dig, is_unknown, known_str, quantity

from gpu_tenancy.contract.device_layers import LAYERS, find_layer
from gpu_tenancy.hami.protocol import NVIDIA

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
    if configured in LAYERS:
        return str(configured)
    modes: dict[str, list[str]] = defaultdict(list)
    for res in resources:
        if res.type in (TENANT_TYPE, STACK_TYPE):
            mode = known_str(res.props.get("mode"))
            if mode:
                modes[mode].append(res.name)
    if len(modes) > 1:
        found = "; ".join(f"{mode}: {', '.join(sorted(names))}" for mode, names in sorted(modes.items()))
        report(f"the stack mixes modes: {found}", None)
        return None
    if modes:
        return next(iter(modes))
    return known_str(stack_config("mode"))  # a mode the pack does not know is checked as no mode


def _is_hami(release: Res) -> bool:
    return chart_name(release.props.get("chart")) == "hami"


def _device_plugin_enabled(release: Res) -> bool | None:
    """HAMi's devicePlugin.enabled (the chart enables it unless told otherwise); None if not HAMi or unknown."""
    if not _is_hami(release):
        return None
    enabled = dig(release.props, "values", "devicePlugin", "enabled", default=True)
    return None if is_unknown(enabled) else bool(enabled)


def _driver_root(release: Res) -> Any:
    """HAMi's devicePlugin.nvidiaDriverRoot: a string, None if unset (the chart default, host `/`), or UNKNOWN."""
    return dig(release.props, "values", "devicePlugin", "nvidiaDriverRoot")


def _is_mock_driver_root(root: Any) -> bool:
    root = known_str(root)
    return root is not None and posixpath.normpath(root) == MOCK_NVML_DRIVER_ROOT


_REAL_PLUGIN_CHARTS = ("nvidia-device-plugin", "gpu-operator")


@dataclass
class _GpuProviders:
    """What registers a tenant's GPUs, by tenant (None: a resource no tenant owns)."""

    agent: dict[str | None, list[Res]] = field(default_factory=lambda: defaultdict(list))
    nvml: dict[str | None, list[Res]] = field(default_factory=lambda: defaultdict(list))
    # Tenants with a DaemonSet that may be a mock NVML: its component label is not known yet (preview).
    maybe_nvml: set[str | None] = field(default_factory=set)
    hami: dict[str | None, list[Res]] = field(default_factory=lambda: defaultdict(list))
    real_chart: dict[str | None, list[Res]] = field(default_factory=lambda: defaultdict(list))

    def plugin_on(self) -> dict[str | None, list[Res]]:
        """HAMi releases with their device plugin enabled, and real plugin charts: a real device plugin each."""
        found: dict[str | None, list[Res]] = defaultdict(list)
        for tenant, releases in self.hami.items():
            found[tenant].extend(r for r in releases if _device_plugin_enabled(r) is True)
        for tenant, releases in self.real_chart.items():
            found[tenant].extend(releases)
        return {tenant: releases for tenant, releases in found.items() if releases}


def _gpu_providers(resources: list[Res]) -> _GpuProviders:
    found = _GpuProviders()
    for res in resources:
        tenant = ancestor_tenant(res) or resource_tenant(res)
        if res.type == MOCK_AGENT_TYPE:
            found.agent[tenant].append(res)
        elif res.type == MOCK_NVML_TYPE:
            found.nvml[tenant].append(res)
        elif res.is_kubernetes and res.kind == "DaemonSet":
            component = dig(res.props, "metadata", "labels", COMPONENT_LABEL)
            if component == MOCK_AGENT_COMPONENT:
                found.agent[tenant].append(res)
            elif component == MOCK_NVML_COMPONENT:
                found.nvml[tenant].append(res)
            elif res.unread or is_unknown(component):
                found.maybe_nvml.add(tenant)
        elif res.type in HELM_TYPES:
            if _is_hami(res):
                found.hami[tenant].append(res)
            elif chart_name(res.props.get("chart")) in _REAL_PLUGIN_CHARTS:
                found.real_chart[tenant].append(res)
    return found


def _whose(tenant: str | None) -> str:
    """Who runs a resource, in a message: its tenant, or the stack itself for what no tenant owns."""
    return "the stack, outside any tenant," if tenant is None else f"tenant {tenant!r}"


def _each(found: dict[str | None, list[Res]]) -> list[tuple[str | None, Res]]:
    return [(tenant, res) for tenant, group in sorted(found.items(), key=lambda kv: str(kv[0])) for res in group]


def _check_real(mode: str, found: _GpuProviders, report: ReportViolation) -> None:
    for tenant, res in _each(found.agent):
        report(
            f"mode is {mode!r} but {_whose(tenant)} still runs the mock-GPU agent ({describe(res)}); remove it, "
            "real GPUs are registered by HAMi's device plugin.",
            res.urn,
        )
    for tenant, res in _each(found.nvml):
        report(
            f"mode is {mode!r} but {_whose(tenant)} runs NVIDIA's mock NVML ({describe(res)}); remove it, real GPUs "
            "must not be faked: HAMi's device plugin reads the host's own driver.",
            res.urn,
        )
    for tenant, res in _each(found.hami):
        enabled = _device_plugin_enabled(res)
        if enabled is False:
            report(
                f"mode is {mode!r} but {_whose(tenant)} installs HAMi with devicePlugin.enabled=false "
                f"({describe(res)}); enable it so real GPUs are registered.",
                res.urn,
            )
        elif _is_mock_driver_root(_driver_root(res)):
            report(
                f"mode is {mode!r} but {_whose(tenant)} points HAMi's device plugin at the mock NVML "
                f"(devicePlugin.nvidiaDriverRoot={_driver_root(res)!r}, {describe(res)}); unset it (or name the "
                "real driver's root) so the plugin reads the host's real GPUs.",
                res.urn,
            )


def _check_sim(mode: str, found: _GpuProviders, report: ReportViolation) -> None:
    for tenant, res in _each(found.plugin_on()):
        report(
            f"mode is {mode!r} but {_whose(tenant)} installs a real GPU device plugin ({describe(res)}); "
            "set HAMi devicePlugin.enabled=false, the mock-GPU agent simulates the devices.",
            res.urn,
        )
    for tenant, res in _each(found.nvml):
        report(
            f"mode is {mode!r} but {_whose(tenant)} runs NVIDIA's mock NVML ({describe(res)}); remove it, the "
            "mock-GPU agent registers sim's GPUs and the two would register them twice (HAMi's device plugin on "
            "the mock NVML is mode 'sim-nvml').",
            res.urn,
        )


def _check_sim_nvml(mode: str, found: _GpuProviders, report: ReportViolation) -> None:
    root = MOCK_NVML_DRIVER_ROOT
    for tenant, res in _each(found.agent):
        report(
            f"mode is {mode!r} but {_whose(tenant)} runs the mock-GPU agent ({describe(res)}); remove it, "
            f"HAMi's device plugin registers the mock NVML's GPUs and both would write {NVIDIA.register_annotation}.",
            res.urn,
        )
    for tenant, res in _each(found.real_chart):
        report(
            f"mode is {mode!r} but {_whose(tenant)} installs a real GPU device plugin ({describe(res)}); remove "
            "it, there are no real GPUs: HAMi's own device plugin registers the mock NVML's.",
            res.urn,
        )
    for tenant, res in _each(found.hami):
        enabled = _device_plugin_enabled(res)
        if enabled is None:
            continue  # not known yet (preview)
        if enabled is False:
            report(
                f"mode is {mode!r} but {_whose(tenant)} installs HAMi with devicePlugin.enabled=false "
                f"({describe(res)}); enable it, in this mode HAMi's own device plugin registers the mock NVML's GPUs.",
                res.urn,
            )
            continue
        driver_root = _driver_root(res)
        if not is_unknown(driver_root) and not _is_mock_driver_root(driver_root):
            if driver_root is None:
                setting, where = "without devicePlugin.nvidiaDriverRoot", "at '/'"
            else:
                setting, where = f"with devicePlugin.nvidiaDriverRoot={driver_root!r}", "there"
            report(
                f"mode is {mode!r} but {_whose(tenant)} runs HAMi's device plugin {setting} ({describe(res)}); "
                f"set it to {root!r}, the mock NVML's driver root, else the plugin looks for a real driver {where} "
                "and panics.",
                res.urn,
            )
        if tenant not in found.nvml and tenant not in found.maybe_nvml:
            report(
                f"mode is {mode!r} but {_whose(tenant)} runs HAMi's device plugin ({describe(res)}) with no mock "
                f"NVML ({MOCK_NVML_TYPE}, or a DaemonSet labelled {COMPONENT_LABEL}={MOCK_NVML_COMPONENT}); add one, "
                f"else the plugin finds no NVML library under {root!r} and registers no GPUs.",
                res.urn,
            )


def _check_unknown_mode(found: _GpuProviders, report: ReportViolation) -> None:
    plugin_on = found.plugin_on()
    for tenant in sorted(set(found.agent) & set(plugin_on), key=str):
        report(
            f"{_whose(tenant)} runs both the mock-GPU agent and a real device plugin; pick one "
            "(gpu-tenancy:mode sim or real).",
            found.agent[tenant][0].urn,
        )
    for tenant in sorted(set(found.agent) & set(found.nvml), key=str):
        report(
            f"{_whose(tenant)} runs both the mock-GPU agent and the mock NVML ({describe(found.nvml[tenant][0])}), "
            "which would register its GPUs twice; pick one (gpu-tenancy:mode sim or sim-nvml).",
            found.agent[tenant][0].urn,
        )


def validate_no_mock_gpus_in_real(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    mode = _stack_mode(args, resources, report)
    found = _gpu_providers(resources)
    layer = find_layer(mode)
    if layer is None:
        _check_unknown_mode(found, report)
    elif layer.registrar in _CHECKS_BY_REGISTRAR:
        _CHECKS_BY_REGISTRAR[layer.registrar](layer.mode, found, report)
    else:
        report(f"mode {mode!r}: this pack has no check for what registers its GPUs ({layer.registrar!r}); "
               "teach policies/gpu_policies.py that device layer before deploying it.", None)


# What may register a tenant's GPUs, by the device layer's registrar (gpu_tenancy/contract/device_layers).
_CHECKS_BY_REGISTRAR = {"nvidia": _check_real, "mock-agent": _check_sim, "nvml-mock": _check_sim_nvml}


no_mock_gpus_in_real = StackValidationPolicy(
    name="no-mock-gpus-in-real",
    description=(
        "In mode 'real' no GPU is faked: no mock-GPU agent, no mock NVML, HAMi's device plugin enabled and not "
        "pointed at the mock's driver root. In mode 'sim' no real device plugin and no mock NVML (the agent "
        "registers the devices). In mode 'sim-nvml' no agent and no real plugin chart; HAMi's device plugin is "
        f"enabled with devicePlugin.nvidiaDriverRoot={MOCK_NVML_DRIVER_ROOT} and every tenant running it has a mock "
        "NVML. The mode is this policy's `mode` setting, else the Tenant components' or the stack's `mode` output, "
        "else the stack config gpu-tenancy:mode."
    ),
    validate=validate_no_mock_gpus_in_real,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "mode": {
                "type": "string",
                "enum": list(LAYERS),
                "description": "Force the mode to check against (default: read from the stack).",
            }
        }
    ),
)
