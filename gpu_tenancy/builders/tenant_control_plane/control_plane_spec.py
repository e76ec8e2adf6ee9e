"""A tenant's TenantControlPlane: its spec, what to wait for, its admin kubeconfig."""

from __future__ import annotations

from typing import Any

from gpu_tenancy.builders.kamaji.kamaji_chart import DATASTORE_NAME
from gpu_tenancy.contract.limits import KONNECTIVITY_PORT, TCP_PORT

# What kind's own KubeletConfiguration sets for a kindest/node container and a plain kubeadm join
# would miss (versions.md §7). Real hosts keep kubelet defaults apart from the cgroup driver.
KIND_NODE_KUBELET_PATCHES: list[dict[str, Any]] = [
    {"op": "add", "path": "/cgroupRoot", "value": "/kubelet"},
    {"op": "add", "path": "/failSwapOn", "value": False},
    {"op": "add", "path": "/imageGCHighThresholdPercent", "value": 100},
    {
        "op": "add",
        "path": "/evictionHard",
        "value": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
    },
]


def tenant_control_plane_spec(
    kubernetes_version: str,
    pod_cidr: str,
    service_cidr: str,
    *,
    node_runtime: str = "kind",
    service_type: str = "LoadBalancer",
    address: str | None = None,
    port: int = TCP_PORT,
    konnectivity_port: int = KONNECTIVITY_PORT,
    api_server_args: list[str] | None = None,
    data_store: str = DATASTORE_NAME,
) -> dict[str, Any]:
    """TCP with Konnectivity; `node_runtime` "kind" (kindest/node workers) or "host" (real hosts)."""
    # Both kindest/node and the prepared hosts run containerd with SystemdCgroup=true. `add`, not
    # `replace`: Kamaji serialises the kubelet defaults with cgroupDriver emptied (omitempty, so absent)
    # unless the deprecated kubelet.cgroupfs is set, and RFC 6902 `replace` on a missing key fails the
    # whole kubelet-config upload (kamaji internal/kubeadm/uploadconfig.go getKubeletConfigmapContent).
    kubelet_patches: list[dict[str, Any]] = [{"op": "add", "path": "/cgroupDriver", "value": "systemd"}]
    if node_runtime == "kind":
        kubelet_patches += KIND_NODE_KUBELET_PATCHES
    network_profile: dict[str, Any] = {"port": port, "podCidrs": [pod_cidr], "serviceCidrs": [service_cidr]}
    if address:
        network_profile["address"] = address
    deployment: dict[str, Any] = {"extraArgs": {"apiServer": list(api_server_args)}} if api_server_args else {}
    service: dict[str, Any] = {"serviceType": service_type}
    if service_type == "LoadBalancer":
        # No NodePorts besides the LoadBalancer address: kube-proxy would serve them on every management node, at
        # ports the API server picks, which the real hosts' firewall (host_worker/fence.py) cannot know to close.
        # In every mode, so that a simulated tenant's control plane is the one it is promoted with.
        service["allocateLoadBalancerNodePorts"] = False
    return {
        "dataStore": data_store,
        "controlPlane": {
            "deployment": {
                **deployment,
                "replicas": 1,
                "resources": {
                    "apiServer": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                    "controllerManager": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                    "scheduler": {"requests": {"cpu": "25m", "memory": "32Mi"}},
                },
            },
            "service": service,
        },
        "kubernetes": {
            "version": kubernetes_version,
            "kubelet": {
                "configurationJSONPatches": kubelet_patches,
                "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"],
            },
        },
        "networkProfile": network_profile,
        "addons": {
            "coreDNS": {},
            # No kubeProxy addon: Kamaji rewrites its ConfigMap with conntrack.maxPerCore=32768, which
            # crash-loops inside node containers (kind #2240); the program runs kind's kube-proxy.
            "konnectivity": {
                "server": {"port": konnectivity_port},
                # hostNetwork + tolerate everything: the agent must run before the CNI is up, or a
                # webhook-gated CNI install deadlocks (Kamaji #882, PR #883).
                "agent": {
                    "mode": "DaemonSet",
                    "hostNetwork": True,
                    "tolerations": [{"operator": "Exists"}],
                },
            },
        },
    }


def tcp_wait_conditions() -> tuple[str, str]:
    return (
        "jsonpath={.status.kubernetesResources.version.status}=Ready",
        "jsonpath={.status.kubeconfig.admin.secretName}",
    )


def admin_kubeconfig_secret_name(tenant: str) -> str:
    return f"{tenant}-admin-kubeconfig"
