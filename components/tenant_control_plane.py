"""A tenant's control plane in the management cluster, its admin kubeconfig and its own provider."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from gpu_tenancy import kubeadm, manifests


@dataclass
class TenantControlPlaneArgs:
    tenant: str
    management_provider: k8s.Provider
    kubernetes_version: str
    pod_cidr: str
    service_cidr: str
    depends_on: list[pulumi.Resource]
    node_runtime: str = "kind"  # "kind": kindest/node containers; "host": prepared real hosts
    service_type: str = "LoadBalancer"
    address: str | None = None
    port: int = manifests.TCP_PORT
    konnectivity_port: int = manifests.KONNECTIVITY_PORT


class TenantControlPlane(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(
        self, name: str, args: TenantControlPlaneArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("gpu-tenancy:tenant_control_plane:TenantControlPlane", name, None, opts)
        tenant = args.tenant
        on_management = pulumi.ResourceOptions(parent=self, provider=args.management_provider)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": tenant, "labels": manifests.labels(tenant, "control-plane")},
            opts=pulumi.ResourceOptions.merge(on_management, pulumi.ResourceOptions(depends_on=args.depends_on)),
        )
        self.tcp = k8s.apiextensions.CustomResource(
            f"{name}-tcp",
            api_version="kamaji.clastix.io/v1alpha1",
            kind="TenantControlPlane",
            metadata={
                "name": tenant,
                "namespace": namespace.metadata.name,
                "labels": manifests.labels(tenant, "control-plane"),
                "annotations": manifests.wait_for(*manifests.tcp_wait_conditions()),
            },
            spec=manifests.tenant_control_plane_spec(
                args.kubernetes_version,
                args.pod_cidr,
                args.service_cidr,
                node_runtime=args.node_runtime,
                service_type=args.service_type,
                address=args.address,
                port=args.port,
                konnectivity_port=args.konnectivity_port,
            ),
            opts=pulumi.ResourceOptions.merge(on_management, pulumi.ResourceOptions(depends_on=[namespace])),
        )
        secret = k8s.core.v1.Secret.get(
            f"{name}-admin-kubeconfig",
            pulumi.Output.concat(tenant, "/", manifests.admin_kubeconfig_secret_name(tenant)),
            opts=pulumi.ResourceOptions(parent=self, provider=args.management_provider, depends_on=[self.tcp]),
        )
        self.kubeconfig = pulumi.Output.secret(
            secret.data.apply(lambda data: base64.b64decode(data["admin.conf"]).decode())
        )
        # The address is not a secret, only the credentials next to it are.
        self.endpoint = pulumi.Output.unsecret(self.kubeconfig.apply(kubeadm.server_endpoint))
        self.ca_cert_hash = pulumi.Output.unsecret(self.kubeconfig.apply(kubeadm.ca_cert_hash))
        self.provider = k8s.Provider(
            f"{tenant}-kubernetes",
            kubeconfig=self.kubeconfig,
            # Replacing the provider only when the tenant changes avoids cascades on kubeconfig rotation.
            cluster_identifier=f"tenant/{tenant}",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"endpoint": self.endpoint, "kubeconfig": self.kubeconfig})
