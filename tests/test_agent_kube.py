"""The thin I/O layer: which calls it makes, in what order, and how it treats API errors."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent import kube

NODE = "tenant-a-worker"
# One A100 80GB as HAMi v2.10.0 registers it, and the annotation that says so (literals: see test_agent_decisions).
DEVICES = [
    {"id": "GPU-8410f28c-b427-57c7-8e3c-84238d86026d", "index": 0, "count": 10, "devmem": 81920, "devcore": 100,
     "type": "NVIDIA A100-SXM4-80GB", "numa": 0, "mode": "hami-core", "health": True}
]
REGISTERED = (
    '[{"id":"GPU-8410f28c-b427-57c7-8e3c-84238d86026d","index":0,"count":10,"devmem":81920,"devcore":100,'
    '"type":"NVIDIA A100-SXM4-80GB","numa":0,"mode":"hami-core","health":true}]'
)
LOCK = "2026-12-02T20:00:00Z,default,pod-a"


def release_patch(lock: str) -> list[dict[str, Any]]:
    """HAMi's node lock removed only while it still holds `lock` (RFC 6902 test + remove; `/` escaped as ~1)."""
    return [{"op": "test", "path": "/metadata/annotations/hami.io~1mutex.lock", "value": lock},
            {"op": "remove", "path": "/metadata/annotations/hami.io~1mutex.lock"}]


SUCCESS_PATCH = {"metadata": {"annotations": {"hami.io/bind-phase": "success"}}}


def bound_pod(name: str, phase: str = "allocating") -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name,
            namespace="default",
            annotations={
                hami.ASSIGNED_NODE_ANNOTATION: NODE,
                hami.DEVICES_ALLOCATED_ANNOTATION: "GPU-a,NVIDIA,4000,5:;",
                hami.BIND_PHASE_ANNOTATION: phase,
            },
        ),
        spec=client.V1PodSpec(node_name=NODE, containers=[client.V1Container(name="c")]),
    )


class FakeCoreV1:
    """Records calls; errors are injected per (method, target)."""

    def __init__(self, node: client.V1Node, pods: list[client.V1Pod]) -> None:
        self.api_client = client.ApiClient()
        self.node = node
        self.pods = pods
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []
        self.errors: dict[tuple[str, str], int] = {}

    def _maybe_fail(self, method: str, target: str) -> None:
        if (status := self.errors.get((method, target))) is not None:
            raise ApiException(status=status, reason="injected")

    def _own_node(self, name: str) -> None:
        # The API answers 404 for a node of another name (or none): the agent only ever touches its own.
        if name != self.node.metadata.name:
            raise ApiException(status=404, reason=f"nodes {name!r} not found")

    def read_node(self, name: str, **kwargs: Any) -> client.V1Node:
        self.calls.append(("read_node", name, kwargs))
        self._own_node(name)
        return self.node

    def list_pod_for_all_namespaces(self, **kwargs: Any) -> client.V1PodList:
        self.calls.append(("list_pod_for_all_namespaces", None, kwargs))
        return client.V1PodList(items=self.pods)

    def list_node(self, **kwargs: Any) -> client.V1NodeList:
        self.calls.append(("list_node", None, kwargs))
        return client.V1NodeList(items=[self.node])

    def patch_node(self, name: str, body: Any, **kwargs: Any) -> None:
        self.calls.append(("patch_node", body, kwargs))
        self._own_node(name)
        self._maybe_fail("patch_node", "json-patch" if isinstance(body, list) else "merge")

    def patch_node_status(self, name: str, body: Any, **kwargs: Any) -> None:
        self.calls.append(("patch_node_status", body, kwargs))
        self._own_node(name)

    def patch_namespaced_pod(self, name: str, namespace: str, body: Any, **kwargs: Any) -> None:
        self.calls.append(("patch_namespaced_pod", (namespace, name, body), kwargs))
        self._maybe_fail("patch_namespaced_pod", name)


def fresh_node(lock: str | None = LOCK) -> client.V1Node:
    annotations = {hami.NODE_LOCK_ANNOTATION: lock} if lock else {}
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=NODE, annotations=annotations),
        status=client.V1NodeStatus(capacity={"cpu": "8"}),
    )


def agent(api: FakeCoreV1) -> kube.KubeAgent:
    return kube.KubeAgent(api, NODE, DEVICES)  # type: ignore[arg-type]


