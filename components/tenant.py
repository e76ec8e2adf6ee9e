"""One tenant: control plane, GPU access, its device layer's nodes and HAMi, and its workloads.

The tenant layer (control plane, GPU-access policy, workloads, quota, user access) is the same in every mode; what
puts GPUs on its nodes is its device layer (components/device_layers/, chosen by the registry in
gpu_tenancy/contract/device_layers), which this component asks and never branches on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components import options
from components.device_layers import TenantSite, wiring
from components.gpu_access import GpuAccessPolicy, GpuAccessPolicyArgs
from components.tenant_access import TenantAccess, TenantAccessArgs
from components.tenant_control_plane import TenantControlPlane, TenantControlPlaneArgs
from components.workloads import Workloads, WorkloadsArgs
from gpu_tenancy.builders import gpu_nodes
from gpu_tenancy.builders.workloads import workloads
from gpu_tenancy.contract.stack_config import StackConfig
from gpu_tenancy.contract.tenant_config import TenantConfig


@dataclass
class TenantArgs:
    """One tenant of the stack. The management cluster's provider and what the tenant waits for (MetalLB's pool,
    Kamaji) come in `opts` (`provider=`, `depends_on=`).

    Attributes:
        config (TenantConfig): the tenant as the stack declares it (`tenants[]`).
        stack (StackConfig): the stack's settings: mode, versions, address ranges, ports.
        cluster_name (str): the stack's cluster name; the sim worker containers are named after it.
        device_stack (Any): what the stack's device layer built once for every tenant (its `stack_parts`: the
            mock NVML image in sim-nvml, the hosts' identity gate in real). Default: None.
    """

    config: TenantConfig
    stack: StackConfig
    cluster_name: str
    device_stack: Any = None


class Tenant(pulumi.ComponentResource):
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    nodes: list[str]

    def __init__(self, name: str, args: TenantArgs, opts: pulumi.ResourceOptions | None = None):
        tenant = args.config.name
        layer = args.stack.device_layer
        devices = wiring(layer)
        self._gpu_nodes = gpu_nodes.tenant_gpu_nodes(layer, args.cluster_name, args.config)
        # What the tenant declares, as plain JSON: the policy pack (gpu-plan-fits, no-mock-gpus-in-real)
        # reads it from the component's inputs at preview and from its outputs in the stack view.
        declaration = {
            "tenant": tenant,
            "mode": args.stack.mode,
            "gpus": [gpu.model_dump(by_alias=True) for gpu in args.config.gpus],
            # Where the cards are, under the node names the cluster will have (the device layer).
            "gpuNodes": [
                {
                    "name": node.name,
                    "gpus": [gpu.model_dump(by_alias=True) for gpu in node.gpus],
                    # Each card's NUMA node as HAMi will read it (None: unknown) and the pods left for workloads.
                    "numa": list(node.numa),
                    "maxPods": gpu_nodes.workload_pods_per_node(layer.registrar),
                }
                for node in self._gpu_nodes
            ],
            "workloads": [workload.model_dump(by_alias=True) for workload in args.config.workloads],
            "quota": dict(args.config.quota),
            "orderedWorkloads": args.stack.ordered_workloads,
        }
        super().__init__(
            "gpu-tenancy:tenant:Tenant",
            name,
            declaration,
            opts,
        )
        # The management cluster's provider (opts.provider) reaches the control plane through the provider bag;
        # every child on the tenant's own cluster is given control_plane.provider, which takes precedence.
        options.require_provider(self)
        for gpu in args.config.gpus:
            if not gpu.in_catalogue:
                pulumi.log.warn(
                    f"tenant {tenant}: {gpu.model!r} is not in the GPU catalogue: its {gpu.memory_mib} MiB are the "
                    "stack's word, which plans, simulations and the inventory check then hold the hosts to",
                    self,
                )
        versions = args.stack.versions
        pod_cidr, service_cidr = args.stack.cidrs(args.config)

        api_port, konnectivity_port = args.stack.control_plane_ports(args.config)
        control_plane = TenantControlPlane(
            f"{name}-control-plane",
            TenantControlPlaneArgs(
                tenant=tenant,
                kubernetes_version=versions.kubernetes,
                pod_cidr=pod_cidr,
                service_cidr=service_cidr,
                node_runtime=layer.node_runtime,
                service_type=args.stack.control_plane.service_type,
                address=args.config.control_plane_address,
                port=api_port,
                konnectivity_port=konnectivity_port,
                api_server_args=devices.api_server_args(versions.kubernetes),
                data_store=args.config.data_store,
                etcd_volume_mib=args.stack.datastore.volume_mib,
            ),
            pulumi.ResourceOptions(parent=self, depends_on=options.dependencies(opts)),
        )
        # Before any pod: GPUs only through HAMi, the same refusals in every mode.
        gpu_access = GpuAccessPolicy(
            f"{name}-gpu-access",
            GpuAccessPolicyArgs(tenant=tenant, cuda_control_marker=devices.cuda_control_marker()),
            self._on_tenant(control_plane, control_plane),
        )
        deployed = devices.deploy(TenantSite(
            tenant=self, name=name, config=args.config, stack=args.stack, cluster_name=args.cluster_name,
            control_plane=control_plane, pod_cidr=pod_cidr, service_cidr=service_cidr, gpu_nodes=self._gpu_nodes,
            stack_parts=args.device_stack,
        ))
        self.nodes = deployed.nodes
        gpu_ready = [*deployed.ready, gpu_access]
        self.user_kubeconfig: pulumi.Output[str] | None = None
        if workloads.has_workloads(args.config) or args.config.user_access:
            tenant_workloads = Workloads(
                f"{name}-workloads",
                WorkloadsArgs(
                    tenant=tenant,
                    workloads=list(args.config.workloads),
                    quota=dict(args.config.quota),
                    ordered=args.stack.ordered_workloads,
                ),
                # HAMi (its webhook and scheduler) and, in sim, the mock-GPU agent that registers the devices.
                self._on_tenant(control_plane, *gpu_ready),
            )
            if args.config.user_access:
                self.user_kubeconfig = TenantAccess(
                    f"{name}-user-access",
                    TenantAccessArgs(
                        tenant=tenant, namespace=tenant_workloads.namespace, admin_kubeconfig=control_plane.kubeconfig
                    ),
                    self._on_tenant(control_plane),
                ).kubeconfig
        self.endpoint = control_plane.endpoint
        self.kubeconfig = control_plane.kubeconfig
        # The non-admin kubeconfig (secret, as TenantAccess makes it) only when the tenant has user access.
        user_access = {"userKubeconfig": self.user_kubeconfig} if self.user_kubeconfig is not None else {}
        self.register_outputs({
            **declaration, "endpoint": self.endpoint, "kubeconfig": self.kubeconfig, "nodes": self.nodes, **user_access,
        })

    def _on_tenant(self, control_plane: TenantControlPlane, *after: pulumi.Resource) -> pulumi.ResourceOptions:
        """A child on the tenant's own cluster, after `after`: its provider replaces the inherited management one."""
        return pulumi.ResourceOptions(parent=self, provider=control_plane.provider, depends_on=list(after))
