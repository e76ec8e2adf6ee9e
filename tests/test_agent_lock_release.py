"""The agent's node-lock release as the API server answers it: the JSON patch's `test` op fails with 422 when
the lock changed (RFC 6902 via the apiserver's json-patch handler), a conflicting write with 409; only then is the
lock left alone. A pod that is gone (404) still gets its dangling lock released; anything else is an error."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from gpu_tenancy.hami.agent import decisions, kube
from tests.test_agent_kube import LOCK, NODE, FakeCoreV1, agent, bound_pod, fresh_node, release_patch


@pytest.mark.parametrize("status", [409, 422])
def test_a_lock_that_changed_before_the_release_is_left_alone_and_says_so(status: int) -> None:
    api = FakeCoreV1(fresh_node(), [])
    api.errors[("patch_node", "json-patch")] = status
    assert agent(api).release_lock(LOCK) is False


def test_a_released_lock_says_so_with_the_owner_checked_patch() -> None:
    api = FakeCoreV1(fresh_node(), [])
    assert agent(api).release_lock(LOCK) is True
    ((method, body, kwargs),) = api.calls
    assert (method, body) == ("patch_node", release_patch(LOCK))
    assert kwargs["_content_type"] == "application/json-patch+json"


@pytest.mark.parametrize("status", [400, 403, 404, 500])
def test_any_other_release_error_is_raised(status: int) -> None:
    api = FakeCoreV1(fresh_node(), [])
    api.errors[("patch_node", "json-patch")] = status
    with pytest.raises(ApiException) as error:
        agent(api).release_lock(LOCK)
    assert error.value.status == status


def test_a_gone_pod_without_a_lock_to_release_is_an_error_of_that_pod_only() -> None:
    api = FakeCoreV1(fresh_node(lock=None), [bound_pod("pod-a")])
    api.errors[("patch_namespaced_pod", "pod-a")] = 404
    with pytest.raises(ApiException):
        agent(api).apply_pod_action(decisions.PodAction("default", "pod-a", True, None))
    assert [c[0] for c in api.calls] == ["patch_namespaced_pod"]


@pytest.mark.parametrize("status", [403, 500])
def test_a_pod_patch_that_fails_otherwise_keeps_the_lock(status: int) -> None:
    api = FakeCoreV1(fresh_node(), [bound_pod("pod-a")])
    api.errors[("patch_namespaced_pod", "pod-a")] = status
    with pytest.raises(ApiException):
        agent(api).apply_pod_action(decisions.PodAction("default", "pod-a", True, LOCK))
    assert "patch_node" not in [c[0] for c in api.calls]


def test_a_success_pod_holding_the_lock_gets_only_the_release() -> None:
    api = FakeCoreV1(fresh_node(), [])
    agent(api).apply_pod_action(decisions.PodAction("default", "pod-a", False, LOCK))
    assert [(c[0], c[1]) for c in api.calls] == [("patch_node", release_patch(LOCK))]


def test_a_dry_run_writes_nothing_even_with_work_to_do() -> None:
    api = FakeCoreV1(fresh_node(), [bound_pod("pod-a")])
    kube.KubeAgent(api, NODE, [], dry_run=True).apply(  # type: ignore[arg-type]
        decisions.ReconcilePlan({"metadata": {}}, {"status": {}}, [decisions.PodAction("default", "pod-a", True, LOCK)])
    )
    assert api.calls == []


def test_the_agent_logs_what_it_asserts_and_what_failed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger=kube.log.name)
    api = FakeCoreV1(fresh_node(lock="2026-12-02T20:00:00Z,default,pod-b"), [bound_pod("pod-a"), bound_pod("pod-b")])
    api.errors[("patch_namespaced_pod", "pod-a")] = 500
    agent(api).reconcile_once()
    assert caplog.messages == [
        "asserting hami.io/node-nvidia-register on node tenant-a-worker",
        "asserting capacity {'nvidia.com/gpu': '10'} on node tenant-a-worker",
        "pod default/pod-a: 500 injected",
        "pod default/pod-b: bind-phase success",
        "released node lock 2026-12-02T20:00:00Z,default,pod-b",
        "1 of 2 pod actions failed; retrying on the next resync",
    ]


def test_a_dry_run_logs_its_plan(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger=kube.log.name)
    plan = decisions.ReconcilePlan(None, None, [decisions.PodAction("default", "pod-a", True, None)])
    kube.KubeAgent(FakeCoreV1(fresh_node(), []), NODE, [], dry_run=True).apply(plan)  # type: ignore[arg-type]
    assert caplog.messages == [f"dry-run plan: {plan}"]


def test_every_failed_pod_action_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger=kube.log.name)
    api = FakeCoreV1(fresh_node(lock=None), [bound_pod("pod-a"), bound_pod("pod-b")])
    api.errors[("patch_namespaced_pod", "pod-a")] = 500
    api.errors[("patch_namespaced_pod", "pod-b")] = 403
    agent(api).reconcile_once()
    assert caplog.messages[-1] == "2 of 2 pod actions failed; retrying on the next resync"


def test_a_lock_left_alone_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger=kube.log.name)
    api = FakeCoreV1(fresh_node(), [])
    api.errors[("patch_node", "json-patch")] = 422
    agent(api).release_lock(LOCK)
    assert caplog.messages == ["lock changed before release, leaving it alone"]
