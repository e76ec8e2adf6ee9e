"""The policy pack against what the dev stack really registers (recorded under mocks), and against
crafted bad variants of those same resources: every policy passes on the first and fails on the second."""

from __future__ import annotations

import json
from typing import Any

import pytest
from harness import dev_config, docker_info, gpu_config, nvml_config
from policy_support import (
    Recorded,
    add_resource,
    copy_stack,
    dev_stack,
    find,
    gpu_stack,
    nvml_stack,
    owned,
    provider_ref,
    record_engine_view,
    run_resource_policy,
    run_stack_policy,
    set_both,
    stack_root,
)
from pulumi.runtime.rpc import UNKNOWN as ENGINE_UNKNOWN
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.proxy import unknown_checking_proxy

from gpu_tenancy.builders.mock_nvml import cuda_control, nvml_mock
from gpu_tenancy.contract import versions

import gpu_lib  # isort: skip
import pod_lib  # isort: skip
import resource_lib  # isort: skip
import tenancy_lib  # isort: skip
import value_lib  # isort: skip
import workload_lib  # isort: skip
import tenant_policies as tp  # isort: skip

TCP = resource_lib.TCP_TYPE
TENANT = resource_lib.TENANT_TYPE
PROVIDER = resource_lib.K8S_PROVIDER_TYPE
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
RELEASE = resource_lib.HELM_RELEASE_TYPE


