"""Bypasses of the policy pack that plausible code in a pull request could add, driven over the analyzer gRPC
protocol exactly as the engine drives the pack (tests/test_policy_pack_grpc.py starts it).

Each crafted resource is registered the way the program would register it (its URN qualified by its
ancestors' types, its provider reference, its property dependencies), added to the dev stack's real
registrations; each must draw a mandatory diagnostic, and the untouched stacks none.
"""

from __future__ import annotations

from typing import Any

import pytest
from policy_support import Recorded, craft, find, set_both
from test_policy_pack_grpc import (  # noqa: F401  (fixtures: the pack's analyzer process, its configuration)
    MANDATORY,
    analyze,
    analyze_stack,
    analyzer,
    default_configuration,
)

PROVIDER = "pulumi:providers:kubernetes"
SECRET = "kubernetes:core/v1:Secret"
POD = "kubernetes:core/v1:Pod"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
RELEASE = "kubernetes:helm.sh/v3:Release"


def mandatory(diagnostics: list[Any], policy: str) -> list[str]:
    """The reported part of each mandatory diagnostic (the engine shows "<description>\n<message>")."""
    return [d.message.split("\n", 1)[-1] for d in diagnostics if d.policyName == policy and d.enforcementLevel == MANDATORY]


def expect(messages: list[str], *fragments: str) -> None:
    assert any(all(f in m for f in fragments) for m in messages), f"no diagnostic with {fragments} in {messages}"


def tenant_component(stack: list[Recorded], tenant: str, typ: str) -> Recorded:
    return next(r for r in stack if r.type == typ and r.name.startswith(tenant))


def test_the_dev_stack_draws_no_diagnostic(pack: Any, stack: list[Recorded]) -> None:
    assert analyze(pack, stack) == [] and analyze_stack(pack, stack) == []


# --------------------------------------------------------------------------- attribution by provider


@pytest.mark.parametrize("identifier", [None, "tenant/tenant-b", "reporting"])
def test_a_secret_with_a_tenants_kubeconfig_through_a_second_provider(
    pack: Any, stack: list[Recorded], identifier: str | None
) -> None:
    """Tenant a's admin kubeconfig copied into tenant b's cluster through a provider of its own making."""
    admin_a = find(stack, SECRET, "tenant-a-control-plane-admin-kubeconfig")
    admin_b = find(stack, SECRET, "tenant-b-control-plane-admin-kubeconfig")
    inputs: dict[str, Any] = {"kubeconfig": "apiVersion: v1\nkind: Config\n"}
    if identifier:
        inputs["clusterIdentifier"] = identifier
    reporting = craft(stack, PROVIDER, "reporting", inputs, property_dependencies={"kubeconfig": [admin_b.urn]})
    craft(
        stack, SECRET, "tenant-a-admin-copy",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tenant-a-admin", "namespace": "default"},
         "stringData": {"admin.conf": "apiVersion: v1\nkind: Config\n"}},
        provider=reporting, property_dependencies={"stringData": [admin_a.urn]},
    )
    messages = mandatory(analyze_stack(pack, stack), "tenant-provider-isolation")
    expect(messages, "provider 'reporting'", "cannot attribute")
    expect(messages, "'tenant-a-admin-copy' goes through provider 'reporting'")


def test_any_object_in_a_tenants_own_management_namespace(pack: Any, stack: list[Recorded]) -> None:
    """Kinds a tenant's control plane does not need, in its management namespace, next to its admin Secret."""
    control_plane = tenant_component(stack, "tenant-a", "gpu-tenancy:tenant_control_plane:TenantControlPlane")
    management = find(stack, PROVIDER, "management")
    craft(
        stack, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "tenant-a-secret-reader",
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "secret-reader", "namespace": "tenant-a"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
         "subjects": [{"kind": "User", "name": "someone"}]},
        parent=control_plane, provider=management,
    )
    expect(mandatory(analyze_stack(pack, stack), "tenant-provider-isolation"),
           "'tenant-a-secret-reader' lands on the management cluster")


