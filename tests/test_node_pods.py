"""The pods the planner leaves for workloads on a GPU node: the kubelet's 110 less the DaemonSet pods the
program runs there, counted from what each example stack registers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from policy_support import Recorded, dev_stack, gpu_stack, nvml_stack

from gpu_tenancy.builders.gpu_nodes import NODE_DAEMONSETS, workload_pods_per_node
from gpu_tenancy.hami.planner.model import KUBELET_MAX_PODS

DAEMONSET = "kubernetes:apps/v1:DaemonSet"
RELEASE = "kubernetes:helm.sh/v3:Release"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


def node_daemonsets(resources: list[Recorded], tenant: str) -> int:
    """DaemonSets on the tenant's nodes: the program's own, those HAMi's chart renders (v2.10.0
    charts/hami/templates/device-plugin/daemonsetnvidia.yaml if devicePlugin.enabled, daemonsetmock.yaml if
    mockDevicePlugin.enabled) and Kamaji's konnectivity agent when the TenantControlPlane asks for a DaemonSet."""
    count = 0
    for r in resources:
        if not r.name.startswith(f"{tenant}-"):
            continue
        if r.type == DAEMONSET:
            count += 1
        elif r.type == RELEASE and r.name == f"{tenant}-hami-chart":
            values = r.inputs.get("values") or {}
            count += bool((values.get("devicePlugin") or {}).get("enabled", True))
            count += bool((values.get("mockDevicePlugin") or {}).get("enabled", False))
        elif r.type == TCP:
            agent = ((r.inputs.get("spec") or {}).get("addons") or {}).get("konnectivity", {}).get("agent") or {}
            count += agent.get("mode") == "DaemonSet"
    return count


@pytest.mark.parametrize(("record", "layer"), [(dev_stack, "mock-agent"), (nvml_stack, "nvml-mock"),
                                                (gpu_stack, "nvidia")])
def test_the_daemonsets_counted_are_the_ones_the_program_registers(
    record: Callable[[], list[Recorded]], layer: str
) -> None:
    resources = record()
    for tenant in ("tenant-a", "tenant-b"):
        assert node_daemonsets(resources, tenant) == len(NODE_DAEMONSETS[layer]), (tenant, layer)
    # CoreDNS' two replicas (kubeadm phases/addons/dns/dns.go coreDNSReplicas, applied by Kamaji's coreDNS addon)
    # and HAMi's scheduler (chart 2.10.0 values.yaml scheduler.replicas: 1) run on the tenant's workers too.
    assert workload_pods_per_node(layer) == KUBELET_MAX_PODS - len(NODE_DAEMONSETS[layer]) - 3


@pytest.mark.parametrize("record", [dev_stack, nvml_stack, gpu_stack])
def test_the_program_sets_no_max_pods_when_a_node_joins(record: Callable[[], list[Recorded]]) -> None:
    """The 110 above is the kubelet's default: nothing the program registers (kubeadm join configuration,
    kubelet configuration, kind node patches) sets maxPods."""
    import json

    # Custom resources only: the Tenant component's own declaration carries the planner's maxPods.
    text = json.dumps([r.inputs for r in record() if r.custom], default=str).lower()
    assert "maxpods" not in text and "max-pods" not in text
