"""The non-admin identity (`tenants[].userAccess`) against the real authorizer and admission chain: what the docs
promise it can do and what they say it cannot, each case quoting the doc's words, asked of the authorizer
(SelfSubjectAccessReview) and tried with a real request.

The objects are tenant-a's layer of the dev stack with userAccess on, as registered (tests/realcp/tenant_layer.py).
The identity is a client certificate with the ServiceAccount's user name and groups: the authorizer sees only those
(`test_the_certificate_is_the_identity_the_programs_kubeconfig_gives` compares it with the token the program hands
out).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from policy_support import Recorded

from gpu_tenancy.builders.tenant_access import tenant_access
from tests.realcp.cluster import RealControlPlane, running, wait_until
from tests.realcp.tenant_layer import Cluster, manifest, present, tenant_layer, user_access_stack

DOCS = Path(__file__).resolve().parents[2] / "docs"
THREAT = "threat-model"
CONFIGURATION = "configuration"
NAMESPACE = "workloads"  # the docs: "the tenant's `workloads` namespace"

# The docs' own words, each a clause of docs/<page>.md (whitespace aside).
EDIT_ONLY = (THREAT, "bound to the built-in `edit` role in the tenant's `workloads` namespace only")
EDIT_CONFIG = (CONFIGURATION, "a ServiceAccount bound to `edit` in the `workloads` namespace only")
CANNOT_CHANGE = (THREAT, "It cannot change namespaces (so not their Pod Security labels), RoleBindings, "
                         "ResourceQuotas or admission policies")
NOTHING_CLUSTER = (THREAT, "and sees nothing cluster-scoped")
OWN_NAMESPACE = (THREAT, "and sees nothing cluster-scoped but its own namespace (read only")
RESTRICTED = (THREAT, "Pod Security Admission `restricted`, enforced on that namespace, refuses privileged pods, "
                      "host namespaces, hostPath, host ports, added capabilities, unconfined profiles, privilege "
                      "escalation and root")
NO_NODE_PORTS = (THREAT, "a ResourceQuota allows no NodePort or LoadBalancer Service (a port on the GPU host)")
POLICIES = (THREAT, "admission policies cover what those cannot: GPUs around HAMi")
EXTERNAL_IPS = (THREAT, "and Service `externalIPs`")


def _message(error: ApiException) -> str:
    """The API server's Status message (the body is a JSON Status)."""
    return str(json.loads(error.body or "{}").get("message", error.body))


def _normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# --------------------------------------------------------------------------- the identity and its clients


@dataclass
class User:
    """The clients' APIs are typed Any: their stubs want model objects, and plain dicts are what they send."""

    name: str
    groups: tuple[str, ...]
    api: client.ApiClient

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> Any:
        return client.AppsV1Api(self.api)

    @property
    def rbac(self) -> Any:
        return client.RbacAuthorizationV1Api(self.api)

    @property
    def admission(self) -> Any:
        return client.AdmissionregistrationV1Api(self.api)

    @property
    def authorization(self) -> Any:
        return client.AuthorizationV1Api(self.api)

    @property
    def authentication(self) -> Any:
        return client.AuthenticationV1Api(self.api)


def _identity(objects: list[Recorded]) -> tuple[str, tuple[str, ...]]:
    """The user name and groups the ServiceAccount the layer's RoleBinding binds authenticates as (k8s.io/apiserver
    pkg/authentication/serviceaccount `MakeUsername`, `MakeGroupNames`). What it is bound to is left to the cases."""
    bindings = [manifest(r) for r in objects if r.inputs.get("kind") == "RoleBinding"]
    assert len(bindings) == 1, bindings
    (subject,) = bindings[0]["subjects"]
    assert subject["kind"] == "ServiceAccount"
    namespace = subject["namespace"]
    return (f"system:serviceaccount:{namespace}:{subject['name']}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}"))


def _dry_run_refused(create: Callable[[], Any]) -> bool:
    try:
        create()
    except ApiException as error:
        return error.status in (400, 403, 422)
    return False


