"""real: the GPU hosts a tenant lists, joined over SSH, with HAMi's device plugin on their driver."""

from gpu_tenancy.contract.device_layers import DeviceLayer

LAYER = DeviceLayer(
    mode="real",
    registrar="nvidia",
    placement="hosts",
    numa="declared",
    node_daemonsets=("kindnet", "kube-proxy", "konnectivity-agent", "hami-device-plugin"),
    cuda_control=False,
    summary="real GPUs: the listed hosts joined over SSH, HAMi's device plugin on their driver",
    max_cards_per_node=None,
    stable_card_order=False,
    lab_memory_gib_per_tenant=0.0,
    lab_disk_gib=0.0,
    wiring="components.device_layers.real",
)
