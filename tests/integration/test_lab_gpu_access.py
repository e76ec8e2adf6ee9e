# mypy: disable-error-code="union-attr"
"""Live checks of the admission policies that keep GPUs reachable only through HAMi, and of the host layer
under them (gpu_tenancy/builders/gpu_access/gpu_access.py, gpu_tenancy/builders/mock_gpu_agent/agent_admission.py), against the deployed stack.

* every mode: a pod asking for every GPU by environment, or switching HAMi-core off, is refused at
  admission, with the policy's own message;
* sim: the mock-GPU agent's account may set HAMi's bind phase on a pod of its node and nothing else;
* real: a pod outside the admission policy's scope (kube-system, admin only) that sets
  NVIDIA_VISIBLE_DEVICES=all without asking for a GPU runs under runc and sees no /dev/nvidia* device.
  This one runs only against a stack of mode real (a GPU host), which this suite does not deploy by itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from gpu_tenancy.builders.gpu_access import gpu_access
from tests.integration.conftest import DeployedLab
from tests.integration.support import wait_for
from tests.integration.test_lab import NAMESPACE, POD_IMAGE, delete_pods, only_node, tenant_core

pytestmark = pytest.mark.e2e

# An exact busybox release: `ls` and `sh` for the host-layer check.
BUSYBOX = "docker.io/library/busybox:1.37.0"


def env_pod(name: str, env: dict[str, str], limits: dict[str, str] | None = None) -> client.V1Pod:
    container = client.V1Container(
        name="main",
        image=POD_IMAGE,
        env=[client.V1EnvVar(name=k, value=v) for k, v in env.items()],
        resources=client.V1ResourceRequirements(limits=limits) if limits else None,
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(containers=[container], restart_policy="Never", termination_grace_period_seconds=0),
    )


def refused(core: client.CoreV1Api, pod: client.V1Pod) -> ApiException:
    try:
        core.create_namespaced_pod(NAMESPACE, pod)
    except ApiException as error:
        return error
    delete_pods(core, [pod.metadata.name])
    raise AssertionError(f"pod {pod.metadata.name} was admitted; policy {gpu_access.POLICY_NAME} should refuse it")


@pytest.mark.parametrize(
    ("name", "env", "limits"),
    [
        ("e2e-all-gpus-by-env", {"NVIDIA_VISIBLE_DEVICES": "all"}, None),
        ("e2e-hami-core-off", {"CUDA_DISABLE_CONTROL": "true"}, {"nvidia.com/gpumem": "1000"}),
    ],
)
def test_20_gpus_around_hami_are_refused_at_admission(
    lab: DeployedLab, name: str, env: dict[str, str], limits: dict[str, str] | None
) -> None:
    error = refused(tenant_core(lab, "tenant-a"), env_pod(name, env, limits))
    assert error.status in (403, 422), f"{error.status}: {error.body}"
    assert gpu_access.POLICY_NAME in str(error.body) and "NVIDIA_VISIBLE_DEVICES may only be none" in str(error.body)


@pytest.mark.e2e_mode("sim", reason="the mock-GPU agent runs in mode sim only")
def test_21_the_agent_may_only_set_the_bind_phase(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    name = "e2e-agent-rights"
    core.create_namespaced_pod(NAMESPACE, env_pod(name, {}))
    try:
        node = only_node(lab, "tenant-a")
        wait_for(lambda: core.read_namespaced_pod(name, NAMESPACE).spec.node_name == node, timeout_s=60,
                 message=f"pod {name} bound to {node}")
        agent = lab.tenant_client("tenant-a")
        agent.set_default_header("Impersonate-User", "system:serviceaccount:kube-system:tenant-a-mock-gpu-agent")
        as_agent = client.CoreV1Api(agent)
        as_agent.patch_namespaced_pod(name, NAMESPACE, {"metadata": {"annotations": {"hami.io/bind-phase": "success"}}})
        with pytest.raises(ApiException) as error:
            as_agent.patch_namespaced_pod(name, NAMESPACE, {"metadata": {"labels": {"stolen": "yes"}}})
        assert error.value.status in (403, 422) and "changes no pod spec or label" in str(error.value.body)
    finally:
        delete_pods(core, [name])


@pytest.mark.e2e_mode("real", reason="needs a GPU host: kind nodes have no NVIDIA runtime")
def test_22_a_pod_without_a_gpu_request_sees_no_gpu(lab: DeployedLab) -> None:
    """Outside the admission policy (kube-system), NVIDIA_VISIBLE_DEVICES=all alone must give no GPU: the
    NVIDIA runtime is not containerd's default, so the pod runs under runc."""
    core = tenant_core(lab, "tenant-a")
    name = "e2e-no-gpu-by-env"
    script = "if ls /dev/nvidia* >/dev/null 2>&1; then echo SEES-GPUS; exit 1; fi; echo NO-GPU"
    pod: Any = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main", image=BUSYBOX, command=["sh", "-c", script],
                                           env=[client.V1EnvVar(name="NVIDIA_VISIBLE_DEVICES", value="all")])],
            restart_policy="Never",
            termination_grace_period_seconds=0,
        ),
    )
    core.create_namespaced_pod("kube-system", pod)
    try:
        phase = wait_for(
            lambda: (p := core.read_namespaced_pod(name, "kube-system").status.phase) in ("Succeeded", "Failed") and p,
            timeout_s=180, message=f"pod {name} finished",
        )
        log = core.read_namespaced_pod_log(name, "kube-system")
        assert phase == "Succeeded" and "NO-GPU" in log, f"{phase}: {log}"
    finally:
        core.delete_namespaced_pod(name, "kube-system", grace_period_seconds=0)
