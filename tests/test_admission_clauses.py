"""Each clause of the tenant user's, the mock-GPU agent's and the CUDA-control admission policies decides a case:
a request the clause refuses (or matches) and the closest one it admits (or leaves alone), evaluated as the API
server evaluates them (tests/admission_cel.py: match rules, failurePolicy, the binding's actions, the reason's
HTTP status). Expected values are the Kubernetes semantics, written out here. The specs are built inside each test,
not at import: mutmut activates a mutant after the test modules were imported, so a spec built at import would
never be the mutant's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from admission_cel import Request, binding_denials, denial_codes, evaluate, failed_validations, in_scope, spec_errors
from test_agent_admission import AGENT, NODE, merge, pod
from test_agent_admission_writes import node

from gpu_tenancy.builders.gpu_access import gpu_access
from gpu_tenancy.builders.mock_gpu_agent import agent_admission
from gpu_tenancy.builders.mock_nvml import cuda_control
from gpu_tenancy.builders.tenant_access import tenant_access
from gpu_tenancy.hami.agent import decisions

USER = "system:serviceaccount:workloads:tenant-user"


def services() -> dict[str, Any]:
    return tenant_access.services_policy_spec("workloads")


# What the program binds the Services policy with (components/tenant_access.py): Deny.
DENY = {"policyName": tenant_access.SERVICES_POLICY, "validationActions": ["Deny"]}


def service(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}], **spec}}


def network_policy() -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "allow-all"},
            "spec": {"podSelector": {}, "ingress": [{}], "egress": [{}]}}


# ---------------------------------------------------------------------------- the tenant user's identity

def test_the_users_role_binding_grants_edit_to_its_service_account_only() -> None:
    assert tenant_access.role_binding("tenant-a", "workloads")["subjects"] == [
        {"kind": "ServiceAccount", "name": "tenant-user", "namespace": "workloads"}]
    assert tenant_access.role_binding("tenant-a", "workloads")["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}


def test_the_users_token_secret_is_for_its_service_account() -> None:
    # kubernetes pkg/controller/serviceaccount/tokens_controller.go fills a Secret annotated with its account's name.
    metadata = tenant_access.token_secret_metadata("tenant-a", "workloads")
    assert metadata["name"] == "tenant-user-token" and metadata["namespace"] == "workloads"
    assert metadata["annotations"]["kubernetes.io/service-account.name"] == "tenant-user"


@pytest.mark.parametrize(("case", "request_", "refused"), [
    ("core Service with externalIPs", Request("services", "CREATE", "workloads", service(externalIPs=["10.0.0.9"])),
     True),
    # Another group's resource named `services` (a CRD's) is not a Service: the rule names the core group only.
    ("another group's services", Request("services", "CREATE", "workloads", service(externalIPs=["10.0.0.9"]),
                                         group="serving.knative.dev"), False),
    ("NetworkPolicy by the user", Request("networkpolicies", "CREATE", "workloads", network_policy(), username=USER),
     True),
    ("NetworkPolicy of another group", Request("networkpolicies", "CREATE", "workloads", network_policy(),
                                               username=USER, group="crd.projectcalico.org"), False),
])
def test_the_services_policy_matches_the_core_and_networking_groups_only(case: str, request_: Request,
                                                                        refused: bool) -> None:
    assert bool(binding_denials(services(), DENY, request_)) is refused, case


def test_the_services_policy_refuses_with_403_forbidden() -> None:
    # dispatcher.go reasonToCode: Forbidden 403 (without the reason: Invalid, 422).
    assert denial_codes(services(), Request("services", "UPDATE", "workloads", service(externalIPs=["10.0.0.9"]),
                                          old=service())) == [403]
    assert denial_codes(services(), Request("networkpolicies", "DELETE", "workloads", None, old=network_policy(),
                                          username=USER)) == [403]


def test_a_service_the_policy_cannot_evaluate_is_refused() -> None:
    """failurePolicy Fail: an expression that fails (here on a Service without a spec) refuses the request; with
    Ignore it would pass unchecked."""
    unreadable = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    assert binding_denials(services(), DENY, Request("services", "CREATE", "workloads", unreadable))
    assert binding_denials(services(), DENY, Request("services", "CREATE", "workloads", service())) == []


# ---------------------------------------------------------------------------- the mock-GPU agent

def agent_spec() -> dict[str, Any]:
    return agent_admission.policy_spec(AGENT, NODE)


def agent_binding() -> dict[str, Any]:
    return agent_admission.binding_spec("tenant-a-mock-gpu-agent-pod-policy")


def test_the_agents_binding_denies() -> None:
    assert agent_binding() == {"policyName": "tenant-a-mock-gpu-agent-pod-policy", "validationActions": ["Deny"]}
    old = pod(**{"hami.io/bind-phase": "allocating"})
    refused = Request("pods", "UPDATE", "tenant-a", merge(old, {"metadata": {"labels": {"app": "x"}}}), old=old,
                      username=AGENT)
    admitted = Request("pods", "UPDATE", "tenant-a", merge(old, decisions.success_patch()), old=old, username=AGENT)
    assert binding_denials(agent_spec(), agent_binding(), refused) == ["the mock-GPU agent changes no pod spec or label"]
    assert binding_denials(agent_spec(), agent_binding(), admitted) == []


@pytest.mark.parametrize(("case", "resource", "old", "change"), [
    ("a pod on another node", "pods", pod(node="gpu-tenancy-dev-tenant-b-worker"), decisions.success_patch()),
    ("a pod's label", "pods", pod(), {"metadata": {"labels": {"app": "x"}}}),
    ("a pod's other annotation", "pods", pod(), {"metadata": {"annotations": {"hami.io/vgpu-devices-allocated": "x"}}}),
    ("a pod's finalizer", "pods", pod(), {"metadata": {"finalizers": ["example.com/keep"]}}),
    ("a node's label", "nodes", node(), {"metadata": {"labels": {"gpu-tenancy.io/gpu-node": None}}}),
    ("a node's capacity", "nodes/status", node(), {"status": {"capacity": {"cpu": "64"}}}),
])
def test_each_refusal_of_the_agent_is_403_forbidden(case: str, resource: str, old: dict[str, Any],
                                                    change: dict[str, Any]) -> None:
    request = Request(resource, "UPDATE", "tenant-a" if resource == "pods" else "", merge(old, change), old=old,
                      username=AGENT)
    codes = denial_codes(agent_spec(), request)
    assert codes and set(codes) == {403}, case


def test_an_agent_write_the_policy_cannot_evaluate_is_refused() -> None:
    """failurePolicy Fail: a pod update whose expressions fail (here a pod without a spec) is refused."""
    old = pod(**{"hami.io/bind-phase": "allocating"})
    unreadable = {k: v for k, v in merge(old, decisions.success_patch()).items() if k != "spec"}
    assert failed_validations(agent_spec(), Request("pods", "UPDATE", "tenant-a", unreadable, old=old, username=AGENT))


@pytest.mark.parametrize(("resource", "operation", "matched"), [
    ("pods", "UPDATE", True), ("nodes", "UPDATE", True), ("nodes/status", "UPDATE", True),
    # The agent creates and deletes nothing; pods/status is not what kube.py writes.
    ("pods", "CREATE", False), ("nodes", "DELETE", False), ("pods/status", "UPDATE", False),
])
def test_the_agents_policy_matches_updates_of_pods_nodes_and_node_status(resource: str, operation: str,
                                                                         matched: bool) -> None:
    request = Request(resource, operation, "", pod(), old=pod(), username=AGENT)
    assert in_scope(agent_spec(), request) is matched


# ---------------------------------------------------------------------------- sim-nvml's CUDA-control mutation

def cuda() -> dict[str, Any]:
    return cuda_control.policy_spec()


def gpu_pod(limits: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}


@pytest.mark.parametrize(("resource", "operation", "group", "matched"), [
    ("pods", "CREATE", "", True),
    # Containers and their env cannot change on an update: only a new pod is mutated.
    ("pods", "UPDATE", "", False),
    ("pods", "CREATE", "example.com", False),
    ("services", "CREATE", "", False),
])
def test_the_mutation_applies_to_new_core_pods(resource: str, operation: str, group: str, matched: bool) -> None:
    request = Request(resource, operation, "team", gpu_pod({"nvidia.com/gpu": "1"}), group=group)
    assert in_scope(cuda(), request) is matched


def test_a_pod_the_mutation_cannot_evaluate_is_refused() -> None:
    """failurePolicy Fail: a pod whose match condition fails to evaluate (no containers list) is refused, not
    admitted without the variable."""
    unreadable = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    assert failed_validations(cuda(), Request("pods", "CREATE", "team", unreadable))
    assert failed_validations(cuda(), Request("pods", "CREATE", "team", gpu_pod({"nvidia.com/gpu": "1"}))) == []


def test_memory_alone_makes_a_gpu_container() -> None:
    """HAMi v2.10.0 pkg/device/nvidia/device.go `mutateContainerResource` gives a container asking for GPU memory
    only a default count of nvidia.com/gpu: it is a GPU container and gets the variable."""
    (condition,) = cuda()["matchConditions"]
    request = Request("pods", "CREATE", "team", gpu_pod({"nvidia.com/gpumem": "4096"}))
    assert in_scope(cuda(), request)
    assert evaluate(condition["expression"], {"object": request.obj}) is True
    assert evaluate(condition["expression"], {"object": gpu_pod({"cpu": "1"})}) is False


@pytest.mark.parametrize(("case", "specs"), [
    ("tenant user's Services", lambda: (services(), DENY)),
    ("mock-GPU agent's", lambda: (agent_spec(), agent_binding())),
    ("CUDA control", lambda: (cuda(), None)),
    ("GPU access", lambda: (gpu_access_spec(), gpu_access.binding_spec())),
])
def test_the_api_server_accepts_every_enum_of_the_policies(
    case: str, specs: Callable[[], tuple[dict[str, Any], dict[str, Any] | None]]
) -> None:
    spec, binding = specs()
    assert spec_errors(spec, binding) == [], case
    # The closest value it refuses: the same word in another case (validation.go compares exactly).
    assert spec_errors({**spec, "failurePolicy": "fail"}, binding) == ["failurePolicy: 'fail'"]


def test_the_mutations_reinvocation_and_patch_type_are_values_the_api_server_accepts() -> None:
    spec = cuda()
    assert spec_errors(spec) == []
    assert spec_errors({**spec, "mutations": [{**spec["mutations"][0], "patchType": "Apply"}]}) == [
        "patchType: 'Apply'"]
    assert spec_errors({**spec, "reinvocationPolicy": "ifneeded"}) == ["reinvocationPolicy: 'ifneeded'"]


# ---------------------------------------------------------------------------- the GPU-access policy

def gpu_access_spec() -> dict[str, Any]:
    return gpu_access.validating_admission_policy_spec("")


def team_pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"},
            "spec": {"schedulerName": "hami-scheduler", "containers": [{"name": "c", "image": "i"}], **spec}}


def test_a_gpu_access_refusal_is_403_and_an_unreadable_pod_is_refused() -> None:
    own_devices = team_pod(containers=[{"name": "c", "image": "i",
                                        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}])
    codes = denial_codes(gpu_access_spec(), Request("pods", "CREATE", "team", own_devices))
    assert codes and set(codes) == {403}
    # failurePolicy Fail: a pod its expressions cannot read (no spec) is refused, a plain pod admitted.
    unreadable = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"}}
    assert failed_validations(gpu_access_spec(), Request("pods", "CREATE", "team", unreadable))
    assert failed_validations(gpu_access_spec(), Request("pods", "CREATE", "team", team_pod())) == []


@pytest.mark.parametrize(("prefix", "allowed"), [
    # envFrom copies every key of a ConfigMap under its prefix: one that could spell a HAMi-core variable is refused.
    ("CUDA_OVER", False), ("GPU_CORE", False), ("CUDA_TASK_", False), ("NVIDIA", False), ("CUDA_DEVICE_ORDER_", False),
    ("APP_", True), ("CUDA_HOME_", True),
])
def test_an_env_from_prefix_that_could_form_a_controlled_name_is_refused(prefix: str, allowed: bool) -> None:
    assert gpu_access.env_from_allowed({"prefix": prefix, "configMapRef": {"name": "cm"}}) is allowed
    pod = team_pod(containers=[{"name": "c", "image": "i", "envFrom": [{"prefix": prefix, "configMapRef": {"name": "cm"}}]}])
    assert (failed_validations(gpu_access_spec(), Request("pods", "CREATE", "team", pod)) == []) is allowed


@pytest.mark.parametrize(("case", "spec", "reaches"), [
    ("GPU count in an init container", {"initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                                        "containers": [{"name": "c"}]}, True),
    ("devices in an ephemeral container", {"containers": [{"name": "c"}], "ephemeralContainers": [
        {"name": "e", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}, True),
    # HAMi v2.10.0 mutateContainerResource: cores or a memory percentage alone get a default GPU count.
    ("cores only", {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpucores": "30"}}}]}, True),
    ("memory percentage only", {"containers": [{"name": "c", "resources": {
        "requests": {"nvidia.com/gpumem-percentage": "50"}}}]}, True),
    ("HAMi-core switch", {"containers": [{"name": "c", "env": [{"name": "CUDA_DISABLE_CONTROL", "value": "1"}]}]}, True),
    ("cpu only", {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}, False),
])
def test_what_reaches_a_gpu_in_any_container(case: str, spec: dict[str, Any], reaches: bool) -> None:
    assert gpu_access.reaches_gpu(spec) is reaches, case


def test_driver_feature_variables_stay_the_pods() -> None:
    """nvidia-container-toolkit: NVIDIA_DRIVER_CAPABILITIES and NVIDIA_DISABLE_REQUIRE pick driver features and
    skip the CUDA version check; they select no device."""
    for name in ("NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_DISABLE_REQUIRE", "NVIDIA_REQUIRE_CUDA"):
        pod = team_pod(containers=[{"name": "c", "image": "i", "env": [{"name": name, "value": "true"}]}])
        assert failed_validations(gpu_access_spec(), Request("pods", "CREATE", "team", pod)) == [], name
        assert gpu_access.env_allowed({"name": name, "value": "true"}), name
