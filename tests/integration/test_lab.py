# mypy: disable-error-code="union-attr"
# The kubernetes client types every status/metadata field as Optional; a None here fails the test anyway.
"""The live checks 1-13 against a deployed throwaway stack (see conftest.lab), in modes sim and sim-nvml.

Tests run in file order and share one stack; each one removes the pods it created (and waits until
they are gone) so the next one sees empty GPUs. test_13 destroys the stack, so it runs last (marker
``e2e_last``), after the sim-nvml checks of test_nvml.py too. Check 6 reads what the mock-GPU agent
registers and runs in mode sim only; test_nvml.py checks what HAMi's own device plugin registers.
"""

from __future__ import annotations

import time
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.integration import checks
from tests.integration.conftest import POLICY_PACK_DIR, DeployedLab, host_leftovers
from tests.integration.support import (
    DEVICES_ALLOCATED_ANNOTATION,
    FIRST_POD_STAGE,
    NODE_REGISTER_ANNOTATION,
    TEN_PODS_STAGE,
    filtering_failed_messages,
    ipv4_in_range,
    parse_devices_allocated,
    parse_register_annotation,
    preview_then_up,
    wait_for,
    worker_nodes,
)

pytestmark = pytest.mark.e2e

# The dev stack's GPUs (tests/test_integration_support.py keeps this in step with Pulumi.dev.yaml).
EXPECTED_INVENTORY = {
    # What HAMi registers for these cards on a real host: NVML's name and total (an L4 reports 23034 MiB).
    "tenant-a": {"type": "NVIDIA A100-SXM4-80GB", "devmem": 81920, "devices": 1},
    "tenant-b": {"type": "NVIDIA L4", "devmem": 23034, "devices": 2},
}
SPLIT_COUNT = 10
POD_IMAGE = "registry.k8s.io/pause:3.10"
NAMESPACE = "default"
BIND_PHASE_ANNOTATION = "hami.io/bind-phase"
NODE_LOCK_ANNOTATION = "hami.io/mutex.lock"
# Who completes HAMi's bind (bind-phase success, node lock released) in each simulated mode.
BINDER = {"sim": "the mock-gpu-agent", "sim-nvml": "HAMi's device plugin (its Allocate)"}


def binder(lab: DeployedLab) -> str:
    return BINDER.get(lab.mode, f"the device plugin of mode {lab.mode}")


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
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name, labels={"gpu-tenancy.io/e2e": "true"}), spec=spec)


def create_pod(core: client.CoreV1Api, pod: client.V1Pod) -> client.V1Pod:
    return core.create_namespaced_pod(NAMESPACE, pod)


def delete_pods(core: client.CoreV1Api, names: list[str], timeout_s: float = 90) -> None:
    """Delete and wait until gone: HAMi counts a pod's devices until the pod object disappears."""
    for name in names:
        try:
            core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise

    def gone() -> bool:
        remaining = {p.metadata.name for p in core.list_namespaced_pod(NAMESPACE).items}
        return not remaining.intersection(names)

    wait_for(gone, timeout_s=timeout_s, message=f"pods {names} to be deleted")


def pod_phase(core: client.CoreV1Api, name: str) -> str:
    return str(core.read_namespaced_pod(name, NAMESPACE).status.phase)


def describe_pods(core: client.CoreV1Api, names: list[str], node: str | None = None) -> str:
    """One line per pod (phase, HAMi bind phase) plus the node lock: what to look at when pods stall."""
    try:
        return _describe_pods(core, names, node)
    except Exception as error:  # diagnostics must never hide the original failure
        return f"<could not describe pods: {error!r}>"


def _describe_pods(core: client.CoreV1Api, names: list[str], node: str | None) -> str:
    lines = []
    for name in names:
        try:
            pod = core.read_namespaced_pod(name, NAMESPACE)
        except ApiException as error:
            lines.append(f"{name}: {error.status}")
            continue
        annotations = pod.metadata.annotations or {}
        lines.append(
            f"{name}: phase={pod.status.phase} node={pod.spec.node_name} "
            f"bind-phase={annotations.get(BIND_PHASE_ANNOTATION)} devices={annotations.get(DEVICES_ALLOCATED_ANNOTATION)}"
        )
    if node:
        lock = (core.read_node(node).metadata.annotations or {}).get(NODE_LOCK_ANNOTATION)
        lines.append(f"node {node} {NODE_LOCK_ANNOTATION}={lock!r}")
    return "\n".join(lines)


