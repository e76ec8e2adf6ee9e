"""Workload safety: nothing the program creates gets the node, the host or the GPUs around HAMi, unless
the program's own component that needs it made it, and then only what that component needs.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from typing import Any

from policy_common import MANDATORY, describe, policy_config
from pulumi_policy import PolicyConfigSchema, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy
from resource_lib import (
    CONTAINER_TYPE,
    HAMI_TYPE,
    HELM_RELEASE_TYPE,
    KAMAJI_TYPE,
    METALLB_TYPE,
    MOCK_NVML_TYPE,
    TENANT_DATASTORE_TYPE,
    TENANT_NETWORK_TYPE,
    WORKER_TYPE,
    Res,
    from_resource_args,
    nearest_component,
)
from workload_lib import findings

from gpu_tenancy.builders.mock_nvml import nvml_mock

DAEMONSET_TYPE = "kubernetes:apps/v1:DaemonSet"

# component type -> resource type -> findings that component's resources of that type may have. Granted by
# where the program constructs a resource (its URN), never by a label the resource carries.
DEFAULT_EXEMPTIONS: dict[str, dict[str, list[str]]] = {
    # kind's kindnetd and kube-proxy, as kind runs them (gpu_tenancy/builders/tenant_network/network_daemonsets.py).
    TENANT_NETWORK_TYPE: {
        DAEMONSET_TYPE: [
            "hostNetwork", "privileged", "capability:NET_RAW", "capability:NET_ADMIN",
            "hostPath:/etc/cni/net.d", "hostPath:/run/xtables.lock", "hostPath:/lib/modules", "hostPath:/var/run/nri",
        ]
    },
    # NVIDIA's mock NVML (sim-nvml): upstream's chart, privileged to mknod /dev/nvidia* on the node.
    MOCK_NVML_TYPE: {
        DAEMONSET_TYPE: [
            "privileged", f"hostPath:{nvml_mock.HOST_ROOT}", "hostPath:/var/run/cdi", "hostPath:/run/nvidia",
            "hostPath:/etc/kubernetes/node-feature-discovery/features.d",
        ]
    },
    # A kind node container, with the flags kind gives its nodes (gpu_tenancy/builders/worker/kind_node.py).
    # `label=disable` is what the Docker daemon adds to any privileged container anyway (moby daemon/create.go
    # generateSecurityOpt); the program sends it so that state and inputs agree.
    WORKER_TYPE: {
        CONTAINER_TYPE: [
            "privileged", "seccomp:unconfined", "apparmor:unconfined", "label:unconfined", "hostPath:/lib/modules",
            "hostPath:/dev/mapper", "device:/dev/fuse", "usernsMode:host",
        ]
    },
    HAMI_TYPE: {HELM_RELEASE_TYPE: ["helm:hami"]},
    KAMAJI_TYPE: {HELM_RELEASE_TYPE: ["helm:cert-manager", "helm:kamaji"]},
    METALLB_TYPE: {HELM_RELEASE_TYPE: ["helm:metallb"]},
    TENANT_DATASTORE_TYPE: {HELM_RELEASE_TYPE: ["helm:kamaji-etcd"]},
}


def exempt(res: Res, key: str, exemptions: dict[str, Any]) -> bool:
    component = nearest_component(res.urn)
    allowed = (exemptions.get(component or "") or {}).get(res.type) or []
    return key in allowed


def validate_workload_safety(args: ResourceValidationArgs, report: ReportViolation) -> None:
    res = from_resource_args(args)
    exemptions = policy_config(args, "exemptions", DEFAULT_EXEMPTIONS)
    for key, sentence in findings(res):
        if not exempt(res, key, exemptions):
            component = nearest_component(res.urn) or "the stack"
            report(
                f"{describe(res)} (made by {component}) {sentence} [{key}]; only the program's own components "
                "that need this may (policy config `exemptions`).",
                None,
            )


workload_safety = ResourceValidationPolicy(
    name="workload-safety",
    description=(
        "Nothing the program creates is privileged, shares host namespaces, mounts host paths (also through a "
        "PersistentVolume), adds capabilities, binds host ports, runs unconfined, allows privilege escalation, "
        "reaches GPUs around HAMi or installs a Helm chart the pack cannot inspect, unless the program component "
        "that needs it (by its type in the URN, never a label) made it."
    ),
    validate=validate_workload_safety,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "exemptions": {
                "type": "object",
                "default": DEFAULT_EXEMPTIONS,
                "description": "component type -> resource type -> findings (e.g. 'privileged', "
                "'hostPath:/lib/modules', 'helm:hami') it may have.",
            }
        }
    ),
)
