"""The kind management cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from gpu_tenancy.builders.kind_cluster import kind, kind_config
from gpu_tenancy.contract import limits


@dataclass
class KindClusterArgs:
    """The management cluster, made by kind on this Docker host (sim, sim-nvml).

    Attributes:
        cluster_name (str): kind's cluster name.
        node_image (str): the kindest/node image of its node.
        network (str): kind's Docker network. Not kind's default: kind v0.32.0 reads it from
            KIND_EXPERIMENTAL_DOCKER_NETWORK when it provisions (pkg/cluster/internal/providers/docker/provider.go
            `Provision`). Default: "kind".
    """

    cluster_name: str
    node_image: str
    network: str = limits.DEFAULT_NETWORK


class KindCluster(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    cluster_identifier: pulumi.Output[str]

    def __init__(self, name: str, args: KindClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:kind_cluster:KindCluster", name, None, opts)
        # Only a non-default network adds inputs: stacks on kind's own network keep theirs unchanged.
        other_network = args.network != limits.DEFAULT_NETWORK
        create = command.local.Command(
            f"{name}-create",
            create=kind.create_command(args.cluster_name, args.node_image),
            delete=kind.delete_command(args.cluster_name),
            stdin=kind_config.kind_cluster_config(args.cluster_name),
            environment={"KIND_EXPERIMENTAL_DOCKER_NETWORK": args.network} if other_network else None,
            # A changed trigger replaces the command (pulumi-command `common/inputs.go`, replaceOnChanges),
            # by default create-before-delete: the new create would adopt the running cluster and the old
            # delete then remove it. Deleting first makes the replacement a real new cluster.
            triggers=[args.cluster_name, args.node_image, *([args.network] if other_network else [])],
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        read_kubeconfig = command.local.Command(
            f"{name}-kubeconfig",
            create=kind.kubeconfig_command(args.cluster_name),
            logging=command.local.Logging.NONE,
            triggers=[create.id],
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[create], additional_secret_outputs=["stdout"]
            ),
        )
        self.kubeconfig = pulumi.Output.secret(read_kubeconfig.stdout)
        self.cluster_name = create.id.apply(lambda _: args.cluster_name)
        # From `create`, so a replaced cluster makes the provider's identifier unknown and everything on it is
        # replaced first (pulumi/pulumi step_generator.go `calculateDependentReplacements`; docs/operations.md).
        self.cluster_identifier = create.id.apply(lambda _: kind.CLUSTER_IDENTIFIER)
        self.register_outputs({
            "kubeconfig": self.kubeconfig,
            "clusterName": self.cluster_name,
            "clusterIdentifier": self.cluster_identifier,
        })