def wait_running(core: client.CoreV1Api, name: str, timeout_s: float = 180) -> client.V1Pod:
    return wait_for(
        lambda: (pod := core.read_namespaced_pod(name, NAMESPACE)).status.phase == "Running" and pod,
        timeout_s=timeout_s,
        message=f"pod {NAMESPACE}/{name} to be Running (see FilteringFailed events, hami-scheduler and "
        "mock-gpu-agent or hami-device-plugin logs in reports/e2e/<stack>/)",
    )


def allocated_devices(pod: client.V1Pod) -> list[list[dict[str, Any]]]:
    annotations = pod.metadata.annotations or {}
    assert DEVICES_ALLOCATED_ANNOTATION in annotations, (
        f"pod {pod.metadata.name} has no {DEVICES_ALLOCATED_ANNOTATION}; HAMi did not schedule it "
        f"(schedulerName={pod.spec.scheduler_name})"
    )
    return parse_devices_allocated(annotations[DEVICES_ALLOCATED_ANNOTATION])


def tenant_core(lab: DeployedLab, tenant: str) -> client.CoreV1Api:
    return client.CoreV1Api(lab.tenant_client(tenant))


def only_node(lab: DeployedLab, tenant: str) -> str:
    nodes = worker_nodes(lab.outputs, tenant)
    assert len(nodes) == 1, f"the sim stack gives {tenant} one worker node, outputs name {nodes}"
    return nodes[0]


def record_first_gpu_pod(lab: DeployedLab, seconds: float) -> None:
    if FIRST_POD_STAGE not in lab.timings.seconds_by_stage:
        lab.timings.record(FIRST_POD_STAGE, seconds)


def test_01_kamaji_and_datastore_ready(lab: DeployedLab) -> None:
    apps = client.AppsV1Api(lab.management_client())
    deployments = apps.list_namespaced_deployment("kamaji-system", label_selector="app.kubernetes.io/name=kamaji").items
    assert deployments, "no Kamaji deployment in kamaji-system (label app.kubernetes.io/name=kamaji); see pulumi.log"
    for deployment in deployments:
        ready, wanted = deployment.status.ready_replicas or 0, deployment.spec.replicas or 1
        assert ready >= wanted, (
            f"Kamaji deployment {deployment.metadata.name} has {ready}/{wanted} ready replicas; "
            "check `kubectl -n kamaji-system describe deploy` in the management cluster"
        )
    custom = client.CustomObjectsApi(lab.management_client())
    datastores: list[Any] = cast(
        dict[str, Any], custom.list_cluster_custom_object("kamaji.clastix.io", "v1alpha1", "datastores")
    )["items"]
    assert datastores, "no Kamaji DataStore exists; the program declares `default`"
    not_ready = [d["metadata"]["name"] for d in datastores if (d.get("status") or {}).get("ready") is not True]
    assert not not_ready, f"Kamaji DataStore(s) not ready: {not_ready}; check the kamaji-etcd pods in kamaji-system"


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
        f"{tenant} endpoint {endpoint} is outside MetalLB range {metallb_range}; is the LoadBalancer IP from MetalLB?"
    )


@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_03_tenant_lists_exactly_its_own_worker_ready(lab: DeployedLab, tenant: str) -> None:
    worker = only_node(lab, tenant)
    nodes = tenant_core(lab, tenant).list_node().items
    names = [node.metadata.name for node in nodes]
    assert names == [worker], f"tenant {tenant} should list only node {worker}, got {names}"
    ready = {c.type: c.status for c in nodes[0].status.conditions or []}.get("Ready")
    assert ready == "True", f"node {worker} in tenant {tenant} is not Ready (Ready={ready}); check CNI and kube-proxy"


@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_04_hami_scheduler_running(lab: DeployedLab, tenant: str) -> None:
    pods = (
        tenant_core(lab, tenant)
        .list_namespaced_pod("kube-system", label_selector="app.kubernetes.io/component=hami-scheduler")
        .items
    )
    ready = [
        pod.metadata.name
        for pod in pods
        if pod.status.phase == "Running" and all(c.ready for c in pod.status.container_statuses or [])
    ]
    assert ready, (
        f"no Running, ready hami-scheduler pod in kube-system of {tenant}; found "
        f"{[(p.metadata.name, p.status.phase) for p in pods]} (image pull of kube-scheduler / hami?)"
    )