@pytest.fixture(scope="module")
def own_plane(realcp_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[RealControlPlane]:
    """A control plane of this module's own: the identity's layer is applied into a state no other module has
    touched, as on a tenant's first `up`."""
    with running(realcp_binaries, tmp_path_factory.mktemp("realcp-user-access")) as plane:
        yield plane


@pytest.fixture(scope="module")
def admin_api(own_plane: RealControlPlane) -> client.ApiClient:
    return config.new_client_from_config(str(own_plane.admin_kubeconfig))


@pytest.fixture(scope="module")
def user_layer(admin_api: client.ApiClient) -> Iterator[list[Recorded]]:
    """Tenant-a's layer with the identity, applied as registered into a state without it; removed at the end."""
    cluster = Cluster(admin_api)
    objects = tenant_layer(user_access_stack(), "tenant-a")
    bodies = [manifest(r) for r in objects]
    assert not present(cluster, bodies), "not a fresh state"
    try:
        for body in bodies:
            cluster.apply(body, "pulumi-kubernetes")
        core: Any = client.CoreV1Api(admin_api)
        wait_until("the namespace's default account", lambda: bool(core.list_namespaced_service_account(
            NAMESPACE, field_selector="metadata.name=default").items))
        yield objects
    finally:
        for body in reversed(bodies):
            cluster.delete(body)
        cluster.wait_gone(bodies)


@pytest.fixture(scope="module")
def user(user_layer: list[Recorded], own_plane: RealControlPlane) -> User:
    name, groups = _identity(user_layer)
    user = User(name, groups, config.new_client_from_config(str(own_plane.kubeconfig(name, groups))))
    # Admission policies are picked up asynchronously: wait until each refuses the user what it is there to refuse.
    wait_until("the Services policy in force", lambda: _dry_run_refused(lambda: user.core.create_namespaced_service(
        NAMESPACE, _service("probe", externalIPs=["192.0.2.1"]), dry_run="All")))
    # In force means a compliant pod is admitted and a violating one refused.
    wait_until("the GPU access policy in force", lambda: not _dry_run_refused(
        lambda: user.core.create_namespaced_pod(NAMESPACE, _pod("probe"), dry_run="All")) and _dry_run_refused(
        lambda: user.core.create_namespaced_pod(NAMESPACE, _with_env(_pod("probe"), "NVIDIA_VISIBLE_DEVICES", "all"),
                                                dry_run="All")))
    return user


# --------------------------------------------------------------------------- objects the requests send


def _pod(name: str) -> dict[str, Any]:
    """A pod Pod Security `restricted` admits (kubernetes docs: Pod Security Standards, Restricted)."""
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65535, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1",
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
        },
    }


def _with_env(pod: dict[str, Any], name: str, value: str) -> dict[str, Any]:
    pod["spec"]["containers"][0]["env"] = [{"name": name, "value": value}]
    return pod


def _service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec}}


