"""The dev stack's resource graph under Pulumi mocks."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from policy_support import shared_recording
from pulumi.runtime import MockResourceArgs

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.contract.chart_lock import chart_name
from tests.harness import by_type, is_secret, record_mocks, record_stack

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
TENANTS = ("tenant-a", "tenant-b")


@pytest.fixture
@shared_recording
def resources() -> list[MockResourceArgs]:
    return record_stack()


def provider_urn(resources: list[MockResourceArgs], name: str) -> str:
    (provider,) = [r for r in resources if r.typ == "pulumi:providers:kubernetes" and r.name == name]
    return provider.name


def tenant_of(resource: MockResourceArgs) -> str | None:
    labels = (resource.inputs.get("metadata") or {}).get("labels") or {}
    return labels.get(kube_objects.TENANT_LABEL) if isinstance(labels, dict) else None


def component_of(resource: MockResourceArgs) -> str | None:
    labels = (resource.inputs.get("metadata") or {}).get("labels") or {}
    return labels.get(kube_objects.COMPONENT_LABEL) if isinstance(labels, dict) else None


def test_every_component_is_present_once_or_per_tenant(resources: list[MockResourceArgs]) -> None:
    counts = Counter(r.typ for r in resources)
    assert counts["gpu-tenancy:kind_cluster:KindCluster"] == 1
    assert counts["gpu-tenancy:metallb:MetalLB"] == 1
    assert counts["gpu-tenancy:kamaji:Kamaji"] == 1
    for component in ("tenant:Tenant", "tenant_control_plane:TenantControlPlane", "tenant_network:TenantNetwork",
                      "worker:Worker", "hami:Hami", "mock_gpu_agent:MockGpuAgent",
                      "workloads:Workloads"):  # the dev stack declares workloads for both tenants
        assert counts[f"gpu-tenancy:{component}"] == len(TENANTS), component
    assert counts[TCP] == len(TENANTS)
    assert counts["docker:index/container:Container"] == len(TENANTS)
    assert counts["kubernetes:kamaji.clastix.io/v1alpha1:DataStore"] == 1
    assert counts["pulumi:providers:kubernetes"] == 1 + len(TENANTS)


def test_releases_are_pinned_charts(resources: list[MockResourceArgs]) -> None:
    releases = {r.name: r.inputs for r in by_type(resources, "kubernetes:helm.sh/v3:Release")}
    assert {chart_name(v["chart"]) for v in releases.values()} == {"cert-manager", "kamaji", "metallb", "hami"}
    for name, inputs in releases.items():
        assert inputs["version"], name
        # the archive `make charts` pulled and verified (gpu_tenancy/contract/chart_lock.py), no repository
        assert inputs["chart"].startswith(".charts/sha256-") and "repositoryOpts" not in inputs, name
    kamaji = releases["kamaji-chart"]
    assert kamaji["namespace"] == "kamaji-system" and kamaji["name"] == "kamaji"
    assert kamaji["values"]["image"]["tag"] == "26.8.2-edge"


def test_each_tenant_resource_uses_its_own_provider(resources: list[MockResourceArgs]) -> None:
    management = [r for r in resources if r.typ == "pulumi:providers:kubernetes" and r.name == "management"]
    assert management and management[0].inputs["clusterIdentifier"] == "management"
    checked = 0
    for resource in resources:
        if not resource.typ.startswith("kubernetes:"):
            continue
        tenant = tenant_of(resource)
        provider = resource.provider
        assert provider, f"{resource.name} uses the default provider"
        # Only the control plane, its namespace and Kamaji's admin Secret (read) live in management.
        control_plane_namespace = resource.typ == "kubernetes:core/v1:Namespace" and component_of(resource) == "control-plane"
        if resource.typ == TCP or control_plane_namespace or resource.resource_id:
            assert "::management::" in provider, resource.name
        elif tenant is not None or resource.name.startswith(TENANTS):
            owner = tenant or next(t for t in TENANTS if resource.name.startswith(t))
            assert f"::{owner}-kubernetes::" in provider, f"{resource.name} -> {provider}"
            others = [t for t in TENANTS if t != owner]
            assert not any(f"::{o}-kubernetes::" in provider for o in others)
            checked += 1
    assert checked >= 20


def test_tenant_control_plane_wiring(resources: list[MockResourceArgs]) -> None:
    for tcp in by_type(resources, TCP):
        spec = tcp.inputs["spec"]
        tenant = tcp.inputs["metadata"]["name"]
        assert tcp.inputs["metadata"]["namespace"] == tenant
        assert spec["controlPlane"]["service"]["serviceType"] == "LoadBalancer"
        assert spec["kubernetes"]["version"] == "v1.35.5"
        agent = spec["addons"]["konnectivity"]["agent"]
        assert agent["hostNetwork"] is True and {"operator": "Exists"} in agent["tolerations"]
        patches = spec["kubernetes"]["kubelet"]["configurationJSONPatches"]
        assert {"op": "add", "path": "/cgroupDriver", "value": "systemd"} in patches
        assert "kubeProxy" not in spec["addons"]
        assert "Ready" in tcp.inputs["metadata"]["annotations"]["pulumi.com/waitFor"]
    cidrs = [tuple(t.inputs["spec"]["networkProfile"]["podCidrs"]) for t in by_type(resources, TCP)]
    assert len(set(cidrs)) == len(TENANTS)


def test_workers_use_kind_flags_and_join_their_own_tenant(resources: list[MockResourceArgs]) -> None:
    for container in by_type(resources, "docker:index/container:Container"):
        inputs = container.inputs
        assert inputs["privileged"] is True
        assert inputs["networksAdvanced"] == [{"name": "kind"}]
        # kind's two options, and the `label=disable` Docker stores for a privileged container anyway.
        assert set(inputs["securityOpts"]) == {"seccomp=unconfined", "apparmor=unconfined", "label=disable"}
        assert inputs["cgroupnsMode"] == "private" and inputs["init"] is False
        assert set(inputs["tmpfs"]) == {"/tmp", "/run"}
    joins = [r for r in by_type(resources, "command:local:Command") if r.name.endswith("-worker-join")]
    assert len(joins) == len(TENANTS)
    for join in joins:
        env = join.inputs["environment"]
        assert env["GPU_TENANCY_TENANT"] == env["CONTROL_PLANE_TENANT"]
        assert join.name.startswith(env["GPU_TENANCY_TENANT"])
        assert is_secret(join.inputs["stdin"]), "the join's stdin (the tenant's admin kubeconfig) must be secret"
        # The bootstrap token is minted by the script at run time: no token ([a-z0-9]{6}.[a-z0-9]{16}) in inputs.
        assert not re.search(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b", json.dumps(join.inputs))


def test_hami_values_for_simulated_gpus(resources: list[MockResourceArgs]) -> None:
    hami = [r for r in by_type(resources, "kubernetes:helm.sh/v3:Release") if chart_name(r.inputs["chart"]) == "hami"]
    assert len(hami) == len(TENANTS)
    for release in hami:
        values = release.inputs["values"]
        assert values["devicePlugin"]["enabled"] is False
        assert values["scheduler"]["kubeScheduler"]["image"] == {
            "registry": "registry.k8s.io", "repository": "kube-scheduler", "tag": "v1.35.5"}
        assert values["scheduler"]["service"]["type"] == "ClusterIP"


def test_secrets_stay_secret() -> None:
    mocks = record_mocks()
    # sim: no bootstrap token in the program or its state at all (the join script mints one per attempt).
    assert [r.name for r in mocks.resources if r.typ == "kubernetes:core/v1:Secret" and not r.resource_id] == []
    assert not [r.name for r in mocks.resources if r.typ == "random:index/randomString:RandomString"]
    for provider in by_type(mocks.resources, "pulumi:providers:kubernetes"):
        assert is_secret(provider.inputs["kubeconfig"]), provider.name


def test_fresh_stack_preview_registers_everything() -> None:
    known = record_stack()
    preview = record_stack(unknowns=True)
    assert Counter(r.typ for r in preview) == Counter(r.typ for r in known)


def test_metallb_pool_comes_from_ipv4_subnet_in_either_order() -> None:
    for ipam in ([{"subnet": "fc00:f853:ccd:e793::/64"}, {"subnet": "172.18.0.0/16", "gateway": "172.18.0.1"}],
                 [{"subnet": "172.18.0.0/16", "gateway": "172.18.0.1"}, {"subnet": "fc00:f853:ccd:e793::/64"}]):
        (pool,) = by_type(record_stack(ipam=ipam), "kubernetes:metallb.io/v1beta1:IPAddressPool")
        # metallb.poolSize (16) at the top of the subnet, whatever the number of tenants.
        assert pool.inputs["spec"]["addresses"] == ["172.18.255.239-172.18.255.254"]


def test_ipv6_only_network_fails_with_the_network_name() -> None:
    with pytest.raises(Exception, match="'kind' has no IPv4 subnet"):
        record_stack(ipam=[{"subnet": "fc00:f853:ccd:e793::/64"}])
