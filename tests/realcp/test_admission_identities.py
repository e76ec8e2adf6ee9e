"""The admission policies that depend on who asks, in a real kube-apiserver (1.36.3), installed with the RBAC the
program registers in tenant-a, each request sent as that identity with a client certificate the cluster's CA signs
(the real x509 authenticator) or the token the program hands out:

- the mock-GPU agent's policy (dev): the agent's own code (gpu_tenancy/hami/agent/kube.py) is admitted, every other
  write of the CEL tests' tables (tests/test_agent_admission.py, tests/test_agent_admission_writes.py) refused;
- the tenant user's Service policy (dev with userAccess): the requests of tests/test_tenant_access.py, an UPDATE
  adding externalIPs included.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from admission_cel import Request, binding_denials
from kubernetes import client, config
from policy_support import record_engine_view
from test_agent_admission import AGENT, NODE, REFUSED_PATCHES
from test_agent_admission_writes import NODE_CHANGES
from test_tenant_access import SERVICE_REQUESTS, with_user_access

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent import decisions
from gpu_tenancy.hami.agent.kube import KubeAgent
from tests.realcp import admission_support as adm
from tests.realcp.cluster import RealControlPlane

VAP, VAPB = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
# Refused by the API server's own pod update validation (HTTP 422) before any admission policy sees it
# (k8s.io/kubernetes pkg/apis/core/validation ValidatePodUpdate: only a few spec fields may change).
INVALID_UPDATES = {"the spec": "pod updates may not change fields other than"}


def _service_account_groups(user: str) -> tuple[str, ...]:
    namespace = user.split(":")[2]
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def _policy_and_binding(objects: list[dict[str, Any]], part: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return adm.named(objects, VAP, part), adm.named(objects, VAPB, part)


def _expected(objects: list[dict[str, Any]], part: str, request: Request) -> list[str]:
    policy, binding = _policy_and_binding(objects, part)
    failed = binding_denials(policy["spec"], binding["spec"], request)
    return [adm.denial(policy["metadata"]["name"], binding["metadata"]["name"], m) for m in failed[:1]]


@pytest.fixture(scope="module")
def namespace(admin_api: client.ApiClient) -> Iterator[str]:
    yield from adm.fresh_namespace(admin_api)


# --------------------------------------------------------------------------- the mock-GPU agent


@pytest.fixture(scope="module")
def agent(admin_api: client.ApiClient, real_control_plane: RealControlPlane, namespace: str
          ) -> Iterator[tuple[client.ApiClient, list[dict[str, Any]]]]:
    """The agent's policy, binding, ServiceAccount, ClusterRole and ClusterRoleBinding as dev registers them, its
    node, and a client that is the agent."""
    registered = {r.name: adm.manifest(r) for r in adm.in_tenant("dev") if r.name.startswith("tenant-a-mock-gpu-agent")}
    objects = [registered[f"tenant-a-mock-gpu-agent-{part}"]
               for part in ("sa", "role", "binding", "pod-policy", "pod-policy-binding")]
    # As a kubelet registers it: with an allocatable. (Without one, the API server defaults it from the capacity on
    # every status write, k8s.io/kubernetes pkg/apis/core/v1/defaults.go SetDefaults_NodeStatus, and the agent's
    # capacity patch would change allocatable too, which its policy refuses.)
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": {"gpu-tenancy.io/gpu-node": "true"}},
            "status": {"capacity": resources, "allocatable": resources}}
    installing = adm.installed(admin_api, [*objects, node])
    next(installing)
    try:
        policy, _ = _policy_and_binding(objects, "tenant-a-mock-gpu-agent")
        # The CEL tests' agent and node are the ones the program registers.
        assert policy["spec"]["matchConditions"][0]["expression"] == f"request.userInfo.username == '{AGENT}'"
        assert registered["tenant-a-mock-gpu-agent-role"]["rules"][0]["resourceNames"] == [NODE]
        as_agent = config.new_client_from_config(str(real_control_plane.kubeconfig(AGENT, _service_account_groups(AGENT))))
        probe = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
        adm.wait_until("the agent's policy", lambda: adm.merge_patch(
            as_agent, probe, {"metadata": {"labels": {"probe": "x"}}}, dry_run=True).acted_on)
        yield as_agent, [*objects, registered["tenant-a-mock-gpu-agent-inventory"]]
    finally:
        next(installing, None)


def _bound_pod(admin_api: client.ApiClient, namespace: str, node: str, **annotations: str) -> dict[str, Any]:
    """A pod as HAMi leaves it for the device plugin: its allocation annotations, bound to `node` by the binding
    subresource as HAMi's scheduler binds (no HAMi scheduler runs here, so kube-scheduler leaves the pod alone)."""
    name = f"a-infer-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "a-infer"},
                         "annotations": {hami.ASSIGNED_NODE_ANNOTATION: node,
                                         hami.DEVICES_ALLOCATED_ANNOTATION: "GPU-0,NVIDIA,8192,10:;", **annotations}},
            "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "main", "image": adm.IMAGE}]}}
    adm.ok(adm.create(admin_api, body), "create pod")
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    adm.ok(adm.call(admin_api, "POST", adm.path(body, name, "binding"), binding), "bind pod")
    return adm.ok(adm.read(admin_api, body), "read pod")