def test_reconcile_reads_own_node_and_its_pods_then_writes_in_device_plugin_order() -> None:
    api = FakeCoreV1(fresh_node(), [bound_pod("pod-a")])
    agent(api).reconcile_once()
    names = [call[0] for call in api.calls]
    assert names == [
        "read_node",
        "list_pod_for_all_namespaces",
        "patch_node",  # register annotation
        "patch_node_status",  # nvidia.com/gpu capacity, on the status subresource
        "patch_namespaced_pod",  # bind-phase success first ...
        "patch_node",  # ... then the owner-checked lock release
    ]
    assert api.calls[1][2]["field_selector"] == f"spec.nodeName={NODE}"
    assert api.calls[3][1] == {"status": {"capacity": {"nvidia.com/gpu": "10"}}}
    assert api.calls[4][1] == ("default", "pod-a", SUCCESS_PATCH)
    release = api.calls[5]
    assert release[1] == release_patch(LOCK)
    assert release[2]["_content_type"] == "application/json-patch+json"
    # Every call is bounded (10 s to connect, 30 s to read): a hung API server must not hang the agent.
    assert [call[2]["_request_timeout"] for call in api.calls] == [(10, 30)] * 6
    assert api.calls[2][1] == {"metadata": {"annotations": {"hami.io/node-nvidia-register": REGISTERED}}}


def test_converged_node_makes_no_writes() -> None:
    node = fresh_node(lock=None)
    node.metadata.annotations = {hami.NODE_REGISTER_ANNOTATION: REGISTERED}
    node.status.capacity = {"nvidia.com/gpu": "10"}
    api = FakeCoreV1(node, [bound_pod("pod-a", phase="success"), bound_pod("pod-b", phase="failed")])
    agent(api).reconcile_once()
    assert [call[0] for call in api.calls] == ["read_node", "list_pod_for_all_namespaces"]


def test_lock_changed_before_release_is_left_alone() -> None:
    api = FakeCoreV1(fresh_node(), [bound_pod("pod-a")])
    api.errors[("patch_node", "json-patch")] = 422  # the JSON-patch `test` op failed
    agent(api).reconcile_once()
    assert [call[0] for call in api.calls][-1] == "patch_node"


def test_deleted_owner_still_gets_its_dangling_lock_released() -> None:
    api = FakeCoreV1(fresh_node(), [bound_pod("pod-a")])
    api.errors[("patch_namespaced_pod", "pod-a")] = 404
    agent(api).reconcile_once()
    assert api.calls[-1][1] == release_patch(LOCK)


def test_one_failing_pod_does_not_block_the_others() -> None:
    api = FakeCoreV1(fresh_node(lock="2026-12-02T20:00:00Z,default,pod-b"), [bound_pod("pod-a"), bound_pod("pod-b")])
    api.errors[("patch_namespaced_pod", "pod-a")] = 500
    agent(api).reconcile_once()
    patched = [call[1][1] for call in api.calls if call[0] == "patch_namespaced_pod"]
    assert patched == ["pod-a", "pod-b"]
    assert api.calls[-1][1] == release_patch("2026-12-02T20:00:00Z,default,pod-b")


def test_unexpected_release_error_is_raised() -> None:
    api = FakeCoreV1(fresh_node(), [])
    api.errors[("patch_node", "json-patch")] = 403
    with pytest.raises(ApiException):
        agent(api).release_lock(LOCK)


def test_dry_run_only_reads() -> None:
    api = FakeCoreV1(fresh_node(), [bound_pod("pod-a")])
    plan = kube.KubeAgent(api, NODE, DEVICES, dry_run=True).reconcile_once()  # type: ignore[arg-type]
    assert plan.pod_actions and [call[0] for call in api.calls] == ["read_node", "list_pod_for_all_namespaces"]


def test_watch_events_wake_the_loop_and_resync_times_out() -> None:
    worker = agent(FakeCoreV1(fresh_node(), []))
    assert worker.wait_for_work(0.01) is False
    worker._wake.set()
    assert worker.wait_for_work(5) is True
    assert worker.wait_for_work(0.01) is False


def test_dict_patches_go_out_as_strategic_merge_and_lists_as_json_patch() -> None:
    """The pinned client defaults every PATCH to application/json-patch+json and rewrites dict bodies to
    strategic merge; the agent relies on both (merge for annotations/capacity, JSON patch for the lock)."""

    sent: list[tuple[str, str]] = []

    class Pool:
        def request(self, method: str, url: str, body: Any = None, headers: Any = None, **_: Any) -> Any:
            sent.append((headers["Content-Type"], body))
            raise RuntimeError("stop")

    api = client.CoreV1Api(client.ApiClient(client.Configuration(host="https://127.0.0.1:1")))
    api.api_client.rest_client.pool_manager = Pool()  # type: ignore[assignment]
    for call in (
        lambda: api.patch_node(NODE, {"metadata": {"annotations": {"a": "b"}}}),
        lambda: api.patch_node_status(NODE, {"status": {"capacity": {"nvidia.com/gpu": "10"}}}),
        lambda: api.patch_node(NODE, release_patch(LOCK), _content_type=kube.JSON_PATCH),
    ):
        with pytest.raises(Exception, match="stop"):
            call()
    assert [content_type for content_type, _ in sent] == [
        "application/strategic-merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
    ]


