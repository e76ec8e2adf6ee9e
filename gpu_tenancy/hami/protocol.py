"""HAMi 2.10 node/pod protocol helpers: the GPU vendor's names, annotation keys and codecs.

The vendor's resource names, annotations and device type are defined here once (`NVIDIA`), and every other
module takes them from here. This module is also copied alone into the mock-GPU agent's image, so it imports
nothing from this repository. Pure functions only; nothing here talks to Kubernetes or imports Pulumi.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuVendor:
    """What HAMi v2.10.0 names after one GPU vendor: its resources, annotations and device type.

    Attributes:
        device_type: the vendor's device type (pkg/device/nvidia/device.go `NvidiaGPUDevice`, its
            `CommonWord`): a container's request type, the prefix the device plugin gives a registered type
            (plugin/register.go `getAPIDevices`), and, lower-cased, what a registered type must contain for
            the scheduler to consider the card (pkg/scheduler/score.go `getNodeResources`).
        resource_count, resource_memory, resource_memory_percentage, resource_cores: the container resources
            (pkg/scheduler/config/config.go `InitDefaultDevices` resourceCountName, resourceMemoryName,
            resourceMemoryPercentageName, resourceCoreName; chart values resourceName, resourceMem,
            resourceMemPercentage, resourceCores).
        use_type_annotation, nouse_type_annotation: the pod annotations that pick or exclude card types
            (device.go `GPUInUse`, `GPUNoUse`).
        register_annotation: the node annotation the device plugin writes its cards to (device.go
            `RegisterAnnos`, written by plugin/register.go).
        handshake_annotation: the node annotation of the scheduler/device-plugin handshake (device.go
            `HandshakeAnnos`, `util.HandshakeAnnos[NvidiaGPUDevice]` in `InitNvidiaDevice`).
        devices_to_allocate_annotation, devices_allocated_annotation: the pod annotations of an allocation
            (`device.InRequestDevices` and `device.SupportDevices` for `NvidiaGPUDevice` in `InitNvidiaDevice`).
        runtime_handler: the container runtime handler of the chart's RuntimeClass
            (charts/hami/templates/device-plugin/runtime-class.yaml `handler`).
    """

    device_type: str
    resource_count: str
    resource_memory: str
    resource_memory_percentage: str
    resource_cores: str
    use_type_annotation: str
    nouse_type_annotation: str
    register_annotation: str
    handshake_annotation: str
    devices_to_allocate_annotation: str
    devices_allocated_annotation: str
    runtime_handler: str

    @property
    def request_resources(self) -> tuple[str, str, str, str]:
        """Each resource that makes a container a GPU container to HAMi's webhook (device.go
        `mutateContainerResource`: the count, or memory, percentage or cores with a default count)."""
        return self.resource_count, self.resource_memory, self.resource_memory_percentage, self.resource_cores

    @property
    def quota_keys(self) -> tuple[str, str, str]:
        """The stack config's quota keys, `limits.` and the count, memory and cores resource. HAMi's quota
        manager keeps `limits.<memory>` and `limits.<cores>` (pkg/device/quota.go `managedQuotaName`)."""
        return f"limits.{self.resource_count}", f"limits.{self.resource_memory}", f"limits.{self.resource_cores}"


NVIDIA = GpuVendor(
    device_type="NVIDIA",
    resource_count="nvidia.com/gpu",
    resource_memory="nvidia.com/gpumem",
    resource_memory_percentage="nvidia.com/gpumem-percentage",
    resource_cores="nvidia.com/gpucores",
    use_type_annotation="nvidia.com/use-gputype",
    nouse_type_annotation="nvidia.com/nouse-gputype",
    register_annotation="hami.io/node-nvidia-register",
    handshake_annotation="hami.io/node-handshake",
    devices_to_allocate_annotation="hami.io/vgpu-devices-to-allocate",
    devices_allocated_annotation="hami.io/vgpu-devices-allocated",
    runtime_handler="nvidia",
)

NODE_REGISTER_ANNOTATION = NVIDIA.register_annotation
NODE_HANDSHAKE_ANNOTATION = NVIDIA.handshake_annotation
# One node lock for every vendor (pkg/util/nodelock/nodelock.go `NodeLockKey`).
NODE_LOCK_ANNOTATION = "hami.io/mutex.lock"
BIND_PHASE_ANNOTATION = "hami.io/bind-phase"
ASSIGNED_NODE_ANNOTATION = "hami.io/vgpu-node"
DEVICES_ALLOCATED_ANNOTATION = NVIDIA.devices_allocated_annotation
DEVICES_TO_ALLOCATE_ANNOTATION = NVIDIA.devices_to_allocate_annotation

BIND_PHASE_ALLOCATING = "allocating"
BIND_PHASE_SUCCESS = "success"
BIND_PHASE_FAILED = "failed"

RESOURCE_GPU = NVIDIA.resource_count
RESOURCE_GPU_MEMORY = NVIDIA.resource_memory
RESOURCE_GPU_MEMORY_PERCENTAGE = NVIDIA.resource_memory_percentage
RESOURCE_GPU_CORES = NVIDIA.resource_cores

DEVICE_VENDOR = NVIDIA.device_type
DEFAULT_SPLIT_COUNT = 10
FULL_DEVICE_CORES = 100

_DEVICE_ID_NAMESPACE = uuid.UUID("6f1c2a52-5b0e-4d8e-9a57-7f3b8f1b2c10")
_REGISTER_FIELD_ORDER = ("id", "index", "count", "devmem", "devcore", "type", "numa", "mode", "health")


def device_id(tenant: str, index: int) -> str:
    """Stable fake GPU UUID for the index-th GPU of a tenant."""
    return f"GPU-{uuid.uuid5(_DEVICE_ID_NAMESPACE, f'{tenant}/{index}')}"


def device_type(nvml_name: str) -> str:
    """The type HAMi's device plugin registers for a card NVML names `nvml_name`: kept when it starts with
    "NVIDIA", else prefixed "NVIDIA-" (register.go `getAPIDevices`). The scheduler only considers devices
    whose type contains "NVIDIA" (score.go getNodeResources), so the prefix is what makes "Tesla T4" count."""
    return nvml_name if nvml_name.startswith(DEVICE_VENDOR) else f"{DEVICE_VENDOR}-{nvml_name}"


def device_inventory(
    tenant: str, gpus: list[dict[str, Any]], split_count: int = DEFAULT_SPLIT_COUNT
) -> list[dict[str, Any]]:
    """What HAMi's device plugin registers for a node with these cards, one entry per physical GPU.

    `gpus` are stack-config GPU groups as the config resolves them (`model`: NVML's name, `memoryMiB`: NVML's
    total, `count`). Each entry is a `DeviceInfo` as register.go `getAPIDevices` fills it: the NVML name as
    `device_type` writes it, NVML's MiB (deviceMemoryScaling 1), the chart's deviceSplitCount, 100 cores
    (deviceCoreScaling 1), NUMA 0, mode hami-core, healthy; ids are stable per `tenant` and index.
    """
    if split_count < 1:
        raise ValueError("split_count must be at least 1")
    devices: list[dict[str, Any]] = []
    for group in gpus:
        model = str(group["model"])
        memory_mib = int(group["memoryMiB"])
        count = int(group["count"])
        if not model or memory_mib <= 0 or count < 0:
            raise ValueError(f"invalid GPU group {group!r}")
        for _ in range(count):
            index = len(devices)
            devices.append(
                {
                    "id": device_id(tenant, index),
                    "index": index,
                    "count": split_count,
                    "devmem": memory_mib,
                    "devcore": FULL_DEVICE_CORES,
                    "type": device_type(model),
                    "numa": 0,
                    "mode": "hami-core",
                    "health": True,
                }
            )
    return devices


def total_slots(devices: list[dict[str, Any]]) -> int:
    """Value for node capacity nvidia.com/gpu: the sum of every device's split count."""
    return sum(int(device["count"]) for device in devices)