ROOT_POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debug", "namespace": "tenant-a"},
    "spec": {
        "hostPID": True,
        "containers": [{"name": "shell", "image": "registry.k8s.io/pause:3.10.1",
                        "securityContext": {"privileged": True}, "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    },
}


def test_a_root_pod_on_the_management_cluster_under_a_tenant(pack: Any, stack: list[Recorded]) -> None:
    """Privileged, hostPID, hostPath / on a management node: root there is root over every tenant."""
    control_plane = tenant_component(stack, "tenant-a", "gpu-tenancy:tenant_control_plane:TenantControlPlane")
    craft(stack, POD, "tenant-a-debug", ROOT_POD, parent=control_plane, provider=find(stack, PROVIDER, "management"))
    expect(mandatory(analyze_stack(pack, stack), "tenant-provider-isolation"),
           "'tenant-a-debug' lands on the management cluster")
    safety = mandatory(analyze(pack, stack), "workload-safety")
    for fragment in ("is privileged", "sets hostPID: true", "mounts hostPath / "):
        expect(safety, "'tenant-a-debug'", fragment)


# --------------------------------------------------------------------------- workload safety


def workload(stack: list[Recorded]) -> Recorded:
    return find(stack, DEPLOYMENT, "tenant-a-workloads-a-infer")


def test_a_label_does_not_exempt_a_privileged_workload(pack: Any, stack: list[Recorded]) -> None:
    deployment = workload(stack)
    for path in (["metadata", "labels"], ["spec", "template", "metadata", "labels"]):
        set_both(deployment, [*path, "gpu-tenancy.io/component"], "kindnet")
    set_both(deployment, ["spec", "template", "spec", "containers", 0, "securityContext"], {"privileged": True})
    expect(mandatory(analyze(pack, stack), "workload-safety"), "'tenant-a-workloads-a-infer'", "is privileged")


CONTAINER = ["spec", "template", "spec", "containers", 0]
POD_SPEC = ["spec", "template", "spec"]


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        ([*CONTAINER, "securityContext"], {"capabilities": {"add": ["SYS_ADMIN"]}}, "adds capability SYS_ADMIN"),
        ([*CONTAINER, "ports"], [{"containerPort": 8888, "hostPort": 8888}], "binds host port 8888"),
        ([*POD_SPEC, "hostIPC"], True, "sets hostIPC: true"),
        ([*POD_SPEC, "hostNetwork"], True, "sets hostNetwork: true"),
        ([*POD_SPEC, "securityContext"], {"seccompProfile": {"type": "Unconfined"}}, "seccomp Unconfined"),
        ([*CONTAINER, "securityContext"], {"appArmorProfile": {"type": "Unconfined"}}, "AppArmor unconfined"),
        (["spec", "template", "metadata", "annotations"],
         {"container.apparmor.security.beta.kubernetes.io/main": "unconfined"}, "is unconfined"),
        ([*CONTAINER, "securityContext"], {"allowPrivilegeEscalation": True}, "allows privilege escalation"),
        ([*CONTAINER, "securityContext"], {"procMount": "Unmasked"}, "unmasked /proc"),
        ([*POD_SPEC, "securityContext"], {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}, "unsafe sysctl"),
        ([*CONTAINER, "env"], [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}], "sets NVIDIA_VISIBLE_DEVICES"),
        ([*CONTAINER, "env"], [{"name": "CUDA_DISABLE_CONTROL", "value": "true"}], "sets CUDA_DISABLE_CONTROL"),
        ([*POD_SPEC, "runtimeClassName"], "nvidia", "under RuntimeClass 'nvidia'"),
    ],
    ids=["capability", "hostPort", "hostIPC", "hostNetwork", "seccomp", "apparmor", "apparmor-annotation",
         "escalation", "procMount", "sysctl", "gpu-env", "hami-core-off", "runtime-class"],
)
def test_a_workload_reaching_the_node_or_the_gpus(
    pack: Any, stack: list[Recorded], path: list[Any], value: Any, fragment: str
) -> None:
    set_both(workload(stack), path, value)
    if path[-1] == "runtimeClassName":  # a sidecar without a GPU request under the NVIDIA runtime
        set_both(workload(stack), ["spec", "template", "spec", "containers", 0, "resources"], {})
    expect(mandatory(analyze(pack, stack), "workload-safety"), "'tenant-a-workloads-a-infer'", fragment)


