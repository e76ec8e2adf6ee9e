"""The checks across keys, run once the models have parsed the stack: settings that belong to the other mode
or that the chosen mode needs, the mock NVML's limits in sim-nvml, and one machine listed as two workers.

Each returns (key, problem) pairs, the key without the namespace; `load_config` reports the first.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping
from typing import Any

from gpu_tenancy.contract import limits
from gpu_tenancy.contract.stack_config import StackConfig

Resolver = Callable[[str], set[str]]


def resolve_host(address: str) -> set[str]:
    """Every IP address a worker address stands for (itself for an IP); empty when it does not resolve."""
    try:
        return {str(ipaddress.ip_address(address))}
    except ValueError:
        pass
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(address, None)}
    except OSError:
        return set()


def _literal_address(address: str) -> set[str]:
    """An IP in its one spelling; a host name as written (the config admits only lower-case names)."""
    try:
        return {str(ipaddress.ip_address(address))}
    except ValueError:
        return {address}


def _duplicate_hosts(config: StackConfig, resolve: Resolver | None) -> list[tuple[str, str]]:
    """A machine listed twice (same address, or a name resolving to another worker's address) in any tenant:
    both joins would "succeed" and destroying one would `kubeadm reset` the other's host."""
    errors: list[tuple[str, str]] = []
    seen: dict[str, tuple[str, str, str]] = {}  # address -> (tenant, worker, as written)
    for tenant_index, tenant in enumerate(config.tenants):
        for worker_index, host in enumerate(tenant.workers):
            addresses = _literal_address(host.address) | (resolve(host.address) if resolve else set())
            clash = next((seen[a] for a in sorted(addresses) if a in seen), None)
            if clash:
                first_tenant, first_worker, written = clash
                same = "" if written == host.address else f" ({written} and {host.address} resolve to the same address)"
                errors.append(
                    (
                        f"tenants[{tenant_index}].workers[{worker_index}].address",
                        f"host {host.address} is already a worker of tenant {first_tenant} ({first_worker}){same}; "
                        "a machine joins one tenant once",
                    )
                )
            for address in addresses:
                seen.setdefault(address, (tenant.name, host.name, host.address))
    return errors


def mode_errors(
    config: StackConfig, raw: Mapping[str, Any], resolve: Resolver | None = None
) -> list[tuple[str, str]]:
    """Settings that belong to the other mode, or that the chosen mode needs: (key, problem)."""
    errors: list[tuple[str, str]] = []
    if config.simulated:
        for key in ("managementKubeconfig", "sshPrivateKey", "inventoryMismatch"):
            if key in raw:
                errors.append(
                    (key, f"is only for mode 'real' ({config.mode} builds its own kind cluster and workers)")
                )
        errors += _device_layer_errors(config)
        for index, tenant in enumerate(config.tenants):
            if tenant.workers:
                errors.append(
                    (f"tenants[{index}].workers", "worker hosts are only for mode 'real' (sim starts kind nodes)")
                )
            if tenant.control_plane_address:
                errors.append(
                    (f"tenants[{index}].controlPlaneAddress", "is only for mode 'real' (sim takes MetalLB's address)")
                )
            if tenant.node_port is not None:
                errors.append(
                    (f"tenants[{index}].nodePort", "is only for mode 'real' with controlPlane.serviceType NodePort")
                )
        if config.metallb.enabled is False:
            errors.append(("metallb.enabled", "sim needs MetalLB for the control planes' LoadBalancer services"))
        if config.metallb.addresses:
            errors.append(("metallb.addresses", "sim derives the pool from the kind network; remove it"))
        if len(config.tenants) > config.metallb.pool_size:
            errors.append(
                (
                    "metallb.poolSize",
                    f"{config.metallb.pool_size} addresses for {len(config.tenants)} tenants' control planes; "
                    "raise it (existing addresses stay)",
                )
            )
        if "controlPlane" in raw:
            errors.append(("controlPlane", "is only for mode 'real' (sim exposes control planes through MetalLB)"))
        return errors
    if "kind" in raw:
        errors.append(
            ("kind", "is only for modes 'sim' and 'sim-nvml' (real uses the cluster in managementKubeconfig)")
        )
    if config.management_kubeconfig is None:
        errors.append(("managementKubeconfig", "is required in mode 'real' (pulumi config set --secret ...)"))
    if config.ssh_private_key is None:
        errors.append(("sshPrivateKey", "is required in mode 'real' to prepare and join the worker hosts"))
    for index, tenant in enumerate(config.tenants):
        if not tenant.workers:
            errors.append((f"tenants[{index}].workers", "mode 'real' needs at least one worker host per tenant"))
        if config.control_plane.service_type == "NodePort" and not tenant.control_plane_address:
            errors.append(
                (f"tenants[{index}].controlPlaneAddress", "is required with controlPlane.serviceType NodePort")
            )
        if config.control_plane.service_type != "NodePort" and tenant.node_port is not None:
            errors.append((f"tenants[{index}].nodePort", "is only used with controlPlane.serviceType NodePort"))
    if config.metallb.enabled and not config.metallb.addresses:
        errors.append(("metallb.addresses", "is required when MetalLB is enabled in mode 'real'"))
    if config.metallb.addresses and not config.metallb.enabled:
        errors.append(("metallb.addresses", "is set but metallb.enabled is not true"))
    for index, tenant in enumerate(config.tenants):
        for worker_index, host in enumerate(tenant.workers):
            if host.host_key is None:
                errors.append(
                    (
                        f"tenants[{index}].workers[{worker_index}].hostKey",
                        f"worker {host.name} has no SSH host key, so anyone between here and {host.address} would "
                        f"receive its join token; set it from `ssh-keyscan -t ed25519 -p {host.port} {host.address}` "
                        "after checking the fingerprint on the host (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub)",
                    )
                )
    errors += _device_layer_errors(config)
    errors += _duplicate_hosts(config, resolve)
    return errors


def _device_layer_errors(config: StackConfig) -> list[tuple[str, str]]:
    """What the stack's device layer needs: the MutatingAdmissionPolicy API for CUDA control, and no more cards
    on one node than it can hold."""
    layer = config.device_layer
    errors: list[tuple[str, str]] = []
    if layer.cuda_control:
        try:
            limits.mutating_admission_policy_api(config.versions.kubernetes)
        except ValueError as error:
            errors.append(("versions.kubernetes", str(error)))
    if layer.max_cards_per_node is None:
        return errors
    most, why = layer.max_cards_per_node
    for index, tenant in enumerate(config.tenants):
        if layer.placement == "kind-worker":
            total = sum(gpu.count for gpu in tenant.gpus)
            if total > most:
                errors.append((f"tenants[{index}].gpus", f"{total} GPUs on tenant {tenant.name}'s one worker; {why}"))
            continue
        for host_index, host in enumerate(tenant.workers):
            total = sum(gpu.count for gpu in host.gpus)
            if total > most:
                where = f"tenants[{index}].workers[{host_index}].gpus"
                errors.append((where, f"{total} GPUs on host {host.name}; {why}"))
    return errors
