from typing import Any

from gpu_tenancy import hami
from gpu_tenancy.agent import decisions

NODE = "worker-1"
DEVICES = hami.device_inventory("tenant-a", [{"model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920, "count": 1}])
ALLOCATED = "GPU-aaa,NVIDIA,3000,30:;"


def make_node(annotations: dict[str, str] | None = None, capacity: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": NODE, "annotations": annotations}, "status": {"capacity": capacity or {}}}


def make_pod(
    name: str, annotations: dict[str, str] | None, node: str | None = NODE, ns: str = "default"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node} if node else {}
    return {"metadata": {"name": name, "namespace": ns, "annotations": annotations}, "spec": spec}


def hami_bound(node: str = NODE, phase: str = "allocating") -> dict[str, str]:
    return {
        hami.ASSIGNED_NODE_ANNOTATION: node,
        hami.DEVICES_ALLOCATED_ANNOTATION: ALLOCATED,
        hami.DEVICES_TO_ALLOCATE_ANNOTATION: ALLOCATED,
        hami.BIND_PHASE_ANNOTATION: phase,
        "hami.io/bind-time": "1764700000",
    }


def test_fresh_node_gets_annotation_and_capacity() -> None:
    plan = decisions.plan_reconcile(make_node(), [], DEVICES)
    assert plan.node_annotation_patch == {
        "metadata": {"annotations": {hami.NODE_REGISTER_ANNOTATION: hami.register_annotation(DEVICES)}}
    }
    assert plan.node_status_patch == {"status": {"capacity": {hami.RESOURCE_GPU: "10"}}}
    assert plan.pod_actions == []


def test_converged_node_needs_no_patch() -> None:
    node = make_node({hami.NODE_REGISTER_ANNOTATION: hami.register_annotation(DEVICES)}, {hami.RESOURCE_GPU: "10"})
    plan = decisions.plan_reconcile(node, [], DEVICES)
    assert plan.node_annotation_patch is None and plan.node_status_patch is None


def test_owned_new_format_lock_is_released() -> None:
    lock = "2026-12-02T20:00:00Z,default,pod-a"
    plan = decisions.plan_reconcile(
        make_node({hami.NODE_LOCK_ANNOTATION: lock}), [make_pod("pod-a", hami_bound())], DEVICES
    )
    assert plan.pod_actions == [decisions.PodAction("default", "pod-a", True, lock)]


def test_legacy_lock_is_never_released() -> None:
    node = make_node({hami.NODE_LOCK_ANNOTATION: "2026-12-02T20:00:00Z"})
    plan = decisions.plan_reconcile(node, [make_pod("pod-a", hami_bound())], DEVICES)
    assert plan.pod_actions == [decisions.PodAction("default", "pod-a", True, None)]


def test_foreign_lock_is_left_alone() -> None:
    node = make_node({hami.NODE_LOCK_ANNOTATION: "2026-12-02T20:00:00Z,other,pod-a"})
    plan = decisions.plan_reconcile(node, [make_pod("pod-a", hami_bound())], DEVICES)
    assert plan.pod_actions[0].release_lock_value is None


def test_pods_that_are_not_ours_to_finish_are_skipped() -> None:
    lock = "2026-12-02T20:00:00Z,default,failed"
    pods = [
        make_pod("failed", hami_bound(phase="failed")),
        make_pod("done", hami_bound(phase="success")),
        make_pod("other-node", hami_bound(node="worker-2")),
        make_pod("unassigned", {hami.BIND_PHASE_ANNOTATION: "allocating"}),
        make_pod("no-annotations", None),
        make_pod("not-bound-here", hami_bound(), node="worker-2"),
        {"metadata": {}, "spec": {"nodeName": NODE}},
    ]
    plan = decisions.plan_reconcile(make_node({hami.NODE_LOCK_ANNOTATION: lock}), pods, DEVICES)
    assert plan.pod_actions == []


def test_missing_node_fields_are_tolerated() -> None:
    plan = decisions.plan_reconcile({"metadata": {"name": NODE}}, [], DEVICES)
    assert plan.node_status_patch is not None


def test_lock_release_patch_tests_value_first() -> None:
    assert decisions.lock_release_json_patch("t,ns,p") == [
        {"op": "test", "path": "/metadata/annotations/hami.io~1mutex.lock", "value": "t,ns,p"},
        {"op": "remove", "path": "/metadata/annotations/hami.io~1mutex.lock"},
    ]
