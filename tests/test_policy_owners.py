"""Whose a resource is, as the policy pack decides it (policies/tenancy_lib.py `owner`): the Tenant above it in
the URN parent chain first, else its tenant label (Kubernetes metadata or Docker container labels) or a join
command's GPU_TENANCY_TENANT, and every disagreement between them named."""

from __future__ import annotations

import policy_support  # noqa: F401  (puts policies/ on the import path, as the engine runs the pack from there)
import pytest
from policy_support import dev_stack, find, resource_args
from resource_lib import Provider, Res, from_resource_args, nearest_component, urn_types
from tenancy_lib import Cluster, component_label, labels, owner, provider_cluster
from value_lib import plain

TENANT = "gpu-tenancy:tenant:Tenant"
LABEL = "gpu-tenancy.io/tenant"


def _under(tenant: str | None, typ: str, props: dict[str, object]) -> Res:
    component = Res("gpu-tenancy:worker:Worker", "w", "urn:w", {},
                    parent=Res(TENANT, tenant, f"urn:{tenant}", {}) if tenant else None)
    return Res(typ, "r", "urn:r", props, parent=component)


def test_the_parent_chain_decides_and_a_contradicting_label_is_named() -> None:
    res = _under("tenant-a", "kubernetes:core/v1:ConfigMap", {"metadata": {"labels": {LABEL: "tenant-b"}}})
    assert owner(res) == ("tenant-a", ["URN parent chain says 'tenant-a', label gpu-tenancy.io/tenant says 'tenant-b'"])
    assert owner(_under("tenant-a", "kubernetes:core/v1:ConfigMap", {"metadata": {"labels": {LABEL: "tenant-a"}}})) == (
        "tenant-a", [])


def test_without_a_tenant_above_it_a_label_or_the_join_environment_decides() -> None:
    container = _under(None, "docker:index/container:Container", {"labels": [
        {"label": LABEL, "value": "tenant-b"}, {"label": "gpu-tenancy.io/component", "value": "worker"}, {"value": "x"}]})
    assert labels(container) == {LABEL: "tenant-b", "gpu-tenancy.io/component": "worker"}
    assert component_label(container) == "worker"
    assert owner(container) == ("tenant-b", [])
    join = _under(None, "command:local:Command", {"environment": {"GPU_TENANCY_TENANT": "tenant-a"}})
    assert owner(join) == ("tenant-a", [])
    # A command with a label too: both named, and the first in name order owns it.
    both = _under(None, "command:local:Command", {"environment": {"GPU_TENANCY_TENANT": "tenant-b"},
                                                  "metadata": {"labels": {LABEL: "tenant-a"}}})
    assert owner(both) == ("tenant-a", [
        "label gpu-tenancy.io/tenant says 'tenant-a', environment GPU_TENANCY_TENANT says 'tenant-b'"])
    # The join environment counts only on a local Command.
    assert owner(_under(None, "kubernetes:core/v1:Pod", {"environment": {"GPU_TENANCY_TENANT": "tenant-a"}})) == (None, [])


MGMT_URN = "urn:pulumi:dev::gpu-tenancy::pulumi:providers:kubernetes::management"
TENANT_URN = ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_control_plane:TenantControlPlane"
              "$pulumi:providers:kubernetes::tenant-a-kubernetes")
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi's rpc.UNKNOWN, as value_lib.plain receives it


def _provider(urn: str, identifier: object) -> Provider:
    return Provider(urn.rsplit("::", 1)[-1], urn, plain({"clusterIdentifier": identifier}))


