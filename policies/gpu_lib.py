"""GPUs as the pack sees them: HAMi's resource names, the mock GPUs' component labels and driver root, the
stack config the engine hands the pack, and a tenant's declared GPUs and workloads as the planner's inputs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from resource_lib import STACK_CONFIG_NAMESPACE

from gpu_tenancy.builders.mock_nvml import nvml_mock
from gpu_tenancy.contract.device_layers import DeviceLayer, find_layer
from gpu_tenancy.hami.protocol import NVIDIA

GPU = NVIDIA.resource_count
GPUMEM = NVIDIA.resource_memory
GPUMEM_PERCENTAGE = NVIDIA.resource_memory_percentage
GPUCORES = NVIDIA.resource_cores

# gpu-tenancy.io/component of the mock-GPU agent's DaemonSet (mode sim) and of the mock NVML's (mode sim-nvml).
MOCK_AGENT_COMPONENT = "mock-gpu-agent"
MOCK_NVML_COMPONENT = nvml_mock.COMPONENT
# Where the mock NVML lays out its driver (libnvidia-ml.so.1, /dev/nvidia*) on each kind worker, i.e. where HAMi's
# device plugin must look in mode sim-nvml (HAMi values devicePlugin.nvidiaDriverRoot): /var/lib/nvml-mock/driver.
MOCK_NVML_DRIVER_ROOT = nvml_mock.DRIVER_ROOT


# --------------------------------------------------------------------------- stack config


def stack_config(key: str) -> Any:
    """A `gpu-tenancy:<key>` stack config value as the engine hands it to the pack (PULUMI_CONFIG)."""
    return stack_config_in(f"{STACK_CONFIG_NAMESPACE}:{key}")


def stack_device_layer() -> DeviceLayer | None:
    """The device layer of the stack config's `gpu-tenancy:mode`; None for a mode no layer registers."""
    return find_layer(stack_config("mode"))


def stack_config_in(full_key: str) -> Any:
    """A stack config value by its namespaced key (`<namespace>:<key>`), JSON-decoded where it is JSON."""
    raw = os.environ.get("PULUMI_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError:
        return None
    value = config.get(full_key) if isinstance(config, dict) else None
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


# --------------------------------------------------------------------------- planner inputs


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _count(value: Any) -> int:
    """A container's GPU count or a workload's replicas: one when unset, as HAMi and a Deployment read them."""
    return 1 if value is None else int(value)


def planner_inputs(
    tenant: str,
    nodes: Sequence[tuple[Any, ...]],
    workloads: Sequence[Mapping[str, Any]],
    quota: Mapping[str, Any] | None,
    split_count: int,
) -> tuple[list[Any], list[Any], Any]:
    """The tenant's declaration (Tenant props / stack config, by alias) as gpu_tenancy.hami.planner.model inputs.

    `nodes` are (node name, the GPU groups on it[, each card's NUMA node or None when unknown, the pods the
    kubelet admits for workloads]). Each node's register is what HAMi's device plugin writes
    for its cards (gpu_tenancy.hami.protocol.device_inventory, memory from the GPU catalogue where the declaration
    leaves it out); fitting itself is left to gpu_tenancy.hami.planner.schedule.plan. Raises ValueError on a malformed
    declaration.
    """
    from gpu_tenancy.hami import gpu_catalogue
    from gpu_tenancy.hami import protocol as hami
    from gpu_tenancy.hami.planner.model import ContainerRequest, Quota, Workload, node_from_register

    try:
        planned_nodes = []
        for node_name, gpus, *known in nodes:
            numa = known[0] if known else None
            max_pods = known[1] if len(known) > 1 and known[1] is not None else None
            groups = [
                {
                    "model": str(g["model"]),
                    "memoryMiB": gpu_catalogue.registered_memory(str(g["model"]), _optional_int(g.get("memoryMiB"))),
                    "count": int(g["count"]),
                }
                for g in gpus
            ]
            key = tenant if len(nodes) == 1 else f"{tenant}/{node_name}"
            devices = hami.device_inventory(key, groups, split_count)
            # Unknown NUMA nodes (no list, or null entries) leave every tie-break possible.
            numas = list(numa) if isinstance(numa, list) and len(numa) == len(devices) else [None] * len(devices)
            devices = [{**d, "numa": None if n is None else int(n)} for d, n in zip(devices, numas, strict=True)]
            planned_nodes.append(
                node_from_register(node_name, devices, tenant, *([int(max_pods)] if max_pods is not None else []))
            )
        planned = [
            Workload(
                name=str(w["name"]),
                containers=tuple(
                    ContainerRequest(
                        gpus=_count(c.get("gpus")),
                        gpumem_mib=_optional_int(c.get("gpumemMiB")),
                        gpumem_percentage=_optional_int(c.get("gpumemPercentage")),
                        # Unset stays unset: HAMi's webhook gives a whole-card request 100 cores.
                        gpucores=_optional_int(c.get("gpucores")),
                    )
                    for c in w.get("containers") or []
                ),
                replicas=_count(w.get("replicas")),
                use_gpu_type=tuple(w.get("useGpuType") or ()),
                nouse_gpu_type=tuple(w.get("noUseGpuType") or ()),
                gpu_scheduler_policy=w.get("gpuSchedulerPolicy") or "spread",
                node_scheduler_policy=w.get("nodeSchedulerPolicy") or "binpack",
                tenant=tenant,
            )
            for w in workloads
        ]
        limits = Quota.from_dict(quota) if quota else None
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"malformed declaration ({type(error).__name__}: {error})") from None
    return planned_nodes, planned, limits
