from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from gpu_tenancy import hami
from gpu_tenancy.agent import decisions

NODES = st.sampled_from(["n1", "n2"])
NAMES = st.sampled_from(["a", "b", "c"])
NAMESPACES = st.sampled_from(["default", "team"])
PHASES = st.sampled_from([None, "allocating", "success", "failed"])
locks = st.one_of(
    st.none(),
    st.just("2026-12-02T20:00:00Z"),
    st.builds(lambda ns, pod: f"2026-12-02T20:00:00Z,{ns},{pod}", NAMESPACES, NAMES),
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
    return {
        "metadata": {"name": draw(NAMES), "namespace": draw(NAMESPACES), "annotations": annotations},
        "spec": {"nodeName": draw(NODES)},
    }


@given(node_name=NODES, lock=locks, pod_list=st.lists(pods(), max_size=8))
def test_agent_only_finishes_own_assigned_pods_and_own_lock(
    node_name: str, lock: str | None, pod_list: list[dict[str, Any]]
) -> None:
    annotations = {hami.NODE_LOCK_ANNOTATION: lock} if lock is not None else {}
    node = {"metadata": {"name": node_name, "annotations": annotations}}
    plan = decisions.plan_reconcile(node, pod_list, [])
    by_key = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pod_list}
    # Two pods cannot share a namespace/name in a cluster; such lists are not valid inputs.
    assume(len(by_key) == len(pod_list))
    for action in plan.pod_actions:
        pod = by_key[(action.namespace, action.name)]
        pod_annotations = pod["metadata"]["annotations"]
        assert pod["spec"]["nodeName"] == node_name
        assert pod_annotations.get(hami.BIND_PHASE_ANNOTATION) == "allocating"
        assert pod_annotations.get(hami.ASSIGNED_NODE_ANNOTATION) == node_name
        assert pod_annotations.get(hami.DEVICES_ALLOCATED_ANNOTATION)
        if action.release_lock_value is not None:
            assert action.release_lock_value == lock
            assert hami.lock_owner(lock) == (action.namespace, action.name)
