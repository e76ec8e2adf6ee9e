"""tenant-provider-isolation (policies/provider_policies.py) on the providers themselves and on what lands on the
management cluster: each finding whole, with the resource the preview shows it on."""

from __future__ import annotations

from policy_support import (
    Recorded,
    add_resource,
    find,
    owned,
    provider_ref,
    run_stack_policy,
    set_both,
    stack_root,
)
from pulumi.runtime.rpc import UNKNOWN as ENGINE_UNKNOWN

import resource_lib  # isort: skip
import tenant_policies as tp  # isort: skip

PROVIDER = resource_lib.K8S_PROVIDER_TYPE
URN = "urn:pulumi:dev::gpu-tenancy::"
TENANT_PROVIDER = URN + "gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_control_plane:TenantControlPlane$" + PROVIDER


def test_every_provider_of_no_known_cluster_is_named(stack: list[Recorded]) -> None:
    root = stack_root(stack)
    add_resource(stack, root, PROVIDER, "prod", {"clusterIdentifier": "prod"})
    add_resource(stack, root, PROVIDER, "staging", {})
    only = (
        " reaches a cluster the pack cannot attribute to a tenant or to the platform; only the stack's `management` "
        "provider (clusterIdentifier 'management') and each tenant's own TenantControlPlane provider "
        "(clusterIdentifier 'tenant/<name>') may exist."
    )
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [
        ("provider 'prod' (clusterIdentifier 'prod')" + only, URN + PROVIDER + "::prod"),
        ("provider 'staging', which has no clusterIdentifier" + only, URN + PROVIDER + "::staging"),
    ]


def test_a_tenants_provider_for_another_cluster_is_flagged(stack: list[Recorded]) -> None:
    """Under tenant-b's control plane, a provider named and identified for a tenant the stack does not have."""
    control_plane = find(stack, resource_lib.TCP_COMPONENT_TYPE, "tenant-b-control-plane")
    add_resource(stack, control_plane, PROVIDER, "tenant-z-kubernetes", {"clusterIdentifier": "tenant/tenant-z"})
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [(
        "provider 'tenant-z-kubernetes' belongs to tenant 'tenant-b' but reaches tenant 'tenant-z''s cluster; set "
        "cluster_identifier='tenant/tenant-b' so it only ever targets that tenant's cluster.",
        TENANT_PROVIDER + "::tenant-z-kubernetes",
    )]


def test_two_providers_claiming_one_cluster_are_flagged_once_their_identifiers_are_known(stack: list[Recorded]) -> None:
    for tenant in ("tenant-a", "tenant-b"):  # not known yet: each is taken by its place in the stack
        set_both(find(stack, PROVIDER, f"{tenant}-kubernetes"), ["clusterIdentifier"], ENGINE_UNKNOWN)
    add_resource(stack, stack_root(stack), PROVIDER, "management-2", {"clusterIdentifier": "management"})
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [(
        "providers 'management' and 'management-2' both claim clusterIdentifier 'management'; one provider per "
        "cluster, or the pack cannot tell which of them really reaches it.",
        URN + PROVIDER + "::management-2",
    )]


def test_what_lands_on_the_management_cluster_names_who_made_it_and_what_that_may_make(
    stack: list[Recorded],
) -> None:
    management = provider_ref(stack, "management")
    kamaji = find(stack, resource_lib.KAMAJI_TYPE)
    add_resource(stack, stack_root(stack), "kubernetes:core/v1:ConfigMap", "stray", {"metadata": {"name": "s"}}, management)
    add_resource(stack, kamaji, resource_lib.HELM_RELEASE_TYPE, "no-chart", {"name": "x"}, management)
    add_resource(stack, kamaji, resource_lib.HELM_RELEASE_TYPE, "kamaji-2", {"chart": "kamaji"}, management)  # allowed
    deploy = ". Deploy it through a tenant's own provider instead."
    kamaji_kinds = (
        "helm:cert-manager, helm:kamaji, kubernetes:kamaji.clastix.io/v1alpha1:DataStore, "
        "kubernetes:cert-manager.io/v1:ClusterIssuer"
    )
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [
        ("kubernetes:core/v1:ConfigMap 'stray' lands on the management cluster, made by the stack itself; only the "
         "platform's own components create objects there, and only the kinds they need (the stack itself: none)"
         + deploy, URN + "kubernetes:core/v1:ConfigMap::stray"),
        ("kubernetes:helm.sh/v3:Release 'no-chart' lands on the management cluster, made by gpu-tenancy:kamaji:Kamaji;"
         " only the platform's own components create objects there, and only the kinds they need "
         f"(gpu-tenancy:kamaji:Kamaji: {kamaji_kinds})" + deploy,
         URN + "gpu-tenancy:kamaji:Kamaji$kubernetes:helm.sh/v3:Release::no-chart"),
    ]