def test_05_webhook_sets_scheduler_through_konnectivity(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    name = "e2e-webhook"
    started = time.monotonic()
    created = create_pod(core, gpu_pod(name, {"nvidia.com/gpumem": "1000"}, scheduler=None))
    elapsed = time.monotonic() - started
    try:
        scheduler = created.spec.scheduler_name
        assert scheduler == "hami-scheduler", (
            f"HAMi's webhook did not mutate the pod (schedulerName={scheduler!r}, create took {elapsed:.1f}s; "
            "~10s means the API server timed out calling the webhook): check the konnectivity-agent pods in "
            "tenant-a's kube-system and the konnectivity-server sidecar of its TenantControlPlane"
        )
        limits = created.spec.containers[0].resources.limits or {}
        assert limits.get("nvidia.com/gpu") == "1", f"webhook should default nvidia.com/gpu to 1, limits={limits}"
    finally:
        delete_pods(core, [name])


@pytest.mark.e2e_mode(
    "sim", reason="reads the inventory the mock-GPU agent registers; test_nvml.py checks HAMi's device plugin's"
)
@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_06_inventory_annotation_and_allocatable(lab: DeployedLab, tenant: str) -> None:
    expected = EXPECTED_INVENTORY[tenant]
    core = tenant_core(lab, tenant)
    node_name = only_node(lab, tenant)
    node = core.read_node(node_name)
    annotation = (node.metadata.annotations or {}).get(NODE_REGISTER_ANNOTATION)
    assert annotation, f"node {node_name} of {tenant} lacks {NODE_REGISTER_ANNOTATION}; is the mock-gpu-agent running?"
    devices = parse_register_annotation(annotation)
    assert len(devices) == expected["devices"], f"{tenant}: expected {expected['devices']} devices, got {devices}"
    for device in devices:
        assert device["type"] == expected["type"] and device["devmem"] == expected["devmem"], (
            f"{tenant}: device {device} should be {expected['type']} with {expected['devmem']} MiB"
        )
        assert device.get("health") is True, f"{tenant}: device {device.get('id')} not healthy"
    slots = sum(int(device["count"]) for device in devices)
    assert slots == expected["devices"] * SPLIT_COUNT, f"{tenant}: {slots} slots, expected {SPLIT_COUNT} per GPU"

    def allocatable_matches() -> bool:
        allocatable = core.read_node(node_name).status.allocatable or {}
        return allocatable.get("nvidia.com/gpu") == str(slots)

    wait_for(
        allocatable_matches,
        timeout_s=60,
        message=f"{tenant}: node {node_name} allocatable nvidia.com/gpu == {slots} (agent patches status.capacity; "
        "the kubelet copies it into allocatable)",
    )


def test_07_fractional_sharing_on_a100(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    names = ["e2e-share-1", "e2e-share-2", "e2e-share-3"]
    started = time.monotonic()
    for name in names:
        create_pod(
            core, gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"})
        )
    try:
        wait_for(
            lambda: any(pod_phase(core, n) == "Running" for n in names),
            timeout_s=180,
            message="a first fractional pod on tenant-a to be Running",
        )
        record_first_gpu_pod(lab, time.monotonic() - started)
        for name in names:
            wait_running(core, name)
        node = only_node(lab, "tenant-a")
        registered = parse_register_annotation(
            (core.read_node(node).metadata.annotations or {}).get(NODE_REGISTER_ANNOTATION) or "[]"
        )
        pods = {name: core.read_namespaced_pod(name, NAMESPACE) for name in names}  # one pass: at once
        problems = checks.shared_card_problems(
            {name: allocated_devices(pod) for name, pod in pods.items()},
            {name: pod.spec.node_name for name, pod in pods.items()},
            {name: pod.status.phase for name, pod in pods.items()},
            registered, node, memory=20000, cores=30,
        )
        assert not problems, "\n".join(problems)
        try:
            wait_for(
                lambda: all(
                    (core.read_namespaced_pod(n, NAMESPACE).metadata.annotations or {}).get(BIND_PHASE_ANNOTATION)
                    == "success"
                    for n in names
                ),
                timeout_s=30,
                message=f"bind-phase success on every pod ({binder(lab)}'s job)",
            )
        except AssertionError as error:
            raise AssertionError(f"{error}\n{describe_pods(core, names, only_node(lab, 'tenant-a'))}") from None
    finally:
        delete_pods(core, names)


def test_08_spread_over_two_l4_and_two_gpu_pod(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-b")
    spread, both = ["e2e-spread-1", "e2e-spread-2"], "e2e-two-gpus"
    try:
        for name in spread:
            create_pod(core, gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}))
            wait_running(core, name)  # one at a time, so the second sees the first's usage
        uuids = {allocated_devices(core.read_namespaced_pod(n, NAMESPACE))[0][0]["uuid"] for n in spread}
        assert len(uuids) == 2, f"gpuSchedulerPolicy spread should place the pods on two different L4s, got {uuids}"
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
            lambda: filtering_failed_messages([e.to_dict() for e in core.list_namespaced_event(NAMESPACE).items], name),
            timeout_s=90,
            message=f"a FilteringFailed event for pod {name} requesting more than the A100's 81920 MiB",
        )
        pod = core.read_namespaced_pod(name, NAMESPACE)
        assert pod.status.phase == "Pending" and not pod.spec.node_name, (
            f"over-committed pod should stay Pending and unbound, is {pod.status.phase} on {pod.spec.node_name}; "
            f"messages: {messages}"
        )
    finally:
        delete_pods(core, [name])


