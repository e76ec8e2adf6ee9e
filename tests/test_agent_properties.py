from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent import decisions

NODES = st.sampled_from(["n1", "n2"])
NAMES = st.sampled_from(["a", "b", "c"])
NAMESPACES = st.sampled_from(["default", "team"])
PHASES = st.sampled_from([None, "allocating", "success", "failed", ""])
locks = st.one_of(
    st.none(),
    st.just("2026-12-02T20:00:00Z"),
    st.builds(lambda ns, pod: f"2026-12-02T20:00:00Z,{ns},{pod}", NAMESPACES, NAMES),
    st.builds(lambda ns, pod: f"2026-12-02T20:00:00Z,{ns},{pod},x", NAMESPACES, NAMES),
    st.text(max_size=20),
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if (phase := draw(PHASES)) is not None:
        annotations[hami.BIND_PHASE_ANNOTATION] = phase
    if draw(st.booleans()):
        annotations[hami.ASSIGNED_NODE_ANNOTATION] = draw(NODES)
    if draw(st.booleans()):
        annotations[hami.DEVICES_ALLOCATED_ANNOTATION] = draw(st.sampled_from(["", "GPU-x,NVIDIA,1,1:;"]))
    spec = {"nodeName": draw(NODES)} if draw(st.booleans()) else {}
    return {"metadata": {"name": draw(NAMES), "namespace": draw(NAMESPACES), "annotations": annotations}, "spec": spec}


@given(node_name=NODES, lock=locks, pod_list=st.lists(pods(), max_size=8))
def test_agent_only_finishes_own_assigned_pods_and_own_lock(
    node_name: str, lock: str | None, pod_list: list[dict[str, Any]]
) -> None:
    by_key = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pod_list}
    # Two pods cannot share a namespace/name in a cluster; such lists are not valid inputs.
    assume(len(by_key) == len(pod_list))
    annotations = {hami.NODE_LOCK_ANNOTATION: lock} if lock is not None else {}
    node = {"metadata": {"name": node_name, "annotations": annotations}}
    plan = decisions.plan_reconcile(node, pod_list, [])
    releases = [action for action in plan.pod_actions if action.release_lock_value is not None]
    assert len(releases) <= 1, "at most one pod can own the node lock"
    for action in plan.pod_actions:
        pod = by_key[(action.namespace, action.name)]
        pod_annotations = pod["metadata"]["annotations"]
        phase = pod_annotations.get(hami.BIND_PHASE_ANNOTATION)
        # Never an unassigned pod, a pod on another node, or a failed pod.
        assert pod["spec"].get("nodeName") == node_name
        assert pod_annotations.get(hami.ASSIGNED_NODE_ANNOTATION) == node_name
        assert pod_annotations.get(hami.DEVICES_ALLOCATED_ANNOTATION)
        assert phase in ("allocating", "success")
        assert action.mark_success == (phase == "allocating")
        if action.release_lock_value is not None:
            # Never a lock the pod does not own: the exact current value, naming this pod.
            assert action.release_lock_value == lock
            assert lock == f"{lock.split(',')[0]},{action.namespace},{action.name}"


@given(
    node_name=NODES,
    owner=st.tuples(NAMESPACES, NAMES),
    phase=st.sampled_from(["allocating", "success"]),
    others=st.lists(pods(), max_size=6),
)
def test_owned_lock_of_an_assigned_pod_is_always_released(
    node_name: str, owner: tuple[str, str], phase: str, others: list[dict[str, Any]]
) -> None:
    """Liveness: the agent must not stall the node either."""
    namespace, name = owner
    lock = f"2026-12-02T20:00:00Z,{namespace},{name}"
    owner_pod = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {
                hami.BIND_PHASE_ANNOTATION: phase,
                hami.ASSIGNED_NODE_ANNOTATION: node_name,
                hami.DEVICES_ALLOCATED_ANNOTATION: "GPU-x,NVIDIA,1,1:;",
            },
        },
        "spec": {"nodeName": node_name},
    }
    unique = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): p
        for p in others
        if (p["metadata"]["namespace"], p["metadata"]["name"]) != owner
    }
    node = {"metadata": {"name": node_name, "annotations": {hami.NODE_LOCK_ANNOTATION: lock}}}
    plan = decisions.plan_reconcile(node, [*unique.values(), owner_pod], [])
    assert [(a.namespace, a.name, a.release_lock_value) for a in plan.pod_actions if a.release_lock_value] == [
        (namespace, name, lock)
    ]
