"""Every real GPU host's machine id, read before any host is prepared, and a gate that refuses one machine
listed twice: two tenants would both join it, and destroying one would `kubeadm reset` the other's.

Config already refuses the same address, or a name resolving to another worker's
(gpu_tenancy/contract/config_checks.py); this catches what only the machine can tell (another name, a NAT
address, a second interface).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from gpu_tenancy.builders.host_worker import hostprep
from gpu_tenancy.contract.tenant_config import WorkerHostConfig


@dataclass
class HostIdentitiesArgs:
    """The machine-id read of every GPU host, before any is prepared.

    Attributes:
        hosts (list[tuple[str, WorkerHostConfig]]): (tenant, worker) for every GPU host of the stack.
        ssh_private_key (pulumi.Output[str]): the stack's SSH key for the hosts (secret).
    """

    hosts: list[tuple[str, WorkerHostConfig]]
    ssh_private_key: pulumi.Output[str]


class HostIdentities(pulumi.ComponentResource):
    gate: command.local.Command

    def __init__(self, name: str, args: HostIdentitiesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:host_identity:HostIdentities", name, None, opts)
        reads: dict[str, pulumi.Output[str]] = {}
        for tenant, host in args.hosts:
            assert host.host_key is not None  # load_config requires it in mode real
            read = command.remote.Command(
                f"{name}-{tenant}-{host.name}",
                connection=command.remote.ConnectionArgs(
                    host=host.address, port=host.port, user=host.user, private_key=args.ssh_private_key,
                    host_key=host.host_key,
                ),
                create=hostprep.MACHINE_ID_COMMAND,
                # Read once per address: a host that moves is read again.
                triggers=[host.address],
                opts=pulumi.ResourceOptions(parent=self),
            )
            reads[f"{tenant}/{host.name}"] = read.stdout
        ids = pulumi.Output.all(**reads) if reads else pulumi.Output.from_input({})
        self.gate = command.local.Command(
            f"{name}-unique",
            # A new verdict changes `create`, which pulumi-command runs again on update (v1.2.1
            # provider/pkg/provider/local/commandController.go Update runs create when no update is set).
            create=ids.apply(lambda found: hostprep.machine_check_command(dict(found))),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"hosts": sorted(reads)})
