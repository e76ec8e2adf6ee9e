"""cert-manager, then Kamaji and its etcd DataStore, ready before any TenantControlPlane."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import options
from components.charts import cached_chart
from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.kamaji import kamaji_chart
from gpu_tenancy.builders.tenant_datastore import datastore
from gpu_tenancy.contract import chart_pins, versions


@dataclass
class KamajiArgs:
    """cert-manager, Kamaji and its DataStore on the management cluster. Its provider (the management cluster's) and
    what it waits for (the kind cluster) come in `opts`.

    Attributes:
        cert_manager_version (str): the cert-manager chart's version.
        chart_version (str): the Kamaji chart's version.
        image_tag (str): Kamaji's image tag.
        etcd_volume_mib (int): the size of the shared etcd's volume, in MiB. Default: 2048.
        dedicated_datastores (bool): some tenant has an etcd of its own: its CA comes from a self-signed
            ClusterIssuer made here (gpu_tenancy/builders/tenant_datastore). Default: False.
    """

    cert_manager_version: str
    chart_version: str
    image_tag: str
    etcd_volume_mib: int = 2048
    dedicated_datastores: bool = False


class Kamaji(pulumi.ComponentResource):
    datastore: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: KamajiArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:kamaji:Kamaji", name, None, opts)
        if chart_pins.moving_build_label(args.chart_version):
            pulumi.log.warn(
                chart_pins.unpinned_warning(
                    "kamaji", args.chart_version, args.image_tag, versions.KAMAJI_CHART_CHECKED_COMMIT
                ),
                resource=self,
            )
        options.require_provider(self)
        after = options.dependencies(opts)
        on_cluster = pulumi.ResourceOptions(parent=self)
        cert_manager = k8s.helm.v3.Release(
            f"{name}-cert-manager",
            name="cert-manager",
            chart=cached_chart("cert-manager", args.cert_manager_version),
            version=args.cert_manager_version,
            namespace="cert-manager",
            create_namespace=True,
            values=kamaji_chart.cert_manager_values(),
            opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=after)),
        )
        kamaji = k8s.helm.v3.Release(
            f"{name}-chart",
            name="kamaji",  # release and namespace are fixed by Kamaji's CRD webhook annotations
            chart=cached_chart("kamaji", args.chart_version),
            version=args.chart_version,
            namespace=kamaji_chart.KAMAJI_NAMESPACE,
            create_namespace=True,
            values=kamaji_chart.kamaji_values(args.image_tag, args.etcd_volume_mib),
            opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[cert_manager])),
        )
        self.datastore = k8s.apiextensions.CustomResource(
            f"{name}-datastore",
            api_version="kamaji.clastix.io/v1alpha1",
            kind="DataStore",
            metadata={
                "name": kamaji_chart.DATASTORE_NAME,
                "annotations": kube_objects.wait_for("jsonpath={.status.ready}=true", timeout_seconds=600),
            },
            spec=kamaji_chart.etcd_datastore_spec(),
            opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[kamaji])),
        )
        self.issuers: list[pulumi.Resource] = []
        if args.dedicated_datastores:
            self.issuers.append(
                k8s.apiextensions.CustomResource(
                    f"{name}-selfsigned-issuer",
                    api_version="cert-manager.io/v1",
                    kind="ClusterIssuer",
                    metadata={"name": datastore.SELF_SIGNED_ISSUER},
                    spec={"selfSigned": {}},
                    opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[cert_manager])),
                )
            )
        self.register_outputs({"dataStore": kamaji_chart.DATASTORE_NAME})
