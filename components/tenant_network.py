"""Pod networking inside a tenant: kind's kindnetd and a kube-proxy configured as kind does."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components import options
from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.tenant_network import network_daemonsets
from gpu_tenancy.contract import versions


@dataclass
class TenantNetworkArgs:
    """kindnet and kube-proxy in a tenant. Its provider (the tenant's) comes in `opts`.

    Attributes:
        tenant (str): the tenant, for labels.
        pod_cidr (str): the tenant's pod network, which kindnet routes and kube-proxy is told of.
        endpoint (pulumi.Input[str]): the tenant's API server, `address:port`, which both reach without a Service.
        kindnetd_image (str): kindnetd's image.
        kubernetes_version (str): the tenant's Kubernetes version, kube-proxy's image tag.
        nodes (list[pulumi.Resource]): the tenant's nodes (their joins): the DaemonSets come after them and, on
            destroy, go before them. Default: [].
    """

    tenant: str
    pod_cidr: str
    endpoint: pulumi.Input[str]
    kindnetd_image: str
    kubernetes_version: str
    nodes: list[pulumi.Resource] = field(default_factory=list)


class TenantNetwork(pulumi.ComponentResource):
    def __init__(self, name: str, args: TenantNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:tenant_network:TenantNetwork", name, None, opts)
        tenant = args.tenant
        options.require_provider(self)
        in_tenant = pulumi.ResourceOptions(parent=self)

        def meta(component: str, resource_name: str, namespaced: bool = True) -> dict[str, object]:
            metadata: dict[str, object] = {"name": resource_name, "labels": kube_objects.labels(tenant, component)}
            if namespaced:
                metadata["namespace"] = "kube-system"
            return metadata

        def daemon_set_meta(component: str) -> dict[str, object]:
            return {**meta(component, component), "annotations": dict(kube_objects.BACKGROUND_DELETION)}

        kindnet_sa = k8s.core.v1.ServiceAccount(f"{name}-kindnet", metadata=meta("kindnet", "kindnet"), opts=in_tenant)
        kindnet_role = k8s.rbac.v1.ClusterRole(
            f"{name}-kindnet",
            metadata=meta("kindnet", "kindnet", namespaced=False),
            rules=network_daemonsets.kindnet_cluster_role_rules(),
            opts=in_tenant,
        )
        kindnet_binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-kindnet",
            metadata=meta("kindnet", "kindnet", namespaced=False),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kindnet"},
            subjects=[{"kind": "ServiceAccount", "name": "kindnet", "namespace": "kube-system"}],
            opts=in_tenant,
        )
        self.kindnet = k8s.apps.v1.DaemonSet(
            f"{name}-kindnet",
            metadata=daemon_set_meta("kindnet"),
            spec=pulumi.Output.from_input(args.endpoint).apply(
                lambda endpoint: network_daemonsets.kindnet_daemonset_spec(
                    tenant, args.kindnetd_image, args.pod_cidr, endpoint
                )
            ),
            opts=pulumi.ResourceOptions.merge(
                in_tenant,
                pulumi.ResourceOptions(depends_on=[kindnet_sa, kindnet_role, kindnet_binding, *args.nodes]),
            ),
        )
        proxy_sa = k8s.core.v1.ServiceAccount(
            f"{name}-kube-proxy", metadata=meta("kube-proxy", "kube-proxy"), opts=in_tenant
        )
        proxy_binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-kube-proxy",
            metadata=meta("kube-proxy", "gpu-tenancy:node-proxier", namespaced=False),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-proxier"},
            subjects=[{"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}],
            opts=in_tenant,
        )
        proxy_config = k8s.core.v1.ConfigMap(
            f"{name}-kube-proxy",
            metadata=meta("kube-proxy", "kube-proxy"),
            data=pulumi.Output.from_input(args.endpoint).apply(
                lambda endpoint: {
                    "config.conf": network_daemonsets.kube_proxy_config(args.pod_cidr),
                    "kubeconfig.conf": network_daemonsets.kube_proxy_kubeconfig(endpoint),
                }
            ),
            opts=in_tenant,
        )
        self.kube_proxy = k8s.apps.v1.DaemonSet(
            f"{name}-kube-proxy",
            metadata=daemon_set_meta("kube-proxy"),
            spec=network_daemonsets.kube_proxy_daemonset_spec(
                tenant, f"{versions.KUBE_PROXY_REPOSITORY}:{args.kubernetes_version}"
            ),
            opts=pulumi.ResourceOptions.merge(
                in_tenant, pulumi.ResourceOptions(depends_on=[proxy_sa, proxy_binding, proxy_config, *args.nodes])
            ),
        )
        self.register_outputs({"kindnet": self.kindnet.metadata.name, "kubeProxy": self.kube_proxy.metadata.name})
