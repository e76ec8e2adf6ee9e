"""sim-nvml: the same kind worker with NVIDIA's mock NVML, whose cards HAMi's own device plugin registers."""

from gpu_tenancy.contract.device_layers import DeviceLayer

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
    wiring="components.device_layers.sim_nvml",
)
