"""HAMi's chart values per device layer, and its metrics' ServiceMonitors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpu_tenancy.builders.gpu_access import gpu_access
from gpu_tenancy.builders.kube_objects import labels
from gpu_tenancy.contract import versions
from gpu_tenancy.contract.device_layers import Registrar


def hami_values(
    kubernetes_version: str,
    image_tag: str,
    device_layer: Registrar = "mock-agent",
    device_plugin: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """HAMi inside a Kamaji tenant, for the tenant's device layer; `device_plugin` adds to the chart's
    devicePlugin values what the plugin needs to reach its devices (nvml_mock.hami_device_plugin_values)."""
    plugin_values: dict[str, Any] = {"enabled": device_layer != "mock-agent", "service": {"type": "ClusterIP"}}
    if device_layer == "nvidia":
        # The NVIDIA runtime is not containerd's default on a prepared host
        # (gpu_tenancy/builders/host_worker/hostprep.py): the chart creates RuntimeClass `nvidia`, runs the device
        # plugin and its vGPU monitor under it, and the webhook puts GPU pods under it
        # (gpu_tenancy/builders/gpu_access/gpu_access.py). kind nodes have no such handler: sim modes skip it.
        plugin_values |= {"runtimeClassName": gpu_access.GPU_RUNTIME_CLASS, "createRuntimeClass": True}
    return {
        "global": {"imageTag": image_tag},
        # mock-device-plugin 1.0.1 (the chart's pin) crashes on the 2.10 ConfigMap (mock PR #18);
        # the mock-GPU agent provides what it would.
        "mockDevicePlugin": {"enabled": False},
        "scheduler": {
            "kubeScheduler": {
                "image": {
                    "registry": versions.KUBE_SCHEDULER_REGISTRY,
                    "repository": versions.KUBE_SCHEDULER_REPOSITORY,
                    # Pinned: with an unreachable tenant at render time Helm's default
                    # capabilities would pick the wrong tag (pulumi-kubernetes #2345).
                    "tag": kubernetes_version,
                },
            },
            # sim: the mock-GPU agent releases node locks; the flag bounds the stall if it is down (the chart's
            # nodeLockExpire is ignored, HAMi #2790). docs/mock-gpu-agent.md says why 30 s.
            **(
                {"extender": {"extraArgs": ["-v=4", "--node-lock-timeout=30s"]}}
                if device_layer == "mock-agent"
                else {}
            ),
            # Service-referenced webhook (no customURL): the tenant API server reaches it through
            # Konnectivity's `cluster` egress. ClusterIP keeps it off node ports.
            "service": {"type": "ClusterIP"},
            "admissionWebhook": {"enabled": True, "failurePolicy": "Ignore"},
            # Containers that ask for no GPU get NVIDIA_VISIBLE_DEVICES=none from the webhook (pkg/device/nvidia/
            # device.go MutateAdmission), overriding an image's `ENV NVIDIA_VISIBLE_DEVICES=all` (CUDA images set
            # it) in a GPU pod's other containers, which run under the NVIDIA runtime too. A string, as the chart.
            "overwriteEnv": "true",
            "defaultSchedulerPolicy": {"nodeSchedulerPolicy": "binpack", "gpuSchedulerPolicy": "spread"},
        },
        # The plugin runs on nodes labelled gpu=on (the chart's nvidiaNodeSelector), which the program
        # sets on every worker it joins. Its vGPU monitor Service is NodePort upstream; ClusterIP like the
        # scheduler's, so the metrics stay inside the tenant.
        "devicePlugin": {**plugin_values, **(device_plugin or {})},
        # The chart's own ServiceMonitors set no honorLabels, so the workloads' labels would be lost
        # (docs/metrics.md); hami_service_monitors makes them when the stack asks.
        "prometheus": {"enabled": False},
    }


# The chart's Services, as hami 2.10.0 names and labels them for release `hami` (templates/_helpers.tpl
# `hami-vgpu.fullname` and `hami-vgpu.selectorLabels`; scheduler/service.yaml port `monitor`,
# device-plugin/monitorservice.yaml port `monitorport`).
HAMI_RELEASE = "hami"


HAMI_METRICS_SERVICES = {
    "hami-scheduler": "monitor",
    "hami-device-plugin": "monitorport",
}


def hami_service_monitors(tenant: str, device_plugin: bool, extra_labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """ServiceMonitors (monitoring.coreos.com/v1) for HAMi's scheduler and, where HAMi's device plugin runs,
    its vGPU monitor: the chart's own selector and port, plus honorLabels so the metrics keep their
    `namespace`/`pod`/`container` (the workload's, not the monitor's), and `extra_labels` for the
    Prometheus that selects them."""
    monitors = []
    for component, port in HAMI_METRICS_SERVICES.items():
        if component == "hami-device-plugin" and not device_plugin:
            continue
        monitors.append({
            "metadata": {
                "name": f"{component}-metrics",
                "namespace": "kube-system",
                "labels": {**labels(tenant, "metrics"), "app.kubernetes.io/component": component, **extra_labels},
            },
            "spec": {
                "selector": {"matchLabels": {
                    "app.kubernetes.io/component": component,
                    "app.kubernetes.io/name": "hami",
                    "app.kubernetes.io/instance": HAMI_RELEASE,
                }},
                "namespaceSelector": {"matchNames": ["kube-system"]},
                "endpoints": [{"port": port, "path": "/metrics", "honorLabels": True}],
            },
        })
    return monitors
