"""sim-nvml: the same kind worker with NVIDIA's mock NVML, whose cards HAMi's own device plugin registers."""

from gpu_tenancy.contract.device_layers import DeviceLayer
from gpu_tenancy.contract.limits import MAX_GPUS_PER_NODE

LAYER = DeviceLayer(
    mode="sim-nvml",
    registrar="nvml-mock",
    placement="kind-worker",
    numa="unknown",
    # HAMi's device plugin (chart devicePlugin.enabled, builders/hami/hami_chart.py) and the mock NVML
    # (components/mock_nvml.py) in place of the agent.
    node_daemonsets=("kindnet", "kube-proxy", "konnectivity-agent", "hami-device-plugin", "nvml-mock"),
    cuda_control=True,
    summary="simulated GPUs: a kind worker per tenant, HAMi's device plugin on NVIDIA's mock NVML",
    max_cards_per_node=(
        MAX_GPUS_PER_NODE,
        f"the mock NVML serves at most {MAX_GPUS_PER_NODE} per node (k8s-test-infra engine/device.go MaxDevices)",
    ),
    stable_card_order=False,
    # The mock NVML's DaemonSet besides the worker, and its image with the build cache on the lab's disk.
    lab_memory_gib_per_tenant=1.6,
    lab_disk_gib=2.5,
    wiring="components.device_layers.sim_nvml",
)
