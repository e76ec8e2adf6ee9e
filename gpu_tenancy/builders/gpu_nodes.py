"""Which node holds which of a tenant's cards, under the name the live cluster gives that node.

sim and sim-nvml: one kind worker container per tenant, named `<cluster>-<tenant>-worker` (its hostname,
which kubeadm takes as the node name), holding all the tenant's cards. real: one node per GPU host, named
after the host (`workers[].name`, the join configuration's `nodeRegistration.name`), holding that host's
cards. The planner, the `gpu-plan-fits` policy, `make status` and the program use these same names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_tenancy.contract.device_layers import LAYERS, DeviceLayer
from gpu_tenancy.contract.stack_config import StackConfig
from gpu_tenancy.contract.tenant_config import GpuConfig, TenantConfig
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.kubelet import KUBELET_MAX_PODS


@dataclass(frozen=True)
class GpuNode:
    name: str
    tenant: str
    gpus: tuple[GpuConfig, ...]
    # Seeds the cards' ids (unique on a node): the tenant for a tenant's only node, so on its one simulated
    # node they are the ids the mock-GPU agent and the mock NVML give its cards.
    device_key: str
    # Each card's NUMA node as HAMi will read it; None where nobody declared it (see planned_register).
    numa: tuple[int | None, ...] = ()

    def register(self, split_count: int = hami.DEFAULT_SPLIT_COUNT) -> list[dict[str, Any]]:
        """The node's `hami.io/node-nvidia-register` entries as HAMi's device plugin writes them."""
        return hami.device_inventory(self.device_key, [gpu.model_dump(by_alias=True) for gpu in self.gpus], split_count)

    def planned_register(self, split_count: int = hami.DEFAULT_SPLIT_COUNT) -> list[dict[str, Any]]:
        """``register`` for the planner: each card's NUMA node as known (``None``: not known)."""
        devices = self.register(split_count)
        return [{**d, "numa": numa} for d, numa in zip(devices, self.numa, strict=True)] if self.numa else devices


# DaemonSets the program runs on every GPU node, by who registers the GPUs (each layer's `node_daemonsets`).
NODE_DAEMONSETS: dict[str, tuple[str, ...]] = {layer.registrar: layer.node_daemonsets for layer in LAYERS.values()}


# Pods of the tenant's own Deployments, which can only run on its workers: CoreDNS (Kamaji's coreDNS addon calls
# kubeadm's EnsureDNSAddon: 2 replicas, phases/addons/dns/dns.go) and HAMi's scheduler (chart scheduler.replicas 1).
# Counted on every GPU node: exact for a tenant of one worker; with several they run on one of them, unknown which.
TENANT_DEPLOYMENT_PODS: dict[str, int] = {"coredns": 2, "hami-scheduler": 1}


def workload_pods_per_node(device_layer: str) -> int:
    """Pods the kubelet admits for workloads on a GPU node: its default maxPods (the program sets none
    when it joins a node) minus the program's own DaemonSet pods there and the tenant's Deployment pods."""
    return KUBELET_MAX_PODS - len(NODE_DAEMONSETS[device_layer]) - sum(TENANT_DEPLOYMENT_PODS.values())


def worker_container_name(cluster_name: str, tenant: str) -> str:
    """The kind worker container (and node) of a tenant in sim and sim-nvml."""
    return f"{cluster_name}-{tenant}-worker"


def tenant_gpu_nodes(layer: DeviceLayer, cluster_name: str, tenant: TenantConfig) -> list[GpuNode]:
    """A tenant's GPU nodes as its device layer places them (`DeviceLayer.placement` and `.numa`)."""
    if layer.placement == "kind-worker":
        name = worker_container_name(cluster_name, tenant.name)
        cards = sum(g.count for g in tenant.gpus)
        # Only the mock-GPU agent's NUMA node (0) is known; HAMi's plugin over the mock NVML reads its own.
        numa_known: tuple[int | None, ...] = (0,) * cards if layer.numa == "zero" else (None,) * cards
        return [GpuNode(name, tenant.name, tuple(tenant.gpus), tenant.name, numa=numa_known)]
    if layer.placement != "hosts":
        raise ValueError(f"device layer {layer.mode!r} places its cards in an unknown way: {layer.placement!r}")
    single = len(tenant.workers) == 1
    return [
        GpuNode(host.name, tenant.name, tuple(host.gpus), tenant.name if single else f"{tenant.name}/{host.name}",
                numa=tuple(host.numa) if host.numa else tuple(None for g in host.gpus for _ in range(g.count)))
        for host in tenant.workers
    ]


def gpu_nodes(config: StackConfig, cluster_name: str) -> list[GpuNode]:
    """Every tenant's GPU nodes, tenants in declaration order."""
    return [node for tenant in config.tenants for node in tenant_gpu_nodes(config.device_layer, cluster_name, tenant)]
