"""What each device layer deploys: one module per layer (sim, sim_nvml, real), each with one `WIRING`.

The tenant layer (components/tenant.py) is the same in every mode: it builds the control plane and the GPU-access
policy, hands its device layer a `TenantSite`, and puts the workloads after the `Devices` it gets back. Which
layer a stack runs is the registry's answer (gpu_tenancy/contract/device_layers `LAYERS`), never a branch here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi

from components.hami import Hami, HamiArgs
from components.tenant_network import TenantNetwork, TenantNetworkArgs
from gpu_tenancy.contract.device_layers import DeviceLayer

if TYPE_CHECKING:
    from components.tenant_control_plane import TenantControlPlane
    from gpu_tenancy.builders.gpu_nodes import GpuNode
    from gpu_tenancy.contract.stack_config import StackConfig
    from gpu_tenancy.contract.tenant_config import TenantConfig


@dataclass
class TenantSite:
    """Where a device layer deploys: one tenant, its control plane, and the parts every layer shares.

    Attributes:
        tenant: the Tenant component, parent of everything the layer creates.
        name: the Tenant's resource name; children are named `<name>-<part>`.
        config: the tenant as the stack declares it.
        stack: the stack's settings.
        cluster_name: the kind cluster's name (sim workers are named after it).
        control_plane: the tenant's control plane; its provider is the tenant cluster's.
        pod_cidr: the tenant's pod CIDR.
        service_cidr: the tenant's service CIDR.
        gpu_nodes: the tenant's GPU nodes as the layer places them (what the inventory check expects).
        stack_parts: what the layer built once for the whole stack (`DeviceLayerWiring.stack_parts`), or None.
    """

    tenant: pulumi.ComponentResource
    name: str
    config: TenantConfig
    stack: StackConfig
    cluster_name: str
    control_plane: TenantControlPlane
    pod_cidr: str
    service_cidr: str
    gpu_nodes: list[GpuNode]
    stack_parts: Any = None

    def child(self, *after: pulumi.Resource) -> pulumi.ResourceOptions:
        """A child of the tenant created on the management side (containers, SSH commands), after `after`."""
        return pulumi.ResourceOptions(parent=self.tenant, depends_on=list(after))

    def on_tenant(self, *after: pulumi.Resource) -> pulumi.ResourceOptions:
        """A child on the tenant's own cluster, after `after`: its provider replaces the inherited management one."""
        return pulumi.ResourceOptions(parent=self.tenant, provider=self.control_plane.provider, depends_on=list(after))

    def network(self, nodes: list[pulumi.Resource]) -> TenantNetwork:
        """kindnet and kube-proxy, after the nodes join and, on destroy, removed while their kubelets still run."""
        versions = self.stack.versions
        return TenantNetwork(
            f"{self.name}-network",
            TenantNetworkArgs(
                tenant=self.config.name,
                pod_cidr=self.pod_cidr,
                endpoint=self.control_plane.endpoint,
                kindnetd_image=versions.kindnetd_image,
                kubernetes_version=versions.kubernetes,
                nodes=nodes,
            ),
            self.on_tenant(),
        )

    def hami(self, after: list[pulumi.Resource], device_plugin: dict[str, Any] | None = None) -> Hami:
        """HAMi for this layer's registrar; `device_plugin` adds what its device plugin needs to reach the cards."""
        versions = self.stack.versions
        return Hami(
            f"{self.name}-hami",
            HamiArgs(
                tenant=self.config.name,
                chart_version=versions.hami,
                image_tag=versions.hami_image_tag,
                kubernetes_version=versions.kubernetes,
                device_layer=self.stack.device_layer.registrar,
                device_plugin=device_plugin,
                service_monitors=self.stack.metrics.service_monitors,
                service_monitor_labels=dict(self.stack.metrics.labels),
            ),
            self.on_tenant(*after),
        )


@dataclass
class Devices:
    """What a device layer deployed into a tenant.

    Attributes:
        nodes: the GPU nodes' names, as the cluster names them.
        ready: what the tenant's workloads wait for (HAMi, and whatever must run before a GPU pod is admitted).
    """

    nodes: list[str]
    ready: list[pulumi.Resource]


class DeviceLayerWiring:
    """One device layer's deployment. A layer overrides `deploy` and, where it needs them, the other hooks."""

    def stack_parts(self, stack: StackConfig) -> Any:
        """What the layer builds once for the whole stack, before any tenant (an image, a gate); None if nothing."""
        return None

    def api_server_args(self, kubernetes_version: str) -> list[str]:
        """Extra kube-apiserver flags the layer needs on every tenant's control plane."""
        return []

    def cuda_control_marker(self) -> str:
        """The GPU-access policy's CUDA-control marker (gpu_tenancy/builders/mock_nvml/cuda_control.py), '' if none."""
        return ""

    def deploy(self, site: TenantSite) -> Devices:
        """The tenant's GPU nodes joined, HAMi, and what registers the cards."""
        raise NotImplementedError

    def after_tenants(self, stack: StackConfig, tenants: Mapping[str, Any]) -> None:
        """What the layer adds once every tenant is declared (`tenants`: Tenant components by tenant name)."""


def wiring(layer: DeviceLayer) -> DeviceLayerWiring:
    """The deployment of a registered layer: the `WIRING` of the module its facts name."""
    found = getattr(importlib.import_module(layer.wiring), "WIRING", None)
    if not isinstance(found, DeviceLayerWiring):
        raise TypeError(f"device layer {layer.mode!r}: {layer.wiring} has no WIRING (a DeviceLayerWiring)")
    return found
