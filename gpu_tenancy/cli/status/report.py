"""Live allocation: a tenant's nodes, pods and quotas (plain API JSON) -> gpu_tenancy.hami.allocation views.

Pure functions; `gpu_tenancy.cli.status.kube` reads the objects, `gpu_tenancy.cli.status.command` prints them.
What counts follows HAMi v2.10.0's own accounting (Project-HAMi/HAMi):
- GPUs: the node's `hami.io/node-nvidia-register` annotation, decoded by the same code the mock-GPU agent
  encodes it with (`gpu_tenancy.hami.protocol.parse_register_annotation`; HAMi `device.UnMarshalNodeDevices`, or the
  pre-2.8 CSV form);
- slices: every pod carrying `hami.io/vgpu-node` that is not Succeeded/Failed (pkg/scheduler/scheduler.go
  `onAddPod`/`onUpdatePod`, `util.IsPodInTerminatedState`), its `hami.io/vgpu-devices-allocated` decoded by
  `gpu_tenancy.hami.protocol.parse_devices_allocated` (HAMi `device.DecodePodDevices`). Entries are per container,
  init containers first (pkg/device/devices.go); once every init container has exited 0 their entries no
  longer count (`util.AllInitContainersSucceeded`, `device.AppContainersOnlyDeviceUsage`). Until then
  they are listed as slices of their own, where HAMi counts the peak of init and app use per device
  (`device.CollapseInitContainerUsage`): the sums shown can then exceed HAMi's;
- pending: pods asking for `nvidia.com/*` that no scheduler has placed, with the reason kube-scheduler
  wrote into their PodScheduled condition (for hami-scheduler that embeds HAMi's Fit reasons, e.g.
  `1/1 CardInsufficientMemory`);
- quota: for the keys HAMi enforces itself (`limits.nvidia.com/gpumem`, `limits.nvidia.com/gpucores`:
  pkg/device/quota.go `IsManagedQuota`, limit from `spec.hard`), the used amount is what HAMi's quota manager
  counts, the sum of the namespace's slices (`countPodDevices`): Kubernetes' quota controller leaves them
  out of `status.used` (its pod evaluator tracks extended resources under `requests.` only). Other
  `nvidia.com/` keys (`requests.nvidia.com/gpu`) come from the quota's `status.used`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpu_tenancy.builders.workloads.workload_names import WORKLOAD_LABEL, WORKLOAD_NAMESPACE
from gpu_tenancy.cli.status import pending
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.allocation import AllocationView, GpuView, QuotaUse, Slice, TenantView, Unplaced, quota_sort_key

GPU_RESOURCES = frozenset(
    {hami.RESOURCE_GPU, hami.RESOURCE_GPU_MEMORY, hami.RESOURCE_GPU_MEMORY_PERCENTAGE, hami.RESOURCE_GPU_CORES}
)
TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})
NOT_YET_SCHEDULED = "not scheduled yet (no PodScheduled condition)"
QUOTA_MEMORY = f"limits.{hami.RESOURCE_GPU_MEMORY}"
QUOTA_CORES = f"limits.{hami.RESOURCE_GPU_CORES}"
HAMI_MANAGED_QUOTA = frozenset({QUOTA_MEMORY, QUOTA_CORES})


@dataclass(frozen=True)
class TenantObjects:
    """What the status reader needs from one tenant's API server, as the API returns it (JSON)."""

    nodes: Sequence[Mapping[str, Any]] = ()
    pods: Sequence[Mapping[str, Any]] = ()
    quotas: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    version: str | None = None  # the API server's /version gitVersion, when asked
    readyz: str | None = None  # its /readyz answer ("ok" when ready), when asked


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _metadata(obj).get("annotations") or {}


def pod_label(pod: Mapping[str, Any]) -> str:
    """The pod's name, namespace-qualified outside the workloads namespace."""
    meta = _metadata(pod)
    namespace = meta.get("namespace") or "default"
    name = str(meta.get("name", "?"))
    return name if namespace == WORKLOAD_NAMESPACE else f"{namespace}/{name}"


def workload_of(pod: Mapping[str, Any]) -> str:
    """The program's workload label, else the owning Deployment (ReplicaSet minus its hash), else the pod."""
    meta = _metadata(pod)
    labels = meta.get("labels") or {}
    if labels.get(WORKLOAD_LABEL):
        return str(labels[WORKLOAD_LABEL])
    for owner in meta.get("ownerReferences") or ():
        name = str(owner.get("name", ""))
        template_hash = labels.get("pod-template-hash")
        if owner.get("kind") == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
            return name[: -len(template_hash) - 1]
        if name:
            return name
    return pod_label(pod)


