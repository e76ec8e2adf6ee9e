"""A tenant's pod network: kindnet and kube-proxy."""

from __future__ import annotations

from typing import Any

from gpu_tenancy.builders.kube_objects import labels, to_yaml


def kindnet_daemonset_spec(tenant: str, image: str, pod_cidr: str, endpoint: str) -> dict[str, Any]:
    """kind's kindnetd, rendered for a tenant (POD_SUBNET and CONTROL_PLANE_ENDPOINT set)."""
    pod_labels = {"app": "kindnet", **labels(tenant, "kindnet")}
    return {
        "selector": {"matchLabels": {"app": "kindnet"}},
        "template": {
            "metadata": {"labels": pod_labels},
            "spec": {
                "hostNetwork": True,
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"operator": "Exists"}],
                "priorityClassName": "system-node-critical",
                "serviceAccountName": "kindnet",
                "containers": [
                    {
                        "name": "kindnet-cni",
                        "image": image,
                        "env": [
                            _field_env("HOST_IP", "status.hostIP"),
                            _field_env("POD_IP", "status.podIP"),
                            {"name": "POD_SUBNET", "value": pod_cidr},
                            # Without it kindnetd dials 10.96.0.1, i.e. needs kube-proxy first.
                            {"name": "CONTROL_PLANE_ENDPOINT", "value": endpoint},
                        ],
                        "volumeMounts": [
                            {"name": "cni-cfg", "mountPath": "/etc/cni/net.d"},
                            {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                            {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
                            {"name": "nri-plugin", "mountPath": "/var/run/nri"},
                        ],
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "50Mi"},
                            "limits": {"cpu": "100m", "memory": "50Mi"},
                        },
                        "securityContext": {
                            "privileged": False,
                            "capabilities": {"add": ["NET_RAW", "NET_ADMIN"]},
                        },
                    }
                ],
                "volumes": [
                    _host_path("cni-cfg", "/etc/cni/net.d"),
                    _host_path("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
                    _host_path("lib-modules", "/lib/modules"),
                    _host_path("nri-plugin", "/var/run/nri"),
                ],
            },
        },
    }


def kindnet_cluster_role_rules() -> list[dict[str, Any]]:
    return [
        {"apiGroups": [""], "resources": ["nodes", "pods", "namespaces"], "verbs": ["list", "watch"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list", "watch"]},
    ]


def kube_proxy_config(pod_cidr: str) -> str:
    """kind's KubeProxyConfiguration: conntrack.maxPerCore=0 leaves the host-global sysctl alone."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf"},
        "mode": "iptables",
        "clusterCIDR": pod_cidr,
        "iptables": {"minSyncPeriod": "1s"},
        "conntrack": {"maxPerCore": 0},
    }
    return to_yaml(config)


def kube_proxy_kubeconfig(endpoint: str) -> str:
    """In-pod kubeconfig that talks to the tenant endpoint with the service-account token."""
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "default", "cluster": {"server": f"https://{endpoint}", "certificate-authority": f"{sa}/ca.crt"}}
        ],
        "contexts": [{"name": "default", "context": {"cluster": "default", "user": "default", "namespace": "default"}}],
        "current-context": "default",
        "users": [{"name": "default", "user": {"tokenFile": f"{sa}/token"}}],
    }
    return to_yaml(config)


def kube_proxy_daemonset_spec(tenant: str, image: str) -> dict[str, Any]:
    pod_labels = {"k8s-app": "kube-proxy", **labels(tenant, "kube-proxy")}
    return {
        "selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
        "template": {
            "metadata": {"labels": pod_labels},
            "spec": {
                "hostNetwork": True,
                "priorityClassName": "system-node-critical",
                "serviceAccountName": "kube-proxy",
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {
                        "name": "kube-proxy",
                        "image": image,
                        "command": [
                            "/usr/local/bin/kube-proxy",
                            "--config=/var/lib/kube-proxy/config.conf",
                            "--hostname-override=$(NODE_NAME)",
                        ],
                        "env": [_field_env("NODE_NAME", "spec.nodeName")],
                        "securityContext": {"privileged": True},
                        "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                        "volumeMounts": [
                            {"name": "kube-proxy", "mountPath": "/var/lib/kube-proxy"},
                            {"name": "xtables-lock", "mountPath": "/run/xtables.lock"},
                            {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "kube-proxy", "configMap": {"name": "kube-proxy"}},
                    _host_path("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
                    _host_path("lib-modules", "/lib/modules"),
                ],
            },
        },
    }


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _host_path(name: str, path: str, kind: str | None = None) -> dict[str, Any]:
    host_path: dict[str, Any] = {"path": path}
    if kind:
        host_path["type"] = kind
    return {"name": name, "hostPath": host_path}