@pytest.mark.parametrize(("urn", "identifier", "cluster"), [
    (MGMT_URN, "management", Cluster("management", None)),
    (TENANT_URN, "tenant/tenant-a", Cluster("tenant", "tenant-a")),
    # Not known yet (a first preview): the program's own providers are known by where they sit.
    (MGMT_URN, UNKNOWN, Cluster("management", None)),
    (TENANT_URN, UNKNOWN, Cluster("tenant", "tenant-a")),
    ("urn:pulumi:dev::gpu-tenancy::pulumi:providers:kubernetes::other", UNKNOWN, Cluster(
        "unknown", "provider 'other' (clusterIdentifier not known yet, not a provider of the program)")),
    (TENANT_URN.replace("tenant-a-kubernetes", "tenant-a-extra"), UNKNOWN, Cluster(
        "unknown", "provider 'tenant-a-extra' (clusterIdentifier not known yet, not a provider of the program)")),
    # Fails closed on everything else.
    (MGMT_URN, "", Cluster("unknown", "provider 'management', which has no clusterIdentifier")),
    (TENANT_URN, "management", Cluster(
        "unknown", "provider 'tenant-a-kubernetes', which is not the stack's management provider")),
    (MGMT_URN, "tenant/tenant-a", Cluster(
        "unknown", "provider 'management', which claims 'tenant/tenant-a' but is not 'tenant-a''s TenantControlPlane "
        "provider")),
    (TENANT_URN, "tenant/tenant-b", Cluster(
        "unknown", "provider 'tenant-a-kubernetes', which claims 'tenant/tenant-b' but is not 'tenant-b''s "
        "TenantControlPlane provider")),
    (MGMT_URN, "kind-gpu-tenancy", Cluster("unknown", "provider 'management' (clusterIdentifier 'kind-gpu-tenancy')")),
])
def test_the_cluster_a_provider_reaches_is_read_from_its_identifier_and_place(
    urn: str, identifier: object, cluster: Cluster
) -> None:
    assert provider_cluster(_provider(urn, identifier)) == cluster


def test_the_default_provider_reaches_no_known_cluster() -> None:
    assert provider_cluster(None) == Cluster("unknown", "the default provider (no provider= given)")
    assert provider_cluster(None).describe() == "the default provider (no provider= given)"
    assert Cluster("tenant", "tenant-a").describe() == "tenant 'tenant-a''s provider"


@pytest.mark.parametrize(("urn", "types", "component"), [
    (TENANT_URN, ["gpu-tenancy:tenant:Tenant", "gpu-tenancy:tenant_control_plane:TenantControlPlane",
                  "pulumi:providers:kubernetes"], "gpu-tenancy:tenant_control_plane:TenantControlPlane"),
    # A name may hold "::" (the engine allows it); the type is the third part all the same.
    ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:worker:Worker$command:local:Command::a::b",
     ["gpu-tenancy:worker:Worker", "command:local:Command"], "gpu-tenancy:worker:Worker"),
    # Only gpu-tenancy's own components count, and never the resource itself.
    ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:hami:Hami$other:index:Component$kubernetes:core/v1:Pod::p",
     ["gpu-tenancy:hami:Hami", "other:index:Component", "kubernetes:core/v1:Pod"], "gpu-tenancy:hami:Hami"),
    ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant::tenant-a", ["gpu-tenancy:tenant:Tenant"], None),
    ("urn:pulumi:dev::gpu-tenancy::kubernetes:core/v1:Pod::p", ["kubernetes:core/v1:Pod"], None),
    ("not-a-urn", [], None),
    ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:hami:Hami$kubernetes:core/v1:Pod", [], None),  # no name: not a URN
])
def test_a_resources_ancestry_is_read_from_its_urn(urn: str, types: list[str], component: str | None) -> None:
    assert urn_types(urn) == types
    assert nearest_component(urn) == component


def test_a_resource_policy_sees_the_provider_its_resource_goes_through() -> None:
    stack = dev_stack()
    proxy = find(stack, "kubernetes:apps/v1:DaemonSet", "tenant-b-network-kube-proxy")
    res = from_resource_args(resource_args(stack, proxy))
    assert res.provider is not None
    assert (res.provider.name, res.provider.urn, res.provider.props["clusterIdentifier"]) == (
        "tenant-b-kubernetes",
        "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_control_plane:TenantControlPlane"
        "$pulumi:providers:kubernetes::tenant-b-kubernetes",
        "tenant/tenant-b",
    )