def register_annotation(devices: list[dict[str, Any]]) -> str:
    """Encode devices as the compact JSON list HAMi >= 2.8 decodes."""
    ordered = [{field: device[field] for field in _REGISTER_FIELD_ORDER if field in device} for device in devices]
    return json.dumps(ordered, separators=(",", ":"))


def _parse_bool(text: str) -> bool:
    return text.strip().lower() == "true"


def _parse_legacy_register(value: str) -> list[dict[str, Any]]:
    devices: list[dict[str, Any]] = []
    for entry in value.split(":"):
        if not entry.strip():
            continue
        fields = entry.split(",")
        if len(fields) < 7:
            raise ValueError(f"legacy register entry has {len(fields)} fields, expected at least 7: {entry!r}")
        device: dict[str, Any] = {
            "id": fields[0],
            "count": int(fields[1]),
            "devmem": int(fields[2]),
            "devcore": int(fields[3]),
            "type": fields[4],
            "numa": int(fields[5]),
            "health": _parse_bool(fields[6]),
        }
        if len(fields) > 7 and fields[7]:
            device["index"] = int(fields[7])
        if len(fields) > 8 and fields[8]:
            device["mode"] = fields[8]
        devices.append(device)
    return devices


def parse_register_annotation(value: str) -> list[dict[str, Any]]:
    """Decode a register annotation: JSON (HAMi >= 2.8) or the pre-2.8 CSV form."""
    stripped = value.strip()
    if not stripped:
        return []
    if stripped.startswith("["):
        decoded = json.loads(stripped)
        if not isinstance(decoded, list) or not all(isinstance(item, dict) for item in decoded):
            raise ValueError("register annotation JSON must be a list of objects")
        # health is omitempty upstream, so a missing field means unhealthy.
        return [{**item, "health": bool(item.get("health", False))} for item in decoded]
    return _parse_legacy_register(stripped)


