"""A tenant's control plane in the management cluster, its admin kubeconfig and its own provider."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import options
from components.tenant_datastore import TenantDataStore, TenantDataStoreArgs
from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.kamaji import kamaji_chart
from gpu_tenancy.builders.tenant_control_plane import control_plane_spec, kubeadm

TCP_API_VERSION = "kamaji.clastix.io/v1alpha1"


@dataclass
class TenantControlPlaneArgs:
    """A tenant's Kamaji control plane. Its provider (the management cluster's) and what it waits for (MetalLB's
    pool, Kamaji) come in `opts`; the tenant's own provider is its `provider` attribute.

    Attributes:
        tenant (str): the tenant: the control plane's name and namespace.
        kubernetes_version (str): the control plane's Kubernetes version.
        pod_cidr (str): the tenant's pod network.
        service_cidr (str): the tenant's service network.
        node_runtime (str): "kind": kindest/node containers; "host": prepared real hosts. Default: "kind".
        service_type (str): the API server's Service type (controlPlane.serviceType). Default: "LoadBalancer".
        address (str | None): the API server's fixed address (tenants[].controlPlaneAddress). Default: None.
        port (int): the API server's port. Default: control_plane_spec.TCP_PORT.
        konnectivity_port (int): the konnectivity server's port. Default: control_plane_spec.KONNECTIVITY_PORT.
        api_server_args (list[str]): flags the device layer needs on the tenant's API server (sim-nvml:
            gpu_tenancy.builders.mock_nvml.cuda_control). Default: [].
        data_store (str): "shared": the platform's etcd; "dedicated": an etcd of this tenant's own
            (TenantDataStore). Default: "shared".
        etcd_volume_mib (int): the size of a dedicated etcd's volume, in MiB. Default: 2048.
    """

    tenant: str
    kubernetes_version: str
    pod_cidr: str
    service_cidr: str
    node_runtime: str = "kind"
    service_type: str = "LoadBalancer"
    address: str | None = None
    port: int = control_plane_spec.TCP_PORT
    konnectivity_port: int = control_plane_spec.KONNECTIVITY_PORT
    api_server_args: list[str] = field(default_factory=list)
    data_store: str = "shared"
    etcd_volume_mib: int = 2048


class KamajiTenantControlPlane(pulumi.CustomResource):
    """A kamaji.clastix.io/v1alpha1 TenantControlPlane whose `status` is an output.

    pulumi_kubernetes' `apiextensions.CustomResource` resolves only the properties it was given (apiVersion,
    kind, metadata, spec); declaring `status` lets the program read what Kamaji's controller writes there.
    """

    metadata: pulumi.Output[dict[str, Any]]
    status: pulumi.Output[dict[str, Any]]

    def __init__(
        self, name: str, metadata: pulumi.Input[dict[str, Any]], spec: dict[str, Any], opts: pulumi.ResourceOptions
    ) -> None:
        props = {"apiVersion": TCP_API_VERSION, "kind": "TenantControlPlane", "metadata": metadata, "spec": spec}
        super().__init__(f"kubernetes:{TCP_API_VERSION}:TenantControlPlane", name, {**props, "status": None}, opts)


def admin_kubeconfig_secret_id(tcp: KamajiTenantControlPlane) -> pulumi.Output[str]:
    """`<namespace>/<name>` of the Secret Kamaji names in `status.kubeconfig.admin.secretName`."""
    return pulumi.Output.all(tcp.metadata, tcp.status).apply(lambda v: secret_id(v[0], v[1]))


def secret_id(metadata: dict[str, Any], status: dict[str, Any] | None) -> str:
    """The admin kubeconfig Secret's id from a TCP's metadata and the status Kamaji wrote.

    Kamaji names the Secret `<tcp>-admin-kubeconfig` in the TCP's namespace and records it once written
    (clastix/kamaji internal/resources/kubeconfig.go `KubeconfigResource.UpdateTenantControlPlaneStatus`).
    """
    name = ((status or {}).get("kubeconfig") or {}).get("admin", {}).get("secretName")
    if not name:
        raise pulumi.RunError(
            f"TenantControlPlane {metadata['namespace']}/{metadata['name']} exists but Kamaji has not written "
            "status.kubeconfig.admin.secretName (check the kamaji controller logs: "
            "kubectl -n kamaji-system logs deploy/kamaji)"
        )
    return f"{metadata['namespace']}/{name}"


class TenantControlPlane(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(
        self, name: str, args: TenantControlPlaneArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("gpu-tenancy:tenant_control_plane:TenantControlPlane", name, None, opts)
        tenant = args.tenant
        # The management cluster's provider, from opts: the children inherit it (its own `self.provider` below
        # is the tenant's, for the caller to pass on).
        options.require_provider(self)
        after = options.dependencies(opts)
        on_management = pulumi.ResourceOptions(parent=self)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": tenant, "labels": kube_objects.labels(tenant, "control-plane")},
            opts=pulumi.ResourceOptions.merge(on_management, pulumi.ResourceOptions(depends_on=after)),
        )
        data_store, tcp_after = kamaji_chart.DATASTORE_NAME, [namespace]
        if args.data_store == "dedicated":
            own = TenantDataStore(
                f"{name}-datastore",
                TenantDataStoreArgs(tenant=tenant, volume_mib=args.etcd_volume_mib),
                pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            )
            data_store, tcp_after = own.name, [namespace, own.datastore]
        self.tcp = KamajiTenantControlPlane(
            f"{name}-tcp",
            metadata={
                "name": tenant,
                "namespace": namespace.metadata.name,
                "labels": kube_objects.labels(tenant, "control-plane"),
                "annotations": kube_objects.wait_for(*control_plane_spec.tcp_wait_conditions()),
            },
            spec=control_plane_spec.tenant_control_plane_spec(
                args.kubernetes_version,
                args.pod_cidr,
                args.service_cidr,
                node_runtime=args.node_runtime,
                service_type=args.service_type,
                address=args.address,
                port=args.port,
                konnectivity_port=args.konnectivity_port,
                api_server_args=args.api_server_args,
                data_store=data_store,
            ),
            opts=pulumi.ResourceOptions.merge(on_management, pulumi.ResourceOptions(depends_on=tcp_after)),
        )
        # The read's id comes from what Kamaji wrote into the TCP's status, so it stays unknown while the
        # TCP is only planned: the engine then skips the read instead of failing it with "resource ...
        # does not exist" (a read with a known id runs during previews; pulumi/pulumi#16395).
        secret = k8s.core.v1.Secret.get(
            f"{name}-admin-kubeconfig",
            admin_kubeconfig_secret_id(self.tcp),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.tcp]),
        )
        # Also carries the TCP (a read's outputs carry only the read, and the engine never counts a read as
        # replaced): when the TCP is deleted first, whatever this feeds is then seen as changing
        # (pulumi/pulumi pkg/resource/deploy/step_generator.go calculateDependentReplacements).
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.tcp.id, secret.data).apply(lambda v: base64.b64decode(v[1]["admin.conf"]).decode())
        )
        # The address is not a secret, only the credentials next to it are.
        self.endpoint = pulumi.Output.unsecret(self.kubeconfig.apply(kubeadm.server_endpoint))
        self.ca_cert_hash = pulumi.Output.unsecret(self.kubeconfig.apply(kubeadm.ca_cert_hash))
        self.provider = k8s.Provider(
            f"{tenant}-kubernetes",
            kubeconfig=self.kubeconfig,
            # Replaced with its control plane (the same text, but unknown while the TCP is being replaced),
            # not when only the kubeconfig rotates (pulumi-kubernetes provider.go DiffConfig).
            cluster_identifier=self.tcp.id.apply(lambda _: f"tenant/{tenant}"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs(
            {"endpoint": self.endpoint, "kubeconfig": self.kubeconfig, "caCertHash": self.ca_cert_hash}
        )
