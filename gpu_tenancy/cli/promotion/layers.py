"""What changes when a stack is promoted from simulated to real GPUs.

Resources are sorted into three layers:
- platform: the management cluster and what runs there for everyone (kind, MetalLB, cert-manager,
  Kamaji, its DataStore). sim and real legitimately differ here (kind vs an existing cluster);
- tenant: each tenant's namespace, control plane, network, HAMi scheduler, workloads and quota.
  Promotion must leave this layer identical;
- device: how GPUs reach a tenant (node containers or SSH-joined hosts, bootstrap tokens, the
  mock-GPU agent or NVIDIA's mock NVML, HAMi's device plugin, kubelet settings for the node runtime,
  inventory checks).

Inputs are plain records (type, name, inputs), so the same code reads mock-recorded resources in
tests and could read a preview's JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpu_tenancy.builders.kube_objects import COMPONENT_LABEL
from gpu_tenancy.contract import chart_lock

PLATFORM = "platform"
TENANT = "tenant"
DEVICE = "device"

_PLATFORM_TYPES = {
    "gpu-tenancy:kind_cluster:KindCluster",
    "gpu-tenancy:metallb:MetalLB",
    "gpu-tenancy:kamaji:Kamaji",
    "kubernetes:kamaji.clastix.io/v1alpha1:DataStore",
    "kubernetes:metallb.io/v1beta1:IPAddressPool",
    "kubernetes:metallb.io/v1beta1:L2Advertisement",
}
_PLATFORM_CHARTS = {"cert-manager", "kamaji", "metallb"}
_DEVICE_TYPE_PREFIXES = ("command:", "docker:", "random:")
_DEVICE_TYPES = {
    "gpu-tenancy:worker:Worker",
    "gpu-tenancy:host_worker:HostWorker",
    "gpu-tenancy:host_identity:HostIdentities",
    "gpu-tenancy:host_fence:HostFences",
    "gpu-tenancy:mock_gpu_agent:MockGpuAgent",
    "gpu-tenancy:mock_nvml:MockNvml",
    "gpu-tenancy:nvml_mock_image:NvmlMockImage",
    "gpu-tenancy:inventory_check:InventoryCheck",
    "gpu-tenancy:bootstrap_token:BootstrapToken",
    "kubernetes:core/v1:Node",
}
_DEVICE_COMPONENTS = {"mock-gpu-agent", "nvml-mock", "worker"}
# Fields of tenant-layer resources that describe the device layer: (type, path).
_DEVICE_FIELDS = (
    ("gpu-tenancy:tenant:Tenant", ("mode",)),
    # Which node holds which card, under the node's name: a kind worker per tenant, or the GPU hosts.
    ("gpu-tenancy:tenant:Tenant", ("gpuNodes",)),
    ("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane", ("spec", "kubernetes", "kubelet")),
    # sim-nvml: the value of its CUDA-control mutation the GPU-access policy lets through, the policy's variable of
    # that name (gpu_tenancy.builders.gpu_access.gpu_access.MARKER_VARIABLE); "@<name>" picks a list entry by name.
    ("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
     ("spec", "variables", "@cudaControlMarker")),
    # sim-nvml: the API server flags its CUDA-control admission policy needs
    # (gpu_tenancy.builders.mock_nvml.cuda_control).
    ("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane", ("spec", "controlPlane", "deployment", "extraArgs")),
    ("kubernetes:helm.sh/v3:Release", ("values", "devicePlugin")),
    # The node-lock timeout depends on who releases HAMi's locks: the device plugin or the mock agent.
    ("kubernetes:helm.sh/v3:Release", ("values", "scheduler", "extender", "extraArgs")),
)


@dataclass(frozen=True)
class Record:
    type: str
    name: str
    inputs: Mapping[str, Any]


@dataclass
class PromotionDiff:
    """Differences per layer, each a readable line."""

    tenant: list[str] = field(default_factory=list)
    device: list[str] = field(default_factory=list)
    platform: list[str] = field(default_factory=list)


# The program names the management cluster, its provider and the kind commands "management*".
_MANAGEMENT_PREFIX = "management"


def layer_of(record: Record) -> str:
    if record.type in _PLATFORM_TYPES or record.name.startswith(_MANAGEMENT_PREFIX):
        return PLATFORM
    chart = chart_lock.chart_name(record.inputs.get("chart"))  # a cached archive's path names its chart
    if record.type == "kubernetes:helm.sh/v3:Release" and chart in _PLATFORM_CHARTS:
        return PLATFORM
    if record.type.startswith(_DEVICE_TYPE_PREFIXES) or record.type in _DEVICE_TYPES:
        return DEVICE
    labels = (record.inputs.get("metadata") or {}).get("labels") or {}
    if isinstance(labels, Mapping) and labels.get(COMPONENT_LABEL) in _DEVICE_COMPONENTS:
        return DEVICE
    return TENANT


def _without(inputs: Mapping[str, Any], path: tuple[str, ...]) -> tuple[dict[str, Any], Any]:
    """A copy of `inputs` without the value at `path` (and parents left empty), and that value."""
    copy: dict[str, Any] = dict(inputs)
    if len(path) == 1:
        return copy, copy.pop(path[0], None)
    child = copy.get(path[0])
    if len(path) == 2 and path[1].startswith("@") and isinstance(child, list):
        name = path[1][1:]
        picked = [entry for entry in child if isinstance(entry, Mapping) and entry.get("name") == name]
        copy[path[0]] = [entry for entry in child if entry not in picked]
        return copy, picked[0] if picked else None
    if not isinstance(child, Mapping):
        return copy, None
    rest, value = _without(child, path[1:])
    if rest:
        copy[path[0]] = rest
    else:
        copy.pop(path[0])
    return copy, value


def _split(record: Record) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tenant-layer inputs and the device-layer fields carved out of them."""
    inputs: dict[str, Any] = dict(record.inputs)
    device: dict[str, Any] = {}
    for typ, path in _DEVICE_FIELDS:
        if record.type == typ:
            inputs, value = _without(inputs, path)
            if value is not None:
                device[".".join(path)] = value
    return inputs, device


