"""sim-nvml's CUDA-control admission policy: what it matches (evaluated by a CEL implementation), what it
sets, where it is deployed and what the tenant's API server needs for it."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import kubernetes_validate
import pytest

from gpu_tenancy import cuda_control
from gpu_tenancy.config import ConfigError, load_config
from tests.harness import by_type, dev_config, gpu_config, nvml_config, record_stack, registered_gpus, unwrap

MAP = "kubernetes:admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicyBinding"


def _matches(pod: dict[str, Any]) -> bool:
    env = celpy.Environment()
    (condition,) = cuda_control.policy_spec()["matchConditions"]
    program = env.program(env.compile(condition["expression"]))
    return bool(program.evaluate({"object": celpy.json_to_cel(pod)}))


def _pod(*limits: dict[str, str] | None) -> dict[str, Any]:
    containers = [{"name": f"c{i}", **({"resources": {"limits": lim}} if lim is not None else {})} for i, lim in enumerate(limits)]
    return {"spec": {"containers": containers}}


@pytest.mark.parametrize(
    ("pod", "matched"),
    [
        (_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"}), True),
        # HAMi's webhook gives a default GPU count to a container asking only for memory or cores.
        (_pod({"nvidia.com/gpumem-percentage": "50"}), True),
        (_pod({"nvidia.com/gpucores": "30"}), True),
        (_pod(None, {"nvidia.com/gpu": "1"}), True),
        (_pod({"cpu": "1"}), False),
        (_pod(None), False),
    ],
    ids=["slice", "percentage only", "cores only", "second container", "cpu only", "no resources"],
)
def test_the_policy_matches_pods_that_ask_hami_for_a_gpu(pod: dict[str, Any], matched: bool) -> None:
    assert _matches(pod) is matched


def test_the_mutation_sets_the_variable_hami_reads_on_the_gpu_containers_only() -> None:
    (mutation,) = cuda_control.policy_spec()["mutations"]
    expression = mutation["applyConfiguration"]["expression"]
    celpy.Environment().compile(expression)  # parses as CEL
    # HAMi's Allocate skips the ld.so.preload mount when the container's own env has CUDA_DISABLE_CONTROL
    # parsing as true (server.go: strconv.ParseBool(val.Value)).
    assert 'Object.spec.containers.env{name: "CUDA_DISABLE_CONTROL", value: "true"}' in expression
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
    assert cuda_control.api_version(version) == api
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