def test_a_privileged_cron_job(pack: Any, stack: list[Recorded]) -> None:
    """A CronJob's pod template sits under spec.jobTemplate.spec.template (batch/v1 CronJobSpec.JobTemplateSpec)."""
    workloads = tenant_component(stack, "tenant-a", "gpu-tenancy:workloads:Workloads")
    template = {"spec": {"containers": [{"name": "shell", "image": "registry.k8s.io/pause:3.10.1",
                                         "securityContext": {"privileged": True}}], "restartPolicy": "Never"}}
    craft(
        stack, "kubernetes:batch/v1:CronJob", "tenant-a-nightly",
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": "workloads"},
         "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}},
        parent=workloads, provider=find(stack, PROVIDER, "tenant-a-kubernetes"),
    )
    expect(mandatory(analyze(pack, stack), "workload-safety"), "'tenant-a-nightly'", "is privileged")


def test_a_host_path_through_a_persistent_volume(pack: Any, stack: list[Recorded]) -> None:
    workloads = tenant_component(stack, "tenant-a", "gpu-tenancy:workloads:Workloads")
    craft(
        stack, "kubernetes:core/v1:PersistentVolume", "tenant-a-scratch",
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "scratch"},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/"}}},
        parent=workloads, provider=find(stack, PROVIDER, "tenant-a-kubernetes"),
    )
    expect(mandatory(analyze(pack, stack), "workload-safety"), "'tenant-a-scratch'", "host path /")


def test_a_helm_release_the_pack_cannot_see_into(pack: Any, stack: list[Recorded]) -> None:
    workloads = tenant_component(stack, "tenant-a", "gpu-tenancy:workloads:Workloads")
    craft(
        stack, RELEASE, "tenant-a-monitoring",
        {"chart": "node-exporter", "version": "4.47.0", "name": "node-exporter", "namespace": "kube-system",
         "repositoryOpts": {"repo": "https://prometheus-community.github.io/helm-charts"}, "values": {}},
        parent=workloads, provider=find(stack, PROVIDER, "tenant-a-kubernetes"),
    )
    expect(mandatory(analyze(pack, stack), "workload-safety"), "'tenant-a-monitoring'", "chart 'node-exporter'")


# --------------------------------------------------------------------------- pinning


def test_a_moving_image_tag(pack: Any, stack: list[Recorded]) -> None:
    set_both(workload(stack), [*CONTAINER, "image"], "ghcr.io/example/infer:main")
    expect(mandatory(analyze(pack, stack), "images-pinned"), "'ghcr.io/example/infer:main'", "moving tag")


@pytest.mark.parametrize("tag", ["", None], ids=["empty", "unset"])
def test_kamaji_without_an_exact_image_tag(pack: Any, stack: list[Recorded], tag: str | None) -> None:
    """The chart then runs its own default: appVersion `latest`."""
    kamaji = find(stack, RELEASE, "kamaji-chart")
    if tag is None:
        for props in (kamaji.inputs, kamaji.state):
            del props["values"]["image"]["tag"]
    else:
        set_both(kamaji, ["values", "image", "tag"], tag)
    expect(mandatory(analyze(pack, stack), "images-pinned"), "'kamaji-chart'", "image.tag")