def test_the_agents_own_code_is_admitted(admin_api: client.ApiClient, namespace: str,
                                         agent: tuple[client.ApiClient, list[dict[str, Any]]]) -> None:
    as_agent, objects = agent
    pod = _bound_pod(admin_api, namespace, NODE, **{hami.BIND_PHASE_ANNOTATION: hami.BIND_PHASE_ALLOCATING})
    lock = f"2026-12-06T03:00:00Z,{namespace},{pod['metadata']['name']}"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    adm.ok(adm.merge_patch(admin_api, node, {"metadata": {"annotations": {hami.NODE_LOCK_ANNOTATION: lock}}}), "lock")
    inventory = adm.named(objects, "ConfigMap", "")
    devices = hami.device_inventory("tenant-a", json.loads(inventory["data"]["inventory.json"]))

    plan = KubeAgent(client.CoreV1Api(as_agent), NODE, devices).reconcile_once()

    assert plan.node_annotation_patch and plan.node_status_patch and plan.pod_actions
    stored = adm.ok(adm.read(admin_api, node), "read node")
    assert hami.NODE_LOCK_ANNOTATION not in stored["metadata"]["annotations"]
    assert stored["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION] == hami.register_annotation(devices)
    assert stored["status"]["capacity"][hami.RESOURCE_GPU] == str(hami.total_slots(devices))
    annotations = adm.ok(adm.read(admin_api, pod), "read pod")["metadata"]["annotations"]
    assert annotations[hami.BIND_PHASE_ANNOTATION] == hami.BIND_PHASE_SUCCESS


def _persisted(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields", "generation")}
    return {"metadata": metadata, "spec": obj.get("spec"), "status": obj.get("status")}


def _refused_as_expected(response: adm.Response, expected: list[str], why: str = "") -> None:
    assert (response.status, response.body.get("reason"), response.policy_warnings) == (403, "Forbidden", []), \
        response.message
    assert [response.refusal] == expected and why in response.refusal, (response.refusal, expected)


@pytest.mark.parametrize(("case", "change", "why"), REFUSED_PATCHES, ids=[c[0] for c in REFUSED_PATCHES])
def test_any_other_pod_patch_of_the_agent_is_refused(
    admin_api: client.ApiClient, namespace: str, agent: tuple[client.ApiClient, list[dict[str, Any]]], case: str,
    change: dict[str, Any], why: str,
) -> None:
    as_agent, objects = agent
    old = _bound_pod(admin_api, namespace, NODE)
    response = adm.merge_patch(as_agent, old, change)
    if case in INVALID_UPDATES:
        assert (response.status, response.body.get("reason")) == (422, "Invalid"), response.message
        assert INVALID_UPDATES[case] in response.message
        return
    new = adm.ok(adm.merge_patch(admin_api, old, change, dry_run=True), "the same patch as admin")
    _refused_as_expected(response, _expected(objects, "tenant-a-mock-gpu-agent",
                                             Request("pods", "UPDATE", namespace, new, old=old, username=AGENT)), why)


@pytest.mark.parametrize(("case", "change"), [c for c in NODE_CHANGES if c[0] in ("an owner", "a finalizer")],
                         ids=["an owner", "a finalizer"])
def test_a_pod_gets_no_owner_or_finalizer_from_the_agent(
    admin_api: client.ApiClient, namespace: str, agent: tuple[client.ApiClient, list[dict[str, Any]]], case: str,
    change: dict[str, Any],
) -> None:
    as_agent, objects = agent
    old = _bound_pod(admin_api, namespace, NODE, **{hami.BIND_PHASE_ANNOTATION: hami.BIND_PHASE_ALLOCATING})
    patch = {"metadata": {**change["metadata"], **decisions.success_patch()["metadata"]}}
    new = adm.ok(adm.merge_patch(admin_api, old, patch, dry_run=True), "the same patch as admin")
    _refused_as_expected(adm.merge_patch(as_agent, old, patch), _expected(
        objects, "tenant-a-mock-gpu-agent", Request("pods", "UPDATE", namespace, new, old=old, username=AGENT)))


def test_a_pod_on_another_node_is_refused_to_the_agent_and_other_users_are_out_of_scope(
    admin_api: client.ApiClient, namespace: str, agent: tuple[client.ApiClient, list[dict[str, Any]]]
) -> None:
    as_agent, objects = agent
    old = _bound_pod(admin_api, namespace, "gpu-tenancy-dev-tenant-b-worker",
                     **{hami.BIND_PHASE_ANNOTATION: hami.BIND_PHASE_ALLOCATING})
    new = adm.ok(adm.merge_patch(admin_api, old, decisions.success_patch(), dry_run=True), "the patch as admin")
    expected = _expected(objects, "tenant-a-mock-gpu-agent", Request("pods", "UPDATE", namespace, new, old=old,
                                                                      username=AGENT))
    assert [e.rsplit(": ", 1)[1] for e in expected] == [f"the mock-GPU agent only updates pods bound to its node {NODE}"]
    _refused_as_expected(adm.merge_patch(as_agent, old, decisions.success_patch()), expected)
    admitted = adm.merge_patch(admin_api, old, {"metadata": {"labels": {"app": "x"}}})
    assert (admitted.status, admitted.policy_warnings) == (200, []), admitted.message


@pytest.mark.parametrize("subresource", ["", "status"])
@pytest.mark.parametrize(("case", "change"), NODE_CHANGES, ids=[c[0] for c in NODE_CHANGES])
def test_any_other_node_change_of_the_agent_is_refused(
    admin_api: client.ApiClient, agent: tuple[client.ApiClient, list[dict[str, Any]]], case: str,
    change: dict[str, Any], subresource: str,
) -> None:
    as_agent, objects = agent
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    old = adm.ok(adm.read(admin_api, node), "read node")
    target = adm.path(node, NODE, subresource)
    response = adm.call(as_agent, "PATCH", target, change, "application/merge-patch+json")
    # What the API server makes of the request before admission (a status write keeps the spec, and the reverse).
    new = adm.ok(adm.call(admin_api, "PATCH", target, change, "application/merge-patch+json", {"dryRun": "All"}),
                 "the same patch as admin")
    expected = _expected(objects, "tenant-a-mock-gpu-agent", Request(
        "nodes" + (f"/{subresource}" if subresource else ""), "UPDATE", "", new, old=old, username=AGENT))
    if _persisted(new) != _persisted(old):
        assert expected, "the CEL double admits a change the agent may not make"
        _refused_as_expected(response, expected)
    else:
        # The API server drops this part of the request before admission (a status write keeps the spec, a write
        # of the node keeps its status: k8s.io/kubernetes pkg/registry/core/node/strategy.go PrepareForUpdate):
        # nothing changes, and there is nothing to refuse.
        assert (response.status, response.policy_warnings, expected) == (200, [], []), response.message
        assert _persisted(adm.ok(adm.read(admin_api, node), "read node")) == _persisted(old)


# --------------------------------------------------------------------------- the tenant's user and Services


@pytest.fixture(scope="module")
def user_access(admin_api: client.ApiClient) -> Iterator[list[dict[str, Any]]]:
    """What dev with userAccess registers in tenant-a, in the order the program creates it."""
    stack = record_engine_view(with_user_access())
    registered = {r.name: r for r in stack if "tenant-a-kubernetes" in r.provider}
    names = ["tenant-a-workloads-namespace", *(f"tenant-a-user-access-{part}" for part in (
        "sa", "edit", "quota", "services-policy", "services-policy-binding", "token"))]
    objects = [adm.manifest(registered[name]) for name in names]
    installing = adm.installed(admin_api, objects)
    next(installing)
    try:
        captured = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "probe", "namespace": "workloads"},
                    "spec": {"ports": [{"port": 80}], "externalIPs": ["10.20.0.11"]}}
        adm.wait_until("the Service policy", lambda: adm.create(admin_api, captured, dry_run=True).acted_on)
        yield objects
    finally:
        next(installing, None)


