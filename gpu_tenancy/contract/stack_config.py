"""The whole stack file: its mode, its tenants and the platform sections, and what follows from them (who
registers the GPUs, each tenant's address ranges and control-plane ports).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from gpu_tenancy.contract import addressing
from gpu_tenancy.contract.config_fields import ConfigModel
from gpu_tenancy.contract.device_layers import LAYERS, DeviceLayer
from gpu_tenancy.contract.limits import KONNECTIVITY_PORT, TCP_PORT
from gpu_tenancy.contract.platform_config import (
    ControlPlaneConfig,
    DataStoreConfig,
    KindConfig,
    MetalLBConfig,
    MetricsConfig,
    VersionsConfig,
)
from gpu_tenancy.contract.tenant_config import MAX_TENANTS, TenantConfig


class StackConfig(ConfigModel):
    # One value per device layer (gpu_tenancy/contract/device_layers, LAYERS).
    mode: Literal["sim", "sim-nvml", "real"]
    tenants: list[TenantConfig] = Field(min_length=1, max_length=MAX_TENANTS)
    versions: VersionsConfig = Field(default_factory=VersionsConfig)
    kind: KindConfig | None = None
    metallb: MetalLBConfig = Field(default_factory=MetalLBConfig)
    control_plane: ControlPlaneConfig = Field(default_factory=ControlPlaneConfig, alias="controlPlane")
    datastore: DataStoreConfig = Field(default_factory=DataStoreConfig)
    inventory_mismatch: Literal["error", "warn"] = Field(default="error", alias="inventoryMismatch")
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    # Create each tenant's GPU workloads one after the other, in declaration order, each once the previous
    # one is ready: HAMi then sees them in the planned order (docs/planner.md).
    ordered_workloads: bool = Field(default=False, alias="orderedWorkloads")
    # What `gpu-plan-fits` does with a replica whose fit depends on the order Kubernetes takes.
    order_dependent_plan: Literal["warn", "refuse"] = Field(default="warn", alias="orderDependentPlan")
    # Secrets (mode real): set with `pulumi config set --secret`; SecretStr keeps them out of reprs.
    management_kubeconfig: SecretStr | None = Field(default=None, alias="managementKubeconfig")
    ssh_private_key: SecretStr | None = Field(default=None, alias="sshPrivateKey")

    @field_validator("tenants")
    @classmethod
    def _unique_tenants(cls, tenants: list[TenantConfig]) -> list[TenantConfig]:
        names = [t.name for t in tenants]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate tenant name(s): {', '.join(duplicates)}")
        return tenants

    def cidrs(self, tenant: TenantConfig) -> tuple[str, str]:
        """Pod and service CIDR of a tenant: explicit, or derived from its name alone."""
        pod, service = addressing.default_cidrs(tenant.name)
        return tenant.pod_cidr or pod, tenant.service_cidr or service

    def cluster_name(self, stack: str) -> str:
        return (self.kind and self.kind.cluster_name) or f"gpu-tenancy-{stack}"

    @property
    def kind_network(self) -> str:
        return self.kind.network if self.kind else KindConfig().network

    @property
    def device_layer(self) -> DeviceLayer:
        """The mode's device layer: what puts the tenants' GPUs on their nodes and registers them with HAMi."""
        return LAYERS[self.mode]

    @property
    def simulated(self) -> bool:
        """sim and sim-nvml: a kind management cluster and kind worker containers on this Docker host."""
        return self.device_layer.simulated

    @property
    def metallb_enabled(self) -> bool:
        return self.simulated or bool(self.metallb.enabled)

    def control_plane_ports(self, tenant: TenantConfig) -> tuple[int, int]:
        """API server and Konnectivity ports of a tenant's control plane."""
        if self.control_plane.service_type == "NodePort":
            if tenant.node_port is not None:
                return tenant.node_port, tenant.node_port + 1
            return addressing.default_node_ports(tenant.name, self.control_plane.node_port_base)
        return TCP_PORT, KONNECTIVITY_PORT

    def address_claims(self) -> list[addressing.Claim]:
        """Every tenant's pod/service CIDR and (NodePort) control-plane ports, explicit or derived."""
        claims = []
        for index, tenant in enumerate(self.tenants):
            pod, service = self.cidrs(tenant)
            claims.append(addressing.Claim(index, tenant.name, "podCidr", pod, tenant.pod_cidr is not None))
            claims.append(
                addressing.Claim(index, tenant.name, "serviceCidr", service, tenant.service_cidr is not None)
            )
            if self.control_plane.service_type == "NodePort":
                api, konnectivity = self.control_plane_ports(tenant)
                claims.append(
                    addressing.Claim(
                        index, tenant.name, "nodePort", f"{api}-{konnectivity}", tenant.node_port is not None
                    )
                )
        return claims
