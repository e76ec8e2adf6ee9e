# mypy: disable-error-code="union-attr"
# The kubernetes client types every status/metadata field as Optional; a None here fails the test anyway.
"""The 13 live checks against a deployed throwaway stack (see conftest.lab)."""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration.conftest import DeployedLab
from tests.integration.support import (
    DEVICES_ALLOCATED_ANNOTATION,
    NODE_REGISTER_ANNOTATION,
    filtering_failed_messages,
    ipv4_in_range,
    parse_devices_allocated,
    parse_register_annotation,
    wait_for,
)

pytestmark = pytest.mark.e2e

EXPECTED_INVENTORY = {
    "tenant-a": {"type": "NVIDIA-A100-SXM4-80GB", "devmem": 81920, "devices": 1},
    "tenant-b": {"type": "NVIDIA-L4", "devmem": 24576, "devices": 2},
}
POD_IMAGE = "registry.k8s.io/pause:3.10"


def gpu_pod(name: str, limits: dict[str, str], scheduler: str | None = "hami-scheduler") -> client.V1Pod:
    spec = client.V1PodSpec(
        containers=[
            client.V1Container(name="main", image=POD_IMAGE, resources=client.V1ResourceRequirements(limits=limits))
        ],
        restart_policy="Never",
        termination_grace_period_seconds=0,
    )
    if scheduler:
        spec.scheduler_name = scheduler
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=spec)


def create_pod(core: client.CoreV1Api, pod: client.V1Pod, namespace: str = "default") -> None:
    core.create_namespaced_pod(namespace, pod)


def delete_pods(core: client.CoreV1Api, names: list[str], namespace: str = "default") -> None:
    for name in names:
        try:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise


def wait_running(core: client.CoreV1Api, name: str, timeout_s: float = 180) -> client.V1Pod:
    return wait_for(
        lambda: (pod := core.read_namespaced_pod(name, "default")).status.phase == "Running" and pod,
        timeout_s=timeout_s,
        message=f"pod default/{name} to be Running (check hami-scheduler logs and FilteringFailed events)",
    )


def allocated_devices(pod: client.V1Pod) -> list[list[dict[str, Any]]]:
    annotations = pod.metadata.annotations or {}
    assert DEVICES_ALLOCATED_ANNOTATION in annotations, (
        f"pod {pod.metadata.name} has no {DEVICES_ALLOCATED_ANNOTATION}; HAMi did not schedule it"
    )
    return parse_devices_allocated(annotations[DEVICES_ALLOCATED_ANNOTATION])


def tenant_core(lab: DeployedLab, tenant: str) -> client.CoreV1Api:
    return client.CoreV1Api(lab.tenant_client(tenant))


def test_01_kamaji_and_datastore_ready(lab: DeployedLab) -> None:
    apps = client.AppsV1Api(lab.management_client())
    deployments = apps.list_deployment_for_all_namespaces(label_selector="app.kubernetes.io/name=kamaji").items
    assert deployments, "no Kamaji deployment found in the management cluster (label app.kubernetes.io/name=kamaji)"
    for deployment in deployments:
        assert (deployment.status.ready_replicas or 0) >= 1, f"Kamaji deployment {deployment.metadata.name} not ready"
    custom = client.CustomObjectsApi(lab.management_client())
    datastores: list[Any] = cast(
        dict[str, Any], custom.list_cluster_custom_object("kamaji.clastix.io", "v1alpha1", "datastores")
    )["items"]
    assert datastores, "no Kamaji DataStore exists; the default datastore was not installed"


@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_02_tenant_control_plane_ready_with_endpoint_in_metallb_range(lab: DeployedLab, tenant: str) -> None:
    custom = client.CustomObjectsApi(lab.management_client())
    tcp = cast(
        dict[str, Any],
        custom.get_namespaced_custom_object("kamaji.clastix.io", "v1alpha1", tenant, "tenantcontrolplanes", tenant),
    )
    status = tcp.get("status", {}).get("kubernetesResources", {}).get("version", {}).get("status")
    assert status == "Ready", f"TenantControlPlane {tenant}/{tenant} status is {status!r}, expected Ready"
    endpoint = lab.output("tenants")[tenant]["endpoint"]
    metallb_range = lab.output("metallbRange")
    assert ipv4_in_range(endpoint, metallb_range), (
        f"{tenant} endpoint {endpoint} is outside MetalLB range {metallb_range}"
    )


