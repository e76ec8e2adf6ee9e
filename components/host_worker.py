"""A real GPU host (mode real): prepared over SSH and joined to its tenant with kubeadm."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from gpu_tenancy import hostprep, manifests
from gpu_tenancy.config import WorkerHostConfig


@dataclass
class HostWorkerArgs:
    tenant: str
    host: WorkerHostConfig
    ssh_private_key: pulumi.Output[str]
    kubernetes_version: str
    endpoint: pulumi.Input[str]
    ca_cert_hash: pulumi.Input[str]
    bootstrap_token: pulumi.Output[str]
    depends_on: list[pulumi.Resource]


class HostWorker(pulumi.ComponentResource):
    node_name: pulumi.Output[str]
    join: command.remote.Command

    def __init__(self, name: str, args: HostWorkerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "gpu-tenancy:host_worker:HostWorker",
            name,
            # What joins where, for the policy pack (the join configuration itself is secret).
            {
                "tenant": args.tenant,
                "address": args.host.address,
                "nodeName": args.host.name,
                "controlPlaneEndpoint": args.endpoint,
            },
            opts,
        )
        host = args.host
        connection = command.remote.ConnectionArgs(
            host=host.address, port=host.port, user=host.user, private_key=args.ssh_private_key
        )
        prepare = command.remote.Command(
            f"{name}-prepare",
            connection=connection,
            create=hostprep.prepare_command(),
            stdin=hostprep.prepare_script(args.kubernetes_version),
            # A new Kubernetes version or host re-prepares it (apt pins move with the version).
            triggers=[host.address, args.kubernetes_version],
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        join_configuration: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(args.endpoint, args.bootstrap_token, args.ca_cert_hash).apply(
                lambda v: manifests.join_configuration(
                    v[0], v[1], v[2], host.name, manifests.gpu_node_labels(args.tenant), ignore_preflight_errors=()
                )
            )
        )
        self.join = command.remote.Command(
            f"{name}-join",
            connection=connection,
            create=hostprep.join_command(),
            delete=hostprep.reset_command(),
            stdin=join_configuration,  # the token travels on stdin, never on a command line
            triggers=[prepare.id],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[prepare]),
        )
        self.node_name = self.join.id.apply(lambda _: host.name)
        self.register_outputs(
            {
                "tenant": args.tenant,
                "address": host.address,
                "nodeName": self.node_name,
                "controlPlaneEndpoint": args.endpoint,
            }
        )
