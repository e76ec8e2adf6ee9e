"""gpu-tenancy: multi-tenant GPU sharing on one Docker host.

kind management cluster -> MetalLB (pool from the kind network's IPv4 subnet) -> cert-manager and
Kamaji -> per tenant: TenantControlPlane, CNI, worker container joined with kubeadm, HAMi, mock GPUs.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s

from components.kamaji import Kamaji, KamajiArgs
from components.kind_cluster import KindCluster, KindClusterArgs
from components.metallb import MetalLB, MetalLBArgs
from components.tenant import Tenant, TenantArgs
from gpu_tenancy.config import NAMESPACE, ConfigError, StackConfig, load_config


def decode_config_value(value: str | None) -> object:
    """Structured stack config arrives JSON-encoded; plain strings stay strings."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def read_config() -> StackConfig:
    prefix = f"{NAMESPACE}:"
    raw = {}
    # Every key set for this project, so a misspelt key is an error instead of silently ignored.
    keys = set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.get_config_env())
    for key in sorted(keys):
        if key.startswith(prefix):
            short = key[len(prefix):]
            raw[short] = decode_config_value(pulumi.Config(NAMESPACE).get(short))
    try:
        return load_config(raw)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None


config = read_config()
cluster_name = config.cluster_name(pulumi.get_stack())

cluster = KindCluster(
    "management", KindClusterArgs(cluster_name=cluster_name, node_image=config.versions.kind_node_image)
)
management = k8s.Provider(
    "management",
    kubeconfig=cluster.kubeconfig,
    cluster_identifier="management",
    opts=pulumi.ResourceOptions(depends_on=[cluster]),
)
metallb = MetalLB(
    "metallb",
    MetalLBArgs(
        provider=management,
        network=config.kind.network,
        addresses_needed=len(config.tenants) + config.metallb.headroom,
        chart_version=config.versions.metallb,
        depends_on=[cluster],
    ),
)
kamaji = Kamaji(
    "kamaji",
    KamajiArgs(
        provider=management,
        cert_manager_version=config.versions.cert_manager,
        chart_version=config.versions.kamaji_chart,
        image_tag=config.versions.kamaji_image_tag,
        depends_on=[cluster],
    ),
)
tenants = {
    tenant.name: Tenant(
        tenant.name,
        TenantArgs(
            config=tenant,
            stack=config,
            cluster_name=cluster_name,
            management_provider=management,
            depends_on=[kamaji.datastore, metallb.pool, metallb.advertisement],
        ),
    )
    for tenant in config.tenants
}

pulumi.export("mode", config.mode)
pulumi.export("kindClusterName", cluster.cluster_name)
pulumi.export("managementKubeconfig", cluster.kubeconfig)
pulumi.export("metallbRange", metallb.address_range)
pulumi.export(
    "tenants", {name: {"endpoint": t.endpoint, "kubeconfig": t.kubeconfig} for name, t in tenants.items()}
)
pulumi.export("workers", {name: t.worker_container for name, t in tenants.items()})
