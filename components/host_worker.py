"""A real GPU host (mode real): prepared over SSH and joined to its tenant with kubeadm."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from components import options
from components.bootstrap_token import BootstrapToken
from gpu_tenancy.builders.host_worker import hostprep
from gpu_tenancy.contract.tenant_config import WorkerHostConfig


@dataclass
class HostWorkerArgs:
    """One real GPU host joined to its tenant. What its preparation waits for (the control plane, its token's mint,
    the hosts' identity check) comes in `opts.depends_on`.

    Attributes:
        tenant (str): the tenant the host joins.
        host (WorkerHostConfig): the host as the stack declares it (tenants[].workers[]).
        ssh_private_key (pulumi.Output[str]): the stack's SSH key for the hosts (secret).
        kubernetes_version (str): the tenant's Kubernetes version; the host's packages are pinned to it.
        endpoint (pulumi.Input[str]): the tenant's API server, `address:port`.
        ca_cert_hash (pulumi.Input[str]): the tenant CA's `sha256:<hex>`, which the join pins.
        kubeconfig (pulumi.Input[str]): the tenant's admin kubeconfig (secret), to remove the host's Node.
        bootstrap (BootstrapToken): the host's join token.
    """

    tenant: str
    host: WorkerHostConfig
    ssh_private_key: pulumi.Output[str]
    kubernetes_version: str
    endpoint: pulumi.Input[str]
    ca_cert_hash: pulumi.Input[str]
    kubeconfig: pulumi.Input[str]
    bootstrap: BootstrapToken


class HostWorker(pulumi.ComponentResource):
    node_name: pulumi.Output[str]
    join: command.remote.Command

    def __init__(self, name: str, args: HostWorkerArgs, opts: pulumi.ResourceOptions | None = None):
        # What joins where, for the policy pack (the join configuration itself is secret).
        where = {"tenant": args.tenant, "address": args.host.address, "controlPlaneEndpoint": args.endpoint}
        super().__init__(
            "gpu-tenancy:host_worker:HostWorker",
            name,
            {**where, "nodeName": args.host.name},
            opts,
        )
        host = args.host
        # The pinned host key: pulumi-command otherwise accepts any (v1.2.1 remote/connection.go SSHConfig).
        assert host.host_key is not None  # load_config requires it in mode real
        connection = command.remote.ConnectionArgs(
            host=host.address, port=host.port, user=host.user, private_key=args.ssh_private_key, host_key=host.host_key
        )
        prepare = command.remote.Command(
            f"{name}-prepare",
            connection=connection,
            create=hostprep.prepare_command(),
            stdin=hostprep.prepare_script(args.kubernetes_version),
            # A new Kubernetes version or host re-prepares it (apt pins move with the version).
            triggers=[host.address, args.kubernetes_version],
            # Nothing to delete, but deleting first takes the host out of its tenant (what depends on this
            # is deleted first with it) before its packages change.
            opts=pulumi.ResourceOptions(parent=self, depends_on=options.dependencies(opts), delete_before_replace=True),
        )
        # Created before the join and so deleted after it: once the host is reset, its Node goes. A delete runs
        # with the stored kubeconfig, which a moved endpoint or a new CA leaves unable to reach the tenant (the
        # delete then skips); the replacement's create removes the old Node with the current one before the
        # join. An update (rotated credentials) only stores the new kubeconfig: it must not remove a live Node.
        node = command.local.Command(
            f"{name}-node",
            create=hostprep.remove_stale_node_script(),
            update=hostprep.KEEP_NODE_COMMAND,
            delete=hostprep.remove_node_script(),
            stdin=pulumi.Output.secret(args.kubeconfig),  # credentials on stdin, never on a command line
            environment={"GPU_TENANCY_NODE": host.name},
            # Re-prepared, a new control plane (its CA) or a moved API endpoint: the host joins again.
            triggers=[prepare.id, args.ca_cert_hash, args.endpoint],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[prepare], delete_before_replace=True),
        )
        # A real host passes every kubeadm preflight check.
        join_configuration = args.bootstrap.join_configuration(
            args.endpoint, args.ca_cert_hash, host.name, ignore_preflight_errors=()
        )
        self.join = command.remote.Command(
            f"{name}-join",
            connection=connection,
            create=hostprep.join_command(),
            delete=hostprep.reset_command(),
            stdin=join_configuration,  # the token travels on stdin, never on a command line
            triggers=[node.id],
            # A replacement is create-before-delete by default: the new create finds the host joined and
            # keeps it, then the old delete resets it. Reset first, then join again.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[node], delete_before_replace=True),
        )
        self.node_name = self.join.id.apply(lambda _: host.name)
        self.register_outputs({**where, "nodeName": self.node_name})
