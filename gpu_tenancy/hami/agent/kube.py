"""Thin Kubernetes I/O for the mock GPU agent (official ``kubernetes`` client).

Everything that decides *what* to write lives in ``decisions``; this module reads the node and its
pods, applies a plan and keeps a watch open. Watch events only wake the reconcile loop, so a burst of
pod events collapses into one reconcile, and a periodic resync re-asserts state even if a watch is
silently stuck.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent import decisions

log = logging.getLogger("mock-gpu-agent")

JSON_PATCH = "application/json-patch+json"
# A JSON-patch `test` op that fails is answered 422; a concurrent update can be 409.
HTTP_CONFLICT_OR_INVALID = {409, 422}
HTTP_NOT_FOUND = 404
WATCH_TIMEOUT_SECONDS = 300
REQUEST_TIMEOUT = (10, 30)  # connect, read (seconds) for every non-watch call


def load_kube_config() -> client.CoreV1Api:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.CoreV1Api()


class KubeAgent:
    def __init__(
        self, api: client.CoreV1Api, node_name: str, devices: list[dict[str, Any]], dry_run: bool = False
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.devices = devices
        self.dry_run = dry_run
        self._reconcile_lock = threading.Lock()
        self._wake = threading.Event()

    def _to_dict(self, obj: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.api.api_client.sanitize_for_serialization(obj)
        return result

    def read_state(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        node = self._to_dict(self.api.read_node(self.node_name, _request_timeout=REQUEST_TIMEOUT))
        pods = self.api.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self.node_name}", _request_timeout=REQUEST_TIMEOUT
        )
        return node, [self._to_dict(pod) for pod in pods.items]

    def reconcile_once(self) -> decisions.ReconcilePlan:
        with self._reconcile_lock:
            node, pods = self.read_state()
            plan = decisions.plan_reconcile(node, pods, self.devices)
            self.apply(plan)
            return plan

    def apply(self, plan: decisions.ReconcilePlan) -> None:
        if self.dry_run:
            log.info("dry-run plan: %s", plan)
            return
        if plan.node_annotation_patch is not None:
            log.info("asserting %s on node %s", hami.NODE_REGISTER_ANNOTATION, self.node_name)
            self.api.patch_node(self.node_name, plan.node_annotation_patch, _request_timeout=REQUEST_TIMEOUT)
        if plan.node_status_patch is not None:
            log.info("asserting capacity %s on node %s", plan.node_status_patch["status"]["capacity"], self.node_name)
            self.api.patch_node_status(self.node_name, plan.node_status_patch, _request_timeout=REQUEST_TIMEOUT)
        failures = 0
        for action in plan.pod_actions:
            try:
                self.apply_pod_action(action)
            except ApiException as error:
                failures += 1
                log.warning("pod %s/%s: %s %s", action.namespace, action.name, error.status, error.reason)
        if failures:
            # Leave the rest to the next resync; one bad pod must not block the others.
            log.warning("%d of %d pod actions failed; retrying on the next resync", failures, len(plan.pod_actions))

    def apply_pod_action(self, action: decisions.PodAction) -> None:
        if action.mark_success:
            try:
                self.api.patch_namespaced_pod(
                    action.name, action.namespace, decisions.success_patch(), _request_timeout=REQUEST_TIMEOUT
                )
                log.info("pod %s/%s: bind-phase success", action.namespace, action.name)
            except ApiException as error:
                # A deleted pod's lock is dangling; it still names that pod, so releasing it is safe.
                if error.status != HTTP_NOT_FOUND or action.release_lock_value is None:
                    raise
        if action.release_lock_value is not None:
            self.release_lock(action.release_lock_value)

    def release_lock(self, lock_value: str) -> bool:
        """Remove the node lock atomically iff it still equals lock_value."""
        try:
            self.api.patch_node(
                self.node_name,
                decisions.lock_release_json_patch(lock_value),
                _content_type=JSON_PATCH,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if error.status in HTTP_CONFLICT_OR_INVALID:
                log.info("lock changed before release, leaving it alone")
                return False
            raise
        log.info("released node lock %s", lock_value)
        return True

    def _watch_forever(self, list_call: Any, **kwargs: Any) -> None:
        while True:
            try:
                for _event in watch.Watch().stream(
                    list_call, timeout_seconds=WATCH_TIMEOUT_SECONDS, deserialize=False, **kwargs
                ):
                    self._wake.set()
            except Exception:
                log.exception("watch failed, restarting")
                time.sleep(2)
            # A (re)started watch begins with the current objects: reconcile once more.
            self._wake.set()

    def _safe_reconcile(self) -> None:
        try:
            self.reconcile_once()
        except Exception:
            log.exception("reconcile failed")

    def run_forever(self, resync_seconds: float) -> None:
        threading.Thread(
            target=self._watch_forever,
            args=(self.api.list_pod_for_all_namespaces,),
            kwargs={"field_selector": f"spec.nodeName={self.node_name}"},
            daemon=True,
        ).start()
        threading.Thread(
            target=self._watch_forever,
            args=(self.api.list_node,),
            kwargs={"field_selector": f"metadata.name={self.node_name}"},
            daemon=True,
        ).start()
        while True:
            self._safe_reconcile()
            self.wait_for_work(resync_seconds)

    def wait_for_work(self, resync_seconds: float) -> bool:
        """Block until a watch event arrives or the resync period passes; True if woken by an event."""
        woken = self._wake.wait(resync_seconds)
        self._wake.clear()
        return woken
