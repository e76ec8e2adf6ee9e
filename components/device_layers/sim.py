"""sim: one kindest/node container per tenant, HAMi without device plugin, the mock-GPU agent registering cards."""

from __future__ import annotations

from components.device_layers import DeviceLayerWiring, Devices, TenantSite
from components.mock_gpu_agent import MockGpuAgent, MockGpuAgentArgs
from components.worker import Worker, WorkerArgs
from gpu_tenancy.builders import gpu_nodes


def kind_worker(site: TenantSite) -> tuple[Worker, str]:
    """The tenant's kind worker container, joined to its control plane (sim and sim-nvml), and its name."""
    control_plane = site.control_plane
    container = gpu_nodes.worker_container_name(site.cluster_name, site.config.name)
    worker = Worker(
        f"{site.name}-worker",
        WorkerArgs(
            tenant=site.config.name,
            container_name=container,
            image=site.stack.versions.worker_image,
            network=site.stack.kind_network,
            endpoint=control_plane.endpoint,
            ca_cert_hash=control_plane.ca_cert_hash,
            kubeconfig=control_plane.kubeconfig,
            control_plane_id=control_plane.tcp.id,
            pod_cidr=site.pod_cidr,
            service_cidr=site.service_cidr,
        ),
        site.child(control_plane),
    )
    return worker, container


class Sim(DeviceLayerWiring):
    def deploy(self, site: TenantSite) -> Devices:
        worker, container = kind_worker(site)
        network = site.network([worker.join])
        hami = site.hami([network, worker])
        agent = MockGpuAgent(
            f"{site.name}-mock-gpu-agent",
            MockGpuAgentArgs(
                tenant=site.config.name,
                gpus=[gpu.model_dump(by_alias=True) for gpu in site.config.gpus],
                worker_container=container,
                # A replaced container (same name, empty containerd) must get the image loaded again.
                worker_id=worker.container.id,
                node_name=worker.node_name,
            ),
            site.on_tenant(worker.join, network),
        )
        return Devices(nodes=[container], ready=[hami, agent])


WIRING = Sim()
