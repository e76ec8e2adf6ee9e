"""Pure reconcile decisions for the mock GPU agent.

Inputs are plain dicts shaped like Kubernetes JSON (``metadata``/``status``), so
the same code serves the watch loop, the tests and the benchmark.

Handshake: HAMi v2.10.0 ``NvidiaGPUDevices.CheckHealth`` (pkg/device/nvidia/device.go)
still consults ``hami.io/node-handshake`` but keeps the node healthy while
allocatable ``nvidia.com/gpu`` > 0 and re-reads devices when that count or the
register annotation changes (#1879). The scheduler writes ``Requesting_<t>``
itself, so the agent never writes the handshake.

Bind completion mirrors the device plugin's ``PodAllocationSuccess``
(pkg/device-plugin/nvidiadevice/nvinternal/plugin/util.go): patch the pod's
``hami.io/bind-phase`` to ``success``, then release ``hami.io/mutex.lock``
only when the lock value is ``<RFC3339>,<ns>,<pod>`` naming that pod. Unlike
upstream (which releases a legacy ownerless lock for any pod) the agent never
releases a lock that does not name the pod. A pod already in ``success`` whose
lock is still held (the agent stopped between the two writes) gets only the
release. ``failed`` pods, pods on other nodes and pods without HAMi's device
assignment are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_tenancy.hami import protocol as hami


@dataclass(frozen=True)
class PodAction:
    namespace: str
    name: str
    mark_success: bool
    release_lock_value: str | None = None


@dataclass(frozen=True)
class ReconcilePlan:
    node_annotation_patch: dict[str, Any] | None = None
    node_status_patch: dict[str, Any] | None = None
    pod_actions: list[PodAction] = field(default_factory=list)


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def node_patches(
    node: dict[str, Any], desired_devices: list[dict[str, Any]]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Metadata patch and status patch needed to advertise the devices; None when already in place."""
    desired_annotation = hami.register_annotation(desired_devices)
    annotation_patch = None
    if _annotations(node).get(hami.NODE_REGISTER_ANNOTATION) != desired_annotation:
        annotation_patch = {"metadata": {"annotations": {hami.NODE_REGISTER_ANNOTATION: desired_annotation}}}
    desired_slots = str(hami.total_slots(desired_devices))
    capacity = ((node.get("status") or {}).get("capacity")) or {}
    status_patch = None
    if str(capacity.get(hami.RESOURCE_GPU)) != desired_slots:
        status_patch = {"status": {"capacity": {hami.RESOURCE_GPU: desired_slots}}}
    return annotation_patch, status_patch


def is_assigned_to(pod: dict[str, Any], node_name: str) -> bool:
    """HAMi's filter step named this node and wrote the device allocation."""
    annotations = _annotations(pod)
    return annotations.get(hami.ASSIGNED_NODE_ANNOTATION) == node_name and bool(
        annotations.get(hami.DEVICES_ALLOCATED_ANNOTATION)
    )


def pod_action(pod: dict[str, Any], node_name: str, lock_value: str | None) -> PodAction | None:
    """What the fake Allocate does for one pod: success, plus lock release if the lock names it."""
    metadata = pod.get("metadata") or {}
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not namespace or not name:
        return None
    if (pod.get("spec") or {}).get("nodeName") != node_name:
        return None
    if not is_assigned_to(pod, node_name):
        return None
    owns_lock = lock_value is not None and hami.lock_owner(lock_value) == (namespace, name)
    phase = _annotations(pod).get(hami.BIND_PHASE_ANNOTATION)
    if phase == hami.BIND_PHASE_ALLOCATING:
        return PodAction(namespace, name, mark_success=True, release_lock_value=lock_value if owns_lock else None)
    if phase == hami.BIND_PHASE_SUCCESS and owns_lock:
        return PodAction(namespace, name, mark_success=False, release_lock_value=lock_value)
    return None


def plan_reconcile(
    node: dict[str, Any], pods: list[dict[str, Any]], desired_devices: list[dict[str, Any]]
) -> ReconcilePlan:
    node_name = (node.get("metadata") or {}).get("name") or ""
    annotation_patch, status_patch = node_patches(node, desired_devices)
    lock_value = _annotations(node).get(hami.NODE_LOCK_ANNOTATION)
    actions = [action for pod in pods if (action := pod_action(pod, node_name, lock_value)) is not None]
    return ReconcilePlan(annotation_patch, status_patch, actions)


def success_patch() -> dict[str, Any]:
    return {"metadata": {"annotations": {hami.BIND_PHASE_ANNOTATION: hami.BIND_PHASE_SUCCESS}}}


def lock_release_json_patch(lock_value: str) -> list[dict[str, Any]]:
    """JSON patch that removes the lock only if it still holds exactly this value."""
    path = "/metadata/annotations/" + hami.NODE_LOCK_ANNOTATION.replace("~", "~0").replace("/", "~1")
    return [{"op": "test", "path": path, "value": lock_value}, {"op": "remove", "path": path}]
