"""One tenant: control plane, networking, its GPU node(s), HAMi and its workloads.

The tenant layer (namespace, control plane, network, HAMi scheduler, workloads, quota) is the same in
every mode; only the device layer differs: sim runs a kindest/node container with the mock-GPU agent,
sim-nvml the same container with NVIDIA's mock NVML under HAMi's own device plugin, real joins the listed
GPU hosts over SSH and runs HAMi's device plugin on their driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components import options
from components.bootstrap_token import BootstrapToken, BootstrapTokenArgs
from components.gpu_access import GpuAccessPolicy, GpuAccessPolicyArgs
from components.hami import Hami, HamiArgs
from components.host_worker import HostWorker, HostWorkerArgs
from components.inventory_check import InventoryCheck, InventoryCheckArgs
from components.mock_gpu_agent import MockGpuAgent, MockGpuAgentArgs
from components.mock_nvml import MockNvml, MockNvmlArgs
from components.nvml_mock_image import NvmlMockImage
from components.tenant_access import TenantAccess, TenantAccessArgs
from components.tenant_control_plane import TenantControlPlane, TenantControlPlaneArgs
from components.tenant_network import TenantNetwork, TenantNetworkArgs
from components.worker import Worker, WorkerArgs
from components.workloads import Workloads, WorkloadsArgs
from gpu_tenancy.builders import gpu_nodes
from gpu_tenancy.builders.mock_nvml import cuda_control
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
        nvml_mock_image (NvmlMockImage | None): sim-nvml: the stack's one build of NVIDIA's mock NVML image.
            Default: None (mode sim-nvml requires it).
        hosts_ready (list[pulumi.Resource]): real: what a host's preparation waits for (HostIdentities: no
            machine listed twice). Default: [].
    """

    config: TenantConfig
    stack: StackConfig
    cluster_name: str
    nvml_mock_image: NvmlMockImage | None = None
    hosts_ready: list[pulumi.Resource] = field(default_factory=list)


