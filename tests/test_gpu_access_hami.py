"""HAMi cannot be skipped inside a tenant: the GPU-access admission policy (gpu_tenancy/builders/gpu_access) as the
API server evaluates it (tests/admission_cel.py, a real CEL runtime), for who sends what.

HAMi v2.10.0 trusts what it finds on a pod: its webhook passes a pod that names another scheduler untouched
(pkg/scheduler/webhook.go `Handle`), and its device plugin allocates from the pod's `hami.io/` annotations
(pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go `Allocate`, util.GetPendingPod). So a pod that reaches
a GPU is HAMi's scheduler's, nobody places a pod by `spec.nodeName`, and only HAMi writes its annotations.
"""

from __future__ import annotations

from typing import Any

import pytest
from admission_cel import Request, denials
from test_policy_pack_grpc import analyzer, default_configuration  # noqa: F401  (the pack's process)

from gpu_tenancy.builders.gpu_access import gpu_access

USER = "system:serviceaccount:workloads:tenant-user"
ADMIN = "kubernetes-admin"
SCHEDULER = "system:serviceaccount:kube-system:hami-scheduler"  # HAMi chart: the scheduler's ServiceAccount
DEVICE_PLUGIN = "system:serviceaccount:kube-system:hami-device-plugin"
REPLICASET_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
ALLOCATION = {"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,81920,100:;", "hami.io/vgpu-node": "gpu-a100-01",
              "hami.io/bind-phase": "allocating"}


def gpu_pod(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "workloads", "annotations": dict(annotations or {})},
        "spec": {"schedulerName": "hami-scheduler", "containers": [
            {"name": "main", "image": "registry.k8s.io/pause:3.10.1",
             "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"}}}], **spec},
    }


def create(obj: dict[str, Any], user: str = USER) -> list[str]:
    return denials(gpu_access.validating_admission_policy_spec(), Request("pods", "CREATE", "workloads", obj, username=user))


def update(old: dict[str, Any], new: dict[str, Any], user: str = USER) -> list[str]:
    return denials(gpu_access.validating_admission_policy_spec(), Request("pods", "UPDATE", "workloads", new, old=old, username=user))


@pytest.mark.parametrize("user", [USER, ADMIN, REPLICASET_CONTROLLER])
def test_a_pod_is_never_created_with_an_allocation(user: str) -> None:
    """Also through a Deployment: the ReplicaSet controller creates the pod with its template's annotations."""
    assert create(gpu_pod(ALLOCATION), user)


@pytest.mark.parametrize("user", [USER, ADMIN])
@pytest.mark.parametrize("key", sorted(ALLOCATION))
def test_a_tenant_identity_cannot_add_change_or_drop_hamis_annotations(user: str, key: str) -> None:
    scheduled = gpu_pod(ALLOCATION, nodeName="gpu-a100-01")
    changed = gpu_pod({**ALLOCATION, key: "forged"}, nodeName="gpu-a100-01")
    dropped = gpu_pod({k: v for k, v in ALLOCATION.items() if k != key}, nodeName="gpu-a100-01")
    added = gpu_pod({k: v for k, v in ALLOCATION.items() if k != key}, nodeName="gpu-a100-01")
    assert update(scheduled, changed, user)
    assert update(scheduled, dropped, user)
    assert update(added, scheduled, user)


@pytest.mark.parametrize("user", [SCHEDULER, DEVICE_PLUGIN])
def test_hami_writes_its_annotations(user: str) -> None:
    pending = gpu_pod(nodeName="gpu-a100-01")
    assert update(pending, gpu_pod(ALLOCATION, nodeName="gpu-a100-01"), user) == []


def test_other_annotations_stay_the_tenants() -> None:
    old = gpu_pod(ALLOCATION, nodeName="gpu-a100-01")
    new = gpu_pod({**ALLOCATION, "team": "vision", "hami.io/gpu-scheduler-policy": "spread"}, nodeName="gpu-a100-01")
    assert update(old, new) == []


def test_a_pod_placed_on_a_node_at_creation() -> None:
    assert create(gpu_pod(nodeName="gpu-a100-01")) == [
        "a pod is placed by a scheduler: no spec.nodeName when it is created"]
    # The kubelet's mirror pod of a static pod carries its node.
    assert create(gpu_pod(nodeName="gpu-a100-01"), user="system:node:gpu-a100-01") == []


@pytest.mark.parametrize(
    ("env", "reaches"),
    [([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}], False),
     ([{"name": "CUDA_DEVICE_SM_LIMIT", "value": "100"}], True),
     ([{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute"}], False)],
    ids=["blinded", "hami-core-variable", "driver-capabilities"],
)
def test_a_pod_reaching_a_gpu_by_environment_names_hamis_scheduler(env: list[dict[str, str]], reaches: bool) -> None:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "workloads"},
           "spec": {"schedulerName": "my-scheduler",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10.1", "env": env}]}}
    scheduler = "is scheduled by hami-scheduler"
    assert any(scheduler in m for m in create(obj)) is reaches
    assert gpu_access.reaches_gpu(obj["spec"]) is reaches


def runtime_class(name: str, handler: str) -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": handler}


# (case, name, handler, admitted); tests/realcp/test_admission.py creates them in a real API server.
RUNTIME_CLASS_CASES = [("hamis-own", "nvidia", "nvidia", True), ("renamed-gpu-handler", "gpu", "nvidia", False),
                       ("another-handler", "gvisor", "runsc", True)]


@pytest.mark.parametrize(("case", "name", "handler", "admitted"), RUNTIME_CLASS_CASES,
                         ids=[c[0] for c in RUNTIME_CLASS_CASES])
def test_runtime_classes_are_matched_by_handler(case: str, name: str, handler: str, admitted: bool) -> None:
    """HAMi's chart makes RuntimeClass `nvidia` with handler `nvidia` (templates/device-plugin/runtime-class.yaml);
    any other class on that handler would put pods on the NVIDIA runtime under a name the pod rules never meet."""
    for operation in ("CREATE", "UPDATE"):
        refused = denials(gpu_access.validating_admission_policy_spec(), Request("runtimeclasses", operation, "", runtime_class(name, handler), username=ADMIN,
                                        old=runtime_class(name, "runc") if operation == "UPDATE" else None))
        assert (not refused) is admitted, refused


# --------------------------------------------------------------------------- the pack, over the analyzer protocol


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [(["spec", "template", "spec", "schedulerName"], "default-scheduler", "not scheduled by hami-scheduler"),
     (["spec", "template", "spec", "nodeName"], "gpu-a100-01", "sets spec.nodeName"),
     (["spec", "template", "metadata", "annotations"], ALLOCATION, "sets annotation hami.io/vgpu-devices-allocated")],
    ids=["scheduler", "node-name", "forged-allocation"],
)
def test_the_pack_refuses_a_workload_around_hami(
    request: pytest.FixtureRequest, path: list[str], value: Any, fragment: str
) -> None:
    from policy_support import copy_stack, dev_stack, find, set_both
    from test_policy_bypasses_grpc import expect, mandatory
    from test_policy_pack_grpc import analyze

    pack = request.getfixturevalue("analyzer")
    stack = copy_stack(dev_stack())
    set_both(find(stack, "kubernetes:apps/v1:Deployment", "tenant-a-workloads-a-infer"), path, value)
    expect(mandatory(analyze(pack, stack), "workload-safety"), "'tenant-a-workloads-a-infer'", fragment)
