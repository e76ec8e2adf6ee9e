"""The admission policies every tenant gets, admitted or refused by a real kube-apiserver (1.36.3), installed as the
example stacks register them in tenant-a: the GPU-access ValidatingAdmissionPolicy and its binding (every stack),
and sim-nvml's CUDA-control MutatingAdmissionPolicy (dev-nvml), registered as v1beta1 for a
1.35 tenant and checked again as v1, the version a 1.36 tenant is sent.

The pods are the CEL tests' own tables (tests/test_gpu_access.py, tests/test_cuda_control.py), created in the real
API server; a refusal must be the HTTP 403 the binding's message gives, worded as the CEL double's first failing
validation, and an admitted pod must carry no warning. sim-nvml's mutation is read back from the created pod.
The mutation alone, read back as v1beta1 and v1, is in tests/realcp/test_admission_mutation.py; the mock-GPU
agent's policy and the tenant user's Service policy, which depend on who asks, in
tests/realcp/test_admission_identities.py.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from admission_cel import Request, binding_denials
from kubernetes import client, config
from test_cuda_control import MARKER_CASES, _mutated
from test_gpu_access import CASES, HAMI_CORE_VARIABLES, ctr, nvd, pod
from test_gpu_access_hami import ALLOCATION, RUNTIME_CLASS_CASES, SCHEDULER, gpu_pod, runtime_class

from tests.realcp import admission_support as adm
from tests.realcp.cluster import RealControlPlane

V1 = f"{adm.ADMISSION}/v1"
# (id, example stack, the MutatingAdmissionPolicy's apiVersion: None = as registered)
TENANTS = [("dev", "dev", None), ("dev-nvml", "dev-nvml", None), ("dev-nvml-as-v1", "dev-nvml", V1), ("gpu", "gpu", None)]

# Every pod of the CEL tables with whether it is admitted: CASES as they are, each variable HAMi sets refused,
# and the sim-nvml marker cases by mode.
POD_CASES: list[tuple[str, dict[str, Any], bool | tuple[bool, bool]]] = [
    *CASES,
    *[(f"sets {name}", pod(ctr(gpu=True, env=[{"name": name, "value": value}])), False)
      for name, value in HAMI_CORE_VARIABLES],
    *[(f"marker: {case}", {"spec": obj["spec"]}, (not sim_nvml, not other)) for case, obj, sim_nvml, other in MARKER_CASES],
]

# Cases of the CEL tables that the API server's own validation refuses (HTTP 422) before any admission policy sees
# them, with the reason it gives (k8s.io/kubernetes pkg/apis/core/validation: an extended resource needs a limit).
INVALID_PODS = {
    "GPU requests only, another scheduler": "Limit must be set for non overcommitable resources",
}


@pytest.fixture(scope="module")
def namespace(admin_api: client.ApiClient) -> Iterator[str]:
    yield from adm.fresh_namespace(admin_api)


@pytest.fixture(scope="module")
def runtime_classes(admin_api: client.ApiClient) -> Iterator[None]:
    """The RuntimeClasses the cases name (HAMi's chart creates `nvidia` on real hosts); the API server's
    RuntimeClass admission refuses a pod naming one that does not exist."""
    names = sorted({c[1]["spec"]["runtimeClassName"] for c in POD_CASES if "runtimeClassName" in c[1]["spec"]})
    made = []
    for name in names:
        body = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": name}
        if adm.read(admin_api, body).status == 404:
            made.append(adm.ok(adm.create(admin_api, body), f"create RuntimeClass {name}"))
    yield
    for body in made:
        adm.delete(admin_api, body)


@dataclass
class Tenant:
    stack: str
    objects: list[dict[str, Any]]

    @property
    def sim_nvml(self) -> bool:
        return self.stack == "dev-nvml"

    @property
    def mutates(self) -> bool:
        return any(o["kind"] == "MutatingAdmissionPolicy" for o in self.objects)

    def expected_denials(self, request: Request, params_found: bool = True) -> set[str]:
        """What the CEL double says each registered binding refuses, worded as the API server words it; the pod
        as it reaches the validating policies (after the mutation, modelled by tests/test_cuda_control.py)."""
        if self.mutates and request.operation == "CREATE" and request.obj.get("kind") == "Pod":
            request = copy.copy(request)
            request.obj = _mutated(request.obj)
        found = set()
        for binding in (o for o in self.objects if o["kind"] == "ValidatingAdmissionPolicyBinding"):
            policy = adm.named(self.objects, "ValidatingAdmissionPolicy", binding["spec"]["policyName"])
            failed = binding_denials(policy["spec"], binding["spec"], request, params_found=params_found)
            if failed:
                found.add(adm.denial(policy["metadata"]["name"], binding["metadata"]["name"], failed[0]))
        return found


def _refused_case() -> dict[str, Any]:
    return next(obj for _, obj, admitted in CASES if admitted is False)


def _probe(api: client.ApiClient, namespace: str) -> adm.Response:
    return adm.create(api, adm.as_pod(_refused_case(), "probe", namespace), dry_run=True)


@pytest.fixture(scope="class", params=TENANTS, ids=[t[0] for t in TENANTS])
def tenant(request: pytest.FixtureRequest, admin_api: client.ApiClient, namespace: str, runtime_classes: None
           ) -> Iterator[Tenant]:
    _, stack, map_version = request.param
    objects = [adm.with_version(o, map_version) if map_version and "MutatingAdmissionPolicy" in o["kind"] else o
               for o in adm.admission_objects(stack)]
    generator = adm.installed(admin_api, objects)
    next(generator)
    try:
        last: list[adm.Response] = []

        def acting() -> bool:  # refusing, or (were the binding to only warn) warning
            last.append(_probe(admin_api, namespace))
            return last[-1].acted_on

        try:
            adm.wait_until(f"the {stack} policies to act", acting)
        except AssertionError as error:
            raise AssertionError(f"{error}: {last[-1]}") from None
        if any(o["kind"] == "MutatingAdmissionPolicy" for o in objects):
            gpu = adm.as_pod(pod(ctr(gpu=True)), "probe", namespace)
            adm.wait_until("the mutation", lambda: "env" in adm.create(admin_api, gpu, dry_run=True).body.get(
                "spec", {"containers": [{}]})["containers"][0])
        yield Tenant(stack, objects)
    finally:
        next(generator, None)
        adm.wait_until("the policies to be gone", lambda: (lambda r: r.admitted and not r.policy_warnings)(
            _probe(admin_api, namespace)))


def _create_case(api: client.ApiClient, obj: dict[str, Any], name: str, namespace: str) -> tuple[adm.Response, Request]:
    """Create the case's pod; a pod with ephemeral containers is created without them and they are added through
    the subresource (the API server refuses them on create: the policy sees them only there)."""
    body = adm.as_pod(obj, name, namespace)
    ephemeral = body["spec"].pop("ephemeralContainers", None)
    created = adm.create(api, body)
    if not ephemeral:
        return created, Request("pods", "CREATE", namespace, body)
    adm.ok(created, f"create {name} without its ephemeral containers")
    for _ in range(10):  # the scheduler writes the pod's status meanwhile: retry on a conflict
        old = adm.ok(adm.read(api, body), f"read {name}")
        new = copy.deepcopy(old)
        new["spec"]["ephemeralContainers"] = ephemeral
        added = adm.call(api, "PUT", adm.path(body, name, "ephemeralcontainers"), new)
        if added.status != 409:
            break
    return added, Request("pods/ephemeralcontainers", "UPDATE", namespace, new, old=old)


class TestTheGpuAccessPolicyAsRegistered:
    def test_the_api_server_type_checks_every_expression_for_the_kinds_it_reaches(
        self, admin_api: client.ApiClient, tenant: Tenant
    ) -> None:
        """The API server's type checker compiles each expression against every kind its policy matches and warns
        of what would fail; an expression may only fail to compile for a kind its own guard keeps out."""
        for policy in (o for o in tenant.objects if o["kind"] == "ValidatingAdmissionPolicy"):
            assert adm.unguarded_type_warnings(admin_api, policy) == [], policy["metadata"]["name"]

    @pytest.mark.parametrize(("case", "obj", "admitted"), POD_CASES, ids=[c[0] for c in POD_CASES])
    def test_each_pod_is_admitted_or_refused_as_the_cel_tests_say(
        self, admin_api: client.ApiClient, namespace: str, tenant: Tenant, case: str, obj: dict[str, Any],
        admitted: bool | tuple[bool, bool],
    ) -> None:
        if isinstance(admitted, tuple):
            admitted = admitted[0] if tenant.sim_nvml else admitted[1]
        name = f"{adm.slug(case)}-{uuid.uuid4().hex[:4]}"
        response, request = _create_case(admin_api, obj, name, namespace)
        try:
            expected = tenant.expected_denials(request)
            if admitted:
                assert (response.status, response.policy_warnings, expected) == (201 if request.operation == "CREATE" else 200,
                                                                          [], set()), response.message
            elif case in INVALID_PODS:
                # Refused before admission: the pod is not one the API server stores, whatever the policy says.
                assert (response.status, response.body.get("reason")) == (422, "Invalid"), response.message
                assert INVALID_PODS[case] in response.message, response.message
            else:
                assert (response.status, response.body.get("reason")) == (403, "Forbidden"), response.message
                assert response.refusal in expected, (response.refusal, expected)
        finally:
            adm.delete(admin_api, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}})

    def test_a_violation_is_denied_not_only_warned(self, admin_api: client.ApiClient, namespace: str,
                                                   tenant: Tenant) -> None:
        refused = adm.create(admin_api, adm.as_pod(_refused_case(), "denied", namespace))
        assert refused.status == 403 and refused.policy_warnings == [], (refused.status, refused.warnings)
        assert adm.read(admin_api, adm.as_pod(_refused_case(), "denied", namespace)).status == 404

    def test_an_update_adding_what_a_create_is_refused_for_is_refused(self, admin_api: client.ApiClient,
                                                                      namespace: str, tenant: Tenant) -> None:
        """A debug container that sees every GPU, added to an admitted pod (pods/ephemeralcontainers, UPDATE)."""
        plain = pod(ctr(), ephemeralContainers=[ctr("dbg", env=nvd("all"))])
        response, request = _create_case(admin_api, plain, f"debug-{uuid.uuid4().hex[:4]}", namespace)
        try:
            assert response.status == 403 and response.refusal in tenant.expected_denials(request), response.message
        finally:
            adm.delete(admin_api, request.obj)

    def _decides(self, api: client.ApiClient, namespace: str, tenant: Tenant) -> None:
        """A plain pod admitted and one that sees every GPU refused with the binding's own words, at once or
        within the time the API server takes to load a binding."""
        plain = adm.as_pod(pod(ctr()), "plain", namespace)
        around = adm.as_pod(pod(ctr(env=nvd("all"))), "around", namespace)
        adm.wait_until("the binding to decide", lambda: adm.create(api, around, dry_run=True).status == 403
                       and adm.create(api, plain, dry_run=True).status == 201)
        refused = adm.create(api, around, dry_run=True)
        assert refused.refusal in tenant.expected_denials(Request("pods", "CREATE", namespace, around)), refused.message

    def test_a_re_created_binding_decides_as_before(
        self, admin_api: client.ApiClient, namespace: str, tenant: Tenant
    ) -> None:
        """A replaced binding is deleted, then created again (its name is fixed). With ConfigMap parameters the
        API server stopped their watch at the delete and never found them again (kubernetes/kubernetes#130887):
        the policy takes none, so the binding decides again as soon as it is back."""
        (binding,) = [o for o in tenant.objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
                      and o["metadata"]["name"] == "gpu-tenancy-gpu-access"]
        assert adm.ok(adm.delete(admin_api, binding), "delete the binding")
        try:
            plain = adm.as_pod(pod(ctr(env=nvd("all"))), "gone", namespace)
            adm.wait_until("the binding to be gone", lambda: adm.create(admin_api, plain, dry_run=True).status == 201)
        finally:
            adm.ok(adm.create(admin_api, binding), "create the binding again")
        self._decides(admin_api, namespace, tenant)

    def test_a_binding_left_with_parameters_decides_as_the_policy_says(
        self, admin_api: client.ApiClient, namespace: str, tenant: Tenant
    ) -> None:
        """A stack updated from the policy with parameters may hold the old binding for a moment: its paramRef names
        a ConfigMap that is gone. The policy has no paramKind, so the API server ignores it: no pod is refused for
        the missing parameters, none let by."""
        (binding,) = [o for o in tenant.objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
                      and o["metadata"]["name"] == "gpu-tenancy-gpu-access"]
        old = copy.deepcopy(binding)
        old["spec"]["paramRef"] = {"name": "gpu-tenancy-gpu-access", "namespace": "kube-system",
                                   "parameterNotFoundAction": "Deny"}
        current = adm.ok(adm.read(admin_api, binding), "read the binding")
        old["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        assert adm.ok(adm.call(admin_api, "PUT", adm.path(binding, binding["metadata"]["name"]), old), "the old binding")
        try:
            self._decides(admin_api, namespace, tenant)
            plain = adm.as_pod(pod(ctr()), "plain", namespace)
            assert binding_denials(adm.named(tenant.objects, "ValidatingAdmissionPolicy", "gpu-tenancy-gpu-access")
                                   ["spec"], old["spec"], Request("pods", "CREATE", namespace, plain),
                                   params_found=False) == []
        finally:
            current = adm.ok(adm.read(admin_api, binding), "read the binding")
            restored = {**copy.deepcopy(binding), "metadata": {**binding["metadata"],
                                                               "resourceVersion": current["metadata"]["resourceVersion"]}}
            adm.ok(adm.call(admin_api, "PUT", adm.path(binding, binding["metadata"]["name"]), restored), "restore")

    def test_only_hamis_service_accounts_change_hamis_annotations(
        self, admin_api: client.ApiClient, real_control_plane: RealControlPlane, namespace: str, tenant: Tenant
    ) -> None:
        """tests/test_gpu_access_hami.py: HAMi's scheduler writes the allocation on a pending pod; an admin adds,
        changes or drops none of it. The policy reads the user name only; the scheduler's certificate also names
        system:masters for the RBAC HAMi's chart would give it (not installed here)."""
        scheduler = config.new_client_from_config(str(real_control_plane.kubeconfig(SCHEDULER, ("system:masters",))))
        body = adm.as_pod(gpu_pod(), f"hami-annotations-{uuid.uuid4().hex[:4]}", namespace)
        adm.ok(adm.create(admin_api, body), "create the GPU pod")
        key = sorted(ALLOCATION)[0]
        try:
            for who, api, user, patch, refused in [
                ("an admin adds", admin_api, adm.ADMIN, ALLOCATION, True),
                ("the scheduler adds", scheduler, SCHEDULER, ALLOCATION, False),
                ("an admin changes", admin_api, adm.ADMIN, {key: "forged"}, True),
                ("an admin drops", admin_api, adm.ADMIN, {key: None}, True),
            ]:
                old = adm.ok(adm.read(admin_api, body), "read the pod")
                change = {"metadata": {"annotations": patch}}
                new = adm.ok(adm.merge_patch(scheduler, body, change, dry_run=True), "the change as HAMi")
                expected = tenant.expected_denials(Request("pods", "UPDATE", namespace, new, old=old, username=user))
                response = adm.merge_patch(api, body, change)
                assert (response.status == 403, bool(expected)) == (refused, refused), (who, response.message)
                assert not refused or response.refusal in expected, (who, response.refusal, expected)
        finally:
            adm.delete(admin_api, body)

    @pytest.mark.parametrize(("case", "name", "handler", "admitted"), RUNTIME_CLASS_CASES,
                             ids=[c[0] for c in RUNTIME_CLASS_CASES])
    def test_runtime_classes_are_matched_by_handler(self, admin_api: client.ApiClient, tenant: Tenant, case: str,
                                                    name: str, handler: str, admitted: bool) -> None:
        body = runtime_class(name, handler)
        response = adm.create(admin_api, body, dry_run=True)
        expected = tenant.expected_denials(Request("runtimeclasses", "CREATE", "", body, username=adm.ADMIN))
        if admitted:
            # Past admission; a class of that name may already be there (this module's own nvidia and gvisor).
            assert (response.status in (201, 409), response.body.get("reason") != "Forbidden", expected) == (
                True, True, set()), response.message
        else:
            assert (response.status, response.refusal in expected) == (403, True), (response.refusal, expected)
