"""What the real API server, controllers and kube-scheduler do with what the program registers in a tenant.

- The mock-GPU agent (gpu_tenancy/hami/agent), its own code, registers a node's GPUs through the real API server
  under the RBAC the program gives it: the annotation HAMi reads and the `nvidia.com/gpu` capacity.
- The kubelet's pod limit: kube-scheduler's NodeResourcesFit admits no more pods on a node than its allocatable
  `pods` (110 unless the kubelet's maxPods says otherwise), counting the DaemonSet pods the real DaemonSet
  controller puts there from the DaemonSets the program registers.
- Quotas: the ResourceQuota the program registers, enforced by the real quota admission on the pods the real
  ReplicaSet controller creates for the workloads the program registers.

Cluster-scoped names and namespaces are prefixed so that these objects never meet another test's in the shared
cluster; each rewrite keeps the references between them consistent (roleRef, subjects, resourceNames).
HAMi's own scheduler is not here (its Go module is not served by the proxy this project reaches: see
docs/verification.md), so GPU placement is not decided in this tier.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from policy_support import EXAMPLE_STACKS, Recorded

from gpu_tenancy.builders import gpu_nodes
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent.kube import KubeAgent
from tests.realcp.cluster import KWOK_NODE_ANNOTATION, RealControlPlane, wait_until
from tests.realcp.tenant_layer import manifest

HAMI_RENDERED_GPU = Path(__file__).resolve().parents[1] / "fixtures" / "hami_real" / "hami-rendered.gpu.yaml"
PREFIX = "realcp-sched-"
SYSTEM = f"{PREFIX}kube-system"
WAIT = 60.0


def _registered(stack: str, tenant: str, kind: str) -> list[Recorded]:
    return [r for r in EXAMPLE_STACKS[stack]() if r.type.endswith(f":{kind}") and r.name.startswith(f"{tenant}-")
            and f"{tenant}-kubernetes" in r.provider]


def _renamespaced(body: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(body)
    if body["metadata"].get("namespace") == "kube-system":
        body["metadata"]["namespace"] = SYSTEM
    for subject in body.get("subjects", []):
        if subject.get("namespace") == "kube-system":
            subject["namespace"] = SYSTEM
    return body


def _node(name: str, pods: int, labels: dict[str, str]) -> dict[str, Any]:
    key, value = KWOK_NODE_ANNOTATION
    capacity = {"cpu": "64", "memory": "512Gi", "pods": str(pods)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {key: value},
                         "labels": {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name, **labels}},
            "status": {"capacity": capacity, "allocatable": capacity}}


@pytest.fixture(scope="module")
def core(admin_api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(admin_api)


@pytest.fixture(scope="module")
def system_namespace(core: client.CoreV1Api) -> Iterator[str]:
    core.create_namespace({"metadata": {"name": SYSTEM}})
    yield SYSTEM
    core.delete_namespace(SYSTEM)


# --------------------------------------------------------------------------- the mock-GPU agent registers


def test_the_agent_registers_its_gpus_under_its_own_rbac(real_control_plane: RealControlPlane, admin_api: client.ApiClient,
                                                         core: client.CoreV1Api, system_namespace: str) -> None:
    rbac = client.RbacAuthorizationV1Api(admin_api)
    (role,) = [r for r in _registered("dev", "tenant-a", "ClusterRole") if "mock-gpu-agent" in r.name]
    (binding,) = [r for r in _registered("dev", "tenant-a", "ClusterRoleBinding") if "mock-gpu-agent" in r.name]
    (inventory,) = [r for r in _registered("dev", "tenant-a", "ConfigMap") if "mock-gpu-agent" in r.name]
    role_body, binding_body = manifest(role), _renamespaced(manifest(binding))
    role_body["metadata"]["name"] = binding_body["roleRef"]["name"] = PREFIX + role_body["metadata"]["name"]
    binding_body["metadata"]["name"] = PREFIX + binding_body["metadata"]["name"]
    rbac.create_cluster_role(role_body)
    rbac.create_cluster_role_binding(binding_body)
    (node_name,) = role_body["rules"][0]["resourceNames"]
    core.create_node(_node(node_name, 110, {"gpu-tenancy.io/gpu-node": "true"}))
    try:
        (subject,) = binding_body["subjects"]
        agent_user = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
        as_agent = config.new_client_from_config(str(real_control_plane.kubeconfig(
            agent_user, ("system:serviceaccounts", f"system:serviceaccounts:{subject['namespace']}"))))
        groups = json.loads(manifest(inventory)["data"]["inventory.json"])
        devices = hami.device_inventory("tenant-a", groups, hami.DEFAULT_SPLIT_COUNT)

        plan = KubeAgent(client.CoreV1Api(as_agent), node_name, devices).reconcile_once()

        assert plan.node_annotation_patch is not None and plan.node_status_patch is not None
        stored = core.read_node(node_name)
        registered = hami.parse_register_annotation(stored.metadata.annotations[hami.NODE_REGISTER_ANNOTATION])
        # The inventory is one A100-SXM4-80GB (Pulumi.dev.yaml tenant-a), split 10 ways as HAMi's default; a name
        # that starts with NVIDIA is registered as it is (HAMi v2.10.0 nvinternal/plugin/register.go).
        assert [(d["type"], d["devmem"], d["count"]) for d in registered] == [("NVIDIA A100-SXM4-80GB", 81920, 10)]
        # Capacity only: the kubelet copies an extended resource's capacity into allocatable on its next status
        # update (pkg/kubelet/nodestatus/setters.go MachineInfo; "Advertise Extended Resources for a Node"), and
        # this tier has no kubelet.
        assert stored.status.capacity["nvidia.com/gpu"] == "10"
        # A second reconcile finds nothing to assert: what the server stored is what the agent wants.
        again = KubeAgent(client.CoreV1Api(as_agent), node_name, devices).reconcile_once()
        assert again.node_annotation_patch is None and again.node_status_patch is None
        # The agent's role names its own node only.
        with pytest.raises(ApiException) as refused:
            client.CoreV1Api(as_agent).patch_node("some-other-node", {"metadata": {"annotations": {"x": "y"}}})
        assert refused.value.status == 403
    finally:
        core.delete_node(node_name)
        rbac.delete_cluster_role_binding(binding_body["metadata"]["name"])
        rbac.delete_cluster_role(role_body["metadata"]["name"])


# --------------------------------------------------------------------------- the kubelet's pod limit


def _scheduled_on(core: client.CoreV1Api, node: str) -> list[client.V1Pod]:
    return core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items


# What each example stack's GPU node runs besides what the program registers itself: DaemonSets of Helm charts,
# as Helm's SDK rendered them for the stack's values (tests/fixtures, see their tests for how they were made).
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RENDERED_DAEMONSETS = {
    "dev": (),
    "dev-nvml": (FIXTURES / "nvml_mock" / "hami-device-plugin.dev-nvml.tenant-a.yaml",),
    "gpu": (HAMI_RENDERED_GPU,),
}
DEVICE_LAYER = {"dev": "mock-agent", "dev-nvml": "nvml-mock", "gpu": "nvidia"}
# Kamaji's konnectivity agent is a DaemonSet Kamaji creates in the tenant (addons.konnectivity.agent.mode), not one
# the program registers, so it cannot be placed here; the planner counts it.
KAMAJI_DAEMONSETS = ("konnectivity-agent",)
# The DaemonSets as named in the cluster (tenant-a's) -> as the planner lists them (builders/gpu_nodes.py).
PLANNER_NAMES = {"kindnet": "kindnet", "kube-proxy": "kube-proxy", "tenant-a-mock-gpu-agent": "mock-gpu-agent",
                 "hami-device-plugin": "hami-device-plugin", "tenant-a-mock-nvml": "nvml-mock"}


@pytest.mark.parametrize("stack", ["dev", "dev-nvml", "gpu"])
def test_kube_scheduler_stops_at_the_pod_limit_the_planner_plans(
        admin_api: client.ApiClient, core: client.CoreV1Api, system_namespace: str, stack: str) -> None:
    apps = client.AppsV1Api(admin_api)
    node_name = f"{PREFIX}{stack}-node"
    daemonsets = [_renamespaced(manifest(r)) for r in _registered(stack, "tenant-a", "DaemonSet")]
    assert daemonsets, f"{stack}: tenant-a registers no DaemonSet"
    # Chart DaemonSets keep their selectors and templates; the priority class is dropped (the Priority admission
    # plugin allows system-node-critical in kube-system only; placement does not depend on it), and the
    # RuntimeClass a template names is created.
    rendered = [d for path in RENDERED_DAEMONSETS[stack] for d in yaml.safe_load_all(path.read_text()) if d]
    for chart_daemonset in (d for d in rendered if d["kind"] == "DaemonSet"):
        chart_daemonset["spec"]["template"]["spec"].pop("priorityClassName", None)
        chart_daemonset["metadata"]["namespace"] = "kube-system"
        daemonsets.append(_renamespaced(chart_daemonset))
        runtime_class = chart_daemonset["spec"]["template"]["spec"].get("runtimeClassName")
        if runtime_class:
            try:
                client.NodeV1Api(admin_api).create_runtime_class({"metadata": {"name": runtime_class},
                                                                  "handler": runtime_class})
            except ApiException as error:
                if error.status != 409:
                    raise
    workload_namespace = f"{PREFIX}{stack}-pods"
    core.create_namespace({"metadata": {"name": workload_namespace}})
    # Labelled as a GPU node of each mode: the program's own label, and HAMi's `gpu: on` (chart nodeSelector).
    core.create_node(_node(node_name, 110, {"gpu-tenancy.io/gpu-node": "true", "gpu": "on"}))
    names = []
    original: dict[str, str] = {}
    try:
        for index, body in enumerate(daemonsets):
            # Each DaemonSet's own selector and template as registered; only its name is made unique, and its
            # service account is created (the ServiceAccount admission plugin refuses pods without it).
            unique = f"{stack}-{index}-{body['metadata']['name']}"
            original[unique] = body["metadata"]["name"]
            body["metadata"]["name"] = unique
            account = body["spec"]["template"]["spec"].get("serviceAccountName")
            if account:
                try:
                    core.create_namespaced_service_account(SYSTEM, {"metadata": {"name": account}})
                except ApiException as error:
                    if error.status != 409:
                        raise
            apps.create_namespaced_daemon_set(SYSTEM, body)
            names.append(body["metadata"]["name"])
        daemon_pods = wait_until(f"{len(daemonsets)} DaemonSet pods on {node_name}",
                                lambda: len(_scheduled_on(core, node_name)) == len(daemonsets) and _scheduled_on(core, node_name), timeout=WAIT)
        # The planner's list of what runs on a GPU node is what the real DaemonSet controller put there, and
        # Kamaji's agent; so its pod budget per node is what kube-scheduler leaves for workloads.
        layer = DEVICE_LAYER[stack]
        planned = [entry for entry in gpu_nodes.NODE_DAEMONSETS[layer] if entry not in KAMAJI_DAEMONSETS]

        placed = sorted(PLANNER_NAMES.get(original[pod.metadata.owner_references[0].name], "?") for pod in daemon_pods)
        assert placed == sorted(planned), [original[pod.metadata.owner_references[0].name] for pod in daemon_pods]
        # CoreDNS (kubeadm's two replicas, deployed by Kamaji) and HAMi's scheduler are Deployments of the tenant that
        # neither the program nor this test registers; their pods also run on the tenant's workers.
        assert gpu_nodes.workload_pods_per_node(layer) == 110 - len(daemon_pods) - len(KAMAJI_DAEMONSETS) - 3
        replicas = 115
        apps.create_namespaced_deployment(workload_namespace, {
            "metadata": {"name": "fill"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "fill"}},
                     "template": {"metadata": {"labels": {"app": "fill"}},
                                  "spec": {"nodeSelector": {"kubernetes.io/hostname": node_name},
                                           "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1"}]}}}})
        wait_until("every replica created", lambda: len(core.list_namespaced_pod(workload_namespace).items) == replicas,
                   timeout=WAIT)

        def settled() -> tuple[int, list[client.V1Pod]] | None:
            pods = core.list_namespaced_pod(workload_namespace).items
            bound = sum(1 for pod in pods if pod.spec.node_name == node_name)
            waiting = [pod for pod in pods if not pod.spec.node_name and any(
                c.type == "PodScheduled" and c.status == "False" for c in (pod.status.conditions or []))]
            return (bound, waiting) if bound + len(waiting) == replicas else None

        bound, waiting = wait_until("every replica bound or marked unschedulable", settled, timeout=120)
        assert bound == 110 - len(daemon_pods)
        assert len(waiting) == replicas - bound
        assert all("Too many pods" in (c.message or "") for pod in waiting for c in pod.status.conditions
                   if c.type == "PodScheduled")
    finally:
        apps.delete_collection_namespaced_deployment(workload_namespace)
        for name in names:
            apps.delete_namespaced_daemon_set(name, SYSTEM)
        core.delete_namespace(workload_namespace)
        core.delete_node(node_name)


# --------------------------------------------------------------------------- quotas and Pod Security


def _tenant_workloads(stack: str, tenant: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The tenant's workload namespace, its ResourceQuotas and its Deployments, as registered."""
    namespaces = [manifest(r) for r in _registered(stack, tenant, "Namespace") if "workloads" in r.name]
    quotas = [manifest(r) for r in _registered(stack, tenant, "ResourceQuota")]
    deployments = [manifest(r) for r in _registered(stack, tenant, "Deployment") if "workloads" in r.name]
    assert len(namespaces) == 1 and deployments, f"{stack}/{tenant}: no workload namespace or workload"
    return namespaces[0], quotas, deployments


