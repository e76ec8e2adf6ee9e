"""What a failed live run leaves behind, collected while the lab still exists: before anything is destroyed
(conftest's DeployedLab.destroy and the fault checks that destroy calls it first) and after a failed deploy.

Per cluster (the management cluster and each tenant's): nodes, pods, events, Helm releases; the logs of HAMi's
scheduler and the device layer (mock-GPU agent, device plugin, mock NVML) in each tenant and of Kamaji,
cert-manager and MetalLB in the management cluster; the TenantControlPlanes' status. The Pulumi log is already
in the same directory (`pulumi.log`); `diagnostics.md` lists what was collected, when and why, and what could not
be. Nothing secret is written: kubeconfigs are read to connect, never dumped; Helm releases are listed from their
storage Secrets' labels only (helm/helm v3 pkg/storage/driver/secrets.go: labels name, owner=helm, status,
version), never their data.

Unit-tested offline against a double of the Kubernetes API (tests/test_e2e_diagnostics.py).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.integration.support import DEVICE_PLUGIN_SELECTOR, MOCK_GPU_AGENT_SELECTOR, NVML_MOCK_COMPONENT_SELECTOR

# Management-cluster namespaces whose pod logs are kept (the charts' namespaces in components/).
MANAGEMENT_LOG_NAMESPACES = ("kamaji-system", "cert-manager", "metallb-system")
HAMI_LOG_SELECTORS = (
    MOCK_GPU_AGENT_SELECTOR,
    "app.kubernetes.io/component=hami-scheduler",
    DEVICE_PLUGIN_SELECTOR,
    NVML_MOCK_COMPONENT_SELECTOR,
)
HELM_STORAGE_SELECTOR = "owner=helm"
LOG_LINES = 300
INDEX = "diagnostics.md"
# Kamaji writes each TenantControlPlane's admin kubeconfig as Secret <tcp>-admin-kubeconfig, key admin.conf
# (components/tenant_control_plane.py reads it the same way).
ADMIN_KUBECONFIG_KEY = "admin.conf"


def said(error: BaseException) -> str:
    """One line: the error's type and message (an ApiException's repr says neither)."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"[:300]


def nodes(core: Any) -> str:
    lines = []
    for node in core.list_node().items:
        ready = next((c.status for c in node.status.conditions or [] if c.type == "Ready"), "unknown")
        hami = {k: v for k, v in (node.metadata.annotations or {}).items() if "hami.io" in k}
        gpu = {k: v for k, v in (node.status.allocatable or {}).items() if k.startswith("nvidia.com")}
        lines.append(f"{node.metadata.name} Ready={ready} allocatable={gpu} annotations={hami}")
    return "\n".join(lines)


def pods(core: Any) -> str:
    lines = []
    for pod in core.list_pod_for_all_namespaces().items:
        hami = {k: v for k, v in (pod.metadata.annotations or {}).items() if "hami.io" in k}
        waiting = [
            f"{s.name}:{s.state.waiting.reason}" for s in pod.status.container_statuses or []
            if s.state is not None and s.state.waiting is not None
        ]
        lines.append(
            f"{pod.metadata.namespace}/{pod.metadata.name} phase={pod.status.phase} node={pod.spec.node_name} "
            f"scheduler={pod.spec.scheduler_name} waiting={waiting} {hami}"
        )
    return "\n".join(lines)


def events(core: Any) -> str:
    items = core.list_event_for_all_namespaces().items
    return "\n".join(
        f"{e.last_timestamp} {e.type} {e.involved_object.kind} {e.involved_object.namespace}/{e.involved_object.name}"
        f" {e.reason}: {e.message}"
        for e in items[-LOG_LINES:]
    )


def helm_releases(core: Any) -> str:
    """Like `helm list --all --all-namespaces`: every revision's name, namespace, version and status."""
    lines = []
    for secret in core.list_secret_for_all_namespaces(label_selector=HELM_STORAGE_SELECTOR).items:
        labels = secret.metadata.labels or {}
        lines.append(
            f"{secret.metadata.namespace}/{labels.get('name', '?')} revision={labels.get('version', '?')} "
            f"status={labels.get('status', '?')}"
        )
    return "\n".join(sorted(lines)) or "no Helm release"


def _container_logs(core: Any, pod: Any, label: str) -> list[str]:
    chunks = []
    for container in pod.spec.containers:
        try:  # one container that never started must not hide the others' logs
            text = core.read_namespaced_pod_log(
                pod.metadata.name, pod.metadata.namespace, container=container.name, tail_lines=LOG_LINES
            )
        except Exception as error:
            text = f"<no log: {said(error)}>"
        chunks.append(f"==== {label}{pod.metadata.name}/{container.name}\n{text}")
    return chunks