def _changes(before: Any, after: Any, path: str = "") -> list[str]:
    """Leaf-level differences between two JSON-like values, as 'path: before -> after'."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        lines: list[str] = []
        for key in sorted(set(before) | set(after), key=str):
            lines += _changes(before.get(key), after.get(key), f"{path}.{key}" if path else str(key))
        return lines
    if before == after:
        return []
    return [f"{path or '(value)'}: {_short(before)} -> {_short(after)}"]


def _short(value: Any, limit: int = 80) -> str:
    text = "(absent)" if value is None else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def promotion_diff(source: Iterable[Record], target: Iterable[Record]) -> PromotionDiff:
    """Compare two renderings of the program (e.g. dev under sim and gpu under real)."""
    diff = PromotionDiff()
    before = {(r.type, r.name): r for r in source}
    after = {(r.type, r.name): r for r in target}
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        record = new or old
        assert record is not None
        label = f"{key[0].split(':')[-1]} {key[1]}"
        layer = layer_of(record)
        out = getattr(diff, layer)
        if old is None or new is None:
            out.append(f"{label}: {'added' if old is None else 'removed'}")
            continue
        old_tenant, old_device = _split(old)
        new_tenant, new_device = _split(new)
        out += [f"{label}: {line}" for line in _changes(old_tenant, new_tenant)]
        diff.device += [f"{label}: {line}" for line in _changes(old_device, new_device)]
    return diff


def format_diff(diff: PromotionDiff) -> str:
    sections = []
    for layer in (TENANT, DEVICE, PLATFORM):
        lines = getattr(diff, layer)
        body = "\n".join(f"  - {line}" for line in lines) if lines else "  (identical)"
        sections.append(f"{layer} layer:\n{body}")
    return "\n".join(sections)