def test_an_object_under_no_tenant_on_a_tenants_cluster_is_flagged(stack: list[Recorded]) -> None:
    add_resource(stack, stack_root(stack), "kubernetes:core/v1:ConfigMap", "stray", {"metadata": {"name": "s"}},
         provider_ref(stack, "tenant-a-kubernetes"))
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [(
        "kubernetes:core/v1:ConfigMap 'stray' is under no tenant but goes through tenant 'tenant-a''s provider; only "
        "tenant 'tenant-a''s own components (under its Tenant) create objects on its cluster.",
        URN + "kubernetes:core/v1:ConfigMap::stray",
    )]


def test_a_tenants_management_objects_stay_in_its_namespace_and_names(stack: list[Recorded]) -> None:
    """A dedicated etcd (TenantDataStore: the kamaji-etcd release and its DataStore) and the admin kubeconfig read."""
    management = provider_ref(stack, "management")
    tenant_a = find(stack, resource_lib.TENANT_TYPE, "tenant-a")
    store = add_resource(stack, tenant_a, resource_lib.TENANT_DATASTORE_TYPE, "tenant-a-datastore", {}, outputs={})
    release = add_resource(stack, store, resource_lib.HELM_RELEASE_TYPE, "tenant-a-etcd-chart",
                   {"chart": "kamaji-etcd", "name": ENGINE_UNKNOWN, "namespace": "tenant-b"}, management)
    data_store = add_resource(stack, store, resource_lib.DATASTORE_TYPE, "tenant-a-etcd",
                      {"metadata": {"name": "tenant-b-etcd"}}, management)
    admin = owned(stack, "kubernetes:core/v1:Secret", "tenant-a", "admin-kubeconfig")
    admin.state["metadata"]["namespace"] = "kube-system"
    of_a = "of tenant 'tenant-a'"
    credentials = "management namespace, where control-plane credentials live; use only the tenant's own namespace."
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [
        (f"kubernetes:core/v1:Secret 'tenant-a-control-plane-admin-kubeconfig' {of_a} reaches into 'kube-system' "
         + credentials, admin.urn),
        # Its name not known yet in a preview: where it goes is.
        (f"kubernetes:helm.sh/v3:Release 'tenant-a-etcd-chart' {of_a} reaches into tenant 'tenant-b''s "
         + credentials, release.urn),
        (f"kubernetes:kamaji.clastix.io/v1alpha1:DataStore 'tenant-a-etcd' {of_a} is DataStore 'tenant-b-etcd', not "
         "its own tenant-a-etcd.", data_store.urn),
    ]
    # Where it goes not known yet: checked once it is.
    set_both(release, ["namespace"], ENGINE_UNKNOWN)
    set_both(data_store, ["metadata", "name"], ENGINE_UNKNOWN)
    assert [urn for _, urn in run_stack_policy(tp.tenant_provider_isolation, stack)] == [admin.urn]


def test_a_component_resource_without_a_provider_is_checked_through_its_children(stack: list[Recorded]) -> None:
    """A ConfigGroup or a v4 Chart is a component: it may carry no provider; what it creates is checked."""
    tenant_a = find(stack, resource_lib.TENANT_TYPE, "tenant-a")
    group = add_resource(stack, tenant_a, "kubernetes:yaml/v2:ConfigGroup", "tenant-a-extras", {})
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == []
    add_resource(stack, group, "kubernetes:core/v1:ConfigMap", "tenant-a-extra", {"metadata": {"name": "x"}})
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [(
        "kubernetes:core/v1:ConfigMap 'tenant-a-extra' goes through the default provider (no provider= given), which "
        "the pack cannot attribute to a tenant or to the platform; pass provider=<the tenant's "
        "TenantControlPlane>.provider (or the management provider for platform components).",
        URN + "gpu-tenancy:tenant:Tenant$kubernetes:yaml/v2:ConfigGroup$kubernetes:core/v1:ConfigMap::tenant-a-extra",
    )]
