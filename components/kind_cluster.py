"""The kind management cluster."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import pulumi
import pulumi_command as command

from gpu_tenancy import manifests


@dataclass
class KindClusterArgs:
    cluster_name: str
    node_image: str


class KindCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    cluster_name: pulumi.Output[str]

    def __init__(self, name: str, args: KindClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:kind_cluster:KindCluster", name, None, opts)
        cluster = shlex.quote(args.cluster_name)
        create = command.local.Command(
            f"{name}-create",
            # Re-running against an existing cluster of the same name adopts it instead of failing.
            create=(
                f"kind get clusters 2>/dev/null | grep -qx {cluster} || "
                f"kind create cluster --name {cluster} --image {shlex.quote(args.node_image)} "
                "--config - --wait 180s"
            ),
            delete=f"kind delete cluster --name {cluster}",
            stdin=manifests.kind_cluster_config(args.cluster_name),
            triggers=[args.cluster_name, args.node_image],
            opts=pulumi.ResourceOptions(parent=self),
        )
        read_kubeconfig = command.local.Command(
            f"{name}-kubeconfig",
            create=f"kind get kubeconfig --name {cluster}",
            logging=command.local.Logging.NONE,
            triggers=[create.id],
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[create], additional_secret_outputs=["stdout"]
            ),
        )
        self.kubeconfig = pulumi.Output.secret(read_kubeconfig.stdout)
        self.cluster_name = create.id.apply(lambda _: args.cluster_name)
        self.ready = read_kubeconfig
        self.register_outputs({"kubeconfig": self.kubeconfig, "clusterName": self.cluster_name})
