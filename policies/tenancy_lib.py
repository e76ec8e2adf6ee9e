"""Whose a resource is: its tenant by the URN parent chain, labels and join environment (and where
they disagree), its gpu-tenancy component label, and the cluster its Kubernetes provider reaches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from resource_lib import (
    COMMAND_TYPE,
    CONTAINER_TYPE,
    K8S_PROVIDER_TYPE,
    TCP_COMPONENT_TYPE,
    TENANT_TYPE,
    Provider,
    Res,
    urn_types,
)
from value_lib import as_dict, as_list, dig, is_unknown, known_str

TENANT_LABEL = "gpu-tenancy.io/tenant"
COMPONENT_LABEL = "gpu-tenancy.io/component"
# The management provider's clusterIdentifier in both modes (gpu_tenancy/builders/kind_cluster/kind.py).
MANAGEMENT = "management"


# --------------------------------------------------------------------------- tenants


def labels(res: Res) -> dict[str, Any]:
    """Kubernetes metadata labels, or Docker container labels ([{label, value}]) as a dict."""
    if res.type == CONTAINER_TYPE:
        out: dict[str, Any] = {}
        for item in as_list(res.props.get("labels")):
            label, value = dig(item, "label"), dig(item, "value")
            if isinstance(label, str):
                out[label] = value
        return out
    return as_dict(dig(res.props, "metadata", "labels"))


def label_tenant(res: Res) -> str | None:
    return known_str(labels(res).get(TENANT_LABEL))


def component_label(res: Res) -> str | None:
    return known_str(labels(res).get(COMPONENT_LABEL))


def tenant_component_name(res: Res) -> str:
    return known_str(res.props.get("tenant")) or res.name


def ancestor_tenant(res: Res) -> str | None:
    """The tenant whose Tenant component this resource sits under (URN parent chain)."""
    if res.type == TENANT_TYPE:
        return tenant_component_name(res)
    for ancestor in res.ancestors():
        if ancestor.type == TENANT_TYPE:
            return tenant_component_name(ancestor)
    return None


def env_tenant(res: Res) -> str | None:
    if res.type != COMMAND_TYPE:
        return None
    return known_str(dig(res.props, "environment", "GPU_TENANCY_TENANT"))


def owner(res: Res) -> tuple[str | None, list[str]]:
    """(tenant the resource belongs to, disagreements between the signals that say so)."""
    signals = {
        "URN parent chain": ancestor_tenant(res),
        f"label {TENANT_LABEL}": label_tenant(res),
        "environment GPU_TENANCY_TENANT": env_tenant(res),
    }
    found = {source: tenant for source, tenant in signals.items() if tenant}
    tenants = sorted(set(found.values()))
    conflicts = []
    if len(tenants) > 1:
        conflicts.append(", ".join(f"{source} says {tenant!r}" for source, tenant in found.items()))
    return (signals["URN parent chain"] or (tenants[0] if tenants else None)), conflicts


# --------------------------------------------------------------------------- clusters


@dataclass(frozen=True)
class Cluster:
    """Which cluster a Kubernetes provider talks to: ("management", None), ("tenant", name) or
    ("unknown", why): a provider the pack cannot attribute, which fails closed."""

    kind: str
    name: str | None

    def describe(self) -> str:
        """How a finding names a tenant's or an unknown cluster (a management one is named in none)."""
        if self.kind == "tenant":
            return f"tenant {self.name!r}'s provider"
        return f"{self.name}"

    @property
    def known(self) -> bool:
        return self.kind in ("tenant", MANAGEMENT)


def _structural_cluster(provider: Provider) -> Cluster | None:
    """The cluster of a provider this program makes, from its place in the stack (URN) and name alone.

    Used only while its clusterIdentifier is unknown (a preview before the control plane exists): the
    management provider is the stack's top-level `management`, a tenant's is `<tenant>-kubernetes` made by
    that tenant's TenantControlPlane component. URNs are unique in a stack, so no other provider can
    take either place.
    """
    types = urn_types(provider.urn)
    if types == [K8S_PROVIDER_TYPE] and provider.name == MANAGEMENT:
        return Cluster(MANAGEMENT, None)
    if types == [TENANT_TYPE, TCP_COMPONENT_TYPE, K8S_PROVIDER_TYPE] and provider.name.endswith("-kubernetes"):
        return Cluster("tenant", provider.name.removesuffix("-kubernetes"))
    return None


def provider_cluster(provider: Provider | None) -> Cluster:
    """The cluster a provider reaches, by its `clusterIdentifier` (`management` or `tenant/<name>`).

    Fails closed: the default provider, a provider without a clusterIdentifier or with one of another
    form, or a tenant identifier on a provider that is not that tenant's own, are "unknown"; a resource
    going through one cannot be attributed to a tenant or to the platform.
    """
    if provider is None:
        return Cluster("unknown", "the default provider (no provider= given)")
    identifier = provider.props.get("clusterIdentifier")
    if is_unknown(identifier):
        unattributed = f"provider {provider.name!r} (clusterIdentifier not known yet, not a provider of the program)"
        return _structural_cluster(provider) or Cluster("unknown", unattributed)
    if not isinstance(identifier, str) or not identifier:
        return Cluster("unknown", f"provider {provider.name!r}, which has no clusterIdentifier")
    if identifier == MANAGEMENT:
        if urn_types(provider.urn) != [K8S_PROVIDER_TYPE]:
            return Cluster("unknown", f"provider {provider.name!r}, which is not the stack's management provider")
        return Cluster(MANAGEMENT, None)
    if identifier.startswith("tenant/"):
        tenant = identifier.removeprefix("tenant/")
        expected = Cluster("tenant", tenant)
        if _structural_cluster(provider) != expected:
            return Cluster(
                "unknown",
                f"provider {provider.name!r}, which claims {identifier!r} but is not {tenant!r}'s TenantControlPlane "
                "provider",
            )
        return expected
    return Cluster("unknown", f"provider {provider.name!r} (clusterIdentifier {identifier!r})")


def resource_tenant(res: Res) -> str | None:
    """A resource policy's view of the tenant: label first, then the tenant provider it goes through."""
    tenant = label_tenant(res)
    if tenant:
        return tenant
    if res.is_kubernetes:
        cluster = provider_cluster(res.provider)
        if cluster.kind == "tenant":
            return cluster.name
    return None
