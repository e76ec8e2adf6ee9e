"""sim-nvml's CUDA-control admission policy: what it matches (evaluated by a CEL implementation), what it
sets, where it is deployed and what the tenant's API server needs for it."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from gpu_tenancy.builders.gpu_access import gpu_access
from gpu_tenancy.builders.mock_nvml import cuda_control
from gpu_tenancy.contract import limits
from gpu_tenancy.contract.config import ConfigError, load_config
from tests.admission_cel import Request, denials, evaluate
from tests.harness import by_type, dev_config, gpu_config, nvml_config, record_stack, registered_gpus, unwrap

MAP = "kubernetes:admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicyBinding"


def _matches(pod: dict[str, Any]) -> bool:
    (condition,) = cuda_control.policy_spec()["matchConditions"]
    return evaluate(condition["expression"], {"object": pod}) is True


def _pod(*limits: dict[str, str] | None, env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    containers = [{"name": f"c{i}", **({"resources": {"limits": lim}} if lim is not None else {}),
                   **({"env": env} if env is not None else {})} for i, lim in enumerate(limits)]
    # As HAMi's webhook leaves a pod (chart v2.10.0 schedulerName, forceOverwriteDefaultScheduler): the GPU-access
    # policy refuses a GPU pod any other scheduler would place.
    return {"spec": {"schedulerName": "hami-scheduler", "containers": containers}}


# (case, pod, whether the mutation matches it); tests/realcp/test_admission.py creates the same pods in a real API server.
MATCH_CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("slice", _pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"}), True),
    # HAMi's webhook gives a default GPU count to a container asking only for memory or cores.
    ("percentage only", _pod({"nvidia.com/gpumem-percentage": "50"}), True),
    ("cores only", _pod({"nvidia.com/gpucores": "30"}), True),
    ("second container", _pod(None, {"nvidia.com/gpu": "1"}), True),
    ("cpu only", _pod({"cpu": "1"}), False),
    ("no resources", _pod(None), False),
    # A container that sets the variable itself is left as it is (and refused by the GPU-access policy).
    ("sets it itself", _pod({"nvidia.com/gpu": "1"}, env=[{"name": "CUDA_DISABLE_CONTROL", "value": "true"}]), False),
]


@pytest.mark.parametrize(("case", "pod", "matched"), MATCH_CASES, ids=[c[0] for c in MATCH_CASES])
def test_the_policy_matches_pods_that_ask_hami_for_a_gpu(case: str, pod: dict[str, Any], matched: bool) -> None:
    assert _matches(pod) is matched


def test_the_mutation_sets_the_variable_hami_reads_on_the_gpu_containers_only() -> None:
    (mutation,) = cuda_control.policy_spec()["mutations"]
    expression = mutation["applyConfiguration"]["expression"]
    # HAMi's Allocate skips the ld.so.preload mount when the container's own env has CUDA_DISABLE_CONTROL
    # parsing as true (server.go: strconv.ParseBool(val.Value), which reads "T" as true).
    assert 'Object.spec.containers.env{name: "CUDA_DISABLE_CONTROL", value: "T"}' in expression
    (condition,) = cuda_control.policy_spec()["matchConditions"]
    gpu_filter = condition["expression"].removeprefix("object.spec.containers.exists(c, ").removesuffix(")")
    assert f"object.spec.containers.filter(c, {gpu_filter}).map(" in expression
    assert mutation["patchType"] == "ApplyConfiguration"


@pytest.mark.parametrize(
    ("version", "api", "args"),
    [
        ("v1.34.8", "admissionregistration.k8s.io/v1beta1",
         ["--feature-gates=MutatingAdmissionPolicy=true", "--runtime-config=admissionregistration.k8s.io/v1beta1=true"]),
        ("v1.35.5", "admissionregistration.k8s.io/v1beta1",
         ["--feature-gates=MutatingAdmissionPolicy=true", "--runtime-config=admissionregistration.k8s.io/v1beta1=true"]),
        ("v1.36.1", "admissionregistration.k8s.io/v1", []),
    ],
)
def test_beta_before_136_ga_from_136(version: str, api: str, args: list[str]) -> None:
    assert limits.mutating_admission_policy_api(version) == api
    assert cuda_control.api_server_args(version) == args
    body = {"apiVersion": api, "kind": "MutatingAdmissionPolicy", "metadata": {"name": cuda_control.POLICY_NAME},
            "spec": cuda_control.policy_spec()}
    kubernetes_validate.validate(body, version.removeprefix("v").rsplit(".", 1)[0] + ".0", strict=True)


def test_sim_nvml_refuses_a_tenant_version_without_the_policy() -> None:
    config = copy.deepcopy(nvml_config())
    config["versions"] = {"kubernetes": "v1.33.12", "workerImage": "kindest/node:v1.33.12"}
    with pytest.raises(ConfigError, match=r"^gpu-tenancy:versions.kubernetes: sim-nvml needs a tenant Kubernetes of "
                                          r"v1.34 or later \(MutatingAdmissionPolicy\), not v1.33.12$"):
        load_config(config)
    config["mode"] = "sim"
    assert load_config(config).versions.kubernetes == "v1.33.12"


def test_only_sim_nvml_deploys_the_policy_and_the_api_server_flags() -> None:
    nvml = record_stack(nvml_config(), stack="dev-nvml")
    for tenant in ("tenant-a", "tenant-b"):
        (policy,) = [r for r in by_type(nvml, MAP) if r.name == f"{tenant}-mock-nvml-cuda-control-policy"]
        assert unwrap(policy.inputs)["spec"] == cuda_control.policy_spec()
        (binding,) = [r for r in by_type(nvml, BINDING) if r.name == f"{tenant}-mock-nvml-cuda-control-binding"]
        assert unwrap(binding.inputs)["spec"] == {"policyName": "gpu-tenancy-cuda-control-off"}
        assert binding.provider and f"{tenant}-kubernetes" in binding.provider
    for tcp in by_type(nvml, "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        assert unwrap(tcp.inputs)["spec"]["controlPlane"]["deployment"]["extraArgs"] == {
            "apiServer": ["--feature-gates=MutatingAdmissionPolicy=true",
                          "--runtime-config=admissionregistration.k8s.io/v1beta1=true"]}
    for config, stack in ((dev_config(), "dev"), (gpu_config(), "gpu")):
        resources = record_stack(config, stack=stack, node_register=registered_gpus(config))
        assert not [r for r in resources if "MutatingAdmissionPolicy" in r.typ], stack
        for tcp in by_type(resources, "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
            assert "extraArgs" not in unwrap(tcp.inputs)["spec"]["controlPlane"]["deployment"], stack


def _mutated(pod: dict[str, Any]) -> dict[str, Any]:
    """What the mutation leaves (its apply configuration, merged by name as server-side apply does): the
    variable on each GPU container that lacked it."""
    pod = copy.deepcopy(pod)
    for container in pod["spec"]["containers"]:
        limits = (container.get("resources") or {}).get("limits") or {}
        if any(r in limits for r in cuda_control.GPU_RESOURCES) and not any(
            e["name"] == "CUDA_DISABLE_CONTROL" for e in container.get("env") or []
        ):
            container.setdefault("env", []).append({"name": "CUDA_DISABLE_CONTROL", "value": cuda_control.MARKER})
    return pod


# (case, pod, GPU-access denials with sim-nvml's parameters, with the other modes'); also created for real in
# tests/realcp/test_admission.py.
MARKER_CASES: list[tuple[str, dict[str, Any], list[str], list[str]]] = [
    # The mutation's own value on a GPU container: only where sim-nvml's policy names it.
    ("mutated GPU container", _mutated(_pod({"nvidia.com/gpu": "1"})), [], ["refused"]),
    # A pod's own value, or the marker on a container without a GPU: refused in every mode alike.
    ("own value", _pod({"nvidia.com/gpu": "1"}, env=[{"name": "CUDA_DISABLE_CONTROL", "value": "true"}]),
     ["refused"], ["refused"]),
    ("marker without a GPU", _pod({"cpu": "1"}, env=[{"name": "CUDA_DISABLE_CONTROL", "value": "T"}]),
     ["refused"], ["refused"]),
    ("plain GPU pod", _pod({"nvidia.com/gpu": "1"}), [], []),
]


@pytest.mark.parametrize(("case", "pod", "sim_nvml", "other_modes"), MARKER_CASES, ids=[c[0] for c in MARKER_CASES])
def test_the_gpu_access_policy_admits_the_mutation_only_in_sim_nvml(
    case: str, pod: dict[str, Any], sim_nvml: list[str], other_modes: list[str]
) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"}, **pod}
    for marker, expected in ((cuda_control.MARKER, sim_nvml), ("", other_modes)):
        spec = gpu_access.validating_admission_policy_spec(marker)
        refused = denials(spec, Request("pods", "CREATE", "team", obj))
        assert ["refused"] * len(refused) == expected, (marker, refused)
