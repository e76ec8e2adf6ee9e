"""A tenant's own etcd on the management cluster (tenants[].dataStore: dedicated), in its namespace.

Nothing it stores or fills is shared with another tenant: its quota, its volume, its process. See
gpu_tenancy/builders/tenant_datastore/datastore.py for the sizing and docs/threat-model.md (Datastore) for what each
choice isolates.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import options
from components.charts import cached_chart
from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.tenant_datastore import datastore
from gpu_tenancy.contract import versions


@dataclass
class TenantDataStoreArgs:
    """A tenant's own etcd. Its provider (the management cluster's) and what it waits for (the tenant's namespace)
    come in `opts`.

    Attributes:
        tenant (str): the tenant: the namespace the etcd runs in and the DataStore's name.
        volume_mib (int): the size of its one etcd member's volume, in MiB.
    """

    tenant: str
    volume_mib: int


class TenantDataStore(pulumi.ComponentResource):
    datastore: k8s.apiextensions.CustomResource
    name: str

    def __init__(self, name: str, args: TenantDataStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:tenant_datastore:TenantDataStore", name, {"tenant": args.tenant}, opts)
        self.name = datastore.dedicated_name(args.tenant)
        options.require_provider(self)
        after = options.dependencies(opts)
        on_management = pulumi.ResourceOptions(parent=self)
        release = k8s.helm.v3.Release(
            f"{name}-chart",
            name=self.name,
            chart=cached_chart("kamaji-etcd", versions.KAMAJI_ETCD_CHART_VERSION),
            version=versions.KAMAJI_ETCD_CHART_VERSION,
            namespace=args.tenant,
            values=datastore.dedicated_values(args.tenant, args.volume_mib),
            timeout=900,
            opts=pulumi.ResourceOptions.merge(on_management, pulumi.ResourceOptions(depends_on=after)),
        )
        self.datastore = k8s.apiextensions.CustomResource(
            f"{name}-datastore",
            api_version="kamaji.clastix.io/v1alpha1",
            kind="DataStore",
            metadata={
                "name": self.name,
                "labels": kube_objects.labels(args.tenant, "datastore"),
                "annotations": kube_objects.wait_for("jsonpath={.status.ready}=true", timeout_seconds=600),
            },
            spec=datastore.datastore_spec(self.name, args.tenant),
            opts=pulumi.ResourceOptions.merge(on_management, pulumi.ResourceOptions(depends_on=[release])),
        )
        self.register_outputs({"dataStore": self.name})