@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_03_tenant_lists_exactly_its_own_worker_ready(lab: DeployedLab, tenant: str) -> None:
    worker = lab.output("workers")[tenant]
    nodes = tenant_core(lab, tenant).list_node().items
    names = [node.metadata.name for node in nodes]
    assert names == [worker], f"tenant {tenant} should list only node {worker}, got {names}"
    ready = {c.type: c.status for c in nodes[0].status.conditions}.get("Ready")
    assert ready == "True", f"node {worker} in tenant {tenant} is not Ready (Ready={ready})"


@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_04_hami_scheduler_running(lab: DeployedLab, tenant: str) -> None:
    pods = (
        tenant_core(lab, tenant)
        .list_namespaced_pod("kube-system", label_selector="app.kubernetes.io/component=hami-scheduler")
        .items
    )
    running = [pod.metadata.name for pod in pods if pod.status.phase == "Running"]
    assert running, f"no Running hami-scheduler pod in kube-system of {tenant}; found {[p.metadata.name for p in pods]}"


def test_05_webhook_sets_scheduler_through_konnectivity(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    name = "e2e-webhook"
    create_pod(core, gpu_pod(name, {"nvidia.com/gpumem": "1000"}, scheduler=None))
    try:
        scheduler = core.read_namespaced_pod(name, "default").spec.scheduler_name
        assert scheduler == "hami-scheduler", (
            f"webhook did not mutate the pod (schedulerName={scheduler!r}); check Konnectivity agents in tenant-a"
        )
    finally:
        delete_pods(core, [name])


@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_06_inventory_annotation_and_allocatable(lab: DeployedLab, tenant: str) -> None:
    expected = EXPECTED_INVENTORY[tenant]
    node = tenant_core(lab, tenant).read_node(lab.output("workers")[tenant])
    annotation = (node.metadata.annotations or {}).get(NODE_REGISTER_ANNOTATION)
    assert annotation, f"node of {tenant} lacks {NODE_REGISTER_ANNOTATION}; is the mock-GPU agent running?"
    devices = parse_register_annotation(annotation)
    assert len(devices) == expected["devices"], f"{tenant}: expected {expected['devices']} devices, got {devices}"
    for device in devices:
        assert device["type"] == expected["type"] and device["devmem"] == expected["devmem"], (
            f"{tenant}: bad device {device}"
        )
        assert device.get("health") is True, f"{tenant}: device {device['id']} not healthy"
    allocatable = node.status.allocatable or {}
    assert int(allocatable.get("nvidia.com/gpu", "0")) > 0, f"{tenant}: no allocatable nvidia.com/gpu ({allocatable})"


def test_07_fractional_sharing_on_a100(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    names = ["e2e-share-1", "e2e-share-2"]
    started = time.monotonic()
    for name in names:
        create_pod(
            core, gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"})
        )
    try:
        pods = [wait_running(core, name) for name in names]
        lab.timings.record("first GPU pod Running", time.monotonic() - started)
        uuids = {allocated_devices(pod)[0][0]["uuid"] for pod in pods}
        assert len(uuids) == 1, f"both fractional pods should share the single A100, got devices {uuids}"
        assert all(allocated_devices(pod)[0][0]["usedmem"] == 20000 for pod in pods), (
            "recorded gpumem differs from request"
        )
    finally:
        delete_pods(core, names)


def test_08_spread_over_two_l4_and_two_gpu_pod(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-b")
    spread, both = ["e2e-spread-1", "e2e-spread-2"], "e2e-two-gpus"
    for name in spread:
        create_pod(core, gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}))
    try:
        uuids = {allocated_devices(wait_running(core, name))[0][0]["uuid"] for name in spread}
        assert len(uuids) == 2, f"spread policy should place the pods on two different L4s, got {uuids}"
        delete_pods(core, spread)
        create_pod(core, gpu_pod(both, {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "4000"}))
        devices = allocated_devices(wait_running(core, both))[0]
        assert len({d["uuid"] for d in devices}) == 2, f"nvidia.com/gpu: 2 pod should get both L4s, got {devices}"
    finally:
        delete_pods(core, [*spread, both])


def test_09_overcommit_stays_pending_with_filtering_failed(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    name = "e2e-overcommit"
    create_pod(core, gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "90000"}))
    try:
        messages = wait_for(
            lambda: filtering_failed_messages([e.to_dict() for e in core.list_namespaced_event("default").items], name),
            timeout_s=90,
            message=f"a FilteringFailed event for pod {name} requesting more than the A100's 81920 MiB",
        )
        phase = core.read_namespaced_pod(name, "default").status.phase
        assert phase == "Pending", f"over-committed pod should stay Pending, is {phase}; messages: {messages}"
    finally:
        delete_pods(core, [name])


