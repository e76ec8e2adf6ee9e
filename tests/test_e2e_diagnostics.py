"""The live suite's diagnostics (tests/integration/diagnostics.py) against a double of the Kubernetes API.

The double answers the CoreV1Api / CustomObjectsApi calls the collector makes with the kubernetes client's own
model objects (what the client deserialises the API server's JSON into), for a lab whose tenant-a HAMi scheduler
is crash-looping and whose HAMi release is stuck pending-install: the dumps must show both.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration import diagnostics

M = client.V1ObjectMeta


def pod(namespace: str, name: str, labels: dict[str, str], phase: str = "Running", waiting: str | None = None) -> Any:
    statuses = [client.V1ContainerStatus(
        name="main", image="x", image_id="", ready=waiting is None, restart_count=3 if waiting else 0,
        state=client.V1ContainerState(waiting=client.V1ContainerStateWaiting(reason=waiting) if waiting else None),
    )]
    return client.V1Pod(metadata=M(namespace=namespace, name=name, labels=labels),
                        spec=client.V1PodSpec(containers=[client.V1Container(name="main")], node_name="worker",
                                              scheduler_name="default-scheduler"),
                        status=client.V1PodStatus(phase=phase, container_statuses=statuses))


def matches(selector: str | None, labels: dict[str, str]) -> bool:
    if not selector:
        return True
    return all(labels.get(key) == value for key, value in (part.split("=", 1) for part in selector.split(",")))


class FakeCore:
    """CoreV1Api as the collector calls it."""

    def __init__(self, pods: list[Any], secrets: list[Any], logs: dict[str, str], events: list[Any]) -> None:
        self._pods, self._secrets, self._logs, self._events = pods, secrets, logs, events

    def list_node(self) -> Any:
        ready = client.V1NodeCondition(type="Ready", status="True")
        return client.V1NodeList(items=[client.V1Node(
            metadata=M(name="worker", annotations={"hami.io/node-handshake": "Requesting_2026", "other": "x"}),
            status=client.V1NodeStatus(conditions=[ready], allocatable={"nvidia.com/gpu": "10", "cpu": "4"}))])

    def list_pod_for_all_namespaces(self, label_selector: str | None = None) -> Any:
        return client.V1PodList(items=[p for p in self._pods if matches(label_selector, p.metadata.labels)])

    def list_namespaced_pod(self, namespace: str) -> Any:
        return client.V1PodList(items=[p for p in self._pods if p.metadata.namespace == namespace])

    def list_event_for_all_namespaces(self) -> Any:
        return client.CoreV1EventList(items=self._events)

    def list_secret_for_all_namespaces(self, label_selector: str | None = None) -> Any:
        return client.V1SecretList(items=[s for s in self._secrets if matches(label_selector, s.metadata.labels)])

    def read_namespaced_secret(self, name: str, namespace: str) -> Any:
        for secret in self._secrets:
            if (secret.metadata.name, secret.metadata.namespace) == (name, namespace):
                return secret
        raise ApiException(status=404, reason="Not Found")

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str, tail_lines: int) -> str:
        if name not in self._logs:
            raise ApiException(status=400, reason=f"container {container} in pod {name} is waiting to start")
        return self._logs[name]


class FakeCustom:
    def __init__(self, tcps: list[dict[str, Any]]) -> None:
        self.tcps = tcps

    def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict[str, Any]:
        assert (group, version, plural) == ("kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes")
        return {"items": self.tcps}


def helm_secret(namespace: str, name: str, version: int, status: str) -> Any:
    # helm/helm v3 pkg/storage/driver/secrets.go: sh.helm.release.v1.<name>.v<version>, these labels, the
    # release itself gzipped in data.release (never read).
    return client.V1Secret(metadata=M(namespace=namespace, name=f"sh.helm.release.v1.{name}.v{version}",
                                      labels={"owner": "helm", "name": name, "status": status, "version": str(version)}),
                           data={"release": "SECRET-RELEASE-DATA"}, type="helm.sh/release.v1")


ADMIN = "apiVersion: v1\nkind: Config\nclusters: [{name: t, cluster: {server: 'https://172.18.255.200:6443'}}]\n"


@pytest.fixture
def lab(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    management = FakeCore(
        pods=[pod("kamaji-system", "kamaji-0", {"app": "kamaji"}), pod("cert-manager", "cm-0", {})],
        secrets=[helm_secret("kamaji-system", "kamaji", 1, "deployed"),
                 client.V1Secret(metadata=M(namespace="default", name="tenant-a-admin-kubeconfig", labels={}),
                                 data={"admin.conf": base64.b64encode(ADMIN.encode()).decode()})],
        logs={"kamaji-0": "kamaji: reconciling tenant-a", "cm-0": "cert-manager ok"},
        events=[client.CoreV1Event(metadata=M(name="e1"), involved_object=client.V1ObjectReference(
            kind="Pod", namespace="kamaji-system", name="kamaji-0"), reason="Started", message="started", type="Normal")],
    )
    tenant = FakeCore(
        pods=[pod("kube-system", "hami-scheduler-0", {"app.kubernetes.io/component": "hami-scheduler"},
                  waiting="CrashLoopBackOff")],
        secrets=[helm_secret("kube-system", "hami", 1, "pending-install")],
        logs={},
        events=[client.CoreV1Event(metadata=M(name="e2"), involved_object=client.V1ObjectReference(
            kind="Pod", namespace="kube-system", name="hami-scheduler-0"), reason="BackOff",
            message="Back-off restarting failed container", type="Warning")],
    )
    apis = {"management": management, "tenant-a": tenant}
    monkeypatch.setattr(diagnostics, "core_api", lambda api: apis[api])
    monkeypatch.setattr(diagnostics, "custom_api", lambda api: FakeCustom(
        [{"metadata": {"name": "tenant-a", "namespace": "default"}, "status": {"kubernetesResources": {"version": {"status": "Ready"}}}}]))
    return apis


def test_a_failed_check_leaves_every_part_of_the_lab(tmp_path: Path, lab: dict[str, Any]) -> None:
    collector = diagnostics.collect(tmp_path, "after 1 failed check(s) (test_04)", lambda: "management",
                                    {"tenant-a": lambda: "tenant-a"})
    read = {path.name: path.read_text() for path in tmp_path.iterdir()}
    assert "worker Ready=True allocatable={'nvidia.com/gpu': '10'}" in read["tenant-a-nodes.txt"]
    assert "hami.io/node-handshake" in read["tenant-a-nodes.txt"] and "other" not in read["tenant-a-nodes.txt"]
    assert "kube-system/hami-scheduler-0 phase=Running" in read["tenant-a-pods.txt"]
    assert "waiting=['main:CrashLoopBackOff']" in read["tenant-a-pods.txt"]
    assert "Warning Pod kube-system/hami-scheduler-0 BackOff: Back-off restarting" in read["tenant-a-events.txt"]
    assert read["tenant-a-helm-releases.txt"] == "kube-system/hami revision=1 status=pending-install\n"
    assert read["management-helm-releases.txt"] == "kamaji-system/kamaji revision=1 status=deployed\n"
    assert "<no log: " in read["tenant-a-logs.txt"] and "waiting to start" in read["tenant-a-logs.txt"]
    assert "==== kamaji-system/kamaji-0/main\nkamaji: reconciling tenant-a" in read["management-logs.txt"]
    assert "name: tenant-a" in read["management-tenantcontrolplanes.yaml"]
    assert "SECRET-RELEASE-DATA" not in "".join(read.values()) and "172.18.255.200" not in "".join(read.values())
    assert read["diagnostics.md"].startswith("Diagnostics collected after 1 failed check(s) (test_04), before anything")
    assert "`pulumi.log`" in read["diagnostics.md"] and collector.failed == []
    for cluster in ("management", "tenant-a"):
        for part in ("nodes", "pods", "events", "helm-releases", "logs"):
            assert f"`{cluster}-{part}.txt`" in read["diagnostics.md"]


def test_after_a_failed_deploy_the_tenants_are_found_through_the_management_cluster(
    tmp_path: Path, lab: dict[str, Any]
) -> None:
    connected: list[str] = []

    def connect_tenant(kubeconfig: str) -> str:
        connected.append(kubeconfig)
        return "tenant-a"

    diagnostics.collect(tmp_path, "after the deploy failed", lambda: "management", connect_tenant=connect_tenant)
    assert connected == [ADMIN], "the admin kubeconfig Kamaji wrote"
    assert (tmp_path / "tenant-a-helm-releases.txt").read_text() == "kube-system/hami revision=1 status=pending-install\n"


def test_what_cannot_be_collected_is_written_down(tmp_path: Path, lab: dict[str, Any]) -> None:
    def unreachable() -> Any:
        raise ConnectionRefusedError("kind cluster gone")

    collector = diagnostics.collect(tmp_path, "after the deploy failed", unreachable, connect_tenant=lambda k: k)
    assert (tmp_path / "management-unreachable.txt").read_text() == "ConnectionRefusedError: kind cluster gone\n"
    assert "management: unreachable: ConnectionRefusedError: kind cluster gone" in (tmp_path / "diagnostics.md").read_text()
    assert collector.failed and not (tmp_path / "management-pods.txt").exists()


def test_a_dump_that_fails_does_not_stop_the_others(tmp_path: Path, lab: dict[str, Any]) -> None:
    def broken(label_selector: str | None = None) -> Any:
        raise ApiException(status=403, reason="Forbidden")

    lab["tenant-a"].list_secret_for_all_namespaces = broken
    collector = diagnostics.collect(tmp_path, "x", lambda: "management", {"tenant-a": lambda: "tenant-a"})
    assert "<could not collect: " in (tmp_path / "tenant-a-helm-releases.txt").read_text()
    assert (tmp_path / "tenant-a-logs.txt").exists() and len(collector.failed) == 1
    assert "Could not collect:\n- tenant-a-helm-releases.txt: ApiException" in (tmp_path / "diagnostics.md").read_text()