# Dynamically linked (glibc, libpython): HAMi's Allocate preloads libvgpu.so into every process of a GPU
# container, which needs libcuda.so.1 and libnvidia-ml.so.1; `pause` is static and would not notice.
DYNAMIC_IMAGE = "python:3.11.11-slim-bookworm"


@pytest.mark.e2e_mode(
    "sim-nvml", "real", reason="HAMi-core is preloaded only where HAMi's device plugin allocates; sim has none"
)
def test_09b_dynamically_linked_gpu_pod_runs_to_completion(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-b")
    name = "e2e-dynamic"
    pod = gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"})
    pod.spec.containers[0].image = DYNAMIC_IMAGE
    pod.spec.containers[0].command = checks.DYNAMIC_COMMAND
    created = create_pod(core, pod)
    try:
        env = {e.name: e.value for e in created.spec.containers[0].env or []}
        phase = wait_for(
            lambda: (p := pod_phase(core, name)) in ("Succeeded", "Failed") and p,
            timeout_s=300,
            message=f"pod {name} ({DYNAMIC_IMAGE}) to run to completion",
        )
        problems = checks.dynamic_run_problems(lab.mode, phase, core.read_namespaced_pod_log(name, NAMESPACE), env)
        assert not problems, f"{name} ({DYNAMIC_IMAGE}): " + "\n".join(problems)
    finally:
        delete_pods(core, [name])


def test_09c_a_request_of_the_whole_registered_memory_fits_and_one_mib_more_waits(lab: DeployedLab) -> None:
    """An L4 registers 23034 MiB (NVML's total, as on a real host), so the plan's edge is the cluster's edge."""
    core = tenant_core(lab, "tenant-b")
    fits, waits = "e2e-l4-whole", "e2e-l4-over"
    try:
        create_pod(core, gpu_pod(fits, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "23034"}))
        wait_running(core, fits)
        create_pod(core, gpu_pod(waits, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "23035"}))
        messages = wait_for(
            lambda: filtering_failed_messages([e.to_dict() for e in core.list_namespaced_event(NAMESPACE).items], waits),
            timeout_s=90,
            message=f"a FilteringFailed event for pod {waits} asking one MiB more than an L4 registers",
        )
        assert any("CardInsufficientMemory" in m for m in messages), messages
    finally:
        delete_pods(core, [fits, waits])