def _containers(pod: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    spec = pod.get("spec") or {}
    return list(spec.get("initContainers") or ()), list(spec.get("containers") or ())


def init_containers_done(pod: Mapping[str, Any]) -> bool:
    """HAMi util.AllInitContainersSucceeded (v2.10.0 pkg/util/util.go): some init container status, and every one
    terminated with exit code 0 (Go's zero value when the field is absent)."""
    statuses = (pod.get("status") or {}).get("initContainerStatuses") or ()
    if not statuses:
        return False
    for status in statuses:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated is None or terminated.get("exitCode", 0) != 0:
            return False
    return True


def asks_for_gpu(pod: Mapping[str, Any]) -> bool:
    init, regular = _containers(pod)
    for container in (*init, *regular):
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            if GPU_RESOURCES & set(resources.get(section) or {}):
                return True
    return False


def is_counted(pod: Mapping[str, Any]) -> bool:
    """HAMi keeps a pod's devices in its usage while it has a node assigned and has not terminated."""
    return hami.ASSIGNED_NODE_ANNOTATION in _annotations(pod) and (pod.get("status") or {}).get(
        "phase"
    ) not in TERMINATED_PHASES


def pending_reason(pod: Mapping[str, Any]) -> str:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            message = str(condition.get("message") or condition.get("reason") or "").strip()
            return " ".join(message.split()) or NOT_YET_SCHEDULED
    return NOT_YET_SCHEDULED


def is_pending(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return (
        status.get("phase", "Pending") == "Pending"
        and not (pod.get("spec") or {}).get("nodeName")
        and hami.ASSIGNED_NODE_ANNOTATION not in _annotations(pod)
        and not _metadata(pod).get("deletionTimestamp")
        and asks_for_gpu(pod)
    )


@dataclass
class _Gpu:
    node: str
    device: Mapping[str, Any]
    slices: list[Slice] = field(default_factory=list)

    def view(self) -> GpuView:
        d = self.device
        return GpuView(
            node=self.node,
            model=str(d.get("type", "?")),
            # Go's encoding/json omits zero values (DeviceInfo `omitempty`): no "index" means index 0.
            index=int(d.get("index", 0)),
            uuid=str(d.get("id", "?")),
            memory_mib=int(d.get("devmem", 0)),
            cores=int(d.get("devcore", 0)),
            split_count=int(d.get("count", 0)),
            slices=tuple(self.slices),
        )


def _register(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    value = _annotations(node).get(hami.NODE_REGISTER_ANNOTATION)
    return hami.parse_register_annotation(value) if value else []


def _pod_slices(pod: Mapping[str, Any], annotations: Mapping[str, str]) -> list[tuple[str, str, Slice]]:
    """(node, uuid, slice) for every device entry of a counted pod."""
    node = annotations[hami.ASSIGNED_NODE_ANNOTATION]
    value = annotations.get(hami.DEVICES_ALLOCATED_ANNOTATION, "")
    spec = pod.get("spec") or {}
    init = spec.get("initContainers") or ()
    workload, label = workload_of(pod), pod_label(pod)
    fields = value[:-2].split(",") if not init and value.endswith(":;") and value.count(":") == 1 else ()
    if len(fields) >= 4:
        # The common case, one container holding one device: `UUID,NVIDIA,<mem>,<cores>:;`, read as
        # hami.parse_devices_allocated reads it, without building its lists (which also words what is wrong).
        uuid, _vendor, memory, cores = fields[:4]
        return [(node, uuid, Slice(workload, label, int(memory), int(cores)))]
    allocated = hami.parse_devices_allocated(value)
    if not init and len(allocated) == 1:  # one container holds the pod's devices
        return [(node, d["uuid"], Slice(workload, label, d["usedmem"], d["usedcores"])) for d in allocated[0]]
    regular = spec.get("containers") or ()
    names = [f"init:{c.get('name', i)}" for i, c in enumerate(init)]
    names += [str(c.get("name", i)) for i, c in enumerate(regular)]
    first = len(init) if init_containers_done(pod) else 0  # finished init containers no longer count
    holders = [(names[i] if i < len(names) else f"#{i}", devices) for i, devices in enumerate(allocated)][first:]
    holders = [(container, devices) for container, devices in holders if devices]
    slices = []
    for container, devices in holders:
        holder = label if len(holders) == 1 and not container.startswith("init:") else f"{label}/{container}"
        slices += [(node, d["uuid"], Slice(workload, holder, d["usedmem"], d["usedcores"])) for d in devices]
    return slices


def _hard(value: Any) -> int:
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    from kubernetes.utils.quantity import parse_quantity  # only for suffixed forms: it is slow to import

    return int(parse_quantity(text))


def _quota_uses(
    quotas: Sequence[Mapping[str, Any]], hami_used: Mapping[str, Mapping[str, int]]
) -> tuple[list[QuotaUse], dict[str, pending.NamespaceQuota]]:
    """`hami_used`: namespace -> HAMi-managed quota key -> what HAMi counts as used there. Also, per
    namespace, the HAMi-managed limits (the tightest when several quotas set one) for the pending pods."""
    uses: list[QuotaUse] = []
    managed: dict[str, dict[str, tuple[int, int]]] = {}
    for quota in quotas:
        meta = _metadata(quota)
        namespace = str(meta.get("namespace", ""))
        hard = (quota.get("spec") or {}).get("hard") or {}
        used = (quota.get("status") or {}).get("used") or {}
        prefix = "" if namespace == WORKLOAD_NAMESPACE else f"{namespace}/{meta.get('name')}: "
        for key in hard:
            if "nvidia.com/" not in key:
                continue
            limit = _hard(hard[key])
            if key in HAMI_MANAGED_QUOTA:
                amount = hami_used.get(namespace, {}).get(key, 0)
                known = managed.setdefault(namespace, {}).get(key)
                if known is None or limit < known[1]:
                    managed[namespace][key] = (amount, limit)
            else:
                amount = _hard(used.get(key, "0"))
            uses.append(QuotaUse(prefix + key, amount, limit))
    uses.sort(key=lambda q: quota_sort_key(q.key))
    limits = {ns: pending.NamespaceQuota(gpumem=keys.get(QUOTA_MEMORY), gpucores=keys.get(QUOTA_CORES))
              for ns, keys in managed.items()}
    return uses, limits


def tenant_view(tenant: str, objects: TenantObjects) -> TenantView:
    """One tenant's GPUs with who holds which slice, what is pending and why, and its quota."""
    gpus: dict[tuple[str, str], _Gpu] = {}
    registered: dict[str, list[dict[str, Any]]] = {}
    for node in sorted(objects.nodes, key=lambda n: str(_metadata(n).get("name", ""))):
        name = str(_metadata(node).get("name", "?"))
        try:
            devices = _register(node)
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"node {name}: unreadable {hami.NODE_REGISTER_ANNOTATION}: {error}") from None
        registered[name] = devices
        for device in devices:
            gpus[(name, str(device.get("id", "?")))] = _Gpu(name, device)
    waiting: list[Mapping[str, Any]] = []
    hami_used: dict[str, dict[str, int]] = {}
    def order(pod: Mapping[str, Any]) -> tuple[str, str]:
        meta = pod.get("metadata") or {}
        return str(meta.get("namespace")), str(meta.get("name"))

    # The API server lists in key order (namespace/name) already; sort only what is not.
    keys = [order(pod) for pod in objects.pods]
    in_order = all(a <= b for a, b in itertools.pairwise(keys))
    pods = objects.pods if in_order else sorted(objects.pods, key=order)
    for pod in pods:
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        phase = (pod.get("status") or {}).get("phase")
        # is_counted, inlined: this loop runs once per pod of every tenant
        if hami.ASSIGNED_NODE_ANNOTATION in annotations and phase not in TERMINATED_PHASES:
            try:
                entries = _pod_slices(pod, annotations)
            except (ValueError, KeyError, TypeError) as error:
                what = hami.DEVICES_ALLOCATED_ANNOTATION
                raise ValueError(f"pod {pod_label(pod)}: unreadable {what}: {error}") from None
            namespace_used = hami_used.setdefault(str(meta.get("namespace")), {QUOTA_MEMORY: 0, QUOTA_CORES: 0})
            for node_name, uuid, piece in entries:
                namespace_used[QUOTA_MEMORY] += piece.memory_mib
                namespace_used[QUOTA_CORES] += piece.cores
                held = gpus.get((node_name, uuid))
                if held is None:  # allocated on a card the node no longer registers
                    unknown = {"id": uuid, "type": "(not registered)", "index": -1}
                    held = gpus[(node_name, uuid)] = _Gpu(node_name, unknown)
                held.slices.append(piece)
        elif is_pending(pod):
            waiting.append(pod)
    ordered = sorted(gpus.values(), key=lambda g: (g.node, int(g.device.get("index", 0)), str(g.device.get("id"))))
    views = tuple(g.view() for g in ordered)
    quota, namespace_quotas = _quota_uses(objects.quotas, hami_used)
    explainer = pending.Explainer(pending.TenantGpus(tenant, registered, views), namespace_quotas)
    unplaced = tuple(
        Unplaced(workload_of(pod), pod_label(pod), pending.clean_scheduler_message(pending_reason(pod)),
                 explainer.explain(pod))
        for pod in waiting
    )
    return TenantView(tenant=tenant, gpus=views, unplaced=unplaced, quota=tuple(quota))


def unreachable(tenant: str, message: str) -> TenantView:
    return TenantView(tenant=tenant, error=" ".join(message.split()))


def live_view(tenants: Iterable[TenantView]) -> AllocationView:
    return AllocationView(source="live", tenants=tuple(sorted(tenants, key=lambda t: t.tenant)))