def _deployment(name: str) -> dict[str, Any]:
    template = _pod(name)
    template["metadata"] = {"labels": {"app": name}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": template["metadata"], "spec": template["spec"]}}}


def _created_then_deleted(create: Callable[[], Any], delete: Callable[[], Any]) -> None:
    create()
    delete()


# --------------------------------------------------------------------------- what RBAC allows and refuses


@dataclass(frozen=True)
class Access:
    doc: tuple[str, str]
    verb: str
    group: str
    resource: str
    namespace: str | None
    allowed: bool
    request: Callable[[User], Any]
    name: str = ""

    @property
    def id(self) -> str:
        where = f"in {self.namespace}" if self.namespace else "cluster-wide"
        return f'{self.doc[0]} "{self.doc[1]}": {self.verb} {self.resource} {self.name} {where}'.replace("  ", " ")


ACCESS = [
    # Promised: `edit` in its namespace.
    Access(EDIT_ONLY, "create", "apps", "deployments", NAMESPACE, True, lambda u: _created_then_deleted(
        lambda: u.apps.create_namespaced_deployment(NAMESPACE, _deployment("user-deploy")),
        lambda: u.apps.delete_namespaced_deployment("user-deploy", NAMESPACE))),
    Access(EDIT_ONLY, "create", "", "pods", NAMESPACE, True, lambda u: _created_then_deleted(
        lambda: u.core.create_namespaced_pod(NAMESPACE, _pod("user-pod")),
        lambda: u.core.delete_namespaced_pod("user-pod", NAMESPACE, grace_period_seconds=0))),
    Access(EDIT_ONLY, "list", "", "pods", NAMESPACE, True, lambda u: u.core.list_namespaced_pod(NAMESPACE)),
    Access(EDIT_ONLY, "create", "", "services", NAMESPACE, True, lambda u: _created_then_deleted(
        lambda: u.core.create_namespaced_service(NAMESPACE, _service("user-svc")),
        lambda: u.core.delete_namespaced_service("user-svc", NAMESPACE))),
    Access(EDIT_CONFIG, "create", "", "secrets", NAMESPACE, True, lambda u: _created_then_deleted(
        lambda: u.core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": "user-secret"},
                                                            "stringData": {"k": "v"}}),
        lambda: u.core.delete_namespaced_secret("user-secret", NAMESPACE))),
    Access(EDIT_CONFIG, "create", "", "configmaps", NAMESPACE, True, lambda u: _created_then_deleted(
        lambda: u.core.create_namespaced_config_map(NAMESPACE, {"metadata": {"name": "user-cm"}, "data": {"k": "v"}}),
        lambda: u.core.delete_namespaced_config_map("user-cm", NAMESPACE))),
    # Refused: its namespace's guard rails.
    Access(CANNOT_CHANGE, "patch", "", "namespaces", NAMESPACE, False, lambda u: u.core.patch_namespace(
        NAMESPACE, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}), name=NAMESPACE),
    Access(CANNOT_CHANGE, "delete", "", "namespaces", NAMESPACE, False,
           lambda u: u.core.delete_namespace(NAMESPACE), name=NAMESPACE),
    Access(CANNOT_CHANGE, "create", "rbac.authorization.k8s.io", "rolebindings", NAMESPACE, False,
           lambda u: u.rbac.create_namespaced_role_binding(NAMESPACE, {
               "metadata": {"name": "user-admin"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
               "subjects": [{"kind": "User", "name": u.name}]})),
    Access(CANNOT_CHANGE, "delete", "rbac.authorization.k8s.io", "rolebindings", NAMESPACE, False,
           lambda u: u.rbac.delete_namespaced_role_binding(tenant_access.SERVICE_ACCOUNT, NAMESPACE),
           name=tenant_access.SERVICE_ACCOUNT),
    Access(CANNOT_CHANGE, "delete", "", "resourcequotas", NAMESPACE, False,
           lambda u: u.core.delete_namespaced_resource_quota(tenant_access.QUOTA_NAME, NAMESPACE),
           name=tenant_access.QUOTA_NAME),
    Access(CANNOT_CHANGE, "create", "", "resourcequotas", NAMESPACE, False,
           lambda u: u.core.create_namespaced_resource_quota(NAMESPACE, {"metadata": {"name": "user-quota"},
                                                                         "spec": {"hard": {"pods": "1000"}}})),
    Access(CANNOT_CHANGE, "delete", "admissionregistration.k8s.io", "validatingadmissionpolicies", None, False,
           lambda u: u.admission.delete_validating_admission_policy(tenant_access.SERVICES_POLICY),
           name=tenant_access.SERVICES_POLICY),
    Access(CANNOT_CHANGE, "delete", "admissionregistration.k8s.io", "validatingadmissionpolicybindings", None, False,
           lambda u: u.admission.delete_validating_admission_policy_binding(tenant_access.SERVICES_POLICY),
           name=tenant_access.SERVICES_POLICY),
    # Refused: anything cluster-scoped, anything outside its namespace.
    Access(NOTHING_CLUSTER, "list", "", "nodes", None, False, lambda u: u.core.list_node()),
    Access(NOTHING_CLUSTER, "list", "", "namespaces", None, False, lambda u: u.core.list_namespace()),
    Access(OWN_NAMESPACE, "get", "", "namespaces", NAMESPACE, True, lambda u: u.core.read_namespace(NAMESPACE),
           name=NAMESPACE),
    Access(OWN_NAMESPACE, "get", "", "namespaces", "default", False, lambda u: u.core.read_namespace("default"),
           name="default"),
    Access(NOTHING_CLUSTER, "list", "rbac.authorization.k8s.io", "clusterrolebindings", None, False,
           lambda u: u.rbac.list_cluster_role_binding()),
    Access(NOTHING_CLUSTER, "list", "admissionregistration.k8s.io", "validatingadmissionpolicies", None, False,
           lambda u: u.admission.list_validating_admission_policy()),
    Access(EDIT_ONLY, "list", "", "secrets", "kube-system", False, lambda u: u.core.list_namespaced_secret("kube-system")),
    Access(EDIT_ONLY, "create", "apps", "deployments", "default", False,
           lambda u: u.apps.create_namespaced_deployment("default", _deployment("user-deploy"))),
]


