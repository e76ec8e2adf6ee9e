"""Pure builders for a tenant's GPU workloads (issue 7): config in, manifests and planner inputs out.

What HAMi v2.10 reads, checked at the source (Project-HAMi/HAMi):
- container limits `nvidia.com/gpu`, `nvidia.com/gpumem` (MiB) or `nvidia.com/gpumem-percentage`,
  `nvidia.com/gpucores` (chart values resourceName/resourceMem/resourceMemPercentage/resourceCores);
- pod annotations `nvidia.com/use-gputype` / `nvidia.com/nouse-gputype` (comma list, split on "," and each
  part trimmed, upper-cased substring match on the device type: pkg/device/devices.go CheckType) and
  `hami.io/gpu-scheduler-policy` / `hami.io/node-scheduler-policy` (binpack|spread);
- ResourceQuota keys `limits.nvidia.com/gpumem` and `limits.nvidia.com/gpucores` only: the quota manager
  keeps `limits.<ResourceMemoryName>` and `limits.<ResourceCoreName>` (pkg/device/quota.go IsManagedQuota).
  Nothing in HAMi reads `limits.nvidia.com/gpu`, and Kubernetes' own quota only counts extended resources
  under `requests.` (pod evaluator isExtendedResourceNameForQuota), so the config key
  `limits.nvidia.com/gpu` is rendered as `requests.nvidia.com/gpu`, which the API server enforces
  (an extended resource's request defaults to its limit).

No Pulumi, Kubernetes client or I/O here, except `main` (stack file -> planner CLI input).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from gpu_tenancy.builders import gpu_nodes, kube_objects
from gpu_tenancy.builders.workloads.quantity import decimal_si
from gpu_tenancy.builders.workloads.workload_names import (  # re-exported: callers import them from here
    COMPONENT,
    DEFAULT_GPU_SCHEDULER_POLICY,
    DEFAULT_NODE_SCHEDULER_POLICY,
    GPU_SCHEDULER_POLICY_ANNOTATION,
    HAMI_SCHEDULER_NAME,
    NODE_SCHEDULER_POLICY_ANNOTATION,
    NOUSE_GPU_TYPE_ANNOTATION,
    QUOTA_NAME,
    USE_GPU_TYPE_ANNOTATION,
    WORKLOAD_LABEL,
    WORKLOAD_NAMESPACE,
)
from gpu_tenancy.contract.config import NAMESPACE, load_config
from gpu_tenancy.contract.stack_config import StackConfig
from gpu_tenancy.contract.tenant_config import ContainerGpuRequest, TenantConfig, WorkloadConfig
from gpu_tenancy.hami import protocol as hami

# Config quota key -> ResourceQuota key (see the module docstring for the gpu count).
QUOTA_KEY_MAP = dict(zip(
    hami.NVIDIA.quota_keys,
    (f"requests.{hami.RESOURCE_GPU}", f"limits.{hami.RESOURCE_GPU_MEMORY}", f"limits.{hami.RESOURCE_GPU_CORES}"),
    strict=True,
))

# registry.k8s.io/pause runs as 65535:65535; the workloads only hold GPU shares.
RUN_AS_ID = 65535
CPU_REQUEST = "10m"
CPU_LIMIT = "50m"
MEMORY_REQUEST = "16Mi"
MEMORY_LIMIT = "32Mi"


def namespace_metadata(tenant: str) -> dict[str, Any]:
    """The tenant's workload namespace; Pod Security `restricted` is enforced on it.

    A Namespace stays Terminating until its pods are gone, and a pod on a node whose kubelet is dead is gone
    only once its Node is removed (PodGC force-deletes pods of a missing node), which `destroy` does after
    the workloads (the worker's leave). pulumi-kubernetes waits for a deleted object to disappear unless it
    is annotated `pulumi.com/skipAwait` (honoured on delete for Namespaces: `metadata/overrides.go`
    `allowsSkipAwaitWithDelete`), so without it a dead worker holds `destroy` for 10 minutes and fails it.
    """
    return {
        "name": WORKLOAD_NAMESPACE,
        "annotations": dict(kube_objects.SKIP_AWAIT),
        "labels": {
            **kube_objects.labels(tenant, COMPONENT),
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
        },
    }


def gpu_limits(request: ContainerGpuRequest) -> dict[str, str]:
    """HAMi container limits; memory is MiB or a percentage, absent means the whole card."""
    # In the API server's canonical form (gpu_tenancy/builders/workloads/quantity.py), or every `up` would update the
    # pods.
    limits = {hami.RESOURCE_GPU: decimal_si(request.gpus)}
    if request.gpumem_mib is not None:
        limits[hami.RESOURCE_GPU_MEMORY] = decimal_si(request.gpumem_mib)
    if request.gpumem_percentage is not None:
        limits[hami.RESOURCE_GPU_MEMORY_PERCENTAGE] = decimal_si(request.gpumem_percentage)
    if request.gpucores is not None:
        limits[hami.RESOURCE_GPU_CORES] = decimal_si(request.gpucores)
    return limits


def pod_annotations(workload: WorkloadConfig) -> dict[str, str]:
    """Card-type filters and scheduling policies; unset ones are left to HAMi's defaults."""
    annotations: dict[str, str] = {}
    for key, types in ((USE_GPU_TYPE_ANNOTATION, workload.use_gpu_type),
                       (NOUSE_GPU_TYPE_ANNOTATION, workload.nouse_gpu_type)):
        # HAMi splits the annotation on "," and trims each part (devices.go CheckType): the same terms.
        cleaned = [t.strip() for t in types if t.strip()]
        if cleaned:
            annotations[key] = ",".join(cleaned)
    if workload.gpu_scheduler_policy is not None:
        annotations[GPU_SCHEDULER_POLICY_ANNOTATION] = workload.gpu_scheduler_policy
    if workload.node_scheduler_policy is not None:
        annotations[NODE_SCHEDULER_POLICY_ANNOTATION] = workload.node_scheduler_policy
    return annotations


def workload_labels(tenant: str, workload: str) -> dict[str, str]:
    return {**kube_objects.labels(tenant, COMPONENT), WORKLOAD_LABEL: workload}


def container(index: int, image: str, request: ContainerGpuRequest) -> dict[str, Any]:
    return {
        "name": f"gpu-{index}",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {
            "requests": {"cpu": CPU_REQUEST, "memory": MEMORY_REQUEST},
            "limits": {"cpu": CPU_LIMIT, "memory": MEMORY_LIMIT, **gpu_limits(request)},
        },
        "securityContext": {
            "privileged": False,  # HAMi's webhook denies privileged containers that ask for vGPUs anyway
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def deployment_metadata(tenant: str, workload: WorkloadConfig) -> dict[str, Any]:
    """Deleted in the background: the foreground default waits for every pod (kube_objects.BACKGROUND_DELETION)."""
    return {
        "name": workload.name,
        "namespace": WORKLOAD_NAMESPACE,
        "labels": workload_labels(tenant, workload.name),
        "annotations": dict(kube_objects.BACKGROUND_DELETION),
    }


def deployment_spec(tenant: str, workload: WorkloadConfig) -> dict[str, Any]:
    """A Deployment whose pods HAMi places: explicit schedulerName, limits, annotations, hardened pod."""
    pod_labels = workload_labels(tenant, workload.name)
    template_metadata: dict[str, Any] = {"labels": pod_labels}
    annotations = pod_annotations(workload)
    if annotations:
        template_metadata["annotations"] = annotations
    return {
        "replicas": workload.replicas,
        "selector": {"matchLabels": {kube_objects.TENANT_LABEL: tenant, WORKLOAD_LABEL: workload.name}},
        # No surge: a replacement pod must not need GPU share the plan never counted.
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        "template": {
            "metadata": template_metadata,
            "spec": {
                # Explicit, not left to HAMi's webhook: under Kamaji the webhook is reached through
                # Konnectivity with failurePolicy Ignore, and a pod admitted unmutated would go to the
                # default scheduler and bypass HAMi (hami.md §5). The webhook still runs (it accepts pods
                # already naming hami-scheduler) and still applies quota.
                "schedulerName": HAMI_SCHEDULER_NAME,
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "terminationGracePeriodSeconds": 5,
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": RUN_AS_ID,
                    "runAsGroup": RUN_AS_ID,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    container(index, workload.image, request) for index, request in enumerate(workload.containers)
                ],
            },
        },
    }


def resource_quota_hard(quota: Mapping[str, int]) -> dict[str, str]:
    """ResourceQuota `spec.hard` for the tenant's config quota (keys mapped per QUOTA_KEY_MAP)."""
    unknown = sorted(set(quota) - set(QUOTA_KEY_MAP))
    if unknown:
        raise ValueError(f"unknown quota key(s): {', '.join(unknown)}")
    return {QUOTA_KEY_MAP[key]: decimal_si(amount) for key, amount in sorted(quota.items())}


def resource_quota_metadata(tenant: str) -> dict[str, Any]:
    return {"name": QUOTA_NAME, "namespace": WORKLOAD_NAMESPACE, "labels": kube_objects.labels(tenant, COMPONENT)}


def has_workloads(tenant: TenantConfig) -> bool:
    """Whether the tenant declares anything this module deploys (else the program adds nothing)."""
    return bool(tenant.workloads or tenant.quota)


# --------------------------------------------------------------------------- planner inputs


def plan_document(stack: StackConfig, cluster_name: str) -> dict[str, Any]:
    """The stack's GPUs, workloads and quotas in `gpu-tenancy plan`'s input format (gpu_tenancy/cli/plan/plan_input.py).

    Nodes are the ones the live cluster will have (`gpu_nodes`: one kind worker per tenant in sim and
    sim-nvml, one node per host in real), each with the register HAMi's device plugin writes for its cards
    (split count 10); unset scheduler policies take the HAMi release's defaults.
    """
    workloads: list[dict[str, Any]] = []
    quota: dict[str, dict[str, int]] = {}
    max_pods = gpu_nodes.workload_pods_per_node(stack.device_layer.registrar)
    nodes = [
        {"name": node.name, "tenant": node.tenant, "maxPods": max_pods, "devices": node.planned_register()}
        for node in gpu_nodes.gpu_nodes(stack, cluster_name)
    ]
    for tenant in stack.tenants:
        for workload in tenant.workloads:
            workloads.append(_plan_workload(tenant.name, workload))
        if tenant.quota:
            quota[tenant.name] = dict(tenant.quota)
    return {"nodes": nodes, "workloads": workloads, "quota": quota}


def _plan_workload(tenant: str, workload: WorkloadConfig) -> dict[str, Any]:
    containers = []
    for request in workload.containers:
        entry: dict[str, Any] = {"gpus": request.gpus}
        if request.gpumem_mib is not None:
            entry["gpumemMiB"] = request.gpumem_mib
        if request.gpumem_percentage is not None:
            entry["gpumemPercentage"] = request.gpumem_percentage
        if request.gpucores is not None:
            entry["gpucores"] = request.gpucores
        containers.append(entry)
    return {
        "name": workload.name,
        "tenant": tenant,
        "replicas": workload.replicas,
        "containers": containers,
        "useGpuType": list(workload.use_gpu_type),
        "noUseGpuType": list(workload.nouse_gpu_type),
        "gpuSchedulerPolicy": workload.gpu_scheduler_policy or DEFAULT_GPU_SCHEDULER_POLICY,
        "nodeSchedulerPolicy": workload.node_scheduler_policy or DEFAULT_NODE_SCHEDULER_POLICY,
    }


def stack_name(path: str | Path) -> str:
    """'Pulumi.dev.yaml' -> 'dev' (the stack a stack file configures)."""
    name = Path(path).name
    for suffix in (".yaml", ".yml"):
        name = name.removesuffix(suffix)
    return name.removeprefix("Pulumi.")


def load_stack_file(path: str | Path) -> StackConfig:
    """A `Pulumi.<stack>.yaml`'s `gpu-tenancy:*` config, validated like the program does."""
    raw = yaml.safe_load(Path(path).read_text())["config"]
    prefix = f"{NAMESPACE}:"
    return load_config({key[len(prefix):]: value for key, value in raw.items() if key.startswith(prefix)})


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpu_tenancy.builders.workloads.workloads Pulumi.dev.yaml > plan.json`` (then ``cli.plan plan
    plan.json``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m gpu_tenancy.builders.workloads.workloads Pulumi.<stack>.yaml", file=sys.stderr)
        return 2
    stack = load_stack_file(args[0])
    print(json.dumps(plan_document(stack, stack.cluster_name(stack_name(args[0]))), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