@pytest.mark.parametrize(("viewer", "other"), [("tenant-a", "tenant-b"), ("tenant-b", "tenant-a")])
def test_10_isolation_between_tenants_and_management(lab: DeployedLab, viewer: str, other: str) -> None:
    core = tenant_core(lab, viewer)
    other_worker = lab.output("workers")[other]
    assert other_worker not in [n.metadata.name for n in core.list_node().items], f"{viewer} sees {other}'s node"
    assert other not in [n.metadata.name for n in core.list_namespace().items], f"{viewer} sees namespace {other}"
    leaked = [p.metadata.name for p in core.list_pod_for_all_namespaces().items if p.spec.node_name == other_worker]
    assert not leaked, f"{viewer} sees pods on {other}'s worker: {leaked}"
    management_host = lab.management_client().configuration.host
    viewer_api = lab.tenant_client(viewer)
    viewer_api.configuration.host = management_host
    with pytest.raises((ApiException, Exception)) as raised:
        client.CoreV1Api(viewer_api).list_namespace(_request_timeout=10)
    status = getattr(raised.value, "status", None)
    assert status in (None, 401, 403), f"{viewer} credentials reached the management API (status {status})"


def test_11_ten_fractional_pods_running_within_60s(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    names = [f"e2e-burst-{index}" for index in range(10)]
    for name in names:
        create_pod(
            core, gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "5"})
        )
    try:
        wait_for(
            lambda: all(core.read_namespaced_pod(n, "default").status.phase == "Running" for n in names),
            timeout_s=60,
            message="all ten fractional pods on tenant-a's node to be Running (node-lock timeout too long?)",
        )
    finally:
        delete_pods(core, names)


def test_12_second_up_no_changes_and_policy_preview_clean(lab: DeployedLab) -> None:
    from pulumi import automation as auto

    from tests.integration.conftest import POLICY_PACK_DIR

    violations: list[str] = []

    def collect_policy_events(event: auto.EngineEvent) -> None:
        if event.policy_event is not None:
            violations.append(f"{event.policy_event.policy_name}: {event.policy_event.message}")

    up = lab.stack.up(on_output=lab.pulumi_log, policy_packs=[str(POLICY_PACK_DIR)])
    changed = {op: n for op, n in (up.summary.resource_changes or {}).items() if op != "same" and n}
    assert not changed, f"second `pulumi up` is not idempotent: {changed}"
    lab.stack.preview(on_output=lab.pulumi_log, on_event=collect_policy_events, policy_packs=[str(POLICY_PACK_DIR)])
    assert not violations, f"policy pack reported violations: {violations}"


def test_13_teardown_leaves_nothing(lab: DeployedLab) -> None:
    cluster = lab.output("kindClusterName")
    started = time.monotonic()
    lab.stack.destroy(on_output=lab.pulumi_log)
    lab.timings.record("destroy (checked)", time.monotonic() - started)
    docker = shutil.which("docker") or "docker"
    containers = subprocess.run(
        [docker, "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True
    ).stdout.split()
    leftovers = [name for name in containers if name.startswith(cluster)]
    assert not leftovers, f"containers left after destroy: {leftovers}"
    kind_clusters = subprocess.run(["kind", "get", "clusters"], capture_output=True, text=True).stdout.split()
    assert cluster not in kind_clusters, f"kind cluster {cluster} still exists after destroy"
    networks = subprocess.run(
        [docker, "network", "ls", "--format", "{{.Name}}"], capture_output=True, text=True
    ).stdout.split()
    assert not [n for n in networks if n.startswith(cluster)], f"docker networks left: {networks}"