class Stop(BaseException):
    """Ends a loop that runs forever: the agent catches `Exception` only."""


class ScriptedWatch:
    """kubernetes/watch/watch.py `Watch.stream(func, *args, **kwargs)`: calls `func(watch=True, ...)` and yields
    its events until the server ends the watch (`timeout_seconds`) or the connection fails. Each `stream` here
    runs the next step of a script instead, recording what it was asked to watch."""

    def __init__(self, steps: list[Any]) -> None:
        self.steps = steps
        self.streams: list[tuple[Any, dict[str, Any]]] = []

    def __call__(self) -> ScriptedWatch:
        return self

    def stream(self, func: Any, **kwargs: Any) -> Any:
        self.streams.append((func, kwargs))
        return self.steps.pop(0)()


def test_a_watch_wakes_the_loop_on_each_event_and_again_whenever_it_restarts(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    api = FakeCoreV1(fresh_node(), [])
    worker = agent(api)
    seen: list[bool] = []

    def events() -> Any:
        seen.append(worker._wake.is_set())
        yield {"type": "ADDED", "object": {}}
        seen.append(worker._wake.is_set())  # woken by the event
        worker._wake.clear()
        # the server ends the watch after timeout_seconds

    def connection_reset() -> Any:
        seen.append(worker._wake.is_set())  # woken again: a restarted watch lists the current objects
        worker._wake.clear()
        raise ConnectionResetError("connection reset by peer")

    def stop() -> Any:
        seen.append(worker._wake.is_set())  # and again after a failure
        raise Stop

    scripted = ScriptedWatch([events, connection_reset, stop])
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) > 3:  # a watch that fails every time would loop here forever
            raise Stop

    monkeypatch.setattr(kube.watch, "Watch", scripted)
    monkeypatch.setattr(kube.time, "sleep", sleep)
    with pytest.raises(Stop):
        worker._watch_forever(api.list_node, field_selector="metadata.name=tenant-a-worker")
    assert seen == [False, True, True, True]
    assert scripted.streams == [
        (api.list_node, {"timeout_seconds": 300, "deserialize": False, "field_selector": "metadata.name=tenant-a-worker"})
    ] * 3
    assert sleeps == [2]
    assert [r.getMessage() for r in caplog.records] == ["watch failed, restarting"]
    assert caplog.records[0].exc_info is not None


def test_a_failed_reconcile_is_logged_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    worker = agent(FakeCoreV1(fresh_node(), []))

    def fail() -> None:
        raise ApiException(status=500, reason="etcdserver: request timed out")

    monkeypatch.setattr(worker, "reconcile_once", fail)
    worker._safe_reconcile()
    assert [r.getMessage() for r in caplog.records] == ["reconcile failed"]
    assert caplog.records[0].exc_info is not None


def test_the_agent_watches_its_own_pods_and_node_and_reconciles_at_each_wake(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeCoreV1(fresh_node(), [])
    worker = agent(api)
    threads: list[tuple[Any, tuple[Any, ...], dict[str, Any], bool]] = []
    started: list[Any] = []

    class RecordedThread:
        def __init__(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], daemon: bool) -> None:
            threads.append((target, args, kwargs, daemon))
            self.target = target

        def start(self) -> None:
            started.append(self.target)

    reconciles: list[int] = []
    waits: list[float] = []

    def wait(resync_seconds: float) -> bool:
        waits.append(resync_seconds)
        if len(waits) == 2:
            raise Stop
        return True

    monkeypatch.setattr(kube.threading, "Thread", RecordedThread)
    monkeypatch.setattr(worker, "reconcile_once", lambda: reconciles.append(1))
    monkeypatch.setattr(worker, "wait_for_work", wait)
    with pytest.raises(Stop):
        worker.run_forever(30.0)
    # Daemon threads: the process ends with the loop, whatever the watches are doing.
    assert threads == [
        (worker._watch_forever, (api.list_pod_for_all_namespaces,), {"field_selector": "spec.nodeName=tenant-a-worker"}, True),
        (worker._watch_forever, (api.list_node,), {"field_selector": "metadata.name=tenant-a-worker"}, True),
    ]
    assert started == [worker._watch_forever] * 2
    assert reconciles == [1, 1] and waits == [30.0, 30.0]
