"""One tenant: control plane, networking, worker, HAMi and (sim) the mock-GPU agent."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.hami import Hami, HamiArgs
from components.mock_gpu_agent import MockGpuAgent, MockGpuAgentArgs
from components.tenant_control_plane import TenantControlPlane, TenantControlPlaneArgs
from components.tenant_network import TenantNetwork, TenantNetworkArgs
from components.worker import Worker, WorkerArgs
from components.workloads import Workloads, WorkloadsArgs
from gpu_tenancy import workloads
from gpu_tenancy.config import StackConfig, TenantConfig


@dataclass
class TenantArgs:
    config: TenantConfig
    stack: StackConfig
    cluster_name: str
    management_provider: k8s.Provider
    depends_on: list[pulumi.Resource]


class Tenant(pulumi.ComponentResource):
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    worker_container: str

    def __init__(self, name: str, args: TenantArgs, opts: pulumi.ResourceOptions | None = None):
        tenant = args.config.name
        super().__init__(
            "gpu-tenancy:tenant:Tenant",
            name,
            # What the tenant declares, as plain JSON, for the gpu-plan-fits policy (policies/).
            {
                "tenant": tenant,
                "mode": args.stack.mode,
                "gpus": [gpu.model_dump(by_alias=True) for gpu in args.config.gpus],
                "workloads": [workload.model_dump(by_alias=True) for workload in args.config.workloads],
                "quota": dict(args.config.quota),
            },
            opts,
        )
        child = pulumi.ResourceOptions(parent=self)
        versions = args.stack.versions
        pod_cidr, service_cidr = args.stack.cidrs(args.config)

        control_plane = TenantControlPlane(
            f"{name}-control-plane",
            TenantControlPlaneArgs(
                tenant=tenant,
                management_provider=args.management_provider,
                kubernetes_version=versions.kubernetes,
                pod_cidr=pod_cidr,
                service_cidr=service_cidr,
                depends_on=args.depends_on,
            ),
            child,
        )
        network = TenantNetwork(
            f"{name}-network",
            TenantNetworkArgs(
                tenant=tenant,
                provider=control_plane.provider,
                pod_cidr=pod_cidr,
                endpoint=control_plane.endpoint,
                kindnetd_image=versions.kindnetd_image,
                kubernetes_version=versions.kubernetes,
            ),
            child,
        )
        self.worker_container = f"{args.cluster_name}-{tenant}-worker"
        worker = Worker(
            f"{name}-worker",
            WorkerArgs(
                tenant=tenant,
                container_name=self.worker_container,
                image=versions.worker_image,
                network=args.stack.kind.network,
                provider=control_plane.provider,
                endpoint=control_plane.endpoint,
                ca_cert_hash=control_plane.ca_cert_hash,
                depends_on=[control_plane],
            ),
            child,
        )
        hami = Hami(
            f"{name}-hami",
            HamiArgs(
                tenant=tenant,
                provider=control_plane.provider,
                chart_version=versions.hami,
                image_tag=versions.hami_image_tag,
                kubernetes_version=versions.kubernetes,
                depends_on=[network, worker],
            ),
            child,
        )
        gpu_ready: list[pulumi.Resource] = [hami]
        if args.stack.mode == "sim":
            gpu_agent = MockGpuAgent(
                f"{name}-mock-gpu-agent",
                MockGpuAgentArgs(
                    tenant=tenant,
                    gpus=[gpu.model_dump(by_alias=True) for gpu in args.config.gpus],
                    provider=control_plane.provider,
                    worker_container=self.worker_container,
                    node_name=worker.node_name,
                    depends_on=[worker.join, network],
                ),
                child,
            )
            gpu_ready.append(gpu_agent)
        if workloads.has_workloads(args.config):
            Workloads(
                f"{name}-workloads",
                WorkloadsArgs(
                    tenant=tenant,
                    provider=control_plane.provider,
                    workloads=list(args.config.workloads),
                    quota=dict(args.config.quota),
                    depends_on=gpu_ready,
                ),
                child,
            )
        self.endpoint = control_plane.endpoint
        self.kubeconfig = control_plane.kubeconfig
        self.register_outputs({"endpoint": self.endpoint, "kubeconfig": self.kubeconfig})
