"""HAMi inside a tenant: its device plugin on the real driver (real) or on NVIDIA's mock NVML (sim-nvml),
or none, for the mock-GPU agent (sim)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import options
from components.charts import cached_chart
from gpu_tenancy.builders.hami import hami_chart


@dataclass
class HamiArgs:
    """HAMi's chart in one tenant. Its provider (the tenant's) and what it waits for (the network, the nodes,
    sim-nvml's mock) come in `opts`.

    Attributes:
        tenant (str): the tenant, for the ServiceMonitors' labels.
        chart_version (str): the HAMi chart's version (versions.hami), taken from the chart cache.
        image_tag (str): HAMi's image tag.
        kubernetes_version (str): the tenant's Kubernetes version, for the scheduler's kube-scheduler image.
        device_layer (hami_chart.Registrar): who registers the cards: "mock-agent" (no device plugin),
            "nvml-mock" or "nvidia" (HAMi's device plugin). Default: "mock-agent".
        device_plugin (dict[str, Any] | None): sim-nvml: what the device plugin needs to reach the mock
            (MockNvml.hami_device_plugin). Default: None.
        service_monitors (bool): gpu-tenancy:metrics.serviceMonitors: ServiceMonitors for HAMi's metrics (needs
            the Prometheus Operator's CRDs in the tenant). Default: False.
        service_monitor_labels (dict[str, str] | None): labels for the Prometheus that selects the
            ServiceMonitors. Default: None.
    """

    tenant: str
    chart_version: str
    image_tag: str
    kubernetes_version: str
    device_layer: hami_chart.Registrar = "mock-agent"
    device_plugin: dict[str, Any] | None = None
    service_monitors: bool = False
    service_monitor_labels: dict[str, str] | None = None


class Hami(pulumi.ComponentResource):
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: HamiArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:hami:Hami", name, None, opts)
        options.require_provider(self)
        # helm.v3.Release, not v4 Chart: HAMi's webhook certificate comes from Helm hook Jobs,
        # which Chart does not run as hooks (pulumi-kubernetes #555, #1454).
        self.release = k8s.helm.v3.Release(
            f"{name}-chart",
            name="hami",
            chart=cached_chart("hami", args.chart_version),
            version=args.chart_version,
            namespace="kube-system",
            values=hami_chart.hami_values(
                args.kubernetes_version,
                args.image_tag,
                device_layer=args.device_layer,
                device_plugin=args.device_plugin,
            ),
            timeout=900,
            opts=pulumi.ResourceOptions(parent=self, depends_on=options.dependencies(opts)),
        )
        self.service_monitors: list[k8s.apiextensions.CustomResource] = []
        if args.service_monitors:
            for monitor in hami_chart.hami_service_monitors(
                args.tenant, args.device_layer != "mock-agent", args.service_monitor_labels or {}
            ):
                self.service_monitors.append(k8s.apiextensions.CustomResource(
                    f"{name}-{monitor['metadata']['name']}",
                    api_version="monitoring.coreos.com/v1",
                    kind="ServiceMonitor",
                    metadata=monitor["metadata"],
                    spec=monitor["spec"],
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
                ))
        self.register_outputs({"release": self.release.name})