def engine_config(config: dict[str, Any]) -> str:
    """PULUMI_CONFIG as the engine hands it to a policy pack (structured values JSON-encoded)."""
    return json.dumps({f"gpu-tenancy:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})


@pytest.fixture
def pack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack config the engine passes to the pack process."""
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(dev_config()))


@pytest.fixture
def gpu_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(gpu_config()))


@pytest.fixture
def real() -> list[Recorded]:
    """A private copy of the real-GPU example stack (Pulumi.gpu.yaml)."""
    return copy_stack(gpu_stack())


# A stack policy's finding that is about no one resource (the engine shows it without a URN).
STACK_WIDE = ("the stack mixes modes: ",)


def run(policy: Any, resources: list[Recorded], config: dict[str, Any] | None = None) -> list[str]:
    if isinstance(policy, StackValidationPolicy):
        violations = run_stack_policy(policy, resources, config)
        # Every other finding points at a resource of the stack: the one the preview shows it on.
        urns = {r.urn for r in resources}
        assert [(m, u) for m, u in violations if u not in urns and not m.startswith(STACK_WIDE)] == []
        return [message for message, _ in violations]
    return [message for _, message, _ in run_resource_policy(policy, resources, config)]


def assert_violation(messages: list[str], *fragments: str) -> None:
    assert any(all(f in m for f in fragments) for m in messages), f"no violation with {fragments} in {messages}"


# --------------------------------------------------------------------------- the pack itself


def test_every_policy_is_named_described_and_levelled() -> None:
    names = [p.name for p in tp.ALL_POLICIES]
    assert len(names) == len(set(names)) == 21
    assert set(names) >= {
        "tenant-provider-isolation", "tcp-konnectivity-enabled", "tcp-dedicated-namespace", "tcp-version-pinned",
        "images-pinned", "charts-pinned", "gpu-requests-fractional", "tenant-cidrs-disjoint",
        "worker-joins-own-tenant", "no-mock-gpus-in-real", "workload-safety", "gpu-plan-fits",
        "known-types", "type-allowances", "field-allowlist", "gpu-plan-order", "attributed-by-identity",
        "installed-controls", "controls-present", "rbac-contained", "known-types-in-stack",
    }
    for policy in tp.ALL_POLICIES:
        assert len(policy.description) > 40
        # Only the note of what a stack allowed, and why, and a plan that depends on the order do not fail a
        # preview.
        advisory = ("type-allowances", "gpu-plan-order")
        expected = EnforcementLevel.ADVISORY if policy.name in advisory else EnforcementLevel.MANDATORY
        assert policy.enforcement_level == expected, policy.name
    # known-types is asked of each resource before its step, so `up --skip-preview` cannot create an unknown type
    # before the end-of-run stack policies see it.
    stack_policies = {p.name for p in tp.ALL_POLICIES if isinstance(p, StackValidationPolicy)}
    assert stack_policies == {
        "tenant-provider-isolation", "tcp-dedicated-namespace", "tcp-version-pinned", "tenant-cidrs-disjoint",
        "worker-joins-own-tenant", "no-mock-gpus-in-real", "gpu-plan-fits", "gpu-plan-order",
        "known-types-in-stack", "type-allowances", "attributed-by-identity", "controls-present",
        "rbac-contained",
    }


# --------------------------------------------------------------------------- the dev stack passes


@pytest.mark.usefixtures("pack_env")
@pytest.mark.parametrize("unknowns", [False, True], ids=["deployed", "first-preview"])
@pytest.mark.parametrize("policy", tp.ALL_POLICIES, ids=lambda p: p.name)
def test_dev_stack_passes(policy: Any, unknowns: bool) -> None:
    assert run(policy, dev_stack(unknowns)) == []


@pytest.mark.usefixtures("gpu_env")
@pytest.mark.parametrize("unknowns", [False, True], ids=["deployed", "first-preview"])
@pytest.mark.parametrize("policy", tp.ALL_POLICIES, ids=lambda p: p.name)
def test_real_gpu_stack_passes(policy: Any, unknowns: bool) -> None:
    assert run(policy, gpu_stack(unknowns)) == []


def test_dev_stack_is_what_the_policies_expect() -> None:
    """Guards against vacuous passes: the signals the policies key on are really registered."""
    resources = dev_stack()
    types = {r.type for r in resources}
    assert {TCP, TENANT, PROVIDER, DAEMONSET, RELEASE, resource_lib.MOCK_AGENT_TYPE, resource_lib.COMMAND_TYPE} <= types
    providers = {r.name: r.inputs.get("clusterIdentifier") for r in resources if r.type == PROVIDER}
    assert providers == {"management": providers["management"], "tenant-a-kubernetes": "tenant/tenant-a",
                         "tenant-b-kubernetes": "tenant/tenant-b"}
    assert providers["management"] == tenancy_lib.MANAGEMENT
    tenant = find(resources, TENANT, "tenant-a")
    assert {"tenant", "mode", "gpus", "workloads", "quota"} <= set(tenant.inputs)
    # The engine's stack view of a component is its register_outputs (tested with and without the declaration).
    assert {"endpoint", "kubeconfig"} <= set(tenant.outputs)


def undeclare(resources: list[Recorded]) -> list[Recorded]:
    """The engine's view when Tenant.register_outputs carries no declaration: the pack falls back to config."""
    for resource in resources:
        if resource.type == TENANT and resource.registered_outputs:
            for key in ("tenant", "mode", "gpus", "gpuNodes", "workloads", "quota"):
                resource.registered_outputs.pop(key, None)
    return resources


# --------------------------------------------------------------------------- 1 tenant-provider-isolation


def test_isolation_flags_a_resource_on_another_tenants_provider(stack: list[Recorded]) -> None:
    kindnet = owned(stack, DAEMONSET, "tenant-a", "kindnet")
    kindnet.provider = provider_ref(stack, "tenant-b-kubernetes")
    assert_violation(
        run(tp.tenant_provider_isolation, stack),
        "kubernetes:apps/v1:DaemonSet 'tenant-a-network-kindnet' belongs to tenant 'tenant-a' but goes through tenant"
        " 'tenant-b''s provider; only tenant 'tenant-b''s own components (under its Tenant) create objects on its "
        "cluster.",
    )


def test_isolation_flags_a_tenant_workload_on_the_management_provider(stack: list[Recorded]) -> None:
    config_map = owned(stack, "kubernetes:core/v1:ConfigMap", "tenant-a", "kube-proxy")
    config_map.provider = provider_ref(stack, "management")
    assert_violation(
        run(tp.tenant_provider_isolation, stack),
        "kubernetes:core/v1:ConfigMap 'tenant-a-network-kube-proxy' lands on the management cluster, made by "
        "gpu-tenancy:tenant_network:TenantNetwork; only the platform's own components create objects there, and only "
        "the kinds they need (gpu-tenancy:tenant_network:TenantNetwork: none). Deploy it through a tenant's own "
        "provider instead.",
    )


def test_isolation_flags_a_tenant_resource_on_the_default_provider(stack: list[Recorded]) -> None:
    owned(stack, DAEMONSET, "tenant-b", "kube-proxy").provider = ""
    assert_violation(
        run(tp.tenant_provider_isolation, stack),
        "kubernetes:apps/v1:DaemonSet 'tenant-b-network-kube-proxy' goes through the default provider (no provider= "
        "given), which the pack cannot attribute to a tenant or to the platform; pass provider=<the tenant's "
        "TenantControlPlane>.provider (or the management provider for platform components).",
    )


def test_isolation_flags_mixing_two_tenants_outputs(stack: list[Recorded]) -> None:
    join_a = owned(stack, resource_lib.COMMAND_TYPE, "tenant-a", "join")
    secret_b = owned(stack, "kubernetes:core/v1:Secret", "tenant-b", "admin-kubeconfig")
    join_a.property_dependencies.setdefault("stdin", []).append(secret_b.urn)
    assert_violation(
        run(tp.tenant_provider_isolation, stack),
        "command:local:Command 'tenant-a-worker-join' of tenant 'tenant-a' depends on kubernetes:core/v1:Secret "
        "'tenant-b-control-plane-admin-kubeconfig' of tenant 'tenant-b'; a tenant's resources may only use its own "
        "tenant's outputs.",
    )


def test_isolation_flags_reading_another_tenants_credentials(stack: list[Recorded]) -> None:
    admin_a = owned(stack, "kubernetes:core/v1:Secret", "tenant-a", "admin-kubeconfig")
    assert admin_a.read and admin_a.inputs == {}  # a read: the stack view is the live object only
    admin_a.state["metadata"]["namespace"] = "tenant-b"
    assert_violation(
        run(tp.tenant_provider_isolation, stack),
        "kubernetes:core/v1:Secret 'tenant-a-control-plane-admin-kubeconfig' of tenant 'tenant-a' reaches into tenant"
        " 'tenant-b''s management namespace, where control-plane credentials live; use only the tenant's own "
        "namespace.",
    )


def test_isolation_treats_an_empty_read_as_not_known_yet(stack: list[Recorded]) -> None:
    """What the engine hands over for a read it skipped (unknown id) or sent to an unconfigured provider."""
    admin_a = owned(stack, "kubernetes:core/v1:Secret", "tenant-a", "admin-kubeconfig")
    admin_a.state = {}
    assert run(tp.tenant_provider_isolation, stack) == []
    # Still checked where it goes: the empty read does not hide a tenant provider that is not its own.
    admin_a.provider = provider_ref(stack, "tenant-b-kubernetes")
    assert_violation(
        run(tp.tenant_provider_isolation, stack),
        "kubernetes:core/v1:Secret 'tenant-a-control-plane-admin-kubeconfig' belongs to tenant 'tenant-a' but goes "
        "through tenant 'tenant-b''s provider; only tenant 'tenant-b''s own components (under its Tenant) create "
        "objects on its cluster.",
    )


def test_isolation_flags_a_provider_built_from_another_tenants_kubeconfig(stack: list[Recorded]) -> None:
    provider_a = find(stack, PROVIDER, "tenant-a-kubernetes")
    admin_b = owned(stack, "kubernetes:core/v1:Secret", "tenant-b", "admin-kubeconfig")
    provider_a.property_dependencies["kubeconfig"] = [admin_b.urn]
    assert_violation(
        run(tp.tenant_provider_isolation, stack),
        "pulumi:providers:kubernetes 'tenant-a-kubernetes' of tenant 'tenant-a' depends on kubernetes:core/v1:Secret "
        "'tenant-b-control-plane-admin-kubeconfig' of tenant 'tenant-b'; a tenant's resources may only use its own "
        "tenant's outputs.",
    )


def test_isolation_allows_plain_ordering_across_tenants(stack: list[Recorded]) -> None:
    """depends_on without data flowing is ordering, not mixing outputs."""
    join_a = owned(stack, resource_lib.COMMAND_TYPE, "tenant-a", "join")
    join_a.dependencies.append(owned(stack, resource_lib.COMMAND_TYPE, "tenant-b", "join").urn)
    assert run(tp.tenant_provider_isolation, stack) == []


def test_isolation_flags_a_label_that_contradicts_the_parent_chain(stack: list[Recorded]) -> None:
    service_account = owned(stack, "kubernetes:core/v1:ServiceAccount", "tenant-a", "kindnet")
    set_both(service_account, ["metadata", "labels", tenancy_lib.TENANT_LABEL], "tenant-b")
    assert_violation(
        run(tp.tenant_provider_isolation, stack),
        "kubernetes:core/v1:ServiceAccount 'tenant-a-network-kindnet' is claimed by more than one tenant: URN parent "
        "chain says 'tenant-a', label gpu-tenancy.io/tenant says 'tenant-b'.",
    )


def test_isolation_flags_providers_sharing_a_cluster(stack: list[Recorded]) -> None:
    provider_b = find(stack, PROVIDER, "tenant-b-kubernetes")
    set_both(provider_b, ["clusterIdentifier"], "tenant/tenant-a")
    messages = run(tp.tenant_provider_isolation, stack)
    assert_violation(messages, "'tenant-b-kubernetes', which claims 'tenant/tenant-a'", "cannot attribute")
    # And everything that goes through it fails closed.
    assert_violation(messages, "'tenant-b-network-kube-proxy' goes through provider 'tenant-b-kubernetes'")


def test_isolation_keeps_a_tenants_management_objects_to_its_own_namespace(stack: list[Recorded]) -> None:
    namespace = owned(stack, "kubernetes:core/v1:Namespace", "tenant-a", "control-plane-namespace")
    set_both(namespace, ["metadata", "name"], "tenant-b")
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [(
        "kubernetes:core/v1:Namespace 'tenant-a-control-plane-namespace' of tenant 'tenant-a' creates management "
        "namespace 'tenant-b'; a tenant only gets its own namespace 'tenant-a'.", namespace.urn)]
    set_both(namespace, ["metadata", "name"], ENGINE_UNKNOWN)  # a preview: checked once known
    assert run(tp.tenant_provider_isolation, stack) == []


def test_isolation_wants_a_tenant_scoped_object_under_its_tenant(stack: list[Recorded]) -> None:
    tcp = owned(stack, TCP, "tenant-a")
    root = stack_root(stack)
    component = add_resource(stack, root, resource_lib.TCP_COMPONENT_TYPE, "stray-control-plane", {})
    stray = add_resource(stack, component, TCP, "stray-tcp", {"metadata": {"name": "stray", "namespace": "stray"},
                                                      "spec": tcp.inputs["spec"]}, tcp.provider)
    assert run_stack_policy(tp.tenant_provider_isolation, stack) == [(
        "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane 'stray-tcp' made by "
        "gpu-tenancy:tenant_control_plane:TenantControlPlane is under no tenant; it must sit under its Tenant.",
        stray.urn)]


def test_isolation_management_components_are_configurable(stack: list[Recorded]) -> None:
    config_map = owned(stack, "kubernetes:core/v1:ConfigMap", "tenant-a", "kube-proxy")
    config_map.provider = provider_ref(stack, "management")
    network = "gpu-tenancy:tenant_network:TenantNetwork"
    allowed = {"managementComponents": {**tp.DEFAULT_MANAGEMENT_COMPONENTS, network: ["kubernetes:core/v1:ConfigMap"]}}
    assert run(tp.tenant_provider_isolation, stack, allowed) == []


# --------------------------------------------------------------------------- 2 tcp-konnectivity-enabled


def test_konnectivity_missing_is_flagged(stack: list[Recorded]) -> None:
    tcp = owned(stack, TCP, "tenant-b")
    for props in (tcp.inputs, tcp.state):
        del props["spec"]["addons"]["konnectivity"]
    assert_violation(
        run(tp.tcp_konnectivity_enabled, stack),
        "TenantControlPlane 'tenant-b' has no spec.addons.konnectivity; add `konnectivity: {}` (the CRD fills in port"
        " 8132 and a DaemonSet agent) or HAMi's webhook cannot be reached.",
    )
    # Not known yet in a preview, the addon or all of spec.addons: nothing to say until it is.
    set_both(tcp, ["spec", "addons", "konnectivity"], ENGINE_UNKNOWN)
    assert run(tp.tcp_konnectivity_enabled, stack) == []
    set_both(tcp, ["spec", "addons"], ENGINE_UNKNOWN)
    assert run(tp.tcp_konnectivity_enabled, stack) == []


# --------------------------------------------------------------------------- 3 tcp-dedicated-namespace


def test_two_control_planes_in_one_namespace_are_flagged(stack: list[Recorded]) -> None:
    tcp_a, tcp_b = owned(stack, TCP, "tenant-a"), owned(stack, TCP, "tenant-b")
    set_both(tcp_b, ["metadata", "namespace"], "tenant-a")
    both = ("management namespace 'tenant-a' holds 2 TenantControlPlanes ('tenant-a', 'tenant-b'); each tenant needs "
            "its own namespace (its admin kubeconfig Secret lives there).")
    assert run_stack_policy(tp.tcp_dedicated_namespace, stack) == [
        ("TenantControlPlane 'tenant-b' of tenant 'tenant-b' is in namespace 'tenant-a'; use the dedicated namespace "
         "'tenant-b'.", tcp_b.urn),
        (both, tcp_a.urn),
        (both, tcp_b.urn),
    ]


def test_a_control_plane_without_a_namespace_is_in_default_and_unknown_ones_wait(stack: list[Recorded]) -> None:
    tcp = owned(stack, TCP, "tenant-a")
    for props in (tcp.inputs, tcp.state):
        del props["metadata"]["namespace"]
    assert run_stack_policy(tp.tcp_dedicated_namespace, stack) == [(
        "TenantControlPlane 'tenant-a' is in shared namespace 'default'; give it its own namespace named after the "
        "tenant ('tenant-a').", tcp.urn)]
    assert run(tp.tcp_dedicated_namespace, stack, {"forbiddenNamespaces": ["kube-system"]}) == [
        "TenantControlPlane 'tenant-a' of tenant 'tenant-a' is in namespace 'default'; use the dedicated namespace "
        "'tenant-a'."]
    set_both(tcp, ["metadata", "name"], ENGINE_UNKNOWN)  # a preview: checked once it is known
    assert run(tp.tcp_dedicated_namespace, stack) == []
    set_both(tcp, ["metadata", "name"], "tenant-a")
    set_both(tcp, ["metadata", "namespace"], ENGINE_UNKNOWN)
    assert run(tp.tcp_dedicated_namespace, stack) == []
    # One control plane not known yet does not stop the check of the others, whatever their order.
    tcp_b = owned(stack, TCP, "tenant-b")
    set_both(tcp_b, ["metadata", "namespace"], "tenant-x")
    moved = "TenantControlPlane 'tenant-b' of tenant 'tenant-b' is in namespace 'tenant-x'; use the dedicated namespace " \
        "'tenant-b'."
    assert run(tp.tcp_dedicated_namespace, stack) == run(tp.tcp_dedicated_namespace, stack[::-1]) == [moved]


def test_control_plane_named_after_another_tenant_or_in_a_shared_namespace_is_flagged(stack: list[Recorded]) -> None:
    tcp = owned(stack, TCP, "tenant-a")
    set_both(tcp, ["metadata", "name"], "shared")
    set_both(tcp, ["metadata", "namespace"], "kube-system")
    messages = run(tp.tcp_dedicated_namespace, stack)
    assert_violation(
        messages,
        "TenantControlPlane 'shared' belongs to tenant 'tenant-a'; name it 'tenant-a'.",
    )
    assert_violation(
        messages,
        "TenantControlPlane 'shared' is in shared namespace 'kube-system'; give it its own namespace named after the "
        "tenant ('tenant-a').",
    )


# --------------------------------------------------------------------------- 4 tcp-version-pinned


def test_floating_control_plane_version_is_flagged(stack: list[Recorded]) -> None:
    set_both(owned(stack, TCP, "tenant-a"), ["spec", "kubernetes", "version"], "v1.35")
    assert_violation(
        run(tp.tcp_version_pinned, stack),
        "TenantControlPlane 'tenant-a' has spec.kubernetes.version 'v1.35'; pin an exact version like 'v1.35.5' "
        "(gpu-tenancy:versions.kubernetes).",
    )


def test_worker_image_not_matching_its_control_plane_is_flagged(stack: list[Recorded]) -> None:
    image = owned(stack, resource_lib.REMOTE_IMAGE_TYPE, "tenant-b")
    set_both(image, ["name"], "kindest/node:v1.30.13")
    assert_violation(
        run(tp.tcp_version_pinned, stack),
        "tenant 'tenant-b': worker image 'kindest/node:v1.30.13' ('tenant-b-worker-image'), which does not match its "
        "control plane version 'v1.35.5'; the worker kubelet must run the control plane's version (workerImage / "
        "versions.kubernetes).",
    )


def test_a_worker_containers_own_image_is_held_to_its_control_planes_version(stack: list[Recorded]) -> None:
    container = owned(stack, resource_lib.CONTAINER_TYPE, "tenant-b")
    set_both(container, ["image"], "kindest/node:v1.30.13")
    assert run_stack_policy(tp.tcp_version_pinned, stack) == [(
        f"tenant 'tenant-b': worker image 'kindest/node:v1.30.13' ({container.name!r}), which does not match its "
        "control plane version 'v1.35.5'; the worker kubelet must run the control plane's version (workerImage / "
        "versions.kubernetes).",
        container.urn,
    )]
    # An image ID names no version (the RemoteImage beside it does); a container that is no worker runs no kubelet.
    set_both(container, ["image"], "sha256:" + "a" * 64)
    assert run_stack_policy(tp.tcp_version_pinned, stack) == []
    set_both(container, ["image"], "kindest/node:v1.30.13")
    set_both(container, ["labels"], [])
    assert run_stack_policy(tp.tcp_version_pinned, stack) == []


def test_a_control_plane_version_not_known_yet_waits_without_stopping_the_others(stack: list[Recorded]) -> None:
    set_both(owned(stack, TCP, "tenant-a"), ["spec", "kubernetes", "version"], ENGINE_UNKNOWN)
    set_both(owned(stack, TCP, "tenant-b"), ["spec", "kubernetes", "version"], "v1.35")
    expected = [
        "TenantControlPlane 'tenant-b' has spec.kubernetes.version 'v1.35'; pin an exact version like 'v1.35.5' "
        "(gpu-tenancy:versions.kubernetes)."
    ]
    assert run(tp.tcp_version_pinned, stack) == run(tp.tcp_version_pinned, stack[::-1]) == expected
    # Each floating version is named, and a control plane under no tenant has no workers to compare with.
    set_both(owned(stack, TCP, "tenant-a"), ["spec", "kubernetes", "version"], "v1.35")
    add_resource(stack, stack_root(stack), TCP, "stray-tcp", {"metadata": {"name": "stray"},
                                                              "spec": {"kubernetes": {"version": "v1.35.5"}}})
    assert sorted(run(tp.tcp_version_pinned, stack)) == [expected[0].replace("tenant-b", "tenant-a"), *expected]


def test_gpu_host_prepared_for_another_version_is_flagged(real: list[Recorded]) -> None:
    prepare = owned(real, resource_lib.REMOTE_COMMAND_TYPE, "tenant-a", "prepare")
    triggers = prepare.state["triggers"]
    set_both(prepare, ["triggers"], [t if not pod_lib.exact_kubernetes_version(t) else "v1.33.9" for t in triggers])
    assert_violation(
        run(tp.tcp_version_pinned, real),
        "tenant 'tenant-a': host 'tenant-a-gpu-a100-01-prepare' is prepared for v1.33.9, which does not match its "
        "control plane version 'v1.35.5'; the worker kubelet must run the control plane's version (workerImage / "
        "versions.kubernetes).",
    )


# --------------------------------------------------------------------------- 5 images-pinned


@pytest.mark.parametrize(
    ("image", "why"), [("docker.io/kindest/kindnetd", "has no tag"), ("docker.io/kindest/kindnetd:latest", "latest")]
)
def test_untagged_or_latest_container_image_is_flagged(stack: list[Recorded], image: str, why: str) -> None:
    kindnet = owned(stack, DAEMONSET, "tenant-a", "kindnet")
    set_both(kindnet, ["spec", "template", "spec", "containers", 0, "image"], image)
    assert_violation(run(tp.images_pinned, stack), "kindnet", why)


def test_latest_tag_in_helm_values_and_untagged_worker_image_are_flagged(stack: list[Recorded]) -> None:
    set_both(owned(stack, RELEASE, "tenant-a", "hami"), ["values", "global", "imageTag"], "latest")
    set_both(owned(stack, resource_lib.REMOTE_IMAGE_TYPE, "tenant-b"), ["name"], "kindest/node")
    messages = run(tp.images_pinned, stack)
    assert_violation(
        messages,
        "kubernetes:helm.sh/v3:Release 'tenant-a-hami-chart': values.global.imageTag tag 'latest' is a moving tag; "
        "pin an exact release tag or a digest.",
    )
    assert_violation(
        messages,
        "docker:index/remoteImage:RemoteImage 'tenant-b-worker-image': name image 'kindest/node' has no tag; pin an "
        "exact release tag or a digest.",
    )


def test_locally_built_images_are_pinned_by_their_tag(nvml: list[Recorded]) -> None:
    """The agent's (source digest) and the mock NVML's (upstream commit) images are never pulled: the tag pins them."""
    assert run(tp.images_pinned, nvml) == []
    set_both(owned(nvml, DAEMONSET, "tenant-a", "mock-nvml"), ["spec", "template", "spec", "containers", 0, "image"],
             "gpu-tenancy/nvml-mock")
    set_both(owned(nvml, DAEMONSET, "tenant-b", "mock-nvml"), ["spec", "template", "spec", "containers", 0, "image"],
             "gpu-tenancy/nvml-mock:latest")
    messages = run(tp.images_pinned, nvml)
    assert_violation(
        messages,
        "kubernetes:apps/v1:DaemonSet 'tenant-a-mock-nvml-daemonset': container 'nvml-mock' image "
        "'gpu-tenancy/nvml-mock' has no tag; pin an exact release tag or a digest.",
    )
    assert_violation(
        messages,
        "kubernetes:apps/v1:DaemonSet 'tenant-b-mock-nvml-daemonset': container 'nvml-mock' image "
        "'gpu-tenancy/nvml-mock:latest' tag 'latest' is a moving tag; pin an exact release tag or a digest.",
    )


# --------------------------------------------------------------------------- 6 charts-pinned


def test_unpinned_or_repositoryless_chart_is_flagged(stack: list[Recorded]) -> None:
    hami = owned(stack, RELEASE, "tenant-a", "hami")
    set_both(hami, ["version"], "^2.10")
    kamaji = find(stack, RELEASE, "kamaji-chart")
    for props in (kamaji.inputs, kamaji.state):
        del props["version"]
        props["chart"] = "kamaji"  # no repository: Helm would take a local directory ./kamaji first
    messages = run(tp.charts_pinned, stack)
    assert_violation(
        messages,
        "kubernetes:helm.sh/v3:Release 'tenant-a-hami-chart': chart 'hami' version '^2.10' is a range; pin an exact "
        "version.",
    )
    assert_violation(
        messages,
        "kubernetes:helm.sh/v3:Release 'kamaji-chart': chart 'kamaji' has no version; set version= to an exact chart "
        "version.",
    )
    assert_violation(
        messages,
        "kubernetes:helm.sh/v3:Release 'kamaji-chart': chart 'kamaji' has no repository and is not a path in the "
        "chart cache (.charts/sha256-<hex>/<name>-<version>.tgz); install it from the chart cache "
        "(components/charts.py cached_chart, filled by `make charts`).",
    )


# --------------------------------------------------------------------------- 7 gpu-requests-fractional


def test_whole_card_and_over_100_cores_requests_are_flagged(stack: list[Recorded]) -> None:
    kindnet = owned(stack, DAEMONSET, "tenant-a", "kindnet")
    set_both(kindnet, ["spec", "template", "spec", "containers", 0, "resources", "limits"],
             {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "150"})
    messages = run(tp.gpu_requests_fractional, stack)
    assert_violation(
        messages,
        "kubernetes:apps/v1:DaemonSet 'tenant-a-network-kindnet': container 'kindnet-cni' asks for nvidia.com/gpu=1 "
        "without nvidia.com/gpumem or nvidia.com/gpumem-percentage, i.e. whole cards; state the memory share.",
    )
    assert_violation(
        messages,
        "kubernetes:apps/v1:DaemonSet 'tenant-a-network-kindnet': container 'kindnet-cni' asks for "
        "nvidia.com/gpucores=150; HAMi's gpucores is a percentage of one card (<= 100).",
    )


def test_a_memory_share_makes_a_gpu_request_fractional(stack: list[Recorded]) -> None:
    kindnet = owned(stack, DAEMONSET, "tenant-a", "kindnet")
    set_both(kindnet, ["spec", "template", "spec", "containers", 0, "resources", "limits"],
             {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 25, "nvidia.com/gpucores": 100})
    assert run(tp.gpu_requests_fractional, stack) == []


def test_declared_workload_without_memory_is_flagged_on_the_tenant(stack: list[Recorded]) -> None:
    tenant = find(stack, TENANT, "tenant-a")
    tenant.inputs["workloads"] = [
        {"name": "greedy", "containers": [{"gpus": 1, "gpumemMiB": None, "gpucores": 20}]},
        # Numbers arrive from the engine as floats.
        {"name": "hot", "containers": [{"gpus": 1.0, "gpumemPercentage": 10.0, "gpucores": 150.0}]},
    ]
    messages = run(tp.gpu_requests_fractional, stack)
    assert_violation(
        messages,
        "tenant 'tenant-a', workload 'greedy': container #0 asks for GPUs without gpumemMiB or gpumemPercentage.",
    )
    assert_violation(
        messages,
        "tenant 'tenant-a', workload 'hot': container #0 asks for gpucores=150 (> 100).",
    )


# --------------------------------------------------------------------------- 8 tenant-cidrs-disjoint


def test_overlapping_tenant_cidrs_are_flagged(stack: list[Recorded]) -> None:
    tcp_a, tcp_b = owned(stack, TCP, "tenant-a"), owned(stack, TCP, "tenant-b")
    set_both(tcp_b, ["spec", "networkProfile", "podCidrs"], [tcp_a.state["spec"]["networkProfile"]["podCidrs"][0]])
    assert_violation(
        run(tp.tenant_cidrs_disjoint, stack),
        "tenant 'tenant-a' pod CIDR 10.174.16.0/20 overlaps tenant 'tenant-b' pod CIDR 10.174.16.0/20; give every "
        "tenant disjoint podCidr/serviceCidr.",
    )
    # The same words whatever order the resources registered in (it varies between runs).
    assert run(tp.tenant_cidrs_disjoint, stack[::-1]) == run(tp.tenant_cidrs_disjoint, stack)



def test_a_tenants_own_pod_and_service_ranges_overlapping_are_flagged_pod_range_first(stack: list[Recorded]) -> None:
    tcp = owned(stack, TCP, "tenant-a")
    set_both(tcp, ["spec", "networkProfile", "podCidrs"], ["10.1.0.0/20"])
    set_both(tcp, ["spec", "networkProfile", "serviceCidrs"], ["10.1.0.0/16"])
    assert run(tp.tenant_cidrs_disjoint, stack) == [
        "tenant 'tenant-a' pod CIDR 10.1.0.0/20 overlaps tenant 'tenant-a' service CIDR 10.1.0.0/16; give every "
        "tenant disjoint podCidr/serviceCidr."
    ]
    # A range listed twice is one range, not an overlap: in one control plane, or in a second one of the same
    # tenant (which tcp-dedicated-namespace flags).
    set_both(tcp, ["spec", "networkProfile", "podCidrs"], ["10.2.0.0/16", "10.2.0.0/16"])
    assert run(tp.tenant_cidrs_disjoint, stack) == []
    add_resource(stack, find(stack, TENANT, "tenant-a"), TCP, "tenant-a-second",
                 {"spec": {"networkProfile": {"podCidrs": ["10.2.0.0/16"]}}})
    assert run(tp.tenant_cidrs_disjoint, stack) == []


def test_a_control_plane_is_named_by_its_tenant_not_its_metadata(stack: list[Recorded]) -> None:
    tcp_a, tcp_b = owned(stack, TCP, "tenant-a"), owned(stack, TCP, "tenant-b")
    set_both(tcp_b, ["metadata", "name"], "control-plane")
    set_both(tcp_b, ["spec", "networkProfile", "podCidrs"], tcp_a.state["spec"]["networkProfile"]["podCidrs"])
    assert run(tp.tenant_cidrs_disjoint, stack) == [
        "tenant 'tenant-a' pod CIDR 10.174.16.0/20 overlaps tenant 'tenant-b' pod CIDR 10.174.16.0/20; give every "
        "tenant disjoint podCidr/serviceCidr."
    ]


def test_a_control_plane_under_no_tenant_is_named_by_its_metadata_or_resource_name(stack: list[Recorded]) -> None:
    tcp_a = owned(stack, TCP, "tenant-a")
    root = stack_root(stack)
    cidr = tcp_a.inputs["spec"]["networkProfile"]["podCidrs"][0]
    for name, metadata in (("stray", {"name": "stray"}), ("stray-tcp", {})):
        stray = add_resource(stack, root, TCP, "stray-tcp", {"metadata": metadata, "spec": {"networkProfile": {"podCidrs": [cidr]}}})
        assert f"tenant {name!r} pod CIDR {cidr} overlaps tenant 'tenant-a' pod CIDR {cidr}; give every tenant disjoint " \
            "podCidr/serviceCidr." in run(tp.tenant_cidrs_disjoint, stack)
        stack.remove(stray)


def test_cidr_overlapping_the_docker_network_or_kind_ranges_is_flagged(stack: list[Recorded]) -> None:
    tcp = owned(stack, TCP, "tenant-a")
    set_both(tcp, ["spec", "networkProfile", "podCidrs"], ["172.18.128.0/17"])
    set_both(tcp, ["spec", "networkProfile", "serviceCidrs"], ["10.96.0.0/20"])
    messages = run(tp.tenant_cidrs_disjoint, stack)
    assert_violation(
        messages,
        "tenant 'tenant-a' pod CIDR 172.18.128.0/17 overlaps the Docker network 172.18.0.0/16 that MetalLB's pool "
        "comes from; pick another podCidr/serviceCidr.",
    )
    assert_violation(messages, "172.18.128.0/17", "MetalLB pool")
    assert_violation(
        messages,
        "tenant 'tenant-a' service CIDR 10.96.0.0/20 overlaps reserved range 10.96.0.0/16; pick another "
        "podCidr/serviceCidr.",
    )
    assert not any("10.96.0.0/20" in m for m in run(tp.tenant_cidrs_disjoint, stack, {"reservedCidrs": []}))


def test_cidr_covering_a_gpu_host_is_flagged(real: list[Recorded]) -> None:
    set_both(owned(real, TCP, "tenant-a"), ["spec", "networkProfile", "podCidrs"], ["10.20.0.0/16"])
    assert_violation(
        run(tp.tenant_cidrs_disjoint, real),
        "tenant 'tenant-a' pod CIDR 10.20.0.0/16 overlaps GPU host 'tenant-b-gpu-l4-01' at 10.20.0.12; pick another "
        "podCidr/serviceCidr.",
    )


def test_docker_images_and_containers_name_pinned_images(stack: list[Recorded]) -> None:
    tenant_a = find(stack, TENANT, "tenant-a")
    image = add_resource(stack, tenant_a, "docker:index/image:Image", "built", {"imageName": "gpu-tenancy/agent"})
    container = add_resource(stack, tenant_a, "docker:index/container:Container", "run", {"image": "busybox:latest"})
    by_id = add_resource(stack, tenant_a, "docker:index/container:Container", "run-by-id", {"image": "sha256:" + "a" * 64})
    assert [m for _, m, _ in run_resource_policy(tp.images_pinned, [image, container, by_id])] == [
        "docker:index/image:Image 'built': imageName image 'gpu-tenancy/agent' has no tag; pin an exact release tag "
        "or a digest.",
        "docker:index/container:Container 'run': image image 'busybox:latest' tag 'latest' is a moving tag; pin an "
        "exact release tag or a digest.",
    ]


def test_kamajis_chart_needs_its_image_tag_set_and_a_container_an_image(stack: list[Recorded]) -> None:
    kamaji = find(stack, RELEASE, "kamaji-chart")
    del kamaji.inputs["values"]["image"]["tag"]
    assert [m for _, m, _ in run_resource_policy(tp.images_pinned, [kamaji])] == [
        "kubernetes:helm.sh/v3:Release 'kamaji-chart': values.image.tag is not set, so the chart runs its own default "
        "tag (a moving one); set an exact release tag."]
    kamaji.inputs["values"] = ENGINE_UNKNOWN  # a preview: checked once known
    assert run_resource_policy(tp.images_pinned, [kamaji]) == []
    kindnet = owned(stack, DAEMONSET, "tenant-a", "kindnet")
    pod = kindnet.inputs["spec"]["template"]["spec"]
    del pod["containers"][0]["image"]
    pod["containers"].append({"name": "sidecar", "image": "busybox"})  # still checked after the one without
    assert [m for _, m, _ in run_resource_policy(tp.images_pinned, [kindnet])] == [
        "kubernetes:apps/v1:DaemonSet 'tenant-a-network-kindnet': container 'kindnet-cni' has no image.",
        "kubernetes:apps/v1:DaemonSet 'tenant-a-network-kindnet': container 'sidecar' image 'busybox' has no tag; pin "
        "an exact release tag or a digest."]


RELEASE_A = "kubernetes:helm.sh/v3:Release 'tenant-a-hami-chart'"


@pytest.mark.parametrize(("chart", "version", "repo", "finding"), [
    ("hami", "", "https://project-hami.github.io/HAMi/", "chart 'hami' has no version; set version= to an exact chart "
     "version."),
    ("hami", None, "https://project-hami.github.io/HAMi/", "chart 'hami' has no version; set version= to an exact "
     "chart version."),
    ("hami", " ", "https://project-hami.github.io/HAMi/", "chart 'hami' has no version; set version= to an exact "
     "chart version."),
    ("hami", "2.x", "https://project-hami.github.io/HAMi/", "chart 'hami' version '2.x' is a range; pin an exact "
     "version."),
    ("hami", "Stable", "https://project-hami.github.io/HAMi/", "chart 'hami' version 'Stable' is a range; pin an exact "
     "version."),
    ("hami", "0.0.0+latest", "https://project-hami.github.io/HAMi/", "chart 'hami' version '0.0.0+latest' is a moving "
     "build ('latest' is republished from a branch), not a pin; pin a released version."),
    ("kamaji", "0.0.0+latest", "https://clastix.github.io/charts", None),  # the one accepted by default
    ("oci://ghcr.io/project-hami/hami", "2.10.0", None, None),  # an OCI reference names its registry
    ("hami", "2.10.0", " ", "chart 'hami' has no repository and is not a path in the chart cache "
     "(.charts/sha256-<hex>/<name>-<version>.tgz); install it from the chart cache (components/charts.py "
     "cached_chart, filled by `make charts`)."),
    ("hami", ENGINE_UNKNOWN, None, None),  # not known yet: checked when it is
    (ENGINE_UNKNOWN, "2.10.0", None, None),
    ("hami", "2.10.0", ENGINE_UNKNOWN, None),
    ("hami", "LATEST", "https://project-hami.github.io/HAMi/", "chart 'hami' version 'LATEST' is a range; pin an exact "
     "version."),
    ("https://example.test/charts/hami-2.10.0.tgz", "2.10.0", None, None),  # a URL names where it comes from
    ("http://charts.internal/hami-2.10.0.tgz", "2.10.0", None, None),
])
def test_a_chart_is_pinned_to_a_released_version_from_a_named_repository(
    stack: list[Recorded], chart: str, version: str | None, repo: str | None, finding: str | None
) -> None:
    release = hami(stack, "tenant-a")
    for props in (release.inputs, release.state):
        props.update(chart=chart, version=version, repositoryOpts={"repo": repo} if repo else {})
        if version is None:
            del props["version"]
    assert [m for _, m, _ in run_resource_policy(tp.charts_pinned, [release])] == (
        [f"{RELEASE_A}: {finding}"] if finding else [])


# --------------------------------------------------------------------------- 9 worker-joins-own-tenant


def test_worker_joining_an_endpoint_two_other_tenants_claim_names_both(stack: list[Recorded]) -> None:
    join_b = owned(stack, resource_lib.COMMAND_TYPE, "tenant-b", "join")
    tenant_a = find(stack, TENANT, "tenant-a")
    endpoint_a = tenant_a.outputs["endpoint"]
    root = stack_root(stack)
    add_resource(stack, root, TENANT, "tenant-c", {"tenant": "tenant-c"}, outputs={"endpoint": endpoint_a})
    set_both(join_b, ["environment", "CONTROL_PLANE_ENDPOINT"], endpoint_a)
    assert sorted(run(tp.worker_joins_own_tenant, stack)) == [
        f"worker join 'tenant-a-worker-join' of tenant 'tenant-a' targets {endpoint_a}, the control plane of "
        "'tenant-c'; use 'tenant-a''s TenantControlPlane endpoint.",
        f"worker join 'tenant-b-worker-join' of tenant 'tenant-b' targets {endpoint_a}, the control plane of "
        "'tenant-a', 'tenant-c'; use 'tenant-b''s TenantControlPlane endpoint.",
    ]


def test_worker_joining_an_endpoint_of_no_tenant_is_flagged(stack: list[Recorded]) -> None:
    join_b = owned(stack, resource_lib.COMMAND_TYPE, "tenant-b", "join")
    own = find(stack, TENANT, "tenant-b").outputs["endpoint"]
    set_both(join_b, ["environment", "CONTROL_PLANE_ENDPOINT"], "10.9.9.9:6443")
    assert run_stack_policy(tp.worker_joins_own_tenant, stack) == [(
        f"worker join 'tenant-b-worker-join' of tenant 'tenant-b' targets 10.9.9.9:6443, not its own {own}.",
        join_b.urn)]


def test_worker_joining_another_tenant_is_flagged(stack: list[Recorded]) -> None:
    join_b = owned(stack, resource_lib.COMMAND_TYPE, "tenant-b", "join")
    endpoint_a = find(stack, TENANT, "tenant-a").outputs["endpoint"]
    set_both(join_b, ["environment", "CONTROL_PLANE_TENANT"], "tenant-a")
    set_both(join_b, ["environment", "CONTROL_PLANE_ENDPOINT"], endpoint_a)
    messages = run(tp.worker_joins_own_tenant, stack)
    assert_violation(
        messages,
        "worker join 'tenant-b-worker-join' of tenant 'tenant-b' has CONTROL_PLANE_TENANT='tenant-a'; a worker joins "
        "only its own tenant's control plane.",
    )
    assert_violation(
        messages,
        "worker join 'tenant-b-worker-join' of tenant 'tenant-b' targets 10.98.165.86:6443, the control plane of "
        "'tenant-a'; use 'tenant-b''s TenantControlPlane endpoint.",
    )


def test_worker_join_naming_another_tenant_as_its_own_is_flagged(stack: list[Recorded]) -> None:
    join_b = owned(stack, resource_lib.COMMAND_TYPE, "tenant-b", "join")
    set_both(join_b, ["environment", "GPU_TENANCY_TENANT"], "tenant-a")
    assert run_stack_policy(tp.worker_joins_own_tenant, stack) == [(
        "worker join 'tenant-b-worker-join' of tenant 'tenant-b' has GPU_TENANCY_TENANT='tenant-a'; a worker joins "
        "only its own tenant's control plane.",
        join_b.urn,
    )]


def test_worker_joining_another_tenants_container_is_flagged(stack: list[Recorded]) -> None:
    join_a = owned(stack, resource_lib.COMMAND_TYPE, "tenant-a", "join")
    container_b = owned(stack, resource_lib.CONTAINER_TYPE, "tenant-b")
    set_both(join_a, ["environment", "GPU_TENANCY_WORKER"], container_b.state["name"])
    assert_violation(
        run(tp.worker_joins_own_tenant, stack),
        "worker join 'tenant-a-worker-join' of tenant 'tenant-a' joins container 'gpu-tenancy-dev-tenant-b-worker' of"
        " tenant 'tenant-b'.",
    )


def test_gpu_host_shared_by_two_tenants_is_flagged(real: list[Recorded]) -> None:
    host_a = owned(real, resource_lib.HOST_WORKER_TYPE, "tenant-a")
    host_b = owned(real, resource_lib.HOST_WORKER_TYPE, "tenant-b")
    address_a = host_a.inputs["address"]
    host_b.inputs["address"] = address_a
    host_b.registered_outputs = {**(host_b.registered_outputs or {}), "address": address_a}
    assert_violation(
        run(tp.worker_joins_own_tenant, real),
        "host 10.20.0.11 is a worker of several tenants ('tenant-a', 'tenant-b'); a GPU machine joins one tenant "
        "only.",
    )


def test_a_machine_two_tenants_use_is_flagged_by_each_name_it_goes_by(
    real: list[Recorded], stack: list[Recorded]
) -> None:
    several = "is a worker of several tenants ('tenant-a', 'tenant-b'); a GPU machine joins one tenant only."
    host_a = owned(real, resource_lib.HOST_WORKER_TYPE, "tenant-a")
    host_b = owned(real, resource_lib.HOST_WORKER_TYPE, "tenant-b")
    # The node name alone (each host at its own address).
    host_b.registered_outputs = {**(host_b.registered_outputs or {}), "nodeName": "gpu-a100-01"}
    assert run_stack_policy(tp.worker_joins_own_tenant, real) == [(f"node gpu-a100-01 {several}", host_b.urn)]
    # Names not known yet (a first preview) name no machine: two hosts of unknown name and address are not one.
    known = {host.urn: dict(host.registered_outputs or {}) for host in (host_a, host_b)}
    for host in (host_a, host_b):
        host.registered_outputs = {**known[host.urn], "nodeName": ENGINE_UNKNOWN, "address": ENGINE_UNKNOWN}
    assert run_stack_policy(tp.worker_joins_own_tenant, real) == []
    for host in (host_a, host_b):
        host.registered_outputs = {**known[host.urn], "nodeName": host.inputs["nodeName"]}
    # A remote command of tenant-b's on tenant-a's host (its connection is a secret the pack reads through).
    join_b = find(real, resource_lib.REMOTE_COMMAND_TYPE, "tenant-b-gpu-l4-01-join")
    set_both(join_b, ["connection", "value", "host"], host_a.inputs["address"])
    assert run_stack_policy(tp.worker_joins_own_tenant, real) == [(f"host 10.20.0.11 {several}", join_b.urn)]
    # A kind worker container of each tenant by one name; other containers are no workers.
    container_a = owned(stack, resource_lib.CONTAINER_TYPE, "tenant-a")
    container_b = owned(stack, resource_lib.CONTAINER_TYPE, "tenant-b")
    set_both(container_b, ["name"], container_a.state["name"])
    assert (f"container gpu-tenancy-dev-tenant-a-worker {several}", container_b.urn) in run_stack_policy(
        tp.worker_joins_own_tenant, stack
    )
    set_both(container_b, ["labels"], [])
    assert not [m for m, _ in run_stack_policy(tp.worker_joins_own_tenant, stack) if m.endswith(several)]


def test_a_join_under_no_tenant_is_checked_by_the_tenant_it_claims(stack: list[Recorded]) -> None:
    environment = {"GPU_TENANCY_TENANT": "tenant-a", "CONTROL_PLANE_TENANT": "tenant-b", "GPU_TENANCY_WORKER": "elsewhere"}
    join = add_resource(stack, stack_root(stack), resource_lib.COMMAND_TYPE, "stray-join", {"environment": environment})
    assert run_stack_policy(tp.worker_joins_own_tenant, stack) == [(
        "worker join 'stray-join' of tenant 'tenant-a' has CONTROL_PLANE_TENANT='tenant-b'; a worker joins only its "
        "own tenant's control plane.",
        join.urn,
    )]


def test_gpu_host_joining_another_tenants_control_plane_is_flagged(real: list[Recorded]) -> None:
    host_b = owned(real, resource_lib.HOST_WORKER_TYPE, "tenant-b")
    endpoint_a = find(real, TENANT, "tenant-a").outputs["endpoint"]
    # As HostWorker registers its inputs today; the engine's stack view needs them in register_outputs.
    host_b.registered_outputs = {**host_b.inputs, "controlPlaneEndpoint": endpoint_a}
    assert_violation(
        run(tp.worker_joins_own_tenant, real),
        "worker join 'tenant-b-gpu-l4-01' of tenant 'tenant-b' targets 10.98.165.86:6443, the control plane of "
        "'tenant-a'; use 'tenant-b''s TenantControlPlane endpoint.",
    )


def test_gpu_host_claiming_another_tenant_or_under_none_is_checked_by_its_claim(real: list[Recorded]) -> None:
    host_b = owned(real, resource_lib.HOST_WORKER_TYPE, "tenant-b")
    assert host_b.registered_outputs is not None
    host_b.registered_outputs["tenant"] = "tenant-a"
    assert run_stack_policy(tp.worker_joins_own_tenant, real) == [
        ("GPU host 'tenant-b-gpu-l4-01' under tenant 'tenant-b' says tenant='tenant-a'.", host_b.urn)]
    # A HostWorker under no Tenant is held to the tenant it names: here it targets tenant-a's control plane.
    root = stack_root(real)
    endpoint_a = find(real, TENANT, "tenant-a").outputs["endpoint"]
    stray = add_resource(real, root, resource_lib.HOST_WORKER_TYPE, "stray-host", {}, outputs={
        "tenant": "tenant-b", "controlPlaneEndpoint": endpoint_a, "address": "10.20.0.99"})
    assert (f"worker join 'stray-host' of tenant 'tenant-b' targets {endpoint_a}, the control plane of 'tenant-a'; "
            "use 'tenant-b''s TenantControlPlane endpoint.", stray.urn) in run_stack_policy(tp.worker_joins_own_tenant, real)


def test_gpu_host_that_states_no_endpoint_fails_closed(real: list[Recorded]) -> None:
    host_b = owned(real, resource_lib.HOST_WORKER_TYPE, "tenant-b")
    outputs = host_b.registered_outputs
    assert outputs is not None
    outputs["controlPlaneEndpoint"] = ENGINE_UNKNOWN  # a first preview: checked once it is known
    assert run(tp.worker_joins_own_tenant, real) == []
    del outputs["controlPlaneEndpoint"]
    assert run_stack_policy(tp.worker_joins_own_tenant, real) == [(
        "GPU host 'tenant-b-gpu-l4-01' of tenant 'tenant-b' states no controlPlaneEndpoint, so which control plane it "
        "joins cannot be checked; a HostWorker registers the endpoint it joins as an output.", host_b.urn)]


# --------------------------------------------------------------------------- 10 no-mock-gpus-in-real


@pytest.mark.usefixtures("gpu_env")
def test_real_mode_without_the_device_plugin_is_flagged(real: list[Recorded]) -> None:
    set_both(owned(real, RELEASE, "tenant-a", "hami"), ["values", "devicePlugin", "enabled"], False)
    assert_violation(
        run(tp.no_mock_gpus_in_real, real),
        "mode is 'real' but tenant 'tenant-a' installs HAMi with devicePlugin.enabled=false "
        "(kubernetes:helm.sh/v3:Release 'tenant-a-hami-chart'); enable it so real GPUs are registered.",
    )


@pytest.mark.usefixtures("gpu_env")
@pytest.mark.parametrize("chart", ["hami", "project-hami/hami", "oci://ghcr.io/project-hami/charts/hami",
                                   "./charts/hami-2.10.0.tgz"])
def test_hami_is_known_in_each_form_helm_takes_its_chart(real: list[Recorded], chart: str) -> None:
    release = owned(real, RELEASE, "tenant-a", "hami")
    set_both(release, ["chart"], chart)
    set_both(release, ["values", "devicePlugin", "enabled"], False)
    assert run_stack_policy(tp.no_mock_gpus_in_real, real) == [(
        "mode is 'real' but tenant 'tenant-a' installs HAMi with devicePlugin.enabled=false "
        "(kubernetes:helm.sh/v3:Release 'tenant-a-hami-chart'); enable it so real GPUs are registered.", release.urn)]
    # Unset, the chart's own default enables the plugin.
    for props in (release.inputs, release.state):
        del props["values"]["devicePlugin"]["enabled"]
    assert run_stack_policy(tp.no_mock_gpus_in_real, real) == []


def test_a_fake_gpu_outside_any_tenant_is_named_first_in_mode_real(stack: list[Recorded]) -> None:
    for tenant in ("tenant-a", "tenant-b"):  # HAMi's plugin on, so only the agents remain to name
        set_both(owned(stack, RELEASE, tenant, "hami"), ["values", "devicePlugin", "enabled"], True)
    root = stack_root(stack)
    stray = add_resource(stack, root, resource_lib.MOCK_AGENT_TYPE, "stray-agent", {})
    # Tenants by the name their Tenant registers, in its order, whatever their resources are called.
    tenant_0 = add_resource(stack, root, TENANT, "lab-0", {"tenant": "tenant-0"}, outputs={"tenant": "tenant-0"})
    add_resource(stack, tenant_0, resource_lib.MOCK_AGENT_TYPE, "zz-agent", {})
    messages = run_stack_policy(tp.no_mock_gpus_in_real, stack, {"mode": "real"})
    assert messages[0] == (
        "mode is 'real' but the stack, outside any tenant, still runs the mock-GPU agent "
        "(gpu-tenancy:mock_gpu_agent:MockGpuAgent 'stray-agent'); remove it, real GPUs are registered by HAMi's "
        "device plugin.", stray.urn)
    assert [m.split(" still runs")[0].removeprefix("mode is 'real' but ") for m, _ in messages[1:]] == [
        "tenant 'tenant-0'", "tenant 'tenant-a'", "tenant 'tenant-a'", "tenant 'tenant-b'", "tenant 'tenant-b'"]


def test_a_daemon_set_outside_the_tenants_is_owned_by_its_label_or_else_its_provider(stack: list[Recorded]) -> None:
    root = stack_root(stack)

    def agent_daemon_set(name: str, labels: dict[str, str], provider: str) -> Recorded:
        labels = {"gpu-tenancy.io/component": "mock-gpu-agent", **labels}
        return add_resource(stack, root, DAEMONSET, name, {"metadata": {"name": name, "labels": labels}}, provider)

    labelled = agent_daemon_set("labelled", {"gpu-tenancy.io/tenant": "tenant-b"}, provider_ref(stack, "tenant-a-kubernetes"))
    on_a = agent_daemon_set("on-a", {}, provider_ref(stack, "tenant-a-kubernetes"))
    on_management = agent_daemon_set("on-management", {}, provider_ref(stack, "management"))
    findings = {urn: m.split(" still runs")[0] for m, urn in run_stack_policy(tp.no_mock_gpus_in_real, stack, {"mode": "real"})}
    assert [findings[r.urn] for r in (labelled, on_a, on_management)] == [
        "mode is 'real' but tenant 'tenant-b'", "mode is 'real' but tenant 'tenant-a'",
        "mode is 'real' but the stack, outside any tenant,"]


def test_a_stack_of_mixed_modes_names_each_tenant_by_mode(stack: list[Recorded], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    tenant_a = find(stack, TENANT, "tenant-a")
    tenant_a.registered_outputs = {**(tenant_a.registered_outputs or {}), "mode": "real"}
    add_resource(stack, stack_root(stack), TENANT, "tenant-c", {}, outputs={"mode": "sim"})
    assert run_stack_policy(tp.no_mock_gpus_in_real, stack)[0] == (
        "the stack mixes modes: real: tenant-a; sim: tenant-b, tenant-c", None)


def test_real_stack_checked_as_sim_is_flagged(real: list[Recorded]) -> None:
    assert_violation(run(tp.no_mock_gpus_in_real, real, {"mode": "sim"}), "installs a real GPU device plugin")



def test_mock_agent_in_real_mode_is_flagged(stack: list[Recorded]) -> None:
    messages = run(tp.no_mock_gpus_in_real, stack, {"mode": "real"})
    assert_violation(messages, "mode is 'real' but tenant 'tenant-a' still runs the mock-GPU agent")
    assert_violation(messages, "devicePlugin.enabled=false")


def test_mode_real_from_the_stack_config_is_honoured(stack: list[Recorded], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", engine_config({**dev_config(), "mode": "real"}))
    assert_violation(run(tp.no_mock_gpus_in_real, undeclare(stack)), "mode is 'real'", "mock-GPU agent")


def test_real_device_plugin_in_sim_mode_is_flagged(stack: list[Recorded], pack_env: None) -> None:
    set_both(owned(stack, RELEASE, "tenant-b", "hami"), ["values", "devicePlugin", "enabled"], True)
    assert_violation(
        run(tp.no_mock_gpus_in_real, stack),
        "mode is 'sim' but tenant 'tenant-b' installs a real GPU device plugin (kubernetes:helm.sh/v3:Release "
        "'tenant-b-hami-chart'); set HAMi devicePlugin.enabled=false, the mock-GPU agent simulates the devices.",
    )


def test_a_real_device_plugin_chart_in_mode_sim_is_flagged(stack: list[Recorded]) -> None:
    release = hami(stack, "tenant-a")
    tenant_hami = find(stack, "gpu-tenancy:hami:Hami", "tenant-a-hami")
    plugin = add_resource(stack, tenant_hami, RELEASE, "tenant-a-nvidia",
                  {**release.inputs, "chart": "nvidia-device-plugin", "values": {}}, release.provider)
    assert run_stack_policy(tp.no_mock_gpus_in_real, stack, {"mode": "sim"}) == [(
        "mode is 'sim' but tenant 'tenant-a' installs a real GPU device plugin (kubernetes:helm.sh/v3:Release "
        "'tenant-a-nvidia'); set HAMi devicePlugin.enabled=false, the mock-GPU agent simulates the devices.",
        plugin.urn)]


def test_without_a_known_mode_the_agent_next_to_a_real_plugin_or_a_mock_nvml_is_flagged(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    set_both(owned(stack, RELEASE, "tenant-a", "hami"), ["values", "devicePlugin", "enabled"], True)
    add_mock_nvml(stack, "tenant-b")
    # And an agent and a plugin no tenant owns (straight under the stack).
    root = stack_root(stack)
    add_resource(stack, root, resource_lib.MOCK_AGENT_TYPE, "stray-agent", {})
    add_resource(stack, root, RELEASE, "stray-hami", {"chart": "hami", "values": {"devicePlugin": {"enabled": True}}})
    add_resource(stack, root, MOCK_NVML, "stray-nvml", {})
    agent = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:mock_gpu_agent:MockGpuAgent::"
    assert run_stack_policy(tp.no_mock_gpus_in_real, undeclare(stack)) == [
        ("the stack, outside any tenant, runs both the mock-GPU agent and a real device plugin; pick one "
         "(gpu-tenancy:mode sim or real).",
         "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:mock_gpu_agent:MockGpuAgent::stray-agent"),
        ("tenant 'tenant-a' runs both the mock-GPU agent and a real device plugin; pick one "
         "(gpu-tenancy:mode sim or real).", agent + "tenant-a-mock-gpu-agent"),
        ("the stack, outside any tenant, runs both the mock-GPU agent and the mock NVML (gpu-tenancy:mock_nvml:MockNvml "
         "'stray-nvml'), which would register its GPUs twice; pick one (gpu-tenancy:mode sim or sim-nvml).",
         "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:mock_gpu_agent:MockGpuAgent::stray-agent"),
        ("tenant 'tenant-b' runs both the mock-GPU agent and the mock NVML (gpu-tenancy:mock_nvml:MockNvml "
         "'tenant-b-mock-nvml'), which would register its GPUs twice; pick one (gpu-tenancy:mode sim or sim-nvml).",
         agent + "tenant-b-mock-gpu-agent"),
    ]


def _tenant_child(stack: str, path: str) -> str:
    return f"urn:pulumi:{stack}::gpu-tenancy::gpu-tenancy:tenant:Tenant${path}"


def test_each_fake_gpu_in_mode_real_is_named_where_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every violation in full, on the resource to remove or change: the agent and its DaemonSet, HAMi without
    its plugin (the dev stack); the mock NVML, its DaemonSet and HAMi pointed at it (the sim-nvml stack)."""
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    agent, release = "gpu-tenancy:mock_gpu_agent:MockGpuAgent", "gpu-tenancy:hami:Hami$kubernetes:helm.sh/v3:Release"
    expected = []
    for tenant in ("tenant-a", "tenant-b"):
        expected += [
            (f"mode is 'real' but tenant '{tenant}' still runs the mock-GPU agent ({agent} '{tenant}-mock-gpu-agent'); "
             "remove it, real GPUs are registered by HAMi's device plugin.",
             _tenant_child("dev", f"{agent}::{tenant}-mock-gpu-agent")),
            (f"mode is 'real' but tenant '{tenant}' still runs the mock-GPU agent (kubernetes:apps/v1:DaemonSet "
             f"'{tenant}-mock-gpu-agent-daemonset'); remove it, real GPUs are registered by HAMi's device plugin.",
             _tenant_child("dev", f"{agent}$kubernetes:apps/v1:DaemonSet::{tenant}-mock-gpu-agent-daemonset")),
        ]
    expected += [
        (f"mode is 'real' but tenant '{tenant}' installs HAMi with devicePlugin.enabled=false "
         f"(kubernetes:helm.sh/v3:Release '{tenant}-hami-chart'); enable it so real GPUs are registered.",
         _tenant_child("dev", f"{release}::{tenant}-hami-chart"))
        for tenant in ("tenant-a", "tenant-b")
    ]
    assert run_stack_policy(tp.no_mock_gpus_in_real, copy_stack(dev_stack()), {"mode": "real"}) == expected

    nvml, expected = "gpu-tenancy:mock_nvml:MockNvml", []
    for tenant in ("tenant-a", "tenant-b"):
        for what, path in ((f"{nvml} '{tenant}-mock-nvml'", f"{nvml}::{tenant}-mock-nvml"),
                           (f"kubernetes:apps/v1:DaemonSet '{tenant}-mock-nvml-daemonset'",
                            f"{nvml}$kubernetes:apps/v1:DaemonSet::{tenant}-mock-nvml-daemonset")):
            expected.append((f"mode is 'real' but tenant '{tenant}' runs NVIDIA's mock NVML ({what}); remove it, real "
                             "GPUs must not be faked: HAMi's device plugin reads the host's own driver.",
                             _tenant_child("dev-nvml", path)))
    expected += [
        (f"mode is 'real' but tenant '{tenant}' points HAMi's device plugin at the mock NVML "
         f"(devicePlugin.nvidiaDriverRoot='/var/lib/nvml-mock/driver', kubernetes:helm.sh/v3:Release "
         f"'{tenant}-hami-chart'); unset it (or name the real driver's root) so the plugin reads the host's real GPUs.",
         _tenant_child("dev-nvml", f"{release}::{tenant}-hami-chart"))
        for tenant in ("tenant-a", "tenant-b")
    ]
    assert run_stack_policy(tp.no_mock_gpus_in_real, copy_stack(nvml_stack()), {"mode": "real"}) == expected


def test_a_real_plugin_or_a_mock_nvml_in_mode_sim_is_named_where_it_is(stack: list[Recorded]) -> None:
    add_mock_nvml(stack, "tenant-b")
    set_both(owned(stack, RELEASE, "tenant-a", "hami"), ["values", "devicePlugin", "enabled"], True)
    twice = ("remove it, the mock-GPU agent registers sim's GPUs and the two would register them twice (HAMi's device "
             "plugin on the mock NVML is mode 'sim-nvml').")
    assert run_stack_policy(tp.no_mock_gpus_in_real, stack, {"mode": "sim"}) == [
        ("mode is 'sim' but tenant 'tenant-a' installs a real GPU device plugin (kubernetes:helm.sh/v3:Release "
         "'tenant-a-hami-chart'); set HAMi devicePlugin.enabled=false, the mock-GPU agent simulates the devices.",
         _tenant_child("dev", "gpu-tenancy:hami:Hami$kubernetes:helm.sh/v3:Release::tenant-a-hami-chart")),
        ("mode is 'sim' but tenant 'tenant-b' runs NVIDIA's mock NVML (gpu-tenancy:mock_nvml:MockNvml "
         f"'tenant-b-mock-nvml'); {twice}", _tenant_child("dev", "gpu-tenancy:mock_nvml:MockNvml::tenant-b-mock-nvml")),
        ("mode is 'sim' but tenant 'tenant-b' runs NVIDIA's mock NVML (kubernetes:apps/v1:DaemonSet "
         f"'tenant-b-mock-nvml-daemonset'); {twice}",
         _tenant_child("dev", "gpu-tenancy:mock_nvml:MockNvml$kubernetes:apps/v1:DaemonSet::tenant-b-mock-nvml-daemonset")),
    ]


# --------------------------------------------------------------------------- 10 no-mock-gpus-in-real: mode sim-nvml

# The shapes the program registers in mode sim-nvml (HAMi's own device plugin on NVIDIA's mock NVML).
MOCK_NVML = "gpu-tenancy:mock_nvml:MockNvml"
INVENTORY_CHECK = "gpu-tenancy:inventory_check:InventoryCheck"
NVML_DRIVER_ROOT = "/var/lib/nvml-mock/driver"
NVML_IMAGE = nvml_mock.image_name()  # built on the Docker host: 12 hex of the pinned upstream commit
NVML_HOST_PATHS = {
    "host-nvml-mock": "/var/lib/nvml-mock",
    "host-cdi": "/var/run/cdi",
    "host-run-nvidia": "/run/nvidia",
    "host-nfd-features": "/etc/kubernetes/node-feature-discovery/features.d",
}
SIM_NVML_DEVICE_PLUGIN = {
    "enabled": True,
    "nvidiaDriverRoot": NVML_DRIVER_ROOT,
    "passDeviceSpecsEnabled": True,
    "extraEnvs": [
        {"name": "LD_LIBRARY_PATH", "value": "/driver-root/usr/lib64"},
        {"name": "DEVICE_DISCOVERY_STRATEGY", "value": "nvml"},
    ],
    "service": {"type": "ClusterIP"},
}


def add_mock_nvml(
    resources: list[Recorded], tenant: str, *, component: bool = True, daemon_set: bool = True
) -> list[Recorded]:
    """What MockNvml registers for `tenant` (without its component: the children straight under the Tenant)."""
    parent = find(resources, TENANT, tenant)
    name = f"{tenant}-mock-nvml"
    added = []
    if component:
        parent = add_resource(resources, parent, MOCK_NVML, name, {"tenant": tenant},
                      outputs={"daemonSetName": name, "configDigest": "c70adf6b770b21df", "gpus": 1})
        added.append(parent)
    provider = provider_ref(resources, f"{tenant}-kubernetes")
    labels = {tenancy_lib.TENANT_LABEL: tenant, tenancy_lib.COMPONENT_LABEL: "nvml-mock"}
    metadata = {"name": name, "namespace": "kube-system", "labels": labels}
    cluster_metadata = {"name": name, "labels": labels}
    added.append(add_resource(resources, parent, resource_lib.COMMAND_TYPE, f"{name}-image-load",
                      {"environment": {"IMAGE": NVML_IMAGE, "NODE_CONTAINER": f"{tenant}-worker"}}))
    added.append(add_resource(resources, parent, "kubernetes:core/v1:ServiceAccount", f"{name}-sa",
                      {"metadata": metadata}, provider))
    added.append(add_resource(resources, parent, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", f"{name}-role",
                      {"metadata": cluster_metadata, "rules": [{"apiGroups": [""], "resources": ["nodes"],
                       "resourceNames": [f"{tenant}-worker"], "verbs": ["get", "patch"]}]}, provider))
    added.append(add_resource(resources, parent, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                      f"{name}-binding", {"metadata": cluster_metadata, "roleRef": {
                          "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                          "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}]},
                      provider))
    added.append(add_resource(resources, parent, "kubernetes:core/v1:ConfigMap", f"{name}-config",
                      {"metadata": metadata, "data": {"config.yaml": "devices: []\n"}}, provider))
    if daemon_set:
        added.append(add_resource(resources, parent, DAEMONSET, f"{name}-daemonset", {
            "metadata": metadata,
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": name,
                        "nodeSelector": {"gpu": "on"},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{
                            "name": "nvml-mock",
                            "image": NVML_IMAGE,
                            "imagePullPolicy": "Never",
                            "securityContext": {"privileged": True},
                            "volumeMounts": [{"name": v, "mountPath": f"/host{p}"} for v, p in NVML_HOST_PATHS.items()],
                        }],
                        "volumes": [
                            *({"name": v, "hostPath": {"path": p, "type": "DirectoryOrCreate"}}
                              for v, p in NVML_HOST_PATHS.items()),
                            {"name": "gpu-config", "configMap": {"name": name}},
                        ],
                    },
                },
            },
        }, provider))
    return added


def remove_subtree(resources: list[Recorded], root: Recorded) -> None:
    """Drop `root` and everything registered under it."""
    gone = {root.urn}
    changed = True
    while changed:
        changed = False
        for resource in resources:
            if resource.parent in gone and resource.urn not in gone:
                gone.add(resource.urn)
                changed = True
    resources[:] = [r for r in resources if r.urn not in gone]


def hami(resources: list[Recorded], tenant: str) -> Recorded:
    return owned(resources, RELEASE, tenant, "hami")


def to_sim_nvml(resources: list[Recorded], keep_agent: bool = False) -> list[Recorded]:
    """The dev stack as mode sim-nvml registers it: no agent, HAMi's plugin on the mock NVML, a MockNvml each,
    and the image built once for the stack."""
    root = stack_root(resources)
    image = add_resource(resources, root, "gpu-tenancy:nvml_mock_image:NvmlMockImage", "nvml-mock-image",
                 {"commit": versions.NVML_MOCK_COMMIT}, outputs={"imageName": NVML_IMAGE})
    add_resource(resources, image, resource_lib.COMMAND_TYPE, "nvml-mock-image-build", {"environment": {
        "IMAGE": NVML_IMAGE, "CONTEXT": f"{versions.NVML_MOCK_REPOSITORY}#{versions.NVML_MOCK_COMMIT}",
        "DOCKERFILE": "deployments/nvml-mock/Dockerfile"}})
    for tenant in [r for r in resources if r.type == TENANT]:
        tenant_name = tenant.name
        for props in (tenant.inputs, tenant.registered_outputs or {}):
            if "mode" in props:
                props["mode"] = "sim-nvml"
        if not keep_agent:
            remove_subtree(resources, owned(resources, resource_lib.MOCK_AGENT_TYPE, tenant_name))
        set_both(hami(resources, tenant_name), ["values", "devicePlugin"], dict(SIM_NVML_DEVICE_PLUGIN))
        add_mock_nvml(resources, tenant_name)
        # sim-nvml's GPU-access policy names the CUDA-control marker its own mutation writes.
        policy = find(resources, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
                      f"{tenant_name}-gpu-access-policy")
        set_both(policy, ["spec", "variables", 0, "expression"], f"'{cuda_control.MARKER}'")
        add_resource(resources, tenant, INVENTORY_CHECK, f"{tenant_name}-inventory", {"tenant": tenant_name},
             outputs={"problems": []})
    return resources


@pytest.fixture
def nvml_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's PULUMI_CONFIG for the example sim-nvml stack (Pulumi.dev-nvml.yaml)."""
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(nvml_config()))


@pytest.fixture
def nvml() -> list[Recorded]:
    """A private copy of the dev stack turned into mode sim-nvml."""
    return to_sim_nvml(copy_stack(dev_stack()))


def test_the_example_sim_nvml_stack_is_mode_sim_nvml() -> None:
    assert nvml_config()["mode"] == "sim-nvml"
    assert [t["name"] for t in nvml_config()["tenants"]] == [t["name"] for t in dev_config()["tenants"]]


@pytest.mark.usefixtures("nvml_env")
@pytest.mark.parametrize("unknowns", [False, True], ids=["deployed", "first-preview"])
@pytest.mark.parametrize("policy", tp.ALL_POLICIES, ids=lambda p: p.name)
def test_sim_nvml_stack_passes(policy: Any, unknowns: bool) -> None:
    """The mock NVML's privileged, hostPath DaemonSet and locally built image are platform, not violations."""
    assert run(policy, to_sim_nvml(copy_stack(dev_stack(unknowns)))) == []


_PROGRAM_NVML: dict[bool, list[Recorded]] = {}


def program_nvml_stack(unknowns: bool) -> list[Recorded]:
    """Pulumi.dev-nvml.yaml as the program registers it (recorded once per session)."""
    if unknowns not in _PROGRAM_NVML:
        _PROGRAM_NVML[unknowns] = record_engine_view(nvml_config(), stack="dev-nvml", unknowns=unknowns)
    return _PROGRAM_NVML[unknowns]


@pytest.mark.usefixtures("nvml_env")
@pytest.mark.parametrize("unknowns", [False, True], ids=["deployed", "first-preview"])
@pytest.mark.parametrize("policy", tp.ALL_POLICIES, ids=lambda p: p.name)
def test_the_programs_sim_nvml_stack_passes(policy: Any, unknowns: bool) -> None:
    assert run(policy, program_nvml_stack(unknowns)) == []


def test_the_programs_sim_nvml_stack_is_what_the_policies_expect() -> None:
    """Guards against vacuous passes: the program registers the shapes the fabricated stack above has."""
    resources = program_nvml_stack(False)
    types = {r.type for r in resources}
    assert MOCK_NVML in types and resource_lib.MOCK_AGENT_TYPE not in types
    for tenant in ("tenant-a", "tenant-b"):
        assert find(resources, TENANT, tenant).outputs["mode"] == "sim-nvml"
        assert owned(resources, MOCK_NVML, tenant).outputs
        daemon_set = owned(resources, DAEMONSET, tenant, "mock-nvml")
        assert daemon_set.state["metadata"]["labels"] == {tenancy_lib.TENANT_LABEL: tenant, tenancy_lib.COMPONENT_LABEL: "nvml-mock"}
        pod = daemon_set.state["spec"]["template"]["spec"]
        assert pod["containers"][0]["securityContext"]["privileged"] is True
        assert {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v} == set(NVML_HOST_PATHS.values())
        assert pod["containers"][0]["image"] == NVML_IMAGE
        plugin = hami(resources, tenant).state["values"]["devicePlugin"]
        assert {k: plugin[k] for k in ("enabled", "nvidiaDriverRoot", "passDeviceSpecsEnabled", "extraEnvs")} == {
            k: SIM_NVML_DEVICE_PLUGIN[k] for k in ("enabled", "nvidiaDriverRoot", "passDeviceSpecsEnabled", "extraEnvs")
        }
        assert owned(resources, INVENTORY_CHECK, tenant)


def test_the_pack_and_the_program_agree_on_the_mock_nvml() -> None:
    from gpu_tenancy.builders.mock_nvml import nvml_mock

    assert gpu_lib.MOCK_NVML_DRIVER_ROOT == nvml_mock.DRIVER_ROOT == NVML_DRIVER_ROOT
    assert gpu_lib.MOCK_NVML_COMPONENT == nvml_mock.COMPONENT
    assert nvml_mock.image_name() == NVML_IMAGE


def test_sim_nvml_is_read_from_the_tenants_or_the_policy_config(nvml: list[Recorded], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert find(nvml, TENANT, "tenant-a").outputs["mode"] == "sim-nvml"
    remove_subtree(nvml, owned(nvml, MOCK_NVML, "tenant-a"))
    assert_violation(
        run(tp.no_mock_gpus_in_real, nvml),
        "mode is 'sim-nvml' but tenant 'tenant-a' runs HAMi's device plugin (kubernetes:helm.sh/v3:Release "
        "'tenant-a-hami-chart') with no mock NVML (gpu-tenancy:mock_nvml:MockNvml, or a DaemonSet labelled "
        "gpu-tenancy.io/component=nvml-mock); add one, else the plugin finds no NVML library under "
        "'/var/lib/nvml-mock/driver' and registers no GPUs.",
    )
    # The dev stack (sim) checked as sim-nvml: its agent and its disabled plugin are both wrong there.
    messages = run(tp.no_mock_gpus_in_real, copy_stack(dev_stack()), {"mode": "sim-nvml"})
    assert_violation(messages, "mode is 'sim-nvml' but tenant 'tenant-a' runs the mock-GPU agent")
    assert_violation(
        messages,
        "mode is 'sim-nvml' but tenant 'tenant-b' installs HAMi with devicePlugin.enabled=false "
        "(kubernetes:helm.sh/v3:Release 'tenant-b-hami-chart'); enable it, in this mode HAMi's own device plugin "
        "registers the mock NVML's GPUs.",
    )
    assert tp.no_mock_gpus_in_real.config_schema.properties["mode"]["enum"] == ["sim", "sim-nvml", "real"]


def test_sim_nvml_from_the_stack_config_is_honoured(nvml: list[Recorded], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(nvml_config()))
    undeclare(nvml)
    assert run(tp.no_mock_gpus_in_real, nvml) == []
    set_both(hami(nvml, "tenant-b"), ["values", "devicePlugin", "enabled"], False)
    assert_violation(
        run(tp.no_mock_gpus_in_real, nvml),
        "mode is 'sim-nvml' but tenant 'tenant-b' installs HAMi with devicePlugin.enabled=false "
        "(kubernetes:helm.sh/v3:Release 'tenant-b-hami-chart'); enable it, in this mode HAMi's own device plugin "
        "registers the mock NVML's GPUs.",
    )


def test_a_stack_mixing_sim_and_sim_nvml_is_flagged(nvml: list[Recorded], nvml_env: None) -> None:
    outputs = find(nvml, TENANT, "tenant-b").registered_outputs
    assert outputs is not None
    outputs["mode"] = "sim"
    assert_violation(
        run(tp.no_mock_gpus_in_real, nvml),
        "the stack mixes modes: sim: tenant-b; sim-nvml: tenant-a",
    )


@pytest.mark.usefixtures("nvml_env")
def test_mock_agent_in_sim_nvml_mode_is_flagged() -> None:
    stack = to_sim_nvml(copy_stack(dev_stack()), keep_agent=True)
    messages = run(tp.no_mock_gpus_in_real, stack)
    assert_violation(
        messages,
        "mode is 'sim-nvml' but tenant 'tenant-a' runs the mock-GPU agent (gpu-tenancy:mock_gpu_agent:MockGpuAgent "
        "'tenant-a-mock-gpu-agent'); remove it, HAMi's device plugin registers the mock NVML's GPUs and both would "
        "write hami.io/node-nvidia-register.",
    )
    assert_violation(
        messages,
        "mode is 'sim-nvml' but tenant 'tenant-b' runs the mock-GPU agent (kubernetes:apps/v1:DaemonSet "
        "'tenant-b-mock-gpu-agent-daemonset'); remove it, HAMi's device plugin registers the mock NVML's GPUs and "
        "both would write hami.io/node-nvidia-register.",
    )


def test_sim_nvml_with_hamis_device_plugin_disabled_is_flagged(nvml: list[Recorded], nvml_env: None) -> None:
    set_both(hami(nvml, "tenant-a"), ["values", "devicePlugin", "enabled"], False)
    messages = run(tp.no_mock_gpus_in_real, nvml)
    assert_violation(
        messages,
        "mode is 'sim-nvml' but tenant 'tenant-a' installs HAMi with devicePlugin.enabled=false "
        "(kubernetes:helm.sh/v3:Release 'tenant-a-hami-chart'); enable it, in this mode HAMi's own device plugin "
        "registers the mock NVML's GPUs.",
    )
    assert len(messages) == 1


@pytest.mark.parametrize("root", ["/", "/run/nvidia/driver", None])
def test_sim_nvml_without_the_mock_driver_root_is_flagged(nvml: list[Recorded], nvml_env: None, root: str | None) -> None:
    release = hami(nvml, "tenant-b")
    if root is None:
        unset = {k: v for k, v in SIM_NVML_DEVICE_PLUGIN.items() if k != "nvidiaDriverRoot"}
        set_both(release, ["values", "devicePlugin"], unset)
    else:
        set_both(release, ["values", "devicePlugin", "nvidiaDriverRoot"], root)
    found, where = ("without devicePlugin.nvidiaDriverRoot", "at '/'") if root is None else (
        f"with devicePlugin.nvidiaDriverRoot={root!r}", "there")
    assert run_stack_policy(tp.no_mock_gpus_in_real, nvml) == [(
        f"mode is 'sim-nvml' but tenant 'tenant-b' runs HAMi's device plugin {found} (kubernetes:helm.sh/v3:Release "
        f"'tenant-b-hami-chart'); set it to '/var/lib/nvml-mock/driver', the mock NVML's driver root, else the plugin "
        f"looks for a real driver {where} and panics.", release.urn)]


def test_sim_nvml_checks_every_tenant_past_one_whose_plugin_is_not_known_yet(nvml: list[Recorded], nvml_env: None) -> None:
    set_both(hami(nvml, "tenant-a"), ["values", "devicePlugin", "enabled"], ENGINE_UNKNOWN)
    set_both(hami(nvml, "tenant-b"), ["values", "devicePlugin", "enabled"], False)
    assert run(tp.no_mock_gpus_in_real, nvml) == [
        "mode is 'sim-nvml' but tenant 'tenant-b' installs HAMi with devicePlugin.enabled=false "
        "(kubernetes:helm.sh/v3:Release 'tenant-b-hami-chart'); enable it, in this mode HAMi's own device plugin "
        "registers the mock NVML's GPUs."]


def test_sim_nvml_tenant_without_a_mock_nvml_is_flagged(nvml: list[Recorded], nvml_env: None) -> None:
    remove_subtree(nvml, owned(nvml, MOCK_NVML, "tenant-b"))
    messages = run(tp.no_mock_gpus_in_real, nvml)
    assert_violation(
        messages,
        "mode is 'sim-nvml' but tenant 'tenant-b' runs HAMi's device plugin (kubernetes:helm.sh/v3:Release "
        "'tenant-b-hami-chart') with no mock NVML (gpu-tenancy:mock_nvml:MockNvml, or a DaemonSet labelled "
        "gpu-tenancy.io/component=nvml-mock); add one, else the plugin finds no NVML library under "
        "'/var/lib/nvml-mock/driver' and registers no GPUs.",
    )
    assert not any("tenant-a" in m for m in messages)


@pytest.mark.parametrize("keep", ["component", "daemonset"])
def test_sim_nvml_accepts_the_component_or_the_daemonset(nvml: list[Recorded], nvml_env: None, keep: str) -> None:
    remove_subtree(nvml, owned(nvml, MOCK_NVML, "tenant-b"))
    add_mock_nvml(nvml, "tenant-b", component=keep == "component", daemon_set=keep == "daemonset")
    assert run(tp.no_mock_gpus_in_real, nvml) == []


@pytest.mark.parametrize("chart", ["nvidia-device-plugin", "oci://ghcr.io/nvidia/gpu-operator"])
def test_real_device_plugin_chart_in_sim_nvml_mode_is_flagged(nvml: list[Recorded], nvml_env: None, chart: str) -> None:
    release = hami(nvml, "tenant-a")
    tenant_hami = find(nvml, "gpu-tenancy:hami:Hami", "tenant-a-hami")
    add_resource(nvml, tenant_hami, RELEASE, "tenant-a-nvidia", {**release.inputs, "chart": chart, "values": {}},
                  release.provider)
    messages = run(tp.no_mock_gpus_in_real, nvml)
    assert_violation(
        messages,
        "mode is 'sim-nvml' but tenant 'tenant-a' installs a real GPU device plugin (kubernetes:helm.sh/v3:Release "
        "'tenant-a-nvidia'); remove it, there are no real GPUs: HAMi's own device plugin registers the mock NVML's.",
    )
    assert len(messages) == 1


@pytest.mark.usefixtures("gpu_env")
@pytest.mark.parametrize("component", [True, False], ids=["component", "daemonset-only"])
def test_mock_nvml_in_real_mode_is_flagged(real: list[Recorded], component: bool) -> None:
    add_mock_nvml(real, "tenant-a", component=component)
    messages = run(tp.no_mock_gpus_in_real, real)
    what = f"{MOCK_NVML} 'tenant-a-mock-nvml'" if component else f"{DAEMONSET} 'tenant-a-mock-nvml-daemonset'"
    assert_violation(messages, "mode is 'real' but tenant 'tenant-a' runs NVIDIA's mock NVML", what, "remove it")
    assert not any("tenant-b" in m for m in messages)


@pytest.mark.usefixtures("gpu_env")
def test_real_mode_on_the_mock_driver_root_is_flagged(real: list[Recorded]) -> None:
    set_both(hami(real, "tenant-b"), ["values", "devicePlugin", "nvidiaDriverRoot"], NVML_DRIVER_ROOT)
    messages = run(tp.no_mock_gpus_in_real, real)
    assert_violation(
        messages,
        "mode is 'real' but tenant 'tenant-b' points HAMi's device plugin at the mock NVML "
        "(devicePlugin.nvidiaDriverRoot='/var/lib/nvml-mock/driver', kubernetes:helm.sh/v3:Release "
        "'tenant-b-hami-chart'); unset it (or name the real driver's root) so the plugin reads the host's real GPUs.",
    )
    assert len(messages) == 1
    set_both(hami(real, "tenant-b"), ["values", "devicePlugin", "nvidiaDriverRoot"], "/run/nvidia/driver")
    assert run(tp.no_mock_gpus_in_real, real) == []  # a real driver container's root is fine


def test_mock_nvml_in_sim_mode_is_flagged(stack: list[Recorded], pack_env: None) -> None:
    add_mock_nvml(stack, "tenant-b")
    messages = run(tp.no_mock_gpus_in_real, stack)
    assert_violation(
        messages,
        "mode is 'sim' but tenant 'tenant-b' runs NVIDIA's mock NVML (gpu-tenancy:mock_nvml:MockNvml "
        "'tenant-b-mock-nvml'); remove it, the mock-GPU agent registers sim's GPUs and the two would register them "
        "twice (HAMi's device plugin on the mock NVML is mode 'sim-nvml').",
    )
    assert_violation(
        messages,
        "mode is 'sim' but tenant 'tenant-b' runs NVIDIA's mock NVML (kubernetes:apps/v1:DaemonSet "
        "'tenant-b-mock-nvml-daemonset'); remove it, the mock-GPU agent registers sim's GPUs and the two would "
        "register them twice (HAMi's device plugin on the mock NVML is mode 'sim-nvml').",
    )
    assert not any("tenant-a" in m for m in messages)


def test_mock_agent_next_to_a_mock_nvml_is_flagged_without_a_known_mode(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    undeclare(stack)
    assert run(tp.no_mock_gpus_in_real, stack) == []
    add_mock_nvml(stack, "tenant-a")
    messages = run(tp.no_mock_gpus_in_real, stack)
    assert_violation(
        messages,
        "tenant 'tenant-a' runs both the mock-GPU agent and the mock NVML (gpu-tenancy:mock_nvml:MockNvml "
        "'tenant-a-mock-nvml'), which would register its GPUs twice; pick one (gpu-tenancy:mode sim or sim-nvml).",
    )
    assert len(messages) == 1


def _unknown_labels(resource: Recorded) -> None:
    set_both(resource, ["metadata", "labels"], rpc_unknown())
    set_both(resource, ["spec", "template", "metadata", "labels"], rpc_unknown())


def rpc_unknown() -> str:
    from pulumi.runtime.rpc import UNKNOWN

    return UNKNOWN


def test_unknowns_at_preview_never_flag_sim_nvml(nvml: list[Recorded], nvml_env: None) -> None:
    # Whether tenant-a's plugin is on, and where it looks for NVML, is not known yet.
    set_both(hami(nvml, "tenant-a"), ["values", "devicePlugin", "enabled"], rpc_unknown())
    set_both(hami(nvml, "tenant-b"), ["values", "devicePlugin", "nvidiaDriverRoot"], rpc_unknown())
    # tenant-b's DaemonSet is its only mock NVML, and whether it is one is not known yet.
    remove_subtree(nvml, owned(nvml, MOCK_NVML, "tenant-b"))
    add_mock_nvml(nvml, "tenant-b", component=False)
    _unknown_labels(owned(nvml, DAEMONSET, "tenant-b", "mock-nvml"))
    assert run(tp.no_mock_gpus_in_real, nvml) == []
    # Nor does an empty view of it (a preview the engine knows nothing of yet).
    daemon_set = owned(nvml, DAEMONSET, "tenant-b", "mock-nvml")
    daemon_set.state = {}
    assert run(tp.no_mock_gpus_in_real, nvml) == []
    set_both(hami(nvml, "tenant-b"), ["values"], rpc_unknown())
    assert run(tp.no_mock_gpus_in_real, nvml) == []


@pytest.mark.usefixtures("gpu_env")
def test_unknowns_at_preview_never_flag_real(real: list[Recorded]) -> None:
    set_both(hami(real, "tenant-a"), ["values", "devicePlugin", "nvidiaDriverRoot"], rpc_unknown())
    add_mock_nvml(real, "tenant-b", component=False)
    _unknown_labels(owned(real, DAEMONSET, "tenant-b", "mock-nvml"))
    assert run(tp.no_mock_gpus_in_real, real) == []


def test_sim_nvml_first_preview_still_flags_what_is_known(nvml_env: None) -> None:
    stack = to_sim_nvml(copy_stack(dev_stack(unknowns=True)), keep_agent=True)
    assert_violation(run(tp.no_mock_gpus_in_real, stack), "mode is 'sim-nvml'", "runs the mock-GPU agent")


# --------------------------------------------------------------------------- 11 workload-safety


@pytest.mark.parametrize("security_options", [["name=seccomp,profile=builtin", "name=userns"],
                                              ["name=seccomp,profile=builtin", "name=rootless"]])
def test_workload_safety_accepts_every_host_and_datastore_the_program_supports(security_options: list[str]) -> None:
    """What kind gives its nodes on a userns-remapped or rootless Docker with a btrfs store, and a tenant with an
    etcd of its own: each needs its exemption, and has it."""
    config = dev_config()
    config["tenants"][1]["dataStore"] = "dedicated"
    stack = record_engine_view(config, docker_info=docker_info(security_options, driver="btrfs", backing="btrfs"))
    reached = {k for r in stack if r.custom for k, _ in workload_lib.findings(
        resource_lib.Res(r.type, r.name, r.urn, r.inputs))}
    # The flags gpu_tenancy/builders/worker/kind_node.py gives a kind node on such hosts (tests/test_worker.py).
    host_flags = {"hostPath:/dev/mapper", "usernsMode:host"} if "name=userns" in security_options else {"device:/dev/fuse"}
    assert host_flags | {"helm:kamaji-etcd"} <= reached
    assert run(tp.workload_safety, stack) == []


def test_a_label_no_longer_exempts_a_privileged_workload_but_its_component_does(stack: list[Recorded]) -> None:
    """kube-proxy is privileged and hostNetwork by design: exempt because TenantNetwork made it, not by label."""
    assert run(tp.workload_safety, stack) == []
    workload = owned(stack, "kubernetes:apps/v1:Deployment", "tenant-a", "a-infer")
    for path in (["metadata", "labels"], ["spec", "template", "metadata", "labels"]):
        set_both(workload, [*path, tenancy_lib.COMPONENT_LABEL], "kube-proxy")
    set_both(workload, ["spec", "template", "spec", "hostNetwork"], True)
    assert_violation(
        run(tp.workload_safety, stack),
        "kubernetes:apps/v1:Deployment 'tenant-a-workloads-a-infer' (made by gpu-tenancy:workloads:Workloads) sets "
        "hostNetwork: true [hostNetwork]; only the program's own components that need this may (policy config "
        "`exemptions`).",
    )


def test_the_mock_nvml_is_exempt_by_its_component_type_only(nvml: list[Recorded]) -> None:
    """Privileged with hostPath by upstream design (it mknods /dev/nvidia* and lays out the driver root)."""
    assert run(tp.workload_safety, nvml) == []
    daemon_set = owned(nvml, DAEMONSET, "tenant-a", "mock-nvml")
    daemon_set.urn = daemon_set.urn.replace("gpu-tenancy:mock_nvml:MockNvml$", "gpu-tenancy:workloads:Workloads$")
    messages = run(tp.workload_safety, nvml)
    assert_violation(
        messages,
        "kubernetes:apps/v1:DaemonSet 'tenant-a-mock-nvml-daemonset' (made by gpu-tenancy:workloads:Workloads) "
        "container 'nvml-mock' is privileged [privileged]; only the program's own components that need this may "
        "(policy config `exemptions`).",
    )
    assert_violation(
        messages,
        "kubernetes:apps/v1:DaemonSet 'tenant-a-mock-nvml-daemonset' (made by gpu-tenancy:workloads:Workloads) mounts"
        " hostPath /run/nvidia (volume 'host-run-nvidia') [hostPath:/run/nvidia]; only the program's own components "
        "that need this may (policy config `exemptions`).",
    )
    assert not any("tenant-b" in m for m in messages)


def test_the_exemptions_are_the_policy_configs_and_none_is_granted_outside_a_component(
    stack: list[Recorded],
) -> None:
    """The pack's config replaces the default exemptions; what no component made is never exempt."""
    worker = "docker:index/container:Container 'tenant-a-worker-container' (made by gpu-tenancy:worker:Worker) "
    why = "; only the program's own components that need this may (policy config `exemptions`)."
    assert [m for m in run(tp.workload_safety, stack, {"exemptions": {}}) if m.startswith(worker)] == [
        worker + "is a privileged Docker container [privileged]" + why,
        worker + "runs with security option seccomp=unconfined [seccomp:unconfined]" + why,
        worker + "runs with security option apparmor=unconfined [apparmor:unconfined]" + why,
        worker + "runs with security option label=disable [label:unconfined]" + why,
        worker + "mounts host path /lib/modules [hostPath:/lib/modules]" + why,
    ]
    add_resource(stack, stack_root(stack), DAEMONSET, "stray", {
        "metadata": {"name": "stray"},
        "spec": {"template": {"spec": {"hostNetwork": True, "containers": [{"name": "c", "image": "busybox:1.37.0"}]}}},
    })
    assert run(tp.workload_safety, stack) == [
        "kubernetes:apps/v1:DaemonSet 'stray' (made by the stack) sets hostNetwork: true [hostNetwork]" + why
    ]


# --------------------------------------------------------------------------- 12 gpu-plan-fits


def declare(stack: list[Recorded], tenant: str, **changes: Any) -> Recorded:
    """Register `tenant`'s declaration as Tenant outputs (what register_outputs should carry), changed."""
    resource = find(stack, TENANT, tenant)
    declaration = {k: resource.inputs[k] for k in ("tenant", "mode", "gpus", "gpuNodes", "workloads", "quota")}
    if "gpus" in changes and "gpuNodes" not in changes:
        # The tenant's one node now holds the changed cards.
        (node,) = declaration["gpuNodes"]
        changes["gpuNodes"] = [{"name": node["name"], "gpus": changes["gpus"]}]
    resource.registered_outputs = {**(resource.registered_outputs or {}), **declaration, **changes}
    return resource


def test_plan_passes_from_tenant_outputs_without_stack_config(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    undeclare(stack)
    declare(stack, "tenant-a")
    declare(stack, "tenant-b")
    assert run(tp.gpu_plan_fits, stack) == []


def test_overcommitted_workload_is_flagged_in_hamis_words(stack: list[Recorded], pack_env: None) -> None:
    declare(stack, "tenant-a", workloads=[
        {"name": "a-infer", "replicas": 9, "containers": [{"gpus": 1, "gpumemMiB": 10240, "gpucores": 20}]}
    ], quota={})
    messages = run(tp.gpu_plan_fits, stack)
    assert_violation(
        messages,
        "tenant 'tenant-a': workload 'a-infer' replica 5 cannot be placed on its declared GPUs in any order: 1/1 "
        "CardInsufficientCore.",
    )
    assert len(messages) == 4  # replicas 5..8; 5 x 20 cores fill the one A100


def test_quota_exceeded_is_flagged(stack: list[Recorded], pack_env: None) -> None:
    declare(stack, "tenant-b", quota={"limits.nvidia.com/gpu": 1})
    assert_violation(
        run(tp.gpu_plan_fits, stack),
        "tenant 'tenant-b': workload 'b-notebook' replica 1 cannot be placed on its declared GPUs in any order: "
        "ResourceQuotaNotFit: limits.nvidia.com/gpu 1+1 > 1.",
    )


# One L4: w0 {11517 MiB, no cores}, w1 2 x {2048 MiB, 50 cores}; if w1's pods are scheduled first the card's
# cores are full and w0 gets CardComputeUnitsExhausted.
ORDER_CASE = [
    {"name": "w0", "replicas": 1, "containers": [{"gpus": 1, "gpumemMiB": 11517}]},
    {"name": "w1", "replicas": 2, "containers": [{"gpus": 1, "gpumemMiB": 2048, "gpucores": 50}]},
]


def test_a_fit_that_depends_on_the_order_is_advisory_unless_refused(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(dev_config()))
    declare(stack, "tenant-b", gpus=[{"model": "NVIDIA L4", "count": 1}], workloads=ORDER_CASE, quota={})
    assert run(tp.gpu_plan_fits, stack) == []
    (message,) = run(tp.gpu_plan_order, stack)
    assert message.startswith(
        "tenant 'tenant-b': workload 'w0' replica 0 fits in some orders only: it depends on the order pods are "
        "created and scheduled in: 0 to 1 of 1 placed; fewest when: "
    )
    monkeypatch.setenv("PULUMI_CONFIG", engine_config({**dev_config(), "orderDependentPlan": "refuse"}))
    assert run(tp.gpu_plan_order, stack) == []
    (message,) = run(tp.gpu_plan_fits, stack)
    assert "workload 'w0' replica 0 fits only in some orders (orderDependentPlan: refuse)" in message


def test_ordered_workloads_make_the_creation_order_certain(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", engine_config({**dev_config(), "orderDependentPlan": "refuse"}))
    declare(stack, "tenant-b", gpus=[{"model": "NVIDIA L4", "count": 1}], workloads=ORDER_CASE, quota={},
            orderedWorkloads=True)
    assert run(tp.gpu_plan_fits, stack) == []
    assert run(tp.gpu_plan_order, stack) == []


def test_ordered_workloads_in_the_stack_config_make_the_order_certain_too(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before the Tenant registers its outputs the pack reads the stack config, orderedWorkloads included.
    config = {**dev_config(), "orderDependentPlan": "refuse"}
    config["tenants"][1].update(gpus=[{"model": "NVIDIA L4", "count": 1}], workloads=ORDER_CASE, quota={})
    undeclare(stack)
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(config))
    (message,) = run(tp.gpu_plan_fits, stack)
    assert "workload 'w0' replica 0 fits only in some orders (orderDependentPlan: refuse)" in message
    monkeypatch.setenv("PULUMI_CONFIG", engine_config({**config, "orderedWorkloads": True}))
    assert run(tp.gpu_plan_fits, stack) == []


def test_a_quota_met_in_some_orders_only_makes_those_replicas_depend(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    # ORDER_CASE's three one-GPU pods under a quota of two GPUs: HAMi's webhook admits the first two created.
    # w1 first: both its replicas placed and w0 refused; w0 first: w0 and one of w1's. So w0's replica and w1's
    # second depend on the order; w1's first is placed in every order.
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(dev_config()))
    declare(stack, "tenant-b", gpus=[{"model": "NVIDIA L4", "count": 1}], workloads=ORDER_CASE,
            quota={"limits.nvidia.com/gpu": 2})
    assert run(tp.gpu_plan_fits, stack) == []
    assert sorted(m.split(" fits in some orders only")[0] for m in run(tp.gpu_plan_order, stack)) == [
        "tenant 'tenant-b': workload 'w0' replica 0", "tenant 'tenant-b': workload 'w1' replica 1"]


def test_the_order_policy_leaves_an_undeclared_tenant_to_the_fit_policy(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    # gpu-plan-fits names a tenant it cannot plan (test_plan_without_any_declaration_fails_closed); the advisory
    # policy says nothing more about it, and does not fail.
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert run(tp.gpu_plan_order, undeclare(stack)) == []


def test_the_planned_nodes_carry_numa_and_pod_room_from_the_tenant(stack: list[Recorded]) -> None:
    """The Tenant declares its node's cards' NUMA nodes (sim: the mock-GPU agent's 0) and the pods left for
    workloads after the program's DaemonSets."""
    (node,) = find(stack, TENANT, "tenant-b").inputs["gpuNodes"]
    assert node["numa"] == [0, 0] and node["maxPods"] == 103
    nodes, _, _ = gpu_lib.planner_inputs("tenant-b", [(node["name"], node["gpus"], node["numa"], node["maxPods"])],
                                         [], {}, 10)
    assert [d.numa for d in nodes[0].devices] == [0, 0] and nodes[0].max_pods == 103
    nodes, _, _ = gpu_lib.planner_inputs("tenant-b", [(node["name"], node["gpus"])], [], {}, 10)
    assert [d.numa for d in nodes[0].devices] == [None, None], "undeclared NUMA nodes are unknown"


def test_unset_gpucores_stay_unset_for_the_planner() -> None:
    # HAMi's webhook (device.go defaultExclusiveCoreIfNeeded) gives a whole-card request without gpucores
    # 100 cores, a memory slice 0; reading "unset" as 0 lost the first case.
    _, workloads, _ = gpu_lib.planner_inputs(
        "t", [("t-worker", [{"model": "NVIDIA L4", "count": 1}])],
        [{"name": "whole", "containers": [{"gpus": 1}]}, {"name": "slice", "containers": [{"gpumemMiB": 1024}]}],
        {}, 10,
    )
    assert [w.containers[0].coresreq for w in workloads] == [100, 0]
    # No count is one GPU, no replicas one replica (HAMi's webhook; a Deployment's default).
    assert [(w.replicas, w.containers[0].gpus) for w in workloads] == [(1, 1), (1, 1)]


def test_a_sixteen_gpu_tenant_is_planned(stack: list[Recorded], pack_env: None) -> None:
    # Above 12 cards HAMi's tie order is not reproduced, but the verdict is: the policy still plans it.
    # Each replica takes an L4's whole 23034 MiB, what NVML reports for the card.
    declare(stack, "tenant-b", gpus=[{"model": "NVIDIA L4", "count": 16}], workloads=[
        {"name": "b-infer", "replicas": 16, "containers": [{"gpus": 1, "gpumemMiB": 23034, "gpucores": 100}]}
    ], quota={})
    assert run(tp.gpu_plan_fits, stack) == []
    declare(stack, "tenant-b", gpus=[{"model": "NVIDIA L4", "count": 16}], workloads=[
        {"name": "b-infer", "replicas": 17, "containers": [{"gpus": 1, "gpumemMiB": 23034, "gpucores": 100}]}
    ])
    assert_violation(
        run(tp.gpu_plan_fits, stack),
        "tenant 'tenant-b': workload 'b-infer' replica 16 cannot be placed on its declared GPUs in any order: "
        "ResourceQuotaNotFit at admission: admission webhook \"vgpu.hami.io\" denied the request: exceeding resource quota "
        "(limits.nvidia.com/gpumem 23034+23034 > 36864, limits.nvidia.com/gpucores 100+100 > 150).",
    )


MANY = [{"name": "a-many", "replicas": 3, "containers": [{"gpus": 1, "gpumemMiB": 1024, "gpucores": 10}]}]
SLOTS_FULL = ("tenant 'tenant-a': workload 'a-many' replica 2 cannot be placed on its declared GPUs in any order: "
              "1/1 CardTimeSlicingExhausted.")


def test_the_plan_shares_each_card_among_as_many_pods_as_the_stack_registers(
    stack: list[Recorded], pack_env: None
) -> None:
    """Slots per card: the mock-GPU agent's SPLIT_COUNT (sim), HAMi's deviceSplitCount (sim-nvml, real)."""
    declare(stack, "tenant-a", workloads=MANY, quota={})
    assert run(tp.gpu_plan_fits, stack) == []  # ten slots by default
    agent = owned(stack, DAEMONSET, "tenant-a", "mock-gpu-agent")
    for props in (agent.inputs, agent.state):
        (split,) = [e for e in props["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "SPLIT_COUNT"]
        split["value"] = "2"
    tenant_a = find(stack, TENANT, "tenant-a").urn
    assert run_stack_policy(tp.gpu_plan_fits, stack) == [(SLOTS_FULL, tenant_a)]
    nvml = to_sim_nvml(copy_stack(dev_stack()))
    declare(nvml, "tenant-a", workloads=MANY, quota={})
    set_both(hami(nvml, "tenant-a"), ["values", "devicePlugin", "deviceSplitCount"], 2)
    assert run(tp.gpu_plan_fits, nvml) == [SLOTS_FULL]
    set_both(hami(nvml, "tenant-b"), ["values", "devicePlugin", "deviceSplitCount"], 2)  # another tenant's is not
    set_both(hami(nvml, "tenant-a"), ["values", "devicePlugin", "deviceSplitCount"], 3)  # tenant-a's
    assert run(tp.gpu_plan_fits, nvml) == run(tp.gpu_plan_fits, nvml[::-1]) == []
    # Neither set: HAMi's chart default, ten.
    for props in (agent.inputs, agent.state):
        containers = props["spec"]["template"]["spec"]["containers"]
        containers[0]["env"] = [e for e in containers[0]["env"] if e["name"] != "SPLIT_COUNT"]
    assert run(tp.gpu_plan_fits, stack) == []


def test_a_declaration_the_planner_cannot_read_is_flagged(stack: list[Recorded], pack_env: None) -> None:
    for tenant in ("tenant-a", "tenant-b"):
        declare(stack, tenant, workloads=[{"name": "bad", "containers": [{"gpus": "two"}]}], quota={})
    assert sorted(run_stack_policy(tp.gpu_plan_fits, stack)) == [(
        f"tenant '{tenant}': its GPU declaration cannot be planned: invalid literal for int() with base 10: 'two'.",
        find(stack, TENANT, tenant).urn) for tenant in ("tenant-a", "tenant-b")]


def test_plan_falls_back_to_the_stack_config(stack: list[Recorded], monkeypatch: pytest.MonkeyPatch) -> None:
    config = dev_config()
    config["tenants"][1]["workloads"][0]["useGpuType"] = ["A100"]  # tenant-b only has L4s
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(config))
    assert_violation(run(tp.gpu_plan_fits, undeclare(stack)), "tenant 'tenant-b'", "2/2 CardTypeMismatch")


A100 = "NVIDIA A100-SXM4-80GB"


def test_plan_from_the_stack_config_keeps_real_hosts_apart(real: list[Recorded], monkeypatch: pytest.MonkeyPatch) -> None:
    config = gpu_config()
    tenant_a, tenant_b = config["tenants"]
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(config))
    assert run(tp.gpu_plan_fits, undeclare(real)) == []  # each host with its tenant's cards
    # Two hosts of one A100 each: two whole-card replicas fit, one on each, a third on neither.
    host = tenant_a["workers"][0]
    tenant_a.update(gpus=[{"model": A100, "count": 2}], quota={}, workers=[
        {**host, "name": "gpu-a100-01", "gpus": [{"model": A100, "count": 1}]},
        {**host, "name": "gpu-a100-02", "address": "10.20.0.13", "gpus": [{"model": A100, "count": 1}]},
    ], workloads=[{"name": "a-train", "replicas": 3, "containers": [{"gpus": 1, "gpumemMiB": 81920, "gpucores": 100}]}])
    # A tenant's only host with cards of its own: one L4 of the tenant's two.
    tenant_b["workers"][0]["gpus"] = [{"model": "NVIDIA L4", "count": 1}]
    tenant_b.update(quota={}, workloads=[
        {"name": "b-whole", "replicas": 2, "containers": [{"gpus": 1, "gpumemMiB": 23034, "gpucores": 100}]}])
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(config))
    assert sorted(run(tp.gpu_plan_fits, real)) == [
        "tenant 'tenant-a': workload 'a-train' replica 2 cannot be placed on its declared GPUs in any order: "
        "gpu-a100-01: 1/1 CardInsufficientMemory; gpu-a100-02: 1/1 CardInsufficientMemory.",
        "tenant 'tenant-b': workload 'b-whole' replica 1 cannot be placed on its declared GPUs in any order: "
        "1/1 CardInsufficientMemory.",
    ]


@pytest.mark.parametrize("unknown", ["gpuNodes", "workloads", "quota"])
def test_a_declaration_not_known_yet_is_read_from_the_stack_config(
    stack: list[Recorded], monkeypatch: pytest.MonkeyPatch, unknown: str
) -> None:
    """In a preview a Tenant's outputs can hold values not known yet; the stack config decides instead of a
    plan of the outputs read as empty."""
    config = dev_config()
    config["tenants"][1]["quota"] = {"limits.nvidia.com/gpu": 1}
    monkeypatch.setenv("PULUMI_CONFIG", engine_config(config))
    undeclare(stack)
    not_known = {
        "gpuNodes": [{"name": "tenant-b-worker", "gpus": ENGINE_UNKNOWN}],
        "workloads": ENGINE_UNKNOWN,
        "quota": ENGINE_UNKNOWN,
    }
    declare(stack, "tenant-b", **{"quota": {}, unknown: not_known[unknown]})
    assert run(tp.gpu_plan_fits, stack) == [
        "tenant 'tenant-b': workload 'b-notebook' replica 1 cannot be placed on its declared GPUs in any order: "
        "ResourceQuotaNotFit: limits.nvidia.com/gpu 1+1 > 1."
    ]


def test_a_tenants_gpu_nodes_from_its_outputs_are_named_in_its_verdicts(stack: list[Recorded], pack_env: None) -> None:
    one_a100 = [{"model": A100, "count": 1}]
    declare(stack, "tenant-a", gpus=[{"model": A100, "count": 2}], quota={},
            gpuNodes=[{"name": "node-1", "gpus": one_a100}, {"name": "node-2", "gpus": one_a100}],
            workloads=[{"name": "a-train", "replicas": 3, "containers": [{"gpus": 1, "gpumemMiB": 81920, "gpucores": 100}]}])
    assert run(tp.gpu_plan_fits, stack) == [
        "tenant 'tenant-a': workload 'a-train' replica 2 cannot be placed on its declared GPUs in any order: "
        "node-1: 1/1 CardInsufficientMemory; node-2: 1/1 CardInsufficientMemory."
    ]


def test_plan_without_any_declaration_fails_closed(stack: list[Recorded], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert sorted(run(tp.gpu_plan_fits, undeclare(stack))) == [
        f"tenant '{tenant}': cannot check its GPU plan, the Tenant component exposes no gpus/workloads/quota and the "
        "stack config has none for it; register them as Tenant outputs." for tenant in ("tenant-a", "tenant-b")
    ]


# --------------------------------------------------------------------------- pure helpers


def test_plain_turns_unknowns_into_a_sentinel_instead_of_raising() -> None:
    proxied = unknown_checking_proxy(
        {"a": {"b": ENGINE_UNKNOWN, "c": [1, ENGINE_UNKNOWN]}, "d": "x"}
    )
    value = value_lib.plain(proxied)
    assert value_lib.is_unknown(value["a"]["b"]) and value_lib.is_unknown(value["a"]["c"][1])
    assert value["a"]["c"][0] == 1 and value["d"] == "x"
    assert value_lib.is_unknown(value_lib.dig(value, "a", "b", "deeper"))
    assert value_lib.dig(value, "missing", default="n/a") == "n/a"


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ("kindest/node:v1.35.5", None),
        ("registry:5000/team/app:1.2.3", None),
        ("registry:5000/team/app:1.2", "tag '1.2' is not an exact release (use a vX.Y.Z tag or pin a digest @sha256:...)"),
        ("registry:5000/team/app", "has no tag"),
        ("busybox:1.2.3\n", "tag '1.2.3\\n' is not an exact release (use a vX.Y.Z tag or pin a digest @sha256:...)"),
        ("busybox", "has no tag"),
        ("busybox:latest", "tag 'latest' is a moving tag"),
        ("ghcr.io/org/app:main", "tag 'main' is a moving tag"),
        ("busybox:1.2@sha256:" + "a" * 64, None),
        ("busybox@sha256:" + "a" * 64, None),
        ("sha256:0123", None),
        (None, None),  # no image at all is another finding ("has no image")
    ],
)
def test_image_problem(ref: str | None, problem: str | None) -> None:
    assert pod_lib.image_problem(ref) == problem


def test_an_empty_kubernetes_object_is_unread_but_a_release_without_metadata_is_not() -> None:
    assert resource_lib.Res("kubernetes:core/v1:Secret", "s", "urn:s", {}).unread
    assert resource_lib.Res("kubernetes:core/v1:Node", "n", "urn:n", {"apiVersion": "v1"}).unread
    assert not resource_lib.Res("kubernetes:core/v1:Secret", "s", "urn:s", {"metadata": {"name": "s"}}).unread
    assert not resource_lib.Res(RELEASE, "r", "urn:r", {"namespace": "x"}).unread
    assert not resource_lib.Res(resource_lib.COMMAND_TYPE, "c", "urn:c", {}).unread


def test_quantities_networks_and_provider_clusters() -> None:
    assert [value_lib.quantity(v) for v in ("2", 2, 2.0, "1.5", None, "x")] == [2, 2, 2, None, None, None]
    assert [str(n) for n in value_lib.range_networks("172.18.255.245-172.18.255.254")] == [
        "172.18.255.245/32", "172.18.255.246/31", "172.18.255.248/30", "172.18.255.252/31", "172.18.255.254/32"]
    a, b = value_lib.network("10.100.0.0/16"), value_lib.network("10.100.8.0/24")
    assert a and b and value_lib.overlaps(a, b) and not value_lib.overlaps(a, value_lib.network("fc00::/64"))  # type: ignore[arg-type]

def test_provider_clusters_are_known_only_by_identity_and_place() -> None:
    cluster = tenancy_lib.provider_cluster
    top = f"urn:pulumi:dev::gpu-tenancy::{PROVIDER}::"
    in_tcp = f"urn:pulumi:dev::gpu-tenancy::{TENANT}${resource_lib.TCP_COMPONENT_TYPE}${PROVIDER}::"
    unknown = value_lib.UNKNOWN
    assert cluster(resource_lib.Provider("t1-kubernetes", in_tcp + "t1-kubernetes",
                                {"clusterIdentifier": "tenant/t1"})) == tenancy_lib.Cluster("tenant", "t1")
    assert cluster(resource_lib.Provider("management", top + "management", {"clusterIdentifier": "management"})).known
    # Preview: the identifier is not known yet; only the program's own providers, by their place, are known.
    assert cluster(resource_lib.Provider("t2-kubernetes", in_tcp + "t2-kubernetes",
                                {"clusterIdentifier": unknown})) == tenancy_lib.Cluster("tenant", "t2")
    assert cluster(resource_lib.Provider("management", top + "management", {"clusterIdentifier": unknown})).known
    # Fails closed: no identifier, a name that only looks right, a claim from the wrong place, the default.
    assert not cluster(resource_lib.Provider("t2-kubernetes", top + "t2-kubernetes", {})).known
    assert not cluster(resource_lib.Provider("t3-kubernetes", top + "t3-kubernetes", {"clusterIdentifier": unknown})).known
    assert not cluster(resource_lib.Provider("x", top + "x", {"clusterIdentifier": "tenant/t1"})).known
    assert not cluster(resource_lib.Provider("x", in_tcp + "x", {"clusterIdentifier": "management"})).known
    assert not cluster(None).known


def test_planner_inputs_register_each_node_as_hami_would() -> None:
    nodes, workloads, quota = gpu_lib.planner_inputs(
        "t", [("h1", [{"model": "NVIDIA L4", "count": 1}]), ("h2", [{"model": "NVIDIA L4", "memoryMiB": 23034.0, "count": 1}])],
        [{"name": "w", "containers": [{"gpus": 1, "gpumemPercentage": 50}]}], {"limits.nvidia.com/gpu": 3}, 10,
    )
    # One planned node per host, each card as HAMi registers an L4 (NVML's name and total, the catalogue's
    # memory when the declaration leaves it out; the engine hands numbers over as floats).
    assert [(n.name, n.tenant, [(d.type, d.devmem) for d in n.devices]) for n in nodes] == [
        ("h1", "t", [("NVIDIA L4", 23034)]), ("h2", "t", [("NVIDIA L4", 23034)])]
    assert workloads[0].replicas == 1 and workloads[0].containers[0].gpumem_percentage == 50
    assert quota.gpu == 3
    with pytest.raises(ValueError, match="malformed"):
        gpu_lib.planner_inputs("t", [("n", [{"memoryMiB": 1}])], [], {}, 10)
    with pytest.raises(ValueError, match="24576 MiB is not what an NVIDIA L4 registers: NVML reports 23034 MiB"):
        gpu_lib.planner_inputs("t", [("n", [{"model": "NVIDIA L4", "memoryMiB": 24576, "count": 1}])], [], {}, 10)


def test_resource_policies_are_type_filtered() -> None:
    resource_policies = [p for p in tp.ALL_POLICIES if isinstance(p, ResourceValidationPolicy)]
    stray = Recorded("urn:pulumi:dev::p::random:index/randomString:RandomString::r", "random:index/randomString:RandomString",
                     "r", True, "", "", {"length": 6}, {"length": 6})
    for policy in resource_policies:
        if policy.name == "known-types":  # the one that reads every type: it refuses the stray by its type
            assert len(run(policy, [stray])) == 1
        else:
            assert run(policy, [stray]) == []