def parse_lock(value: str) -> tuple[str, str | None, str | None]:
    """Split a node lock into (timestamp, namespace, pod), as HAMi's ``nodelock.ParseNodeLock`` does.

    ``<RFC3339>,<ns>,<pod>`` names its owner; the legacy bare timestamp (no comma) has none. Any other
    comma count is malformed upstream, so it names no owner here either.
    """
    if "," not in value:
        return value, None, None
    parts = value.split(",")
    if len(parts) != 3:
        return value, None, None
    return parts[0], parts[1], parts[2]


def lock_owner(value: str | None) -> tuple[str, str] | None:
    """(namespace, pod) that holds the lock, or None when it is absent, legacy or malformed."""
    if not value:
        return None
    _, namespace, pod = parse_lock(value)
    if not namespace or not pod:
        return None
    return namespace, pod


def parse_devices_allocated(value: str) -> list[list[dict[str, Any]]]:
    """Decode `UUID,NVIDIA,<mem>,<cores>:` per device, `;` per container."""
    containers: list[list[dict[str, Any]]] = []
    if not value:
        return containers
    container_chunks = value.split(";")
    if container_chunks and container_chunks[-1] == "":
        container_chunks.pop()
    for chunk in container_chunks:
        devices: list[dict[str, Any]] = []
        for entry in chunk.split(":"):
            if not entry:
                continue
            fields = entry.split(",")
            if len(fields) < 4:
                raise ValueError(f"allocated device entry needs 4 fields: {entry!r}")
            devices.append(
                {"uuid": fields[0], "type": fields[1], "usedmem": int(fields[2]), "usedcores": int(fields[3])}
            )
        containers.append(devices)
    return containers
