"""Device layers: what puts a tenant's GPUs on its nodes (simulated or real) and registers them with HAMi.

Each layer is one module here with one `LAYER`, the facts the program, the planner and the policy pack read,
and one module of the same name under components/device_layers/, what it deploys into a tenant. `LAYERS` is
the registry, keyed by the stack's `gpu-tenancy:mode`; docs/architecture.md walks through adding a layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Who writes a node's register annotation for HAMi: the mock-GPU agent, HAMi's device plugin on NVIDIA's mock
# NVML, or HAMi's device plugin on the host's driver. HAMi's chart values and the pack's device checks follow it.
Registrar = Literal["mock-agent", "nvml-mock", "nvidia"]
# Where a tenant's cards are: all on its one kind worker container, or on the GPU hosts it lists (`workers`).
Placement = Literal["kind-worker", "hosts"]
# Each card's NUMA node as HAMi will read it: 0 (what the mock-GPU agent registers), unknown (what the mock NVML
# reports to HAMi's plugin is not known to the plan), or as the host's `numa` list declares it.
Numa = Literal["zero", "unknown", "declared"]


@dataclass(frozen=True)
class DeviceLayer:
    """One device layer, as plain facts.

    Attributes:
        mode: the `gpu-tenancy:mode` value that selects it.
        registrar: who registers the cards with HAMi (`Registrar`).
        placement: where the cards are (`Placement`); `kind-worker` layers run on a kind lab on this Docker host.
        numa: what the plan knows of each card's NUMA node (`Numa`).
        node_daemonsets: the program's DaemonSets on each GPU node, whose pods count against the kubelet's
            maxPods (gpu_tenancy/builders/gpu_nodes.py `workload_pods_per_node`).
        cuda_control: whether the tenant's API server runs the CUDA-control mutation
            (gpu_tenancy/builders/mock_nvml/cuda_control.py): its flags and the GPU-access policy's marker.
        summary: what the layer is, in one line (docs, `gpu-tenancy config-reference`).
        max_cards_per_node: the most cards one node of this layer holds and why (a clause), or None for no limit.
        stable_card_order: whether the cards are registered in the same order every time (the mock-GPU agent
            keeps index order; HAMi's device plugin walks a Go map, register.go `getAPIDevices`), so that a plan's
            placements, not only its verdicts, hold.
        lab_memory_gib_per_tenant: what a tenant's kind worker and control plane take on the lab host (GiB;
            0 off a kind lab), measured by the live suite (docs/live-suite.md, "Footprint").
        lab_disk_gib: what the layer adds to the lab host's disk once (GiB), e.g. an image built there.
        wiring: the module that deploys it into a tenant (components/device_layers/), named here so that the
            pack and the planner, which read these facts, never import the program.
    """

    mode: str
    registrar: Registrar
    placement: Placement
    numa: Numa
    node_daemonsets: tuple[str, ...]
    cuda_control: bool
    summary: str
    wiring: str
    max_cards_per_node: tuple[int, str] | None
    stable_card_order: bool
    lab_memory_gib_per_tenant: float
    lab_disk_gib: float

    @property
    def simulated(self) -> bool:
        """A kind management cluster and kind worker containers on this Docker host."""
        return self.placement == "kind-worker"

    @property
    def node_runtime(self) -> Literal["kind", "host"]:
        """What the GPU nodes are, for the control plane's kubelet settings (TenantControlPlaneArgs.node_runtime)."""
        return "kind" if self.simulated else "host"


def _registry() -> dict[str, DeviceLayer]:
    from gpu_tenancy.contract.device_layers import real, sim, sim_nvml

    return {layer.mode: layer for layer in (sim.LAYER, sim_nvml.LAYER, real.LAYER)}


LAYERS: dict[str, DeviceLayer] = _registry()


def find_layer(mode: object) -> DeviceLayer | None:
    """The layer of a mode as read from a stack file, an export or the engine's config; None for anything no layer
    registers (a missing or non-string mode included), which callers treat as no known layer."""
    return LAYERS.get(mode) if isinstance(mode, str) else None


def layer(mode: str) -> DeviceLayer:
    """The layer of a mode; KeyError for a mode no layer registers."""
    return LAYERS[mode]