@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")
@pytest.mark.parametrize(("viewer", "other"), [("tenant-a", "tenant-b"), ("tenant-b", "tenant-a")])
def test_10_isolation_between_tenants_and_management(lab: DeployedLab, viewer: str, other: str) -> None:
    core = tenant_core(lab, viewer)
    other_core = tenant_core(lab, other)
    other_worker = only_node(lab, other)
    marker = f"e2e-only-in-{other}"
    other_core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=marker)))
    try:
        nodes = [n.metadata.name for n in core.list_node().items]
        namespaces = [n.metadata.name for n in core.list_namespace().items]
        pods = [(p.metadata.namespace, p.metadata.name, p.spec.node_name)
                for p in core.list_pod_for_all_namespaces().items]
    finally:
        other_core.delete_namespace(marker)
    # The viewer's credentials, presented to the other API servers (TLS unverified so the request lands):
    viewer_kubeconfig = lab.tenant_kubeconfig(viewer)
    targets = {
        "management cluster": lab.management_client().configuration.host,
        other: lab.tenant_client(other).configuration.host,
    }
    statuses = {}
    for target, host in targets.items():
        api = lab.api_client(viewer_kubeconfig, verify_ssl=False)
        api.configuration.host = host
        statuses[f"{target} ({host})"] = checks.http_status(lambda api=api: client.CoreV1Api(api).list_namespace())
    problems = checks.isolation_problems(viewer, other, nodes, only_node(lab, viewer), other_worker, namespaces, marker,
                                  pods, statuses)
    assert not problems, "\n".join(problems)


def ten_fractional_pods_running_within_60s(lab: DeployedLab, core: client.CoreV1Api, names: list[str]) -> None:
    """Create ten pods of one A100 slot each on tenant-a and wait until all are Running, 60 s from the first
    create. The caller deletes them."""
    assert len(names) == SPLIT_COUNT, "ten pods fill the A100's ten slots"
    node = only_node(lab, "tenant-a")
    started = time.monotonic()
    deadline = started + 60  # measured from the first create
    try:
        for name in names:
            create_pod(
                core, gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "5"})
            )
        wait_for(
            lambda: all(pod_phase(core, n) == "Running" for n in names),
            timeout_s=max(deadline - time.monotonic(), 0),
            interval_s=1,
            message="all ten fractional pods on tenant-a's A100 Running within 60 s of creation; a stuck "
            f"bind-phase=allocating or a lingering node lock points at {binder(lab)}",
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\n{describe_pods(core, names, node)}") from None
    lab.timings.record(TEN_PODS_STAGE, time.monotonic() - started)


def test_11_ten_fractional_pods_running_within_60s(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    names = [f"e2e-burst-{index}" for index in range(10)]
    try:
        ten_fractional_pods_running_within_60s(lab, core, names)
    finally:
        delete_pods(core, names)


def test_12_second_up_no_changes_and_policy_preview_clean(lab: DeployedLab) -> None:
    from pulumi import automation as auto

    changed: list[str] = []
    violations: list[str] = []

    def collect_changes(event: auto.EngineEvent) -> None:
        step = event.resource_pre_event
        if step is not None and step.metadata.op not in (auto.OpType.SAME, auto.OpType.READ, auto.OpType.REFRESH):
            changed.append(f"{step.metadata.op.value} {step.metadata.urn}")

    def collect_policy_events(event: auto.EngineEvent) -> None:
        if event.policy_event is not None:
            policy = event.policy_event
            violations.append(f"[{policy.enforcement_level}] {policy.policy_name}: {policy.message}")

    up = preview_then_up(lab.stack, [str(POLICY_PACK_DIR)], on_output=lab.pulumi_log, on_event=collect_changes)
    summary = {
        op: n for op, n in (up.summary.resource_changes or {}).items() if op not in ("same", "read", "refresh") and n
    }
    assert not summary and not changed, f"second `pulumi up` is not idempotent: {summary}\n" + "\n".join(changed)
    try:
        lab.stack.preview(
            on_output=lab.pulumi_log,
            on_event=collect_policy_events,
            policy_packs=[str(POLICY_PACK_DIR)],
            color="never",
        )
    except auto.CommandError as error:
        pytest.fail(f"`pulumi preview --policy-pack policies` failed: {violations or error}")
    assert not violations, "policy pack reported violations:\n" + "\n".join(violations)


@pytest.mark.e2e_last
def test_13_teardown_leaves_nothing(lab: DeployedLab) -> None:
    cluster = lab.output("kindClusterName")
    assert lab.destroy(), f"`pulumi destroy` failed twice; see {lab.log_path}"
    left = host_leftovers(cluster)
    assert not left, f"left on the Docker host after destroy: {left}"
