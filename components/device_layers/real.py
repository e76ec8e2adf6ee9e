"""real: the GPU hosts a tenant lists, joined over SSH; HAMi's device plugin on their driver; the inventory checked;
each host fenced off from the other tenants once every tenant is up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.bootstrap_token import BootstrapToken, BootstrapTokenArgs
from components.device_layers import DeviceLayerWiring, Devices, TenantSite
from components.host_fence import HostFences, HostFencesArgs
from components.host_identity import HostIdentities, HostIdentitiesArgs
from components.host_worker import HostWorker, HostWorkerArgs
from components.inventory_check import InventoryCheck, InventoryCheckArgs
from gpu_tenancy.contract.stack_config import StackConfig


def _ssh_key(stack: StackConfig) -> pulumi.Output[str]:
    assert stack.ssh_private_key is not None  # load_config requires it in mode real
    return pulumi.Output.secret(stack.ssh_private_key.get_secret_value())


def _hosts(stack: StackConfig) -> list[tuple[str, Any]]:
    return [(tenant.name, host) for tenant in stack.tenants for host in tenant.workers]


class Real(DeviceLayerWiring):
    def stack_parts(self, stack: StackConfig) -> list[pulumi.Resource]:
        """No host is prepared before every host's machine id shows it is listed once (what hosts wait for)."""
        identities = HostIdentities("hosts", HostIdentitiesArgs(hosts=_hosts(stack), ssh_private_key=_ssh_key(stack)))
        return [identities.gate]

    def deploy(self, site: TenantSite) -> Devices:
        hosts_ready = list(site.stack_parts or [])
        control_plane = site.control_plane
        kubernetes_version = site.stack.versions.kubernetes
        ssh_key = _ssh_key(site.stack)
        hosts = []
        for host in site.config.workers:
            # One token per host, minted again whenever the host's join is replaced: HostWorker replaces it
            # for a new address or Kubernetes version (prepare) or a new control plane (its CA).
            bootstrap = BootstrapToken(
                f"{site.name}-{host.name}-bootstrap-token",
                BootstrapTokenArgs(
                    tenant=site.config.name,
                    kubeconfig=control_plane.kubeconfig,
                    triggers=[host.address, kubernetes_version, control_plane.ca_cert_hash, control_plane.endpoint],
                ),
                site.child(),
            )
            hosts.append(
                HostWorker(
                    f"{site.name}-{host.name}",
                    HostWorkerArgs(
                        tenant=site.config.name,
                        host=host,
                        ssh_private_key=ssh_key,
                        kubernetes_version=kubernetes_version,
                        endpoint=control_plane.endpoint,
                        ca_cert_hash=control_plane.ca_cert_hash,
                        kubeconfig=control_plane.kubeconfig,
                        bootstrap=bootstrap,
                    ),
                    site.child(control_plane, bootstrap.mint, *hosts_ready),
                )
            )
        network = site.network(list(hosts))
        hami = site.hami([network, *hosts])
        check = InventoryCheck(
            f"{site.name}-inventory",
            InventoryCheckArgs(
                tenant=site.config.name,
                nodes=site.gpu_nodes,
                kubeconfig=control_plane.kubeconfig,
                on_mismatch=site.stack.inventory_mismatch,
                node_joins={host.name: worker.join.id for host, worker in zip(site.config.workers, hosts, strict=True)},
            ),
            site.on_tenant(hami),
        )
        return Devices(nodes=[host.name for host in site.config.workers], ready=[hami, check])

    def after_tenants(self, stack: StackConfig, tenants: Mapping[str, Any]) -> None:
        """Each GPU host fenced off from the other tenants' control planes and hosts (a host firewall)."""
        HostFences(
            "host-fences",
            HostFencesArgs(
                hosts=_hosts(stack),
                endpoints={name: tenant.endpoint for name, tenant in tenants.items()},
                ssh_private_key=_ssh_key(stack),
                node_ports=stack.control_plane.service_type == "NodePort",
            ),
            pulumi.ResourceOptions(depends_on=list(tenants.values())),
        )


WIRING = Real()