def _apply_in(namespace: str, admin_api: client.ApiClient, namespace_body: dict[str, Any],
              quotas: list[dict[str, Any]], deployments: list[dict[str, Any]]) -> None:
    core, apps = client.CoreV1Api(admin_api), client.AppsV1Api(admin_api)
    body = copy.deepcopy(namespace_body)
    body["metadata"]["name"] = namespace
    core.create_namespace(body)
    for quota in quotas:
        core.create_namespaced_resource_quota(namespace, {**quota, "metadata": {**quota["metadata"], "namespace": namespace}})
    # The quota controller must have computed the quota's usage before pods are admitted against it.
    wait_until("quota status", lambda: all(q.status and q.status.used is not None
                                          for q in core.list_namespaced_resource_quota(namespace).items), timeout=WAIT)
    for deployment in deployments:
        apps.create_namespaced_deployment(namespace, {**deployment, "metadata": {**deployment["metadata"], "namespace": namespace}})


def _created_pods(core: client.CoreV1Api, namespace: str, expected: int) -> int:
    """Pods the ReplicaSet controller got past admission, once it stops trying (bounded)."""
    previous, stable_since = -1, time.monotonic()
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        count = len(core.list_namespaced_pod(namespace).items)
        if count != previous:
            previous, stable_since = count, time.monotonic()
        if count == expected or time.monotonic() - stable_since > 10:
            return count
        time.sleep(0.5)
    return previous


