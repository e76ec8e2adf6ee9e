"""What each component registers as its outputs: what the policy pack's AnalyzeStack reads of a component.

The engine sets a component's outputs to what it registered (pulumi/pulumi `pkg/resource/deploy/
step_executor.go` `ExecuteRegisterResourceOutputs`) and hands AnalyzeStack a resource's outputs, not its
inputs (`step_generator.go` `AnalyzeResources`); the state keeps them too. A kubeconfig among them stays
secret there.
"""

from __future__ import annotations

import pytest
from harness import is_secret
from policy_support import EXAMPLE_STACKS, STACK_TYPE

OUTPUT_KEYS = {
    "gpu-tenancy:bootstrap_token:BootstrapToken": set(),
    "gpu-tenancy:gpu_access:GpuAccessPolicy": {"policy"},
    "gpu-tenancy:hami:Hami": {"release"},
    "gpu-tenancy:host_fence:HostFences": {"hosts"},
    "gpu-tenancy:host_identity:HostIdentities": {"hosts"},
    "gpu-tenancy:host_worker:HostWorker": {"address", "controlPlaneEndpoint", "nodeName", "tenant"},
    "gpu-tenancy:inventory_check:InventoryCheck": {"problems"},
    "gpu-tenancy:kamaji:Kamaji": {"dataStore"},
    "gpu-tenancy:kind_cluster:KindCluster": {"clusterName", "kubeconfig"},
    "gpu-tenancy:metallb:MetalLB": {"addressRange", "subnet"},
    "gpu-tenancy:mock_gpu_agent:MockGpuAgent": {"daemonSetName", "imageName"},
    "gpu-tenancy:mock_nvml:MockNvml": {"configDigest", "daemonSetName", "gpus"},
    "gpu-tenancy:nvml_mock_image:NvmlMockImage": {"imageName"},
    "gpu-tenancy:tenant:Tenant": {
        "endpoint", "gpuNodes", "gpus", "kubeconfig", "mode", "nodes", "orderedWorkloads", "quota", "tenant",
        "workloads",
    },
    "gpu-tenancy:tenant_control_plane:TenantControlPlane": {"endpoint", "kubeconfig"},
    "gpu-tenancy:tenant_network:TenantNetwork": set(),
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
