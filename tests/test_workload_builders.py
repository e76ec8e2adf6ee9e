"""Pure builders for tenant GPU workloads: limits, annotations, pod hardening, quota keys, planner input."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.hami import hami_chart
from gpu_tenancy.builders.workloads import workloads as wl
from gpu_tenancy.contract.config import load_config
from gpu_tenancy.contract.tenant_config import ContainerGpuRequest, TenantConfig, WorkloadConfig

A100 = {"model": "NVIDIA A100-SXM4-80GB", "count": 1}


def workload(**fields: Any) -> WorkloadConfig:
    data: dict[str, Any] = {"name": "infer", "containers": [{"gpus": 1}], **fields}
    return WorkloadConfig.model_validate(data)


def request(**fields: Any) -> ContainerGpuRequest:
    return ContainerGpuRequest.model_validate(fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # 3000 MiB as the API server stores it (apimachinery Quantity.String: 3e3 DecimalSI is "3k").
        ({"gpus": 1, "gpumemMiB": 3000, "gpucores": 30},
         {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3k", "nvidia.com/gpucores": "30"}),
        ({"gpus": 2, "gpumemPercentage": 50, "gpucores": 30},
         {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "50", "nvidia.com/gpucores": "30"}),
        ({"gpus": 1}, {"nvidia.com/gpu": "1"}),  # whole card memory, cores left to HAMi
        ({"gpus": 1, "gpucores": 0}, {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "0"}),
        ({}, {"nvidia.com/gpu": "1"}),  # config default: one vGPU
    ],
)
def test_gpu_limits(fields: dict[str, Any], expected: dict[str, str]) -> None:
    assert wl.gpu_limits(request(**fields)) == expected


def test_memory_is_mib_or_percentage_never_both() -> None:
    mib = wl.gpu_limits(request(gpumemMiB=10240))
    pct = wl.gpu_limits(request(gpumemPercentage=25))
    assert "nvidia.com/gpumem" in mib and "nvidia.com/gpumem-percentage" not in mib
    assert "nvidia.com/gpumem-percentage" in pct and "nvidia.com/gpumem" not in pct


def test_limits_are_in_every_container_with_small_cpu_memory() -> None:
    spec = wl.deployment_spec("tenant-a", workload(containers=[{"gpus": 1, "gpumemMiB": 1024}, {"gpus": 2}]))
    containers = spec["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["gpu-0", "gpu-1"]
    assert containers[0]["resources"]["limits"] == {
        "cpu": "50m", "memory": "32Mi", "nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024",
    }
    assert containers[1]["resources"]["limits"] == {"cpu": "50m", "memory": "32Mi", "nvidia.com/gpu": "2"}
    for c in containers:
        assert c["resources"]["requests"] == {"cpu": "10m", "memory": "16Mi"}
        # GPU resources are limits only: Kubernetes defaults an extended resource's request to its limit.
        assert not any(k.startswith("nvidia.com/") for k in c["resources"]["requests"])


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, {}),
        ({"useGpuType": ["A100", "H100"]}, {"nvidia.com/use-gputype": "A100,H100"}),
        ({"noUseGpuType": ["1080", " 2080 "]}, {"nvidia.com/nouse-gputype": "1080,2080"}),
        ({"useGpuType": ["A100"], "noUseGpuType": ["MIG"]},
         {"nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gputype": "MIG"}),
        ({"useGpuType": [" ", ""]}, {}),
        ({"gpuSchedulerPolicy": "binpack"}, {"hami.io/gpu-scheduler-policy": "binpack"}),
        ({"nodeSchedulerPolicy": "spread"}, {"hami.io/node-scheduler-policy": "spread"}),
        ({"gpuSchedulerPolicy": "spread", "nodeSchedulerPolicy": "binpack"},
         {"hami.io/gpu-scheduler-policy": "spread", "hami.io/node-scheduler-policy": "binpack"}),
    ],
)
def test_pod_annotations(fields: dict[str, Any], expected: dict[str, str]) -> None:
    assert wl.pod_annotations(workload(**fields)) == expected


def test_annotations_go_on_the_pod_template_not_only_the_deployment() -> None:
    spec = wl.deployment_spec("tenant-a", workload(useGpuType=["A100"], gpuSchedulerPolicy="binpack"))
    assert spec["template"]["metadata"]["annotations"] == {
        "nvidia.com/use-gputype": "A100", "hami.io/gpu-scheduler-policy": "binpack"}
    assert "annotations" not in wl.deployment_spec("tenant-a", workload())["template"]["metadata"]


@pytest.mark.parametrize("replicas", [0, 1, 7])
def test_replicas(replicas: int) -> None:
    assert wl.deployment_spec("t", workload(replicas=replicas))["replicas"] == replicas


def test_default_replicas_and_image() -> None:
    spec = wl.deployment_spec("t", workload())
    assert spec["replicas"] == 1
    assert spec["template"]["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10.1"
    assert wl.deployment_spec("t", workload(image="example.org/x:1.2.0"))["template"]["spec"]["containers"][0][
        "image"] == "example.org/x:1.2.0"


def test_scheduler_name_is_hami_and_matches_the_chart_default() -> None:
    spec = wl.deployment_spec("t", workload())
    assert spec["template"]["spec"]["schedulerName"] == "hami-scheduler"
    # The release does not override the chart's schedulerName value.
    assert "schedulerName" not in hami_chart.hami_values("v1.35.5", "v2.10.0")


def test_default_policies_match_the_hami_release() -> None:
    defaults = hami_chart.hami_values("v1.35.5", "v2.10.0")["scheduler"]["defaultSchedulerPolicy"]
    assert defaults == {"gpuSchedulerPolicy": wl.DEFAULT_GPU_SCHEDULER_POLICY,
                        "nodeSchedulerPolicy": wl.DEFAULT_NODE_SCHEDULER_POLICY}


def test_pods_are_hardened() -> None:
    pod = wl.deployment_spec("t", workload(containers=[{"gpus": 1}, {"gpus": 1}]))["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False  # no other Service's address in its environment
    assert not {"hostNetwork", "hostPID", "hostIPC", "volumes", "nodeName"} & set(pod)
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]} and sc["runAsNonRoot"] is True
        assert sc["readOnlyRootFilesystem"] is True


def test_namespace_enforces_pod_security_restricted() -> None:
    meta = wl.namespace_metadata("tenant-a")
    assert meta["name"] == "workloads"
    # A version label is "latest" or "v1.<minor>", nothing else
    # (https://kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-admission-controller/).
    assert meta["labels"] == {
        "gpu-tenancy.io/tenant": "tenant-a", "gpu-tenancy.io/component": "workload",
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
    }


def test_every_object_carries_the_tenant_label() -> None:
    w = workload()
    for meta in (wl.namespace_metadata("tenant-a"), wl.deployment_metadata("tenant-a", w),
                 wl.resource_quota_metadata("tenant-a"), wl.deployment_spec("tenant-a", w)["template"]["metadata"]):
        assert meta["labels"][kube_objects.TENANT_LABEL] == "tenant-a"
        assert meta["labels"][kube_objects.COMPONENT_LABEL] == "workload"


def test_a_deployment_and_its_pods_are_labelled_with_tenant_component_and_workload() -> None:
    labels = {
        "gpu-tenancy.io/tenant": "tenant-a", "gpu-tenancy.io/component": "workload",
        "gpu-tenancy.io/workload": "b-notebook",
    }
    w = workload(name="b-notebook")
    assert wl.deployment_metadata("tenant-a", w)["labels"] == labels
    assert wl.deployment_spec("tenant-a", w)["template"]["metadata"]["labels"] == labels


def test_selector_selects_the_template() -> None:
    spec = wl.deployment_spec("tenant-a", workload(name="b-notebook"))
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()
    assert selector[wl.WORKLOAD_LABEL] == "b-notebook"


def test_a_rollout_replaces_one_pod_at_a_time_without_surging_past_the_plan() -> None:
    # With maxSurge 0 the API server needs maxUnavailable above 0 (apps/validation ValidateRollingUpdateDeployment).
    spec = wl.deployment_spec("t", workload())
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    # So a rollout replaces one pod at a time, each old one giving its share back within 5 s, not the default 30.
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 5


@pytest.mark.parametrize(
    ("quota", "hard"),
    [
        ({"limits.nvidia.com/gpumem": 81920}, {"limits.nvidia.com/gpumem": "81920"}),
        ({"limits.nvidia.com/gpucores": 150}, {"limits.nvidia.com/gpucores": "150"}),
        # HAMi manages only gpumem/gpucores quotas; Kubernetes counts extended resources under requests.
        ({"limits.nvidia.com/gpu": 4}, {"requests.nvidia.com/gpu": "4"}),
        ({"limits.nvidia.com/gpu": 6, "limits.nvidia.com/gpumem": 61440, "limits.nvidia.com/gpucores": 100},
         {"requests.nvidia.com/gpu": "6", "limits.nvidia.com/gpumem": "61440", "limits.nvidia.com/gpucores": "100"}),
        ({"limits.nvidia.com/gpumem": 0}, {"limits.nvidia.com/gpumem": "0"}),
        ({}, {}),
    ],
)
def test_resource_quota_keys(quota: dict[str, int], hard: dict[str, str]) -> None:
    assert wl.resource_quota_hard(quota) == hard


def test_quota_map_covers_every_config_key() -> None:
    from gpu_tenancy.contract.tenant_config import QUOTA_KEYS

    assert set(wl.QUOTA_KEY_MAP) == set(QUOTA_KEYS)


def test_unknown_quota_key_is_rejected() -> None:
    with pytest.raises(ValueError) as raised:
        wl.resource_quota_hard({"requests.memory": 1, "limits.nvidia.com/gpu": 1, "requests.cpu": 1})
    assert str(raised.value) == "unknown quota key(s): requests.cpu, requests.memory"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [({}, False), ({"workloads": [{"name": "w", "containers": [{"gpus": 1}]}]}, True),
     ({"quota": {"limits.nvidia.com/gpumem": 1024}}, True)],
)
def test_has_workloads(extra: dict[str, Any], expected: bool) -> None:
    tenant = TenantConfig.model_validate({"name": "t", "gpus": [A100], **extra})
    assert wl.has_workloads(tenant) is expected


def body(kind: str, api_version: str, metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def test_manifests_validate_against_kubernetes_schemas() -> None:
    w = workload(containers=[{"gpus": 1, "gpumemMiB": 10240, "gpucores": 20}, {"gpus": 2, "gpumemPercentage": 50}],
                 useGpuType=["A100"], gpuSchedulerPolicy="binpack", nodeSchedulerPolicy="spread", replicas=3)
    kubernetes_validate.validate(
        body("Deployment", "apps/v1", wl.deployment_metadata("t", w), wl.deployment_spec("t", w)), "1.35.0",
        strict=True)
    kubernetes_validate.validate(
        body("ResourceQuota", "v1", wl.resource_quota_metadata("t"),
             {"hard": wl.resource_quota_hard({"limits.nvidia.com/gpu": 2, "limits.nvidia.com/gpumem": 1})}),
        "1.35.0", strict=True)
    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": wl.namespace_metadata("t")}, "1.35.0", strict=True)


def test_plan_document_mirrors_the_config() -> None:
    stack = load_config({
        "mode": "sim",
        "tenants": [
            {"name": "a", "gpus": [A100],
             "workloads": [{"name": "w", "replicas": 2, "useGpuType": ["A100"],
                            "containers": [{"gpus": 1, "gpumemPercentage": 25}]}],
             "quota": {"limits.nvidia.com/gpumem": 40960}},
            {"name": "b", "gpus": [{"model": "NVIDIA L4", "count": 2}]},
        ],
    })
    doc = wl.plan_document(stack, "lab")
    # The nodes as the cluster names them: each tenant's kind worker container (`<cluster>-<tenant>-worker`).
    assert [(n["name"], n["tenant"], len(n["devices"])) for n in doc["nodes"]] == [("lab-a-worker", "a", 1),
                                                                                  ("lab-b-worker", "b", 2)]
    assert doc["nodes"][1]["devices"][0] | {"id": "x"} == {
        "id": "x", "index": 0, "count": 10, "devmem": 23034, "devcore": 100, "type": "NVIDIA L4", "numa": 0,
        "mode": "hami-core", "health": True}
    assert doc["workloads"] == [{
        "name": "w", "tenant": "a", "replicas": 2, "containers": [{"gpus": 1, "gpumemPercentage": 25}],
        "useGpuType": ["A100"], "noUseGpuType": [], "gpuSchedulerPolicy": "spread", "nodeSchedulerPolicy": "binpack"}]
    assert doc["quota"] == {"a": {"limits.nvidia.com/gpumem": 40960}}
