"""What the admission tests of the real control-plane tier share: the admission objects a tenant gets, taken from a
recorded example stack (tests/policy_support.py), installed into the real API server and removed again, and raw
requests whose status, body and warnings are all kept (the official client drops the `Warning` headers).

Admission policies are cluster-wide, so they are installed per test class and removed at its end, under the names
the program registers; an object of the same name, or another policy with the same spec, already in the cluster
fails the install (it would decide in place of the one under test).
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from policy_support import EXAMPLE_STACKS, Recorded

from tests.realcp.cluster import wait_until
from tests.realcp.tenant_layer import manifest

TENANT = "tenant-a"
ADMISSION = "admissionregistration.k8s.io"
EFFECT_TIMEOUT = 30.0  # seconds: the API server picks up policies, bindings and parameters asynchronously
GONE_TIMEOUT = 120.0  # seconds: a namespace is deleted in a few seconds here
IMAGE = "registry.k8s.io/pause:3.10.1"
ADMIN = "realcp-admin"  # the user name of the cluster's admin certificate (tests/realcp/cluster.py)

# kind -> (plural, namespaced): the kinds these tests create.
KINDS = {
    "ValidatingAdmissionPolicy": ("validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("validatingadmissionpolicybindings", False),
    "MutatingAdmissionPolicy": ("mutatingadmissionpolicies", False),
    "MutatingAdmissionPolicyBinding": ("mutatingadmissionpolicybindings", False),
    "ConfigMap": ("configmaps", True), "ServiceAccount": ("serviceaccounts", True), "Secret": ("secrets", True),
    "ClusterRole": ("clusterroles", False), "ClusterRoleBinding": ("clusterrolebindings", False),
    "RoleBinding": ("rolebindings", True), "ResourceQuota": ("resourcequotas", True),
    "Namespace": ("namespaces", False), "Pod": ("pods", True), "Service": ("services", True),
    "RuntimeClass": ("runtimeclasses", False), "Node": ("nodes", False), "Binding": ("bindings", True),
}


@dataclass
class Response:
    status: int
    body: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    @property
    def admitted(self) -> bool:
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))

    @property
    def policy_warnings(self) -> list[str]:
        """What admission policies warned of (`validationActions: [Warn]`), not the API's own deprecation notes."""
        return [warning for warning in self.warnings if "AdmissionPolicy" in warning]

    @property
    def acted_on(self) -> bool:
        """A policy refused it, or (were its binding to only warn) warned: the policy is in effect."""
        return self.status == 403 or bool(self.policy_warnings)

    @property
    def refusal(self) -> str:
        """An admission policy's refusal as the API server words it, without the `<resource> "<name>" is
        forbidden: ` admission.NewForbidden puts before it (the policy's text is its cause)."""
        causes = [str(c.get("message", "")) for c in (self.body.get("details") or {}).get("causes", [])]
        return causes[-1] if causes and self.message.endswith(causes[-1]) else self.message


def call(api: client.ApiClient, method: str, path: str, body: Any = None, content_type: str = "application/json",
         query: dict[str, str] | None = None) -> Response:
    method, url, headers, serialized, post = api.param_serialize(
        method, path, query_params=list((query or {}).items()),
        header_params={"Content-Type": content_type, "Accept": "application/json"}, body=body,
        auth_settings=["BearerToken"])
    raw = api.call_api(method, url, header_params=headers, body=serialized, post_params=post)
    data = raw.read()
    return Response(raw.status, json.loads(data) if data else {}, list(raw.headers.getlist("Warning")))


def path(body: dict[str, Any], name: str | None = None, subresource: str = "") -> str:
    api_version, kind = body["apiVersion"], body["kind"]
    plural, namespaced = KINDS[kind]
    root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    namespace = f"/namespaces/{body['metadata']['namespace']}" if namespaced else ""
    tail = f"/{name}" if name else ""
    return f"{root}{namespace}/{plural}{tail}" + (f"/{subresource}" if subresource else "")


def create(api: client.ApiClient, body: dict[str, Any], dry_run: bool = False) -> Response:
    return call(api, "POST", path(body), body, query={"dryRun": "All"} if dry_run else None)


def read(api: client.ApiClient, body: dict[str, Any]) -> Response:
    return call(api, "GET", path(body, body["metadata"]["name"]))


def delete(api: client.ApiClient, body: dict[str, Any]) -> Response:
    return call(api, "DELETE", path(body, body["metadata"]["name"]), {"gracePeriodSeconds": 0})


def merge_patch(api: client.ApiClient, body: dict[str, Any], patch: dict[str, Any], dry_run: bool = False) -> Response:
    return call(api, "PATCH", path(body, body["metadata"]["name"]), patch, "application/merge-patch+json",
                query={"dryRun": "All"} if dry_run else None)


def ok(response: Response, what: str) -> dict[str, Any]:
    assert response.admitted, f"{what}: HTTP {response.status}: {response.message}"
    return response.body


def denial(policy: str, binding: str, message: str) -> str:
    """How the API server words a binding's refusal (k8s.io/apiserver v0.36.3 pkg/admission/plugin/policy/
    validating/dispatcher.go `Dispatch`: the first denied decision only)."""
    return f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}"


# --------------------------------------------------------------------------- what the program registers


def in_tenant(stack: str, tenant: str = TENANT) -> list[Recorded]:
    return [r for r in EXAMPLE_STACKS[stack]() if f"{tenant}-kubernetes" in r.provider]


