from typing import Any

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent import decisions

NODE = "worker-1"
# One A100 80GB as HAMi v2.10.0's device plugin registers it (register.go getAPIDevices: NVML's name and MiB,
# deviceSplitCount 10, 100 cores, hami-core); the agent is handed this inventory and writes it back.
DEVICES = [
    {"id": "GPU-8410f28c-b427-57c7-8e3c-84238d86026d", "index": 0, "count": 10, "devmem": 81920, "devcore": 100,
     "type": "NVIDIA A100-SXM4-80GB", "numa": 0, "mode": "hami-core", "health": True}
]
# What the register annotation must then read: the JSON DeviceInfo list HAMi >= 2.8 decodes, fields in
# DeviceInfo's order (pkg/device/devices.go), compact. Written out, not encoded by the code under test.
REGISTERED = (
    '[{"id":"GPU-8410f28c-b427-57c7-8e3c-84238d86026d","index":0,"count":10,"devmem":81920,"devcore":100,'
    '"type":"NVIDIA A100-SXM4-80GB","numa":0,"mode":"hami-core","health":true}]'
)
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
        "metadata": {"annotations": {hami.NODE_REGISTER_ANNOTATION: REGISTERED}}
    }
    assert plan.node_status_patch == {"status": {"capacity": {hami.RESOURCE_GPU: "10"}}}
    assert plan.pod_actions == []


def test_converged_node_needs_no_patch() -> None:
    node = make_node({hami.NODE_REGISTER_ANNOTATION: REGISTERED}, {hami.RESOURCE_GPU: "10"})
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


def test_success_pod_still_holding_its_lock_gets_only_the_release() -> None:
    # The agent (or the API) stopped between the success patch and the release: finish the release.
    lock = "2026-12-02T20:00:00Z,default,pod-a"
    plan = decisions.plan_reconcile(
        make_node({hami.NODE_LOCK_ANNOTATION: lock}), [make_pod("pod-a", hami_bound(phase="success"))], DEVICES
    )
    assert plan.pod_actions == [decisions.PodAction("default", "pod-a", False, lock)]


def test_success_pod_without_the_lock_is_left_alone() -> None:
    lock = "2026-12-02T20:00:00Z,default,pod-b"
    pods = [make_pod("pod-a", hami_bound(phase="success")), make_pod("pod-b", hami_bound(phase="allocating"))]
    plan = decisions.plan_reconcile(make_node({hami.NODE_LOCK_ANNOTATION: lock}), pods, DEVICES)
    assert plan.pod_actions == [decisions.PodAction("default", "pod-b", True, lock)]


def test_failed_pod_keeps_its_lock_and_phase() -> None:
    lock = "2026-12-02T20:00:00Z,default,pod-a"
    plan = decisions.plan_reconcile(
        make_node({hami.NODE_LOCK_ANNOTATION: lock}), [make_pod("pod-a", hami_bound(phase="failed"))], DEVICES
    )
    assert plan.pod_actions == []


def test_lock_naming_same_pod_in_another_namespace_is_not_released() -> None:
    node = make_node({hami.NODE_LOCK_ANNOTATION: "2026-12-02T20:00:00Z,team,pod-a"})
    plan = decisions.plan_reconcile(node, [make_pod("pod-a", hami_bound(), ns="default")], DEVICES)
    assert plan.pod_actions == [decisions.PodAction("default", "pod-a", True, None)]


def test_malformed_lock_is_never_released() -> None:
    # HAMi's ParseNodeLock rejects anything but one or three comma-separated parts.
    for lock in ["2026-12-02T20:00:00Z,default,pod-a,extra", "2026-12-02T20:00:00Z,default", "default,pod-a"]:
        plan = decisions.plan_reconcile(
            make_node({hami.NODE_LOCK_ANNOTATION: lock}), [make_pod("pod-a", hami_bound())], DEVICES
        )
        assert plan.pod_actions[0].release_lock_value is None, lock


def test_allocating_pod_with_empty_device_assignment_is_not_marked() -> None:
    annotations = hami_bound() | {hami.DEVICES_ALLOCATED_ANNOTATION: ""}
    lock = "2026-12-02T20:00:00Z,default,pod-a"
    plan = decisions.plan_reconcile(
        make_node({hami.NODE_LOCK_ANNOTATION: lock}), [make_pod("pod-a", annotations)], DEVICES
    )
    assert plan.pod_actions == []


def test_capacity_drift_and_kubelet_reset_are_reasserted() -> None:
    register = {hami.NODE_REGISTER_ANNOTATION: REGISTERED}
    # kubelet zeroes extended resources it does not serve when it re-registers the node.
    for capacity in [{hami.RESOURCE_GPU: "0"}, {hami.RESOURCE_GPU: "3"}, {"cpu": "8"}]:
        plan = decisions.plan_reconcile(make_node(register, capacity), [], DEVICES)
        assert plan.node_status_patch == {"status": {"capacity": {hami.RESOURCE_GPU: "10"}}}, capacity
        assert plan.node_annotation_patch is None


def test_register_annotation_drift_is_reasserted() -> None:
    stale = REGISTERED.replace('"health":true', '"health":false')
    for value in [stale, "GPU-a,10,81920,100,NVIDIA-A100,0,true:", ""]:
        plan = decisions.plan_reconcile(
            make_node({hami.NODE_REGISTER_ANNOTATION: value}, {hami.RESOURCE_GPU: "10"}), [], DEVICES
        )
        assert plan.node_annotation_patch == {
            "metadata": {"annotations": {hami.NODE_REGISTER_ANNOTATION: REGISTERED}}
        }


def test_handshake_is_left_to_the_scheduler() -> None:
    # v2.10 CheckHealth tolerates an expired `Requesting_` handshake while allocatable nvidia.com/gpu > 0.
    node = make_node(
        {
            hami.NODE_REGISTER_ANNOTATION: REGISTERED,
            hami.NODE_HANDSHAKE_ANNOTATION: "Requesting_2026-12-01 10:00:00",
        },
        {hami.RESOURCE_GPU: "10"},
    )
    plan = decisions.plan_reconcile(node, [], DEVICES)
    assert plan == decisions.ReconcilePlan()


def test_lock_release_patch_tests_value_first() -> None:
    assert decisions.lock_release_json_patch("t,ns,p") == [
        {"op": "test", "path": "/metadata/annotations/hami.io~1mutex.lock", "value": "t,ns,p"},
        {"op": "remove", "path": "/metadata/annotations/hami.io~1mutex.lock"},
    ]


def test_a_pod_missing_its_namespace_or_its_name_gets_no_action() -> None:
    lock = "2026-12-02T20:00:00Z,default,pod-a"
    for metadata in ({"name": "pod-a"}, {"namespace": "default"}):
        pod = {"metadata": {**metadata, "annotations": hami_bound()}, "spec": {"nodeName": NODE}}
        plan = decisions.plan_reconcile(make_node({hami.NODE_LOCK_ANNOTATION: lock}), [pod], DEVICES)
        assert plan.pod_actions == [], metadata
