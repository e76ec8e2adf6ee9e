"""sim-nvml: the kind worker with NVIDIA's mock NVML, HAMi's own device plugin on it, the inventory checked."""

from __future__ import annotations

from components.device_layers import DeviceLayerWiring, Devices, TenantSite
from components.device_layers.sim import kind_worker
from components.inventory_check import InventoryCheck, InventoryCheckArgs
from components.mock_nvml import MockNvml, MockNvmlArgs
from components.nvml_mock_image import NvmlMockImage, NvmlMockImageArgs
from gpu_tenancy.builders.mock_nvml import cuda_control
from gpu_tenancy.contract.stack_config import StackConfig


class SimNvml(DeviceLayerWiring):
    def stack_parts(self, stack: StackConfig) -> NvmlMockImage:
        """NVIDIA's mock NVML image, built once on this Docker host for every tenant's worker."""
        return NvmlMockImage("nvml-mock-image", NvmlMockImageArgs(commit=stack.versions.nvml_mock_commit))

    def api_server_args(self, kubernetes_version: str) -> list[str]:
        return cuda_control.api_server_args(kubernetes_version)

    def cuda_control_marker(self) -> str:
        return cuda_control.MARKER

    def deploy(self, site: TenantSite) -> Devices:
        image = site.stack_parts
        if not isinstance(image, NvmlMockImage):
            raise TypeError("sim-nvml deploys a tenant only with the stack's mock NVML image (stack_parts)")
        worker, container = kind_worker(site)
        network = site.network([worker.join])
        mock = MockNvml(
            f"{site.name}-mock-nvml",
            MockNvmlArgs(
                tenant=site.config.name,
                gpus=list(site.config.gpus),
                image_name=image.image_name,
                image_build=image.build,
                worker_container=container,
                node_name=worker.node_name,
                worker_id=worker.container.id,
                kubernetes_version=site.stack.versions.kubernetes,
            ),
            site.on_tenant(worker.join, network),
        )
        # The plugin starts only once the mock's driver root is laid out (the DaemonSet's readiness).
        hami = site.hami([network, worker, mock.daemon_set], mock.hami_device_plugin)
        check = InventoryCheck(
            f"{site.name}-inventory",
            InventoryCheckArgs(
                tenant=site.config.name,
                nodes=site.gpu_nodes,
                kubeconfig=site.control_plane.kubeconfig,
                on_mismatch="error",
                node_joins={container: worker.join.id},
                devices=mock.config_digest,
            ),
            site.on_tenant(hami),
        )
        # Workloads wait for the CUDA-control mutation too: a GPU pod admitted before it would not start.
        return Devices(nodes=[container], ready=[hami, check, mock.cuda_control])


WIRING = SimNvml()