def test_the_api_server_type_checks_the_user_policy_for_the_kinds_it_reaches(
    admin_api: client.ApiClient, user_access: list[dict[str, Any]]
) -> None:
    for policy in (o for o in user_access if o["kind"] == VAP):
        assert adm.unguarded_type_warnings(admin_api, policy) == [], policy["metadata"]["name"]


@pytest.fixture(params=["client certificate", "the token the program hands out"])
def as_user(request: pytest.FixtureRequest, real_control_plane: RealControlPlane, admin_api: client.ApiClient,
            user_access: list[dict[str, Any]], tmp_path: Path) -> client.ApiClient:
    (binding,) = [o for o in user_access if o["kind"] == "RoleBinding"]
    (subject,) = binding["subjects"]
    user = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
    if request.param == "client certificate":
        return config.new_client_from_config(str(real_control_plane.kubeconfig(user, _service_account_groups(user))))
    secret = adm.named(user_access, "Secret", "")
    token: dict[str, str] = {}
    adm.wait_until("the token controller", lambda: bool(token.update(
        adm.ok(adm.read(admin_api, secret), "read token").get("data") or {}) or token.get("token")))
    kubeconfig = yaml.safe_load(real_control_plane.admin_kubeconfig.read_text())
    kubeconfig["users"][0]["user"] = {"token": base64.b64decode(token["token"]).decode()}
    (tmp_path / "user").write_text(yaml.safe_dump(kubeconfig))
    return config.new_client_from_config(str(tmp_path / "user"))