def _self_review(user: User, case: Access) -> bool:
    review = user.authorization.create_self_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": case.verb, "group": case.group, "resource": case.resource,
                                        "namespace": case.namespace or "", "name": case.name}},
    })
    return bool(review.status.allowed)


@pytest.mark.parametrize("case", ACCESS, ids=[case.id for case in ACCESS])
def test_what_the_docs_say_the_identity_may_and_may_not_do(user: User, case: Access) -> None:
    assert _self_review(user, case) is case.allowed
    if case.allowed:
        case.request(user)
        return
    with pytest.raises(ApiException) as refused:
        case.request(user)
    scope = f'in the namespace "{case.namespace}"' if case.namespace else "at the cluster scope"
    assert refused.value.status == 403, refused.value.body
    assert (f'User "{user.name}" cannot {case.verb} resource "{case.resource}" in API group "{case.group}" {scope}'
            in _message(refused.value)), refused.value.body


# --------------------------------------------------------------------------- what admission refuses


@dataclass(frozen=True)
class Refusal:
    doc: tuple[str, str]
    what: str
    request: Callable[[User], Any]
    says: tuple[str, ...]  # in the API server's message

    @property
    def id(self) -> str:
        return f'{self.doc[0]} "{self.doc[1]}": {self.what}'


def _pod_with(change: Callable[[dict[str, Any]], Any]) -> Callable[[User], Any]:
    def request(user: User) -> Any:
        pod = _pod("user-refused")
        change(pod)
        return user.core.create_namespaced_pod(NAMESPACE, pod)
    return request


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


