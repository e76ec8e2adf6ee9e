"""Mode real: each GPU host fenced off from the other tenants' control planes and GPU hosts, by a host firewall
(gpu_tenancy/builders/host_worker/fence.py).

A platform component, as HostIdentities is: it reads every tenant's endpoint, which no tenant's own resources
may (policy tenant-provider-isolation).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command

from components import options
from gpu_tenancy.builders.host_worker import fence
from gpu_tenancy.contract.tenant_config import WorkerHostConfig


def _rules(tenant: str, other_hosts: list[str], node_ports: bool, endpoints: dict[str, Any]) -> str:
    return fence.fence_rules(endpoints[tenant], [e for t, e in endpoints.items() if t != tenant], other_hosts,
                             node_ports=node_ports)


@dataclass
class HostFencesArgs:
    """Every GPU host's firewall. What the fences wait for (the tenants, their hosts' preparation among it) comes in
    `opts.depends_on`.

    Attributes:
        hosts (list[tuple[str, WorkerHostConfig]]): (tenant, worker) for every GPU host of the stack.
        endpoints (dict[str, pulumi.Input[str]]): tenant -> its control plane's `address:port`.
        ssh_private_key (pulumi.Output[str]): the stack's SSH key for the hosts (secret).
        node_ports (bool): controlPlane.serviceType NodePort: every control plane's ports are open on every
            management node.
    """

    hosts: list[tuple[str, WorkerHostConfig]]
    endpoints: dict[str, pulumi.Input[str]]
    ssh_private_key: pulumi.Output[str]
    node_ports: bool


class HostFences(pulumi.ComponentResource):
    def __init__(self, name: str, args: HostFencesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:host_fence:HostFences", name, None, opts)
        endpoints = pulumi.Output.all(**args.endpoints)
        # After what `opts` names (the tenants, their hosts' preparation among it): the script may install nftables,
        # and two apt-get runs on one host would fight over dpkg's lock.
        after = options.dependencies(opts)
        fenced = []
        for tenant, host in args.hosts:
            assert host.host_key is not None  # load_config requires it in mode real
            others = [h.address for t, h in args.hosts if t != tenant]
            command.remote.Command(
                f"{name}-{tenant}-{host.name}",
                connection=command.remote.ConnectionArgs(
                    host=host.address, port=host.port, user=host.user, private_key=args.ssh_private_key,
                    host_key=host.host_key,
                ),
                create=fence.fence_command(),
                delete=fence.unfence_command(),
                # New rules run the create again (pulumi-command v1.2.1 remote Update runs create when no update
                # is set), and the script replaces the table in one transaction.
                stdin=endpoints.apply(functools.partial(_rules, tenant, others, args.node_ports)),
                # A replacement's old delete removes the table: it must run before the new create installs it.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True, depends_on=after),
            )
            fenced.append(f"{tenant}/{host.name}")
        self.register_outputs({"hosts": fenced})