@pytest.mark.parametrize(("case", "operation", "where", "old", "new", "refused"), SERVICE_REQUESTS,
                         ids=[c[0] for c in SERVICE_REQUESTS])
def test_each_service_request_is_admitted_or_refused_as_the_cel_test_says(
    admin_api: client.ApiClient, namespace: str, user_access: list[dict[str, Any]], as_user: client.ApiClient,
    case: str, operation: str, where: str, old: dict[str, Any] | None, new: dict[str, Any], refused: bool,
) -> None:
    """In the user's namespace as the user; elsewhere (where the user may do nothing) as the admin."""
    (quota,) = [o for o in user_access if o["kind"] == "ResourceQuota"]
    users_namespace = quota["metadata"]["namespace"]
    actor, target = (as_user, users_namespace) if where == users_namespace else (admin_api, namespace)
    name = f"{adm.slug(case)[:40]}-{uuid.uuid4().hex[:4]}"

    def placed(body: dict[str, Any]) -> dict[str, Any]:
        return {**copy.deepcopy(body), "metadata": {"name": name, "namespace": target}}

    if operation == "CREATE":
        response = adm.create(actor, placed(new))
    else:
        stored = adm.ok(adm.create(actor, placed(old or {})), "create the Service to update")
        stored["spec"].update(copy.deepcopy(new["spec"]))
        response = adm.call(actor, "PUT", adm.path(stored, name), stored)
    try:
        if refused:
            _refused_as_expected(response, _expected(user_access, "user-services", Request(
                "services", operation, where, new, old=old)))
        else:
            assert response.admitted and response.policy_warnings == [], response.message
    finally:
        adm.delete(admin_api, placed(new))