def admission_objects(stack: str, tenant: str = TENANT) -> list[dict[str, Any]]:
    """Every admission policy and binding the stack registers in the tenant, policies first."""
    resources = in_tenant(stack, tenant)
    policies = [manifest(r) for r in resources if r.type.split(":")[1].startswith(f"{ADMISSION}/")]
    return sorted(policies, key=lambda p: p["kind"].endswith("Binding"))


def named(objects: list[dict[str, Any]], kind: str, name_part: str = "") -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and name_part in o["metadata"]["name"]]
    return found


def _same_spec_elsewhere(api: client.ApiClient, body: dict[str, Any]) -> list[str]:
    if not body["kind"].endswith("AdmissionPolicy"):
        return []
    listed = ok(call(api, "GET", path({**body, "metadata": {}})), f"list {body['kind']}")
    return [item["metadata"]["name"] for item in listed.get("items", [])
            if item["metadata"]["name"] != body["metadata"]["name"] and item.get("spec", {}) == body["spec"]]


def installed(api: client.ApiClient, objects: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Create `objects` (in order), yield what the server returned, delete them (in reverse order)."""
    created: list[dict[str, Any]] = []
    try:
        for body in objects:
            assert read(api, body).status == 404, f"{body['kind']} {body['metadata']['name']} is already in the cluster"
            copies = _same_spec_elsewhere(api, body)
            assert not copies, f"{body['kind']}s {copies} hold the same spec as {body['metadata']['name']}"
            created.append(ok(create(api, copy.deepcopy(body)), f"create {body['kind']} {body['metadata']['name']}"))
        yield created
    finally:
        for body in reversed(created):
            delete(api, body)
        # A namespace goes only once the namespace controller has emptied it: the next test may make it again.
        wait_until("the installed objects to be gone", lambda: all(read(api, body).status == 404 for body in created),
                 timeout=GONE_TIMEOUT)


def fresh_namespace(api: client.ApiClient) -> Iterator[str]:
    name = f"realcp-adm-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    ok(create(api, body), "create namespace")
    yield name
    delete(api, body)


def with_version(body: dict[str, Any], api_version: str) -> dict[str, Any]:
    return {**copy.deepcopy(body), "apiVersion": api_version}


def type_check_warnings(api: client.ApiClient, policy: dict[str, Any]) -> list[Any]:
    """What the API server's type checker says of a ValidatingAdmissionPolicy's expressions (status.typeChecking,
    written asynchronously once it has seen the policy's generation)."""
    state: dict[str, Any] = {}

    def checked() -> bool:
        state.update(ok(read(api, policy), "read policy"))
        return state.get("status", {}).get("observedGeneration") == state["metadata"].get("generation")

    wait_until(f"the type check of {policy['metadata']['name']}", checked)
    return list(state["status"].get("typeChecking", {}).get("expressionWarnings", []))


# Expressions the type checker cannot type for a kind they do reach, by the kind and their message's start: the
# mock-GPU agent's node check iterates over the node's status as a map (`has(object.status) ? object.status : {}`),
# so that a status field added later is covered too; the API server evaluates it untyped at admission, where
# tests/realcp/test_admission_identities.py shows it admitting the agent's own writes and refusing the others.
UNTYPED = [("Node", "the mock-GPU agent changes only its node")]


def _guarded(expression: str, kind: str) -> bool:
    """Whether an expression of a policy matching several kinds keeps out `kind`, whose fields it cannot read (the
    program's policies name `variables.pod = object.kind == 'Pod'`; `variables.gpu` implies it)."""
    if kind == "Pod":
        prefixes: tuple[str, ...] = ("object.kind != 'RuntimeClass' || ", "variables.pod || ")
    else:
        prefixes = ("!variables.pod || ", "!variables.gpu || ")
    other_kind = re.search(r"^(object == null \|\| )?object\.kind != '(\w+)' \|\| ", expression)
    return expression.startswith(prefixes) or bool(other_kind and other_kind.group(2) != kind)


def unguarded_type_warnings(api: client.ApiClient, policy: dict[str, Any]) -> list[Any]:
    """The API server's type-check warnings (each expression compiled against every kind the policy matches) on
    an expression for a kind its own guard does not keep out."""
    validations = policy["spec"]["validations"]
    found = []
    for warning in type_check_warnings(api, policy):
        index = int(warning["fieldRef"].removeprefix("spec.validations[").removesuffix("].expression"))
        kind = warning["warning"].split(", Kind=", 1)[1].split(":", 1)[0]
        if any(kind == k and validations[index]["message"].startswith(m) for k, m in UNTYPED):
            continue
        if not _guarded(validations[index]["expression"], kind):
            found.append(warning)
    return found


def as_pod(obj: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    """A pod of a CEL test's table made creatable: its own name and namespace, an image on every container."""
    pod = copy.deepcopy(obj)
    pod.update(apiVersion="v1", kind="Pod")
    pod["metadata"] = {**pod.get("metadata", {}), "name": name, "namespace": namespace}
    # A table's None stands for a field left out (tests/test_gpu_access.py drops them the same way).
    pod["spec"] = {key: value for key, value in pod["spec"].items() if value is not None}
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in pod["spec"].get(key) or []:
            container.setdefault("image", IMAGE)
    return pod


def slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")[:50]