def _failed_creates(admin_api: client.ApiClient, namespace: str) -> list[str]:
    events = client.CoreV1Api(admin_api).list_namespaced_event(namespace).items
    return [event.message for event in events if event.reason == "FailedCreate"]


@pytest.mark.parametrize(("stack", "tenant"), [(s, t) for s in ("dev", "dev-nvml", "gpu") for t in ("tenant-a", "tenant-b")])
def test_every_declared_replica_passes_pod_security_and_the_quota(admin_api: client.ApiClient, core: client.CoreV1Api,
                                                                  stack: str, tenant: str) -> None:
    namespace_body, quotas, deployments = _tenant_workloads(stack, tenant)
    namespace = f"{PREFIX}{stack}-{tenant}"
    replicas = sum(int(d["spec"]["replicas"]) for d in deployments)
    _apply_in(namespace, admin_api, namespace_body, quotas, deployments)
    try:
        assert _created_pods(core, namespace, replicas) == replicas, _failed_creates(admin_api, namespace)
    finally:
        core.delete_namespace(namespace)


def test_a_replica_past_the_gpu_quota_is_refused_by_the_api_server(admin_api: client.ApiClient,
                                                                    core: client.CoreV1Api) -> None:
    namespace_body, quotas, deployments = _tenant_workloads("dev", "tenant-a")
    (quota,) = quotas
    gpus_allowed = int(quota["spec"]["hard"]["requests.nvidia.com/gpu"])
    (deployment, *_) = deployments
    per_pod = sum(int(c["resources"]["limits"].get("nvidia.com/gpu", 0))
                  for c in deployment["spec"]["template"]["spec"]["containers"])
    deployment = copy.deepcopy(deployment)
    deployment["spec"]["replicas"] = gpus_allowed // per_pod + 1
    namespace = f"{PREFIX}over-quota"
    _apply_in(namespace, admin_api, namespace_body, quotas, [deployment])
    try:
        assert _created_pods(core, namespace, gpus_allowed // per_pod) == gpus_allowed // per_pod
        failures = wait_until("a FailedCreate event", lambda: _failed_creates(admin_api, namespace), timeout=WAIT)
        assert any("exceeded quota" in message and "requests.nvidia.com/gpu" in message for message in failures), failures
    finally:
        core.delete_namespace(namespace)


def test_the_api_server_enforces_only_the_gpu_count_of_the_quota_and_leaves_memory_and_cores_to_hami(
        admin_api: client.ApiClient, core: client.CoreV1Api) -> None:
    """The quota the program registers holds `limits.nvidia.com/gpumem` and `gpucores` too. Kubernetes tracks no
    usage for an extended resource's `limits.` quota (only `requests.` is evaluated for extended resources:
    pkg/quota/v1/evaluator/core/pods.go), so pods past the memory quota are admitted by the API server: only HAMi's
    webhook (pkg/scheduler/webhook.go, for pods that name its scheduler) refuses them."""
    namespace_body, quotas, deployments = _tenant_workloads("dev", "tenant-a")
    (quota,) = quotas
    memory_quota = int(quota["spec"]["hard"]["limits.nvidia.com/gpumem"])
    namespace = f"{PREFIX}memory-quota"
    _apply_in(namespace, admin_api, namespace_body, quotas, [])
    try:
        container = copy.deepcopy(deployments[0]["spec"]["template"]["spec"]["containers"][0])
        container["resources"]["limits"].update({"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(memory_quota)})
        template = deployments[0]["spec"]["template"]
        for name in ("first", "second"):  # together twice the memory quota
            core.create_namespaced_pod(namespace, {"metadata": {"name": name, "labels": template["metadata"]["labels"]},
                                                   "spec": {**template["spec"], "containers": [container]}})
        used = wait_until("quota usage", lambda: (core.read_namespaced_resource_quota(quota["metadata"]["name"], namespace)
                                                 .status.used or {}).get("requests.nvidia.com/gpu") == "2" and
                         core.read_namespaced_resource_quota(quota["metadata"]["name"], namespace).status.used,
                         timeout=WAIT)
        assert set(used) == {"requests.nvidia.com/gpu"}, used
    finally:
        core.delete_namespace(namespace)
