"""Which node holds which of a tenant's cards, under the name the live cluster gives that node.

sim and sim-nvml: one kind worker container per tenant, named `<cluster>-<tenant>-worker` (its hostname,
which kubeadm takes as the node name), holding all the tenant's cards. real: one node per GPU host, named
after the host (`workers[].name`, the join configuration's `nodeRegistration.name`), holding that host's
cards. The planner, the `gpu-plan-fits` policy, `make status` and the program use these same names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_tenancy.contract.stack_config import StackConfig
from gpu_tenancy.contract.tenant_config import GpuConfig, TenantConfig
from gpu_tenancy.hami import protocol as hami


@dataclass(frozen=True)
class GpuNode:
    name: str
    tenant: str
    gpus: tuple[GpuConfig, ...]
    # Seeds the cards' ids (unique on a node): the tenant for a tenant's only node, so on its one simulated
    # node they are the ids the mock-GPU agent and the mock NVML give its cards.
    device_key: str

    def register(self, split_count: int = hami.DEFAULT_SPLIT_COUNT) -> list[dict[str, Any]]:
        """The node's `hami.io/node-nvidia-register` entries as HAMi's device plugin writes them."""
        return hami.device_inventory(self.device_key, [gpu.model_dump(by_alias=True) for gpu in self.gpus], split_count)


def worker_container_name(cluster_name: str, tenant: str) -> str:
    """The kind worker container (and node) of a tenant in sim and sim-nvml."""
    return f"{cluster_name}-{tenant}-worker"


def tenant_gpu_nodes(simulated: bool, cluster_name: str, tenant: TenantConfig) -> list[GpuNode]:
    if simulated:
        name = worker_container_name(cluster_name, tenant.name)
        return [GpuNode(name, tenant.name, tuple(tenant.gpus), tenant.name)]
    single = len(tenant.workers) == 1
    return [
        GpuNode(host.name, tenant.name, tuple(host.gpus), tenant.name if single else f"{tenant.name}/{host.name}")
        for host in tenant.workers
    ]


def gpu_nodes(config: StackConfig, cluster_name: str) -> list[GpuNode]:
    """Every tenant's GPU nodes, tenants in declaration order."""
    return [node for tenant in config.tenants for node in tenant_gpu_nodes(config.simulated, cluster_name, tenant)]
