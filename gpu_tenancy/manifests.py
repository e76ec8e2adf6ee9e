"""Pure builders: dicts in, dicts out. Components only wire these to resources."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import yaml

from gpu_tenancy import gpu_access, versions

TENANT_LABEL = "gpu-tenancy.io/tenant"
COMPONENT_LABEL = "gpu-tenancy.io/component"
GPU_NODE_LABEL = "gpu-tenancy.io/gpu-node"
KAMAJI_NAMESPACE = "kamaji-system"  # fixed: Kamaji's CRDs hard-code kamaji-system/kamaji-serving-cert
DATASTORE_NAME = "default"
TCP_PORT = 6443
KONNECTIVITY_PORT = 8132


# libyaml's dumper when PyYAML has it (the wheels do): same output, several times faster per tenant.
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def to_yaml(document: Any) -> str:
    return yaml.dump(document, Dumper=_YAML_DUMPER, sort_keys=False)


# pulumi-kubernetes deletes in the foreground by default and waits until the object is gone
# (provider/pkg/await/await.go Deletion, metadata.DeletionPropagation); pods on a node whose kubelet is
# already dead are never finalised, so a DaemonSet on the node would hold `destroy` until its timeout.
BACKGROUND_DELETION = {"pulumi.com/deletionPropagationPolicy": "background"}
# Not awaited, on create or delete (pulumi-kubernetes metadata/overrides.go: on delete only for Namespace,
# Pod, ReplicationController, DaemonSet, Deployment, StatefulSet and Job).
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


def labels(tenant: str, component: str) -> dict[str, str]:
    return {TENANT_LABEL: tenant, COMPONENT_LABEL: component}


def gpu_node_labels(tenant: str) -> dict[str, str]:
    """Labels every worker joins with: HAMi's device plugin selector, the agent's, the tenant."""
    return {"gpu": "on", GPU_NODE_LABEL: "true", TENANT_LABEL: tenant}


def kind_cluster_config(cluster_name: str) -> str:
    """kind config for the management cluster: one control-plane node, kind defaults otherwise."""
    config = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": cluster_name,
        "nodes": [{"role": "control-plane"}],
    }
    return to_yaml(config)


def cert_manager_values() -> dict[str, Any]:
    return {"crds": {"enabled": True}}


def metallb_values() -> dict[str, Any]:
    # L2 only: neither FRR nor FRR-K8s (the 0.16 default) is needed.
    return {"frrk8s": {"enabled": False}, "speaker": {"frr": {"enabled": False}}}


def ip_address_pool(addresses: list[str]) -> dict[str, Any]:
    return {"addresses": list(addresses), "autoAssign": True, "avoidBuggyIPs": True}


def metallb_ip_address_pool(namespace: str, name: str, addresses: list[str]) -> dict[str, Any]:
    return {"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": name, "namespace": namespace}, "spec": ip_address_pool(addresses)}


def metallb_l2_advertisement(namespace: str, pool_name: str) -> dict[str, Any]:
    return {"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
            "metadata": {"name": pool_name, "namespace": namespace}, "spec": {"ipAddressPools": [pool_name]}}


def metallb_manifest(objects: list[dict[str, Any]]) -> str:
    """Several objects as one multi-document YAML stream (`kubectl apply -f -`)."""
    return yaml.dump_all(objects, Dumper=_YAML_DUMPER, sort_keys=False)


def kamaji_values(image_tag: str, etcd_volume_mib: int = 2048) -> dict[str, Any]:
    """Kamaji sized for one host; the DataStore is declared by the program to gate on readiness."""
    from gpu_tenancy import datastore  # datastore builds on this module
    return {
        "image": {"tag": image_tag, "pullPolicy": "IfNotPresent"},
        "defaultDatastoreName": DATASTORE_NAME,
        "telemetry": {"disabled": True},
        "resources": {
            "requests": {"cpu": "50m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        # One replica; etcd's quota below its volume (gpu_tenancy/datastore.py).
        "kamaji-etcd": {
            "deploy": True,
            "fullnameOverride": "kamaji-etcd",
            **datastore.etcd_values(etcd_volume_mib),
            "datastore": {"enabled": False},
        },
    }


def etcd_datastore_spec() -> dict[str, Any]:
    """DataStore for the kamaji-etcd subchart (one replica, cert-manager issued certificates)."""
    from gpu_tenancy import datastore  # datastore builds on this module

    return datastore.shared_spec()


def wait_for(*conditions: str, timeout_seconds: int = 900) -> dict[str, str]:
    """pulumi-kubernetes await annotations (`pulumi.com/waitFor`, since v4.18)."""
    return {
        "pulumi.com/waitFor": json.dumps(list(conditions)),
        "pulumi.com/timeoutSeconds": str(timeout_seconds),
    }


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
            "service": {"serviceType": service_type},
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


# Who registers a tenant's GPUs with HAMi: the mock-GPU agent (sim), HAMi's device plugin on NVIDIA's
# mock NVML (sim-nvml), or HAMi's device plugin on the real driver (real).
DeviceLayer = Literal["mock-agent", "nvml-mock", "nvidia"]


def hami_values(
    kubernetes_version: str,
    image_tag: str,
    device_layer: DeviceLayer = "mock-agent",
    device_plugin: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """HAMi inside a Kamaji tenant, for the tenant's device layer; `device_plugin` adds to the chart's
    devicePlugin values what the plugin needs to reach its devices (nvml_mock.hami_device_plugin_values)."""
    plugin_values: dict[str, Any] = {"enabled": device_layer != "mock-agent", "service": {"type": "ClusterIP"}}
    if device_layer == "nvidia":
        # The NVIDIA runtime is not containerd's default on a prepared host (gpu_tenancy/hostprep.py): the chart
        # creates RuntimeClass `nvidia`, runs the device plugin and its vGPU monitor under it, and the webhook
        # puts GPU pods under it (gpu_tenancy/gpu_access.py). kind nodes have no such handler: sim modes skip it.
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
            # No device plugin releases node locks in sim; the mock-GPU agent does, within seconds. A
            # 30 s lock timeout bounds the stall if the agent is down, yet stays long enough for the
            # e2e check (ten pods Running in 60 s) to notice. The chart's nodeLockExpire is ignored
            # (HAMi #2790); the flag is what counts. Where HAMi's device plugin runs it keeps HAMi's
            # default (5m).
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
        # Metrics: the scheduler Service always has port `monitor` (31993 -> :9395), the vGPU monitor's
        # Service port `monitorport` (31992 -> :9394). The chart's own ServiceMonitors stay off: they set
        # no honorLabels (templates/scheduler/servicemonitor.yaml, device-plugin/servicemonitor.yaml), so
        # the operator's target labels would overwrite the metrics' namespace/pod/container (renamed
        # exported_*) and HAMi's dashboard would show the monitor pod instead of the workload; they also
        # appear only if the operator's CRD existed when HAMi was installed. hami_service_monitors makes
        # them right when the stack asks (gpu-tenancy:metrics.serviceMonitors).
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


# Node containers share the host kernel: these kubeadm preflight checks cannot pass there.
KIND_NODE_PREFLIGHT_IGNORES = ("SystemVerification", "FileExisting", "Swap")


def join_configuration(
    endpoint: str,
    token: str,
    ca_cert_hash: str,
    node_name: str,
    node_labels: dict[str, str],
    ignore_preflight_errors: tuple[str, ...] = KIND_NODE_PREFLIGHT_IGNORES,
) -> str:
    """kubeadm JoinConfiguration (v1beta4, served by kubeadm 1.31+) for a worker of a tenant."""
    label_arg = ",".join(f"{k}={v}" for k, v in sorted(node_labels.items()))
    config = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": endpoint,
                "token": token,
                "caCertHashes": [ca_cert_hash],
            }
        },
        "nodeRegistration": {
            "name": node_name,
            "criSocket": "unix:///run/containerd/containerd.sock",
            "kubeletExtraArgs": [{"name": "node-labels", "value": label_arg}],
            "ignorePreflightErrors": list(ignore_preflight_errors),
        },
    }
    return to_yaml(config)


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _host_path(name: str, path: str, kind: str | None = None) -> dict[str, Any]:
    host_path: dict[str, Any] = {"path": path}
    if kind:
        host_path["type"] = kind
    return {"name": name, "hostPath": host_path}
