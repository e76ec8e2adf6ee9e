"""HAMi's own scheduler (v2.10.0 `cmd/scheduler`) beside the real control plane, wired as its chart wires it: a second
kube-scheduler whose only profile `hami-scheduler` calls HAMi as an extender (filter and bind over HTTPS,
`nodeCacheCapable`, HAMi's resources `ignoredByScheduler`: charts/hami/templates/scheduler/configmap.yaml and
_helpers.tpl `hami-vgpu.scheduler.managedResources`), and its admission webhook (`vgpu.hami.io`, pods CREATE,
failurePolicy Ignore: templates/scheduler/webhook.yaml) on the same TLS listener. The device configuration is the
one the chart renders for the program's values (tests/fixtures/hami_real, ConfigMap `hami-scheduler-device`).

The binary is not built by this project: the Go module proxy it reaches does not serve github.com/Project-HAMi/HAMi
(docs/verification.md). `GPU_TENANCY_HAMI_SCHEDULER=<path>` names one built from HAMi's source at the tag v2.10.0
(`go build ./cmd/scheduler` in a checkout); without it the HAMi differential is not run and says so.

What a device plugin does after HAMi binds a pod (mark the pod's bind phase `success`, release the node lock) is
done by the project's own mock-GPU agent code (gpu_tenancy/hami/agent), as in mode `sim`.
"""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from gpu_tenancy.hami.agent.kube import KubeAgent
from tests.realcp.cluster import RealControlPlane, free_port

HAMI_SCHEDULER_ENV = "GPU_TENANCY_HAMI_SCHEDULER"
SCHEDULER_NAME = "hami-scheduler"
RENDERED = Path(__file__).resolve().parents[1] / "fixtures" / "hami_real" / "hami-rendered.gpu.yaml"
MANAGED_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage",
                     "nvidia.com/priority")


def binary() -> Path | None:
    value = os.environ.get(HAMI_SCHEDULER_ENV)
    return Path(value) if value and Path(value).is_file() else None


def device_config() -> str:
    (config_map,) = [d for d in yaml.safe_load_all(RENDERED.read_text())
                     if d and d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-device")]
    return str(config_map["data"]["device-config.yaml"])


def scheduler_config(port: int, kubeconfig: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": SCHEDULER_NAME}],
        "extenders": [{
            "urlPrefix": f"https://127.0.0.1:{port}", "enableHTTPS": True, "tlsConfig": {"insecure": True},
            "filterVerb": "filter", "bindVerb": "bind", "nodeCacheCapable": True, "weight": 1, "httpTimeout": "30s",
            "managedResources": [{"name": name, "ignoredByScheduler": True} for name in MANAGED_RESOURCES],
        }],
    }


def webhook(port: int, ca_pem: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "hami-webhook"},
        "webhooks": [{
            "name": "vgpu.hami.io", "admissionReviewVersions": ["v1beta1"], "sideEffects": "None",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/webhook", "caBundle": base64.b64encode(ca_pem).decode()},
            "failurePolicy": "Ignore", "matchPolicy": "Equivalent", "timeoutSeconds": 10,
            "namespaceSelector": {"matchExpressions": [
                {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]},
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]},
            "objectSelector": {"matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]},
            "reinvocationPolicy": "Never",
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
                       "scope": "*"}],
        }],
    }


class Hami:
    """Starts HAMi's scheduler, its kube-scheduler and webhook on a running control plane."""

    def __init__(self, plane: RealControlPlane, scheduler: Path, api: client.ApiClient) -> None:
        self.plane, self.scheduler, self.api = plane, scheduler, api
        self._agents: dict[str, KubeAgent] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def start(self) -> Hami:
        work = self.plane.workdir
        port = free_port()
        self.metrics_port = free_port()
        serving = self.plane.ca.issue("hami-scheduler", server_ips=("127.0.0.1",))
        (work / "hami.crt").write_bytes(serving.cert_pem)
        (work / "hami.key").write_bytes(serving.key_pem)
        (work / "hami-device-config.yaml").write_text(device_config())
        admin = self.plane.admin_kubeconfig
        self.plane.spawn("hami-scheduler", [
            str(self.scheduler), f"--http_bind=127.0.0.1:{port}", f"--cert_file={work / 'hami.crt'}",
            f"--key_file={work / 'hami.key'}", f"--scheduler-name={SCHEDULER_NAME}",
            f"--device-config-file={work / 'hami-device-config.yaml'}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            # The program's chart values: defaultSchedulerPolicy (tests/fixtures/hami_real/hami-values.gpu.json).
            "--node-scheduler-policy=binpack", "--gpu-scheduler-policy=spread", "--v=1",
            # Its client's default rate limit makes every scenario wait on the others; the chart leaves it unset.
            "--kube-qps=500", "--kube-burst=1000",
        ], env={"KUBECONFIG": str(admin)})
        self.plane.wait("hami-scheduler", lambda: _tls_open(port))
        config_path = work / "hami-kube-scheduler.yaml"
        config_path.write_text(yaml.safe_dump(scheduler_config(port, self.plane.kubeconfig("system:kube-scheduler"))))
        self.plane.spawn("hami-kube-scheduler", [str(self.plane.binaries["kube-scheduler"]), f"--config={config_path}",
                                                 "--secure-port=0"])
        client.AdmissionregistrationV1Api(self.api).create_mutating_webhook_configuration(
            webhook(port, self.plane.ca.cert_pem))
        # The RuntimeClass the webhook puts GPU pods under (device config runtimeClassName), as the chart renders it.
        for runtime_class in (d for d in yaml.safe_load_all(RENDERED.read_text()) if d and d["kind"] == "RuntimeClass"):
            try:
                client.NodeV1Api(self.api).create_runtime_class(runtime_class)
            except client.exceptions.ApiException as error:
                if error.status != 409:
                    raise
        return self

    def add_node(self, node: str, devices: list[dict[str, Any]]) -> None:
        """The project's mock-GPU agent for `node`, answering for HAMi's device plugin after each bind."""
        with self._lock:
            self._agents[node] = KubeAgent(client.CoreV1Api(self.api), node, devices)

    def knows(self, node: str) -> bool:
        """Whether HAMi has read the node's register (its metrics name every registered node's devices)."""
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=20) as response:
                return f'"{node}"' in response.read().decode()
        except OSError:  # busy: ask again
            return False

    def remove_node(self, node: str) -> None:
        with self._lock:
            self._agents.pop(node, None)

    def device_plugin_pass(self, node: str) -> None:
        """One pass of the node's agent: what the device plugin does once HAMi has bound a pod there (the agent's
        own watch loop is not run; the caller asks when a pod it waits for is bound)."""
        with self._lock:
            agent = self._agents.get(node)
        if agent is not None:
            agent.reconcile_once()

    def stop(self) -> None:
        self._stop.set()


def _tls_open(port: int) -> bool:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return True