def hami_logs(core: Any) -> str:
    chunks = []
    for selector in HAMI_LOG_SELECTORS:
        for pod in core.list_pod_for_all_namespaces(label_selector=selector).items:
            chunks += _container_logs(core, pod, "")
    return "\n".join(chunks) or f"no pod matches {list(HAMI_LOG_SELECTORS)}"


def management_logs(core: Any) -> str:
    """Kamaji (and its etcd DataStore), cert-manager and MetalLB (controller and speaker) pod logs."""
    chunks = []
    for namespace in MANAGEMENT_LOG_NAMESPACES:
        for pod in core.list_namespaced_pod(namespace).items:
            chunks += _container_logs(core, pod, f"{namespace}/")
    return "\n".join(chunks)


def tenant_control_planes(custom: Any) -> str:
    tcps = custom.list_cluster_custom_object("kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes")["items"]
    return yaml.safe_dump([{"name": t["metadata"]["name"], "namespace": t["metadata"].get("namespace"),
                            "status": t.get("status")} for t in tcps])


def tenant_kubeconfigs_from_management(core: Any, custom: Any) -> dict[str, str]:
    """Each TenantControlPlane's admin kubeconfig, read from the management cluster (after a failed deploy the
    stack has no outputs to read them from)."""
    found = {}
    tcps = custom.list_cluster_custom_object("kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes")["items"]
    for tcp in tcps:
        name, namespace = tcp["metadata"]["name"], tcp["metadata"].get("namespace", "default")
        secret = core.read_namespaced_secret(f"{name}-admin-kubeconfig", namespace)
        found[name] = base64.b64decode((secret.data or {})[ADMIN_KUBECONFIG_KEY]).decode()
    return found


def core_api(api: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api)


def custom_api(api: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(api)


class Collector:
    """Writes each dump into the run's directory, and the index of what it did."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.written: list[str] = []
        self.failed: list[str] = []

    def dump(self, name: str, produce: Callable[[], str]) -> None:
        try:
            text = produce()
        except Exception as error:
            text = f"<could not collect: {said(error)}>"
            self.failed.append(f"{name}: {said(error)}")
        (self.run_dir / name).write_text(str(text) + "\n", encoding="utf-8")
        self.written.append(name)

    def cluster(self, prefix: str, connect: Callable[[], Any], logs: Callable[[Any], str]) -> Any:
        """Nodes, pods, events, Helm releases and `logs` of one cluster; its CoreV1Api, or None if unreachable."""
        try:
            api = connect()
            core = core_api(api)
        except Exception as error:
            (self.run_dir / f"{prefix}-unreachable.txt").write_text(said(error) + "\n", encoding="utf-8")
            self.written.append(f"{prefix}-unreachable.txt")
            self.failed.append(f"{prefix}: unreachable: {said(error)}")
            return None
        self.dump(f"{prefix}-nodes.txt", lambda: nodes(core))
        self.dump(f"{prefix}-pods.txt", lambda: pods(core))
        self.dump(f"{prefix}-events.txt", lambda: events(core))
        self.dump(f"{prefix}-helm-releases.txt", lambda: helm_releases(core))
        self.dump(f"{prefix}-logs.txt", lambda: logs(core))
        return api

    def index(self, reason: str) -> None:
        lines = [f"Diagnostics collected {reason}, before anything was destroyed.", "",
                 *(f"- `{name}`" for name in self.written), "- `pulumi.log` (the preview, up and destroy output)"]
        if self.failed:
            lines += ["", "Could not collect:", *(f"- {line}" for line in self.failed)]
        (self.run_dir / INDEX).write_text("\n".join(lines) + "\n", encoding="utf-8")


def collect(
    run_dir: Path,
    reason: str,
    management: Callable[[], Any],
    tenants: Mapping[str, Callable[[], Any]] | None = None,
    connect_tenant: Callable[[str], Any] | None = None,
) -> Collector:
    """Everything above, from the management cluster's ApiClient factory and each tenant's. Without `tenants`
    (a failed deploy: no stack outputs) each TenantControlPlane's admin kubeconfig is read from the management
    cluster and `connect_tenant` builds its client. Best effort: every failure is written down, never raised."""
    collector = Collector(run_dir)
    api = collector.cluster("management", management, management_logs)
    if api is not None:
        collector.dump("management-tenantcontrolplanes.yaml", lambda: tenant_control_planes(custom_api(api)))
    if tenants is None and api is not None and connect_tenant is not None:
        try:
            kubeconfigs = tenant_kubeconfigs_from_management(core_api(api), custom_api(api))
        except Exception as error:
            collector.failed.append(f"tenant kubeconfigs from the management cluster: {said(error)}")
            kubeconfigs = {}
        tenants = {name: (lambda text=text: connect_tenant(text)) for name, text in kubeconfigs.items()}
    for tenant, connect in (tenants or {}).items():
        collector.cluster(tenant, connect, hami_logs)
    collector.index(reason)
    return collector
