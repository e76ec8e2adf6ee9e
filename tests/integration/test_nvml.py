# mypy: disable-error-code="union-attr"
# The kubernetes client types every status/metadata field as Optional; a None here fails the test anyway.
"""Checks 14-17, mode sim-nvml only (`make e2e-nvml`): HAMi's own device plugin on NVIDIA's mock NVML.

They share the throwaway stack of test_lab.py (conftest.lab), run after its checks 1-12 and before its
teardown (check 13, marker ``e2e_last``), and skip in mode sim, where the mock-GPU agent stands in for
the device plugin. Each check removes the pods it created.

What they prove: HAMi v2.10.0's unmodified device plugin finds the mock's GPUs through NVML and registers
exactly the declared ones (annotation, allocatable), and its Allocate completes the bind of every pod
(bind-phase, node lock) with no agent deployed; a pod can run the mock driver's nvidia-smi. What they do
not: HAMi-core (libvgpu.so, which Allocate preloads into GPU containers) on the mock. Nothing enforces
memory or compute limits (there is no CUDA behind the mock); the pods here never call CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from gpu_tenancy.contract import versions
from gpu_tenancy.hami.protocol import NODE_REGISTER_ANNOTATION, parse_register_annotation
from tests.integration.conftest import DeployedLab
from tests.integration.support import (
    DEVICE_PLUGIN_SELECTOR,
    DEVICES_TO_ALLOCATE_ANNOTATION,
    MOCK_GPU_AGENT_SELECTOR,
    NVML_MOCK_COMPONENT_SELECTOR,
    NVML_MOCK_DRIVER_ROOT,
    WaitTimeout,
    allocation_consumed,
    nvidia_smi_gpus,
    nvml_inventory,
    nvml_mock_image,
    register_problems,
    wait_for,
)
from tests.integration.test_lab import (
    BIND_PHASE_ANNOTATION,
    EXPECTED_INVENTORY,
    NAMESPACE,
    SPLIT_COUNT,
    allocated_devices,
    delete_pods,
    describe_pods,
    only_node,
    ten_fractional_pods_running_within_60s,
    tenant_core,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.e2e_mode(
        "sim-nvml", reason="checks HAMi's own device plugin on NVIDIA's mock NVML; run `make e2e-nvml`"
    ),
]

NVIDIA_SMI_POD = "e2e-nvidia-smi"
# It sets CUDA_DISABLE_CONTROL (below), which the tenants' GPU-access admission policy refuses everywhere but
# in kube-system (gpu_tenancy/builders/gpu_access/gpu_access.py): the check runs there, as the platform admin.
NVIDIA_SMI_NAMESPACE = "kube-system"
NVIDIA_SMI_LOG = "test_17-nvidia-smi.log"


def wait_holding(check: Callable[[], tuple[bool, str]], *, timeout_s: float, message: str) -> str:
    """Poll ``check`` -> (holds, what was seen) until it holds; on timeout, fail with the last thing seen."""
    last = ["nothing read yet"]

    def probe() -> str | None:
        holds, seen = check()
        last[0] = seen
        return seen if holds else None

    try:
        return wait_for(probe, timeout_s=timeout_s, message=message)
    except WaitTimeout as error:
        raise AssertionError(f"{error}; last seen: {last[0]}") from None


def daemon_sets_ready(apps: client.AppsV1Api, selector: str) -> tuple[bool, str]:
    """Every DaemonSet with the label runs a ready pod on each node it selects (and selects at least one)."""
    items = apps.list_daemon_set_for_all_namespaces(label_selector=selector).items
    seen = [
        f"{d.metadata.namespace}/{d.metadata.name} ready {d.status.number_ready or 0}/"
        f"{d.status.desired_number_scheduled or 0}"
        for d in items
    ]
    holds = bool(items) and all(
        (d.status.desired_number_scheduled or 0) >= 1 and (d.status.number_ready or 0) == d.status.desired_number_scheduled
        for d in items
    )
    return holds, "; ".join(seen) or f"no DaemonSet labelled {selector}"


@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_14_device_plugin_and_mock_nvml_ready_without_the_agent(lab: DeployedLab, tenant: str) -> None:
    apps = client.AppsV1Api(lab.tenant_client(tenant))
    agents = [
        f"{d.metadata.namespace}/{d.metadata.name}"
        for d in apps.list_daemon_set_for_all_namespaces(label_selector=MOCK_GPU_AGENT_SELECTOR).items
    ]
    assert not agents, (
        f"{tenant} runs the mock-GPU agent ({agents}) in mode sim-nvml, where HAMi's device plugin completes "
        "the binds; the program deploys the agent only in mode sim"
    )
    for selector, what in (
        (NVML_MOCK_COMPONENT_SELECTOR, f"the mock NVML (kube-system/{tenant}-mock-nvml)"),
        (DEVICE_PLUGIN_SELECTOR, "HAMi's device plugin"),
    ):
        wait_holding(
            lambda selector=selector: daemon_sets_ready(apps, selector),
            timeout_s=120,
            message=f"{tenant}: {what} ({selector}) Ready on the worker (desired 0: no node matches its nodeSelector; "
            "not ready: see the hami-device-plugin and nvml-mock logs in reports/e2e/<stack>/, the plugin "
            "panics when it finds no libnvidia-ml.so.1 under nvidiaDriverRoot)",
        )


@pytest.mark.parametrize("tenant", sorted(EXPECTED_INVENTORY))
def test_15_device_plugin_registers_exactly_the_declared_gpus(lab: DeployedLab, tenant: str) -> None:
    expected = nvml_inventory(lab.config["gpu-tenancy:tenants"])[tenant]
    slots = sum(expected.values()) * SPLIT_COUNT  # HAMi's deviceSplitCount (chart default 10) per GPU
    core = tenant_core(lab, tenant)
    node_name = only_node(lab, tenant)

    def registered() -> tuple[bool, str]:
        node = core.read_node(node_name)
        value = (node.metadata.annotations or {}).get(NODE_REGISTER_ANNOTATION)
        if not value:
            return False, f"no {NODE_REGISTER_ANNOTATION} on the node"
        problems = register_problems(parse_register_annotation(value), expected, SPLIT_COUNT)
        allocatable = (node.status.allocatable or {}).get("nvidia.com/gpu")
        if allocatable != str(slots):
            problems.append(f"allocatable nvidia.com/gpu is {allocatable!r}, expected {slots}")
        return not problems, "; ".join(problems) or value

    wait_holding(
        registered,
        timeout_s=120,
        message=f"{tenant}: HAMi's device plugin to register exactly {dict(expected)} (type = the mock's NVML "
        f"name, MiB exact, healthy, {SPLIT_COUNT} slots each) on node {node_name} and the kubelet to offer "
        f"{slots} nvidia.com/gpu",
    )


def test_16_device_plugin_completes_ten_binds_within_60s(lab: DeployedLab) -> None:
    # The pods run registry.k8s.io/pause (test_lab.gpu_pod), a static binary: the /etc/ld.so.preload that
    # Allocate mounts (HAMi-core's libvgpu.so) is never read, so they need no CUDA_DISABLE_CONTROL.
    core = tenant_core(lab, "tenant-a")
    names = [f"e2e-nvml-burst-{index}" for index in range(10)]

    def marked_by_allocate() -> tuple[bool, str]:
        unmarked = []
        for name in names:
            annotations = core.read_namespaced_pod(name, NAMESPACE).metadata.annotations or {}
            phase, left = annotations.get(BIND_PHASE_ANNOTATION), annotations.get(DEVICES_TO_ALLOCATE_ANNOTATION)
            if phase != "success" or not allocation_consumed(left):
                unmarked.append(f"{name}: {BIND_PHASE_ANNOTATION}={phase!r} {DEVICES_TO_ALLOCATE_ANNOTATION}={left!r}")
        return not unmarked, "; ".join(unmarked) or "every pod marked"

    try:
        ten_fractional_pods_running_within_60s(lab, core, names)
        try:
            wait_holding(
                marked_by_allocate,
                timeout_s=15,
                message="bind-phase success and no device left to allocate on every pod: HAMi's device plugin's "
                "Allocate marks both (no mock-GPU agent runs in sim-nvml, and it would leave the devices)",
            )
        except AssertionError as error:
            raise AssertionError(f"{error}\n{describe_pods(core, names, only_node(lab, 'tenant-a'))}") from None
    finally:
        delete_pods(core, names)


def nvidia_smi_pod(image: str) -> client.V1Pod:
    """One A100 slice, the mock's driver root mounted where setup.sh put it, running its nvidia-smi -L.

    nvidia-smi's RUNPATH ($ORIGIN/../lib64) finds the mock libnvidia-ml.so.1, which finds its configuration
    at <driver root>/config/config.yaml through /proc/self/maps. The image is the mock's own (Debian bookworm,
    glibc), already in the worker's containerd. CUDA_DISABLE_CONTROL=true keeps Allocate from mounting
    /etc/ld.so.preload, so HAMi-core's libvgpu.so stays out of nvidia-smi: this checks the mock, not HAMi-core.
    """
    volume = "nvml-mock-driver"
    container = client.V1Container(
        name="main",
        image=image,
        image_pull_policy="Never",
        command=[f"{NVML_MOCK_DRIVER_ROOT}/usr/bin/nvidia-smi", "-L"],
        env=[client.V1EnvVar(name="CUDA_DISABLE_CONTROL", value="true")],
        resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"}),
        volume_mounts=[client.V1VolumeMount(name=volume, mount_path=NVML_MOCK_DRIVER_ROOT, read_only=True)],
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=NVIDIA_SMI_POD, labels={"gpu-tenancy.io/e2e": "true"}),
        spec=client.V1PodSpec(
            containers=[container],
            restart_policy="Never",
            termination_grace_period_seconds=0,
            scheduler_name="hami-scheduler",
            volumes=[
                client.V1Volume(
                    name=volume,
                    host_path=client.V1HostPathVolumeSource(path=NVML_MOCK_DRIVER_ROOT, type="Directory"),
                )
            ],
        ),
    )


def _container_states(pod: client.V1Pod) -> str:
    states = []
    for status in pod.status.container_statuses or []:
        state = status.state
        if state.waiting:
            states.append(f"{status.name} waiting: {state.waiting.reason} {state.waiting.message or ''}".strip())
        elif state.terminated:
            states.append(f"{status.name} exited {state.terminated.exit_code} ({state.terminated.reason})")
        else:
            states.append(f"{status.name} running")
    return "; ".join(states) or "no container status yet"


def test_17_nvidia_smi_in_a_pod_lists_the_mock_gpu(lab: DeployedLab) -> None:
    image = nvml_mock_image(getattr(versions, "NVML_MOCK_COMMIT", None))
    if image is None:
        pytest.skip("gpu_tenancy.contract.versions has no NVML_MOCK_COMMIT (40 hex digits): the mock's image tag is unknown")
    (tenant_a,) = [t for t in lab.config["gpu-tenancy:tenants"] if t["name"] == "tenant-a"]
    expected = sorted(str(g["model"]) for g in tenant_a["gpus"] for _ in range(int(g["count"])))
    core = tenant_core(lab, "tenant-a")
    core.create_namespaced_pod(NVIDIA_SMI_NAMESPACE, nvidia_smi_pod(image))
    try:
        last: list[Any] = [None]

        def finished() -> client.V1Pod | None:
            pod = last[0] = core.read_namespaced_pod(NVIDIA_SMI_POD, NVIDIA_SMI_NAMESPACE)
            return pod if pod.status.phase in ("Succeeded", "Failed") else None

        try:
            pod = wait_for(
                finished, timeout_s=180, message=f"pod {NVIDIA_SMI_NAMESPACE}/{NVIDIA_SMI_POD} (nvidia-smi -L) to exit"
            )
        except WaitTimeout as error:
            states = _container_states(last[0]) if last[0] is not None else "never read"
            raise AssertionError(
                f"{error}: {states} (ErrImageNeverPull: {image} is not in the worker's containerd)\n"
                f"{describe_pods(core, [NVIDIA_SMI_POD])}"
            ) from None
        try:
            log = core.read_namespaced_pod_log(NVIDIA_SMI_POD, NVIDIA_SMI_NAMESPACE, container="main")
        except Exception as error:  # the phase and exit code below still tell what happened
            log = f"<no log: {error!r}>"
        (lab.run_dir / NVIDIA_SMI_LOG).write_text(log, encoding="utf-8")
        assert pod.status.phase == "Succeeded", (
            f"nvidia-smi -L failed in the pod ({_container_states(pod)}); its output (also in "
            f"{lab.run_dir / NVIDIA_SMI_LOG}):\n{log}"
        )
        gpus = nvidia_smi_gpus(log)
        assert sorted(name for _, name, _ in gpus) == expected, (
            f"nvidia-smi -L should list {expected} (tenant-a's declared GPUs by their NVML names), listed:\n{log}"
        )
        allocated = {device["uuid"] for device in allocated_devices(pod)[0]}
        assert allocated and allocated <= {uuid for _, _, uuid in gpus}, (
            f"the GPU HAMi registered and allocated to the pod, {sorted(allocated)}, should be among those "
            f"nvidia-smi lists: {[uuid for _, _, uuid in gpus]}"
        )
    finally:
        core.delete_namespaced_pod(NVIDIA_SMI_POD, NVIDIA_SMI_NAMESPACE, grace_period_seconds=0)
