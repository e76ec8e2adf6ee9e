"""Thin Kubernetes I/O for the mock GPU agent (official ``kubernetes`` client)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from gpu_tenancy.agent import decisions

log = logging.getLogger("mock-gpu-agent")

JSON_PATCH = "application/json-patch+json"
HTTP_CONFLICT_OR_INVALID = {409, 422}


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

    def _to_dict(self, obj: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.api.api_client.sanitize_for_serialization(obj)
        return result

    def read_state(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        node = self._to_dict(self.api.read_node(self.node_name))
        pods = self.api.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={self.node_name}")
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
            self.api.patch_node(self.node_name, plan.node_annotation_patch)
        if plan.node_status_patch is not None:
            self.api.patch_node_status(self.node_name, plan.node_status_patch)
        for action in plan.pod_actions:
            if action.mark_success:
                self.api.patch_namespaced_pod(action.name, action.namespace, decisions.success_patch())
            if action.release_lock_value is not None:
                self.release_lock(action.release_lock_value)

    def release_lock(self, lock_value: str) -> bool:
        """Remove the node lock atomically iff it still equals lock_value."""
        try:
            self.api.patch_node(self.node_name, decisions.lock_release_json_patch(lock_value), _content_type=JSON_PATCH)
        except ApiException as error:
            if error.status in HTTP_CONFLICT_OR_INVALID:
                log.info("lock changed before release, leaving it alone")
                return False
            raise
        return True

    def _watch_forever(self, list_call: Any, **kwargs: Any) -> None:
        while True:
            try:
                for _event in watch.Watch().stream(list_call, timeout_seconds=300, **kwargs):
                    self._safe_reconcile()
            except Exception:
                log.exception("watch failed, restarting")
                time.sleep(2)

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
            time.sleep(resync_seconds)