class Tenant(pulumi.ComponentResource):
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    nodes: list[str]

    def __init__(self, name: str, args: TenantArgs, opts: pulumi.ResourceOptions | None = None):
        tenant = args.config.name
        self._gpu_nodes = gpu_nodes.tenant_gpu_nodes(args.stack.device_layer, args.cluster_name, args.config)
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
                    "maxPods": gpu_nodes.workload_pods_per_node(args.stack.device_layer.registrar),
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
                node_runtime="kind" if args.stack.simulated else "host",
                service_type=args.stack.control_plane.service_type,
                address=args.config.control_plane_address,
                port=api_port,
                konnectivity_port=konnectivity_port,
                api_server_args=(
                    cuda_control.api_server_args(versions.kubernetes) if args.stack.mode == "sim-nvml" else []
                ),
                data_store=args.config.data_store,
                etcd_volume_mib=args.stack.datastore.volume_mib,
            ),
            pulumi.ResourceOptions(parent=self, depends_on=options.dependencies(opts)),
        )
        # Before any pod: GPUs only through HAMi, the same refusals in every mode.
        gpu_access = GpuAccessPolicy(
            f"{name}-gpu-access",
            GpuAccessPolicyArgs(
                tenant=tenant, cuda_control_marker=cuda_control.MARKER if args.stack.mode == "sim-nvml" else ""
            ),
            self._on_tenant(control_plane, control_plane),
        )
        if args.stack.simulated:
            self.nodes, gpu_ready = self._simulated_node(name, args, control_plane, pod_cidr, service_cidr)
        else:
            self.nodes, gpu_ready = self._gpu_hosts(name, args, control_plane, pod_cidr)
        gpu_ready = [*gpu_ready, gpu_access]
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

    def _network(
        self,
        name: str,
        args: TenantArgs,
        control_plane: TenantControlPlane,
        pod_cidr: str,
        nodes: list[pulumi.Resource],
    ) -> TenantNetwork:
        """kindnet and kube-proxy, after the nodes join and, on destroy, removed while their kubelets still run."""
        versions = args.stack.versions
        return TenantNetwork(
            f"{name}-network",
            TenantNetworkArgs(
                tenant=args.config.name,
                pod_cidr=pod_cidr,
                endpoint=control_plane.endpoint,
                kindnetd_image=versions.kindnetd_image,
                kubernetes_version=versions.kubernetes,
                nodes=nodes,
            ),
            self._on_tenant(control_plane),
        )

    def _hami(
        self,
        name: str,
        args: TenantArgs,
        control_plane: TenantControlPlane,
        after: list[pulumi.Resource],
        mock_nvml: MockNvml | None = None,
    ) -> Hami:
        versions = args.stack.versions
        return Hami(
            f"{name}-hami",
            HamiArgs(
                tenant=args.config.name,
                chart_version=versions.hami,
                image_tag=versions.hami_image_tag,
                kubernetes_version=versions.kubernetes,
                device_layer=args.stack.device_layer.registrar,
                device_plugin=mock_nvml.hami_device_plugin if mock_nvml else None,
                service_monitors=args.stack.metrics.service_monitors,
                service_monitor_labels=dict(args.stack.metrics.labels),
            ),
            self._on_tenant(control_plane, *after),
        )

    def _simulated_node(
        self, name: str, args: TenantArgs, control_plane: TenantControlPlane, pod_cidr: str, service_cidr: str
    ) -> tuple[list[str], list[pulumi.Resource]]:
        """sim: one kindest/node container, HAMi without device plugin, the mock-GPU agent."""
        tenant = args.config.name
        container = gpu_nodes.worker_container_name(args.cluster_name, tenant)
        worker = Worker(
            f"{name}-worker",
            WorkerArgs(
                tenant=tenant,
                container_name=container,
                image=args.stack.versions.worker_image,
                network=args.stack.kind_network,
                endpoint=control_plane.endpoint,
                ca_cert_hash=control_plane.ca_cert_hash,
                kubeconfig=control_plane.kubeconfig,
                control_plane_id=control_plane.tcp.id,
                pod_cidr=pod_cidr,
                service_cidr=service_cidr,
            ),
            pulumi.ResourceOptions(parent=self, depends_on=[control_plane]),
        )
        network = self._network(name, args, control_plane, pod_cidr, [worker.join])
        if args.stack.mode == "sim-nvml":
            return [container], self._mock_nvml_devices(name, args, control_plane, worker, container, network)
        hami = self._hami(name, args, control_plane, [network, worker])
        gpu_agent = MockGpuAgent(
            f"{name}-mock-gpu-agent",
            MockGpuAgentArgs(
                tenant=tenant,
                gpus=[gpu.model_dump(by_alias=True) for gpu in args.config.gpus],
                worker_container=container,
                # A replaced container (same name, empty containerd) must get the image loaded again.
                worker_id=worker.container.id,
                node_name=worker.node_name,
            ),
            self._on_tenant(control_plane, worker.join, network),
        )
        return [container], [hami, gpu_agent]

    def _mock_nvml_devices(
        self,
        name: str,
        args: TenantArgs,
        control_plane: TenantControlPlane,
        worker: Worker,
        container: str,
        network: TenantNetwork,
    ) -> list[pulumi.Resource]:
        """sim-nvml: NVIDIA's mock NVML on the worker, HAMi with its own device plugin, inventory checked."""
        assert args.nvml_mock_image is not None  # built once per stack in __main__
        mock = MockNvml(
            f"{name}-mock-nvml",
            MockNvmlArgs(
                tenant=args.config.name,
                gpus=list(args.config.gpus),
                image_name=args.nvml_mock_image.image_name,
                image_build=args.nvml_mock_image.build,
                worker_container=container,
                node_name=worker.node_name,
                worker_id=worker.container.id,
                kubernetes_version=args.stack.versions.kubernetes,
            ),
            self._on_tenant(control_plane, worker.join, network),
        )
        # The plugin starts only once the mock's driver root is laid out (the DaemonSet's readiness).
        hami = self._hami(name, args, control_plane, [network, worker, mock.daemon_set], mock)
        check = InventoryCheck(
            f"{name}-inventory",
            InventoryCheckArgs(
                tenant=args.config.name,
                nodes=self._gpu_nodes,
                kubeconfig=control_plane.kubeconfig,
                on_mismatch="error",
                node_joins={container: worker.join.id},
                devices=mock.config_digest,
            ),
            self._on_tenant(control_plane, hami),
        )
        # Workloads wait for the CUDA-control mutation too: a GPU pod admitted before it would not start.
        return [hami, check, mock.cuda_control]

    def _gpu_hosts(
        self, name: str, args: TenantArgs, control_plane: TenantControlPlane, pod_cidr: str
    ) -> tuple[list[str], list[pulumi.Resource]]:
        """real: the listed hosts joined over SSH, HAMi with its device plugin, inventory checked."""
        tenant = args.config.name
        child = pulumi.ResourceOptions(parent=self)
        assert args.stack.ssh_private_key is not None  # load_config requires it in mode real
        ssh_key = pulumi.Output.secret(args.stack.ssh_private_key.get_secret_value())
        kubernetes_version = args.stack.versions.kubernetes
        hosts = []
        for host in args.config.workers:
            # One token per host, minted again whenever the host's join is replaced: HostWorker replaces it
            # for a new address or Kubernetes version (prepare) or a new control plane (its CA).
            bootstrap = BootstrapToken(
                f"{name}-{host.name}-bootstrap-token",
                BootstrapTokenArgs(
                    tenant=tenant,
                    kubeconfig=control_plane.kubeconfig,
                    triggers=[host.address, kubernetes_version, control_plane.ca_cert_hash, control_plane.endpoint],
                ),
                child,
            )
            hosts.append(
                HostWorker(
                    f"{name}-{host.name}",
                    HostWorkerArgs(
                        tenant=tenant,
                        host=host,
                        ssh_private_key=ssh_key,
                        kubernetes_version=kubernetes_version,
                        endpoint=control_plane.endpoint,
                        ca_cert_hash=control_plane.ca_cert_hash,
                        kubeconfig=control_plane.kubeconfig,
                        bootstrap=bootstrap,
                    ),
                    pulumi.ResourceOptions(parent=self, depends_on=[control_plane, bootstrap.mint, *args.hosts_ready]),
                )
            )
        network = self._network(name, args, control_plane, pod_cidr, list(hosts))
        hami = self._hami(name, args, control_plane, [network, *hosts])
        check = InventoryCheck(
            f"{name}-inventory",
            InventoryCheckArgs(
                tenant=tenant,
                nodes=self._gpu_nodes,
                kubeconfig=control_plane.kubeconfig,
                on_mismatch=args.stack.inventory_mismatch,
                node_joins={host.name: worker.join.id for host, worker in zip(args.config.workers, hosts, strict=True)},
            ),
            self._on_tenant(control_plane, hami),
        )
        return [host.name for host in args.config.workers], [hami, check]
