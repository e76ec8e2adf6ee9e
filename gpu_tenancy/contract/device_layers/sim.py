"""sim: a kindest/node container per tenant, with the mock-GPU agent registering its cards with HAMi."""

from gpu_tenancy.contract.device_layers import DeviceLayer

LAYER = DeviceLayer(
    mode="sim",
    registrar="mock-agent",
    placement="kind-worker",
    numa="zero",
    # kindnet and kube-proxy (components/tenant_network.py), Kamaji's konnectivity agent (addons.konnectivity.agent
    # mode DaemonSet, builders/tenant_control_plane) and the agent (components/mock_gpu_agent.py).
    node_daemonsets=("kindnet", "kube-proxy", "konnectivity-agent", "mock-gpu-agent"),
    cuda_control=False,
    summary="simulated GPUs: a kind worker per tenant, the mock-GPU agent registers the cards with HAMi",
    max_cards_per_node=None,
    stable_card_order=True,
    lab_memory_gib_per_tenant=1.4,
    lab_disk_gib=0.0,
    wiring="components.device_layers.sim",
)