PSA = 'violates PodSecurity "restricted:latest"'
REFUSALS = [
    # Privileged needs allowPrivilegeEscalation unset (validation refuses it with `false`).
    Refusal(RESTRICTED, "privileged pods", _pod_with(lambda p: _container(p).update(securityContext={"privileged": True})),
            (PSA, "securityContext.privileged=true")),
    Refusal(RESTRICTED, "host namespaces", _pod_with(lambda p: p["spec"].update(hostNetwork=True)),
            (PSA, "host namespaces (hostNetwork=true)")),
    Refusal(RESTRICTED, "hostPath", _pod_with(lambda p: p["spec"].update(volumes=[{"name": "h", "hostPath": {"path": "/"}}])),
            (PSA, 'uses restricted volume type "hostPath"')),
    Refusal(RESTRICTED, "host ports",
            _pod_with(lambda p: _container(p).update(ports=[{"containerPort": 8080, "hostPort": 8080}])), (PSA, "uses hostPort 8080")),
    Refusal(RESTRICTED, "added capabilities",
            _pod_with(lambda p: _container(p)["securityContext"]["capabilities"].update(add=["NET_ADMIN"])),
            (PSA, 'must not include "NET_ADMIN" in securityContext.capabilities.add')),
    Refusal(RESTRICTED, "unconfined profiles",
            _pod_with(lambda p: p["spec"]["securityContext"].update(seccompProfile={"type": "Unconfined"})),
            (PSA, 'must not set securityContext.seccompProfile.type to "Unconfined"')),
    Refusal(RESTRICTED, "privilege escalation",
            _pod_with(lambda p: _container(p)["securityContext"].update(allowPrivilegeEscalation=True)),
            (PSA, "must set securityContext.allowPrivilegeEscalation=false")),
    Refusal(RESTRICTED, "root", _pod_with(lambda p: p["spec"]["securityContext"].update(runAsNonRoot=False, runAsUser=0)),
            (PSA, "must not set runAsUser=0")),
    Refusal(NO_NODE_PORTS, "NodePort Service",
            lambda u: u.core.create_namespaced_service(NAMESPACE, _service("user-np", type="NodePort")),
            ("exceeded quota", "services.nodeports")),
    Refusal(NO_NODE_PORTS, "LoadBalancer Service",
            lambda u: u.core.create_namespaced_service(NAMESPACE, _service("user-lb", type="LoadBalancer")),
            ("exceeded quota", "services.loadbalancers")),
    Refusal(EXTERNAL_IPS, "Service externalIPs",
            lambda u: u.core.create_namespaced_service(NAMESPACE, _service("user-eip", externalIPs=["192.0.2.1"])),
            ("ValidatingAdmissionPolicy", "denied request")),
    Refusal(POLICIES, "a GPU around HAMi (NVIDIA_VISIBLE_DEVICES=all)",
            _pod_with(lambda p: _with_env(p, "NVIDIA_VISIBLE_DEVICES", "all")),
            ("ValidatingAdmissionPolicy", "denied request")),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[case.id for case in REFUSALS])
def test_what_the_docs_say_admission_refuses_the_identity(user: User, case: Refusal) -> None:
    # RBAC lets the request through (`edit` creates pods and services), so the refusal is admission's.
    kind = "pods" if "Service" not in case.what else "services"
    assert _self_review(user, Access(case.doc, "create", "", kind, NAMESPACE, True, lambda u: None))
    with pytest.raises(ApiException) as refused:
        case.request(user)
    assert refused.value.status in (403, 422), refused.value.body
    for words in case.says:
        assert words in _message(refused.value), refused.value.body


def test_the_restricted_baseline_pod_is_admitted(user: User) -> None:
    # Each refusal above is this pod with one change: without that change it is admitted.
    user.core.create_namespaced_pod(NAMESPACE, _pod("user-baseline"))
    user.core.delete_namespaced_pod("user-baseline", NAMESPACE, grace_period_seconds=0)


# --------------------------------------------------------------------------- the identity and the docs


def test_the_certificate_is_the_identity_the_programs_kubeconfig_gives(
        user: User, user_layer: list[Recorded], admin_api: client.ApiClient, own_plane: RealControlPlane
) -> None:
    # The program's kubeconfig carries the account's token, filled in by the token controller; the authorizer sees
    # the same user and groups through it as through the certificate used above.
    core: Any = client.CoreV1Api(admin_api)
    token: dict[str, str] = {}

    def filled() -> bool:
        data = core.read_namespaced_secret(tenant_access.TOKEN_SECRET, NAMESPACE).data or {}
        token.update(data)
        return "token" in data

    wait_until("the account's token", filled)
    kubeconfig = tenant_access.kubeconfig("tenant-a", own_plane.admin_kubeconfig.read_text(), token["token"],
                                          NAMESPACE)
    seen = []
    program_user = User(user.name, user.groups, config.new_client_from_config_dict(yaml.safe_load(kubeconfig)))
    for who in (program_user, user):
        review = who.authentication.create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        seen.append((review.status.user_info.username, sorted(review.status.user_info.groups)))
    assert seen[0] == seen[1] == (user.name, sorted((*user.groups, "system:authenticated")))


@pytest.mark.parametrize("quoted", sorted({c.doc for c in ACCESS} | {c.doc for c in REFUSALS}))
def test_every_quoted_promise_is_in_the_docs(quoted: tuple[str, str]) -> None:
    page, words = quoted
    assert _normalised(words) in _normalised((DOCS / f"{page}.md").read_text()), (page, words)
