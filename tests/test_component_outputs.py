"""What each component registers as its outputs: what the policy pack's AnalyzeStack reads of a component.

The engine sets a component's outputs to what it registered (pulumi/pulumi `pkg/resource/deploy/
step_executor.go` `ExecuteRegisterResourceOutputs`) and hands AnalyzeStack a resource's outputs, not its
inputs (`step_generator.go` `AnalyzeResources`); the state keeps them too. A kubeconfig among them stays
secret there.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any
from unittest import mock

import pulumi
import pytest
from harness import dev_config, gpu_config, is_secret, nvml_config, record_mocks, registered_gpus
from policy_support import EXAMPLE_STACKS, STACK_TYPE

import components

OUTPUT_KEYS = {
    "gpu-tenancy:bootstrap_token:BootstrapToken": {"tenant"},
    "gpu-tenancy:gpu_access:GpuAccessPolicy": {"policy"},
    "gpu-tenancy:hami:Hami": {"release"},
    "gpu-tenancy:host_fence:HostFences": {"hosts"},
    "gpu-tenancy:host_identity:HostIdentities": {"hosts"},
    "gpu-tenancy:host_worker:HostWorker": {"address", "controlPlaneEndpoint", "nodeName", "tenant"},
    "gpu-tenancy:inventory_check:InventoryCheck": {"problems"},
    "gpu-tenancy:kamaji:Kamaji": {"dataStore"},
    "gpu-tenancy:kind_cluster:KindCluster": {"clusterIdentifier", "clusterName", "kubeconfig"},
    "gpu-tenancy:metallb:MetalLB": {"addressRange", "subnet"},
    "gpu-tenancy:mock_gpu_agent:MockGpuAgent": {"daemonSetName", "imageName"},
    "gpu-tenancy:mock_nvml:MockNvml": {"configDigest", "daemonSetName", "gpus", "hamiDevicePlugin"},
    "gpu-tenancy:nvml_mock_image:NvmlMockImage": {"imageName"},
    "gpu-tenancy:tenant:Tenant": {
        "endpoint", "gpuNodes", "gpus", "kubeconfig", "mode", "nodes", "orderedWorkloads", "quota", "tenant",
        "workloads",
    },
    "gpu-tenancy:tenant_control_plane:TenantControlPlane": {"caCertHash", "endpoint", "kubeconfig"},
    "gpu-tenancy:tenant_network:TenantNetwork": {"kindnet", "kubeProxy"},
    "gpu-tenancy:worker:Worker": {"containerName", "nodeName"},
    "gpu-tenancy:workloads:Workloads": {"deployments", "namespace", "quota"},
}


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_each_component_registers_its_outputs_under_these_names(stack: str) -> None:
    for component in (r for r in EXAMPLE_STACKS[stack]() if not r.custom and r.type != STACK_TYPE):
        assert set(component.registered_outputs or {}) == OUTPUT_KEYS[component.type], component.urn


@pytest.mark.parametrize("stack", ["dev", "dev-nvml"])
def test_the_management_cluster_outputs_its_name_and_a_secret_kubeconfig(stack: str) -> None:
    (cluster,) = [r for r in EXAMPLE_STACKS[stack]() if r.type == "gpu-tenancy:kind_cluster:KindCluster"]
    outputs = cluster.registered_outputs or {}
    assert outputs["clusterName"] == {"dev": "gpu-tenancy-dev", "dev-nvml": "gpu-tenancy-dev-nvml"}[stack]
    assert is_secret(outputs["kubeconfig"])


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_kubeconfig_a_component_outputs_is_secret(stack: str) -> None:
    kubeconfigs = [r.registered_outputs["kubeconfig"] for r in EXAMPLE_STACKS[stack]()
                   if not r.custom and "kubeconfig" in (r.registered_outputs or {})]
    assert len(kubeconfigs) == {"dev": 5, "dev-nvml": 5, "gpu": 4}[stack]
    assert all(is_secret(kubeconfig) for kubeconfig in kubeconfigs)


# --------------------------------------------------------------------------- every exposed value is registered


def _with_every_component() -> dict[str, Any]:
    """The dev stack with what the example stacks leave out: user access, a dedicated etcd, ServiceMonitors."""
    config = dev_config()
    config["tenants"][0]["userAccess"] = True
    config["tenants"][1]["dataStore"] = "dedicated"
    config["metrics"] = {"serviceMonitors": True}
    return config


Registration = tuple[pulumi.ComponentResource, dict[str, Any], dict[str, Any]]


def _registrations() -> list[Registration]:
    """Each component of the program (all three modes) with the outputs it registered and the attributes the SDK
    made of its inputs, as Python objects."""
    captured: list[Registration] = []
    made_of_inputs: dict[int, dict[str, Any]] = {}
    original_init, original_register = pulumi.ComponentResource.__init__, pulumi.ComponentResource.register_outputs

    def init(self: pulumi.ComponentResource, t: str, name: str, props: Any = None, *args: Any, **kwargs: Any) -> None:
        original_init(self, t, name, props, *args, **kwargs)
        # The SDK makes an Output attribute of each input property (pulumi/runtime/rpc.py transfer_properties):
        # the component's inputs, which the engine keeps as such, not values the component exposes.
        made_of_inputs[id(self)] = {key: vars(self)[key] for key in props or {} if key in vars(self)}

    def register_outputs(self: pulumi.ComponentResource, outputs: Any) -> None:
        if type(self).__module__.startswith("components."):
            captured.append((self, dict(outputs), made_of_inputs[id(self)]))
        original_register(self, outputs)

    with mock.patch.object(pulumi.ComponentResource, "__init__", init), \
            mock.patch.object(pulumi.ComponentResource, "register_outputs", register_outputs):
        record_mocks(_with_every_component())
        record_mocks(nvml_config(), stack="dev-nvml")
        record_mocks(gpu_config(), stack="gpu", node_register=registered_gpus(gpu_config()))
    return captured


def _exposed(value: Any) -> str:
    """What a public attribute exposes: an Output, plain data, resources (handed to the program for providers and
    dependencies, not outputs), nothing (None, an empty collection); "unknown" for anything else."""
    if value is None:
        return "nothing"
    if isinstance(value, pulumi.Output):
        return "output"
    if isinstance(value, pulumi.Resource):
        return "resources"
    if isinstance(value, str | int | float | bool):
        return "data"
    if isinstance(value, list | tuple | dict):
        items = list(value.values()) if isinstance(value, dict) else list(value)
        if isinstance(value, dict) and not all(isinstance(key, str) for key in value):
            return "unknown"
        kinds = {_exposed(item) for item in items}
        if not kinds:
            return "nothing"
        if kinds == {"resources"}:
            return "resources"
        return "data" if kinds <= {"data", "nothing"} else "unknown"
    return "unknown"


def _component_classes() -> set[type]:
    found = set()
    for module in pkgutil.walk_packages(components.__path__, "components."):
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, type) and issubclass(value, pulumi.ComponentResource) and (
                value.__module__ == module.name
            ):
                found.add(value)
    return found


def test_every_public_output_and_value_of_a_component_is_among_its_registered_outputs() -> None:
    registrations = _registrations()
    # Every component class of the program is checked in at least one mode.
    assert {type(component) for component, _, _ in registrations} == _component_classes()
    for component, outputs, inputs in registrations:
        # `urn` is the SDK's own (pulumi/resource.py Resource); everything else public is the component's.
        public = {
            k: v for k, v in vars(component).items()
            if not k.startswith("_") and k != "urn" and not (k in inputs and inputs[k] is v)
        }
        for attribute, value in public.items():
            kind = _exposed(value)
            where = f"{type(component).__name__} {component.pulumi_resource_name}.{attribute}"
            assert kind != "unknown", f"{where}: register it, or make it private ({type(value).__name__})"
            if kind == "output":
                # The same Output object, not a copy that could resolve to something else.
                assert any(registered is value for registered in outputs.values()), f"{where} is not registered"
            elif kind == "data":
                assert value in [v for v in outputs.values() if not isinstance(v, pulumi.Output)], (
                    f"{where} is not registered"
                )
