"""gpu-tenancy: multi-tenant GPU sharing as code.

management cluster (sim, sim-nvml: kind on this Docker host; real: an existing cluster) -> MetalLB (sim: pool
from the kind network's IPv4 subnet; real: optional, pool from config) -> cert-manager and Kamaji ->
per tenant: TenantControlPlane, the GPU-access policy, the mode's device layer (components/device_layers: GPU
node(s), CNI, HAMi and what registers the cards; sim: mock-GPU agent; sim-nvml: NVIDIA's mock NVML under HAMi's
device plugin; real: GPU hosts), workloads and quota.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s

from components.device_layers import wiring
from components.kamaji import Kamaji, KamajiArgs
from components.kind_cluster import KindCluster, KindClusterArgs
from components.metallb import MetalLB, MetalLBArgs
from components.tenant import Tenant, TenantArgs
from gpu_tenancy.contract.config import NAMESPACE, SECRET_KEYS, ConfigError, load_config
from gpu_tenancy.contract.config_checks import resolve_host
from gpu_tenancy.contract.stack_config import StackConfig
from gpu_tenancy.gc_settings import defer_full_collections

# The heap only grows until the engine has every resource: full collections would walk it again and again
# for nothing (gpu_tenancy/gc_settings.py). The language host's process ends with the program.
defer_full_collections()


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
    secret_keys = frozenset(key for key in SECRET_KEYS if pulumi.runtime.is_config_secret(prefix + key))
    try:
        return load_config(raw, secret_keys, resolve=resolve_host)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None


config = read_config()
cluster_name = config.cluster_name(pulumi.get_stack())

# The management cluster: kind on this Docker host (sim), or an existing cluster (real).
management_ready: list[pulumi.Resource] = []
if config.simulated:
    cluster = KindCluster(
        "management",
        KindClusterArgs(
            cluster_name=cluster_name, node_image=config.versions.kind_node_image, network=config.kind_network
        ),
    )
    management_kubeconfig = cluster.kubeconfig
    # Depends on the cluster: when the engine replaces the cluster it treats this as changing (dependent
    # replacement), so the provider and everything on it are replaced with it.
    management_identifier: pulumi.Input[str] = cluster.cluster_identifier
    management_ready.append(cluster)
    pulumi.export("kindClusterName", cluster.cluster_name)
else:
    assert config.management_kubeconfig is not None  # load_config requires it in mode real
    management_kubeconfig = pulumi.Output.secret(config.management_kubeconfig.get_secret_value())
    management_identifier = "management"
management = k8s.Provider(
    "management",
    kubeconfig=management_kubeconfig,
    cluster_identifier=management_identifier,
    opts=pulumi.ResourceOptions(depends_on=management_ready),
)

# Addresses for the control planes' LoadBalancer services.
tenants_ready: list[pulumi.Resource] = []
if config.metallb_enabled:
    metallb = MetalLB(
        "metallb",
        MetalLBArgs(
            kubeconfig=management_kubeconfig,
            chart_version=config.versions.metallb,
            network=config.kind_network if config.simulated else None,
            addresses_needed=config.metallb.pool_size,
            addresses=config.metallb.addresses,
        ),
        pulumi.ResourceOptions(provider=management, depends_on=management_ready),
    )
    tenants_ready += [metallb.pool, metallb.advertisement]
    pulumi.export("metallbRange", metallb.address_range)

kamaji = Kamaji(
    "kamaji",
    KamajiArgs(
        cert_manager_version=config.versions.cert_manager,
        chart_version=config.versions.kamaji_chart,
        image_tag=config.versions.kamaji_image_tag,
        etcd_volume_mib=config.datastore.volume_mib,
        dedicated_datastores=any(tenant.data_store == "dedicated" for tenant in config.tenants),
    ),
    pulumi.ResourceOptions(provider=management, depends_on=management_ready),
)
tenants_ready += [kamaji.datastore, *kamaji.issuers]

# What the device layer builds once for every tenant (sim-nvml: the mock NVML image; real: the hosts' identity gate).
device_layer = wiring(config.device_layer)
device_stack = device_layer.stack_parts(config)

# One tenant each: independent of one another, so the engine builds them in parallel.
tenants = {
    tenant.name: Tenant(
        tenant.name,
        TenantArgs(
            config=tenant,
            stack=config,
            cluster_name=cluster_name,
            device_stack=device_stack,
        ),
        # Its control plane goes on the management cluster, after MetalLB's pool and Kamaji.
        pulumi.ResourceOptions(provider=management, depends_on=tenants_ready),
    )
    for tenant in config.tenants
}
# What the device layer adds once every tenant is declared (real: each GPU host's firewall).
device_layer.after_tenants(config, tenants)

pulumi.export("mode", config.mode)
pulumi.export("managementKubeconfig", management_kubeconfig)
# Endpoints and node names are not secret; the kubeconfigs are, in an output of their own so that they
# do not make the whole map secret (`make kubeconfig TENANT=<name>` reads them).
pulumi.export("tenants", {name: {"endpoint": t.endpoint, "nodes": t.nodes} for name, t in tenants.items()})
pulumi.export("tenantKubeconfigs", {name: t.kubeconfig for name, t in tenants.items()})
# Non-admin kubeconfigs (tenants[].userAccess): the `workloads` namespace only, Pod Security restricted.
user_kubeconfigs = {name: t.user_kubeconfig for name, t in tenants.items() if t.user_kubeconfig is not None}
if user_kubeconfigs:
    pulumi.export("tenantUserKubeconfigs", user_kubeconfigs)
