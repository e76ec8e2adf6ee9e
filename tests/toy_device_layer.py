"""A device layer that exists only in tests: the toy cards of tests/test_device_layers.py, registered through the
same registry and hooks as sim, sim-nvml and real, with no change to the tenant layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.device_layers import DeviceLayerWiring, Devices, TenantSite
from gpu_tenancy.contract.stack_config import StackConfig


class Toy(DeviceLayerWiring):
    def stack_parts(self, stack: StackConfig) -> k8s.core.v1.ConfigMap:
        return k8s.core.v1.ConfigMap("toy-stack", metadata={"name": "toy-stack"}, data={"tenants": str(len(stack.tenants))})

    def api_server_args(self, kubernetes_version: str) -> list[str]:
        return [f"--toy-flag={kubernetes_version}"]

    def cuda_control_marker(self) -> str:
        return "Y"

    def deploy(self, site: TenantSite) -> Devices:
        cards = k8s.core.v1.ConfigMap(
            f"{site.name}-toy-cards",
            metadata={"name": "toy-cards", "namespace": "kube-system"},
            data={"cards": str(sum(g.count for g in site.config.gpus)), "shared": str(site.stack_parts is not None)},
            opts=site.on_tenant(site.control_plane),
        )
        hami = site.hami([cards])
        return Devices(nodes=[f"{site.config.name}-toy-node"], ready=[hami, cards])

    def after_tenants(self, stack: StackConfig, tenants: Mapping[str, Any]) -> None:
        k8s.core.v1.ConfigMap("toy-after", metadata={"name": "toy-after"}, data={"tenants": ",".join(tenants)},
                              opts=pulumi.ResourceOptions(depends_on=list(tenants.values())))


WIRING = Toy()
