"""One clause of the policy pack per test: a resource (or declaration) the clause refuses next to the closest one it
admits, so that a clause written otherwise (an entry dropped from a list, a path one key off) fails a test.
Expected values come from the pack's documented intent and from upstream Kubernetes, HAMi and Pulumi behaviour."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import policy_support
import pytest
from policy_support import (
    Recorded,
    add_resource,
    copy_stack,
    craft,
    dev_stack,
    find,
    nvml_stack,
    owned,
    run_resource_policy,
    run_stack_policy,
    set_both,
)
from pulumi.runtime.rpc import UNKNOWN as ENGINE_UNKNOWN
from pulumi_policy import proxy
from resource_lib import Res

import allowlist_policies  # isort: skip
import controls_policies as cp  # isort: skip
import fields_lib  # isort: skip
import gpu_lib  # isort: skip
import plan_policies  # isort: skip
import pod_lib  # isort: skip
import tenant_policies as tp  # isort: skip
import value_lib  # isort: skip

L4 = {"model": "NVIDIA L4", "count": 1}


# --------------------------------------------------------------------------- gpu_lib.planner_inputs


@pytest.mark.parametrize(
    ("nodes", "workloads"),
    [
        # A GPU group whose count is left empty (`count:` in YAML is null): int(None) is a TypeError.
        ([("n", [{"model": "NVIDIA L4", "count": None}])], []),
        # A container written as its GPU count alone: an int has no `.get`, an AttributeError.
        ([("n", [L4])], [{"name": "w", "containers": [1]}]),
    ],
    ids=["null-count", "container-as-a-number"],
)
def test_a_malformed_declaration_is_a_value_error_naming_it(nodes: Any, workloads: Any) -> None:
    # The planner's caller (gpu-plan-fits) reports a ValueError as a violation; any other error would crash the
    # policy instead of naming the declaration.
    with pytest.raises(ValueError, match="malformed declaration"):
        gpu_lib.planner_inputs("t", nodes, workloads, None, 10)


def test_the_closest_well_formed_declaration_is_planned() -> None:
    nodes, workloads, quota = gpu_lib.planner_inputs(
        "t", [("n", [L4])], [{"name": "w", "containers": [{"gpus": 1}]}], None, 10
    )
    assert [n.name for n in nodes] == ["n"] and [w.name for w in workloads] == ["w"] and quota is None
    assert workloads[0].containers[0].gpus == 1


# --------------------------------------------------------------------------- value_lib


@pytest.mark.parametrize(
    "sentinel",
    [proxy.UNKNOWN_BOOLEAN_VALUE, proxy.UNKNOWN_NUMBER_VALUE, proxy.UNKNOWN_STRING_VALUE, proxy.UNKNOWN_ARRAY_VALUE,
     proxy.UNKNOWN_ASSET_VALUE, proxy.UNKNOWN_ARCHIVE_VALUE, proxy.UNKNOWN_OBJECT_VALUE],
)
def test_each_of_the_engines_unknown_sentinels_is_unknown(sentinel: str) -> None:
    # pulumi_policy/proxy.py: the engine sends a value unknown at preview as one of these seven strings, by type.
    assert value_lib.plain({"a": [sentinel]}) == {"a": [value_lib.UNKNOWN]}
    # The closest known value: the same string with one character changed stays a string.
    other = sentinel[:-1] + ("0" if sentinel[-1] != "0" else "1")
    assert value_lib.plain({"a": [other]}) == {"a": [other]}


def test_a_metallb_range_is_the_networks_from_its_first_to_its_last_address() -> None:
    # MetalLB IPAddressPool spec.addresses: "first-last" covers both ends (ipaddress.summarize_address_range).
    assert [str(n) for n in value_lib.range_networks("10.0.0.4-10.0.0.7")] == ["10.0.0.4/30"]
    assert [str(n) for n in value_lib.range_networks("10.0.0.4 - 10.0.0.8")] == ["10.0.0.4/30", "10.0.0.8/32"]
    # A range whose ends are of two IP versions is no range: nothing, not an exception.
    assert value_lib.range_networks("10.0.0.1-fd00::1") == []
    assert value_lib.range_networks("10.0.0.1-nonsense") == []


# --------------------------------------------------------------------------- resource_lib: Helm and component types

# Pulumi's Kubernetes provider installs a chart as a helm.sh/v3 Release (one resource, rendered by Helm in the
# provider) or as a helm.sh/v3 or v4 Chart (a component whose rendered objects are its children).
HELM_CHART_TYPES = ["kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v3:Chart", "kubernetes:helm.sh/v4:Chart"]


def _chart(typ: str, version: str) -> Recorded:
    props = {"chart": "metallb", "version": version, "repositoryOpts": {"repo": "https://metallb.github.io/metallb"}}
    return Recorded(f"urn:pulumi:dev::gpu-tenancy::{typ}::lb", typ, "lb", typ.endswith("Release"), "", "", props, props)


@pytest.mark.parametrize("typ", HELM_CHART_TYPES)
def test_each_helm_resource_type_is_held_to_an_exact_chart_version(typ: str) -> None:
    assert len(run_resource_policy(tp.charts_pinned, [_chart(typ, "^0.14")])) == 1
    assert run_resource_policy(tp.charts_pinned, [_chart(typ, "0.14.9")]) == []


# pulumi-kubernetes' component resources: their children are registered one by one, each with its own provider.
K8S_COMPONENTS = [
    "kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart", "kubernetes:yaml/v2:ConfigGroup",
    "kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml:ConfigGroup", "kubernetes:yaml:ConfigFile",
    "kubernetes:kustomize/v2:Directory", "kubernetes:kustomize:Directory",
]


@pytest.mark.parametrize("typ", K8S_COMPONENTS)
def test_a_kubernetes_component_may_come_without_a_provider(typ: str) -> None:
    stack = copy_stack(dev_stack())
    tenant = find(stack, tp.TENANT_TYPE, "tenant-a")
    component = add_resource(stack, tenant, typ, "tenant-a-bundle", {}, outputs={})
    assert [m for m, urn in run_stack_policy(tp.tenant_provider_isolation, stack) if urn == component.urn] == []
    # The closest refused: an object itself (a ConfigMap) with no provider reaches no cluster the pack can name.
    stray = add_resource(stack, tenant, "kubernetes:core/v1:ConfigMap", "tenant-a-loose", {"metadata": {}})
    assert [urn for _, urn in run_stack_policy(tp.tenant_provider_isolation, stack)] == [stray.urn]


# --------------------------------------------------------------------------- fields_lib: data maps and code types

# Maps keyed by data, not by field names: ObjectMeta labels/annotations, a LabelSelector's matchLabels, a PodSpec's
# nodeSelector, ResourceRequirements limits/requests, a ResourceQuota's hard, ConfigMap/Secret data, stringData and
# binaryData, a PersistentVolume's capacity, and pulumi-command's Command environment.
DATA_MAPS = ["labels", "annotations", "matchLabels", "nodeSelector", "limits", "requests", "hard", "data",
             "stringData", "binaryData", "environment", "capacity"]


@pytest.mark.parametrize("key", DATA_MAPS)
def test_a_data_map_ends_the_field_path(key: str) -> None:
    assert list(fields_lib.paths({"spec": {key: {"any-name": "v"}}})) == [f"spec.{key}"]
    # The closest other map, a field (`template`), is followed into.
    assert list(fields_lib.paths({"spec": {"template": {"any-name": "v"}}})) == ["spec.template.any-name"]


# Types that run code or reach a host without a pod spec: Kamaji's TenantControlPlane and DataStore, a Docker
# container, a Helm release, local and remote commands, a RuntimeClass (its handler picks the node's runtime).
CODE_TYPES = [
    "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane", "kubernetes:kamaji.clastix.io/v1alpha1:DataStore",
    "docker:index/container:Container", "kubernetes:helm.sh/v3:Release", "command:local:Command",
    "command:remote:Command", "kubernetes:node.k8s.io/v1:RuntimeClass",
]


@pytest.mark.parametrize("typ", CODE_TYPES)
def test_a_type_that_runs_code_has_its_fields_allow_listed(typ: str) -> None:
    assert fields_lib.field_checked(Res(typ, "r", f"urn:pulumi:dev::p::{typ}::r", {}))


@pytest.mark.parametrize("typ", ["kubernetes:core/v1:ConfigMap", "kubernetes:node.k8s.io/v1:RuntimeClassList",
                                 "docker:index/network:Network"])
def test_a_type_that_runs_no_code_is_not_allow_listed(typ: str) -> None:
    assert not fields_lib.field_checked(Res(typ, "r", f"urn:pulumi:dev::p::{typ}::r", {}))


# Every pod-bearing kind, and its server-side-apply Patch kind (pulumi-kubernetes `<Kind>Patch`), runs code.
POD_KINDS = ["kubernetes:core/v1:Pod", "kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:CronJob",
             "kubernetes:apps/v1:DaemonSetPatch", "kubernetes:batch/v1:JobPatch"]


@pytest.mark.parametrize("typ", POD_KINDS)
def test_a_pod_bearing_kind_and_its_patch_have_their_fields_allow_listed(typ: str) -> None:
    assert fields_lib.field_checked(Res(typ, "r", f"urn:pulumi:dev::p::{typ}::r", {}))
    # The same kind name from another provider is no Kubernetes object; a Patch prefix is no Patch kind.
    other = typ.replace("kubernetes:", "docker:", 1)
    assert not fields_lib.field_checked(Res(other, "r", f"urn:pulumi:dev::p::{other}::r", {}))
    prefixed = typ.rsplit(":", 1)[0] + ":Patch" + typ.rsplit(":", 1)[1].removesuffix("Patch")
    assert not fields_lib.field_checked(Res(prefixed, "r", f"urn:pulumi:dev::p::{prefixed}::r", {}))


def test_the_providers_defaults_are_no_fields_of_the_program_and_a_lists_items_are_followed() -> None:
    # pulumi-terraform-bridge names the defaults it filled in under `__defaults`; the fields it names are left out,
    # the others kept, and the list itself is no field.
    value = {"__defaults": ["restart", "logDriver"], "restart": "no", "logDriver": "json-file", "image": "x",
             "ports": [{"internal": 80}, {"external": 8080}], "nested": {"__defaults": []}}
    assert sorted(fields_lib.paths(value)) == ["image", "nested", "ports[].external", "ports[].internal"]


def test_a_resources_allow_list_is_its_component_its_type_and_a_releases_chart() -> None:
    tenant = "gpu-tenancy:tenant:Tenant"
    release = "kubernetes:helm.sh/v3:Release"
    made = Res(release, "r", f"urn:pulumi:dev::p::pulumi:pulumi:Stack${tenant}${release}::r", {"chart": "hami"})
    assert fields_lib.allowlist_key(made) == f"{tenant}|{release}|hami"
    stray = Res(release, "r", f"urn:pulumi:dev::p::pulumi:pulumi:Stack${release}::r", {})
    assert fields_lib.allowlist_key(stray) == f"the stack|{release}|?"
    # No component, no chart: no allow-list, so every field it sets is named.
    assert fields_lib.unknown_fields(stray) == []
    stray.props.update(values={"x": 1}, name="r")
    assert fields_lib.unknown_fields(stray) == ["name", "values.x"]


# --------------------------------------------------------------------------- pod_lib: where each kind keeps its pod

# The Kubernetes API's pod template of each pod-bearing kind (core/v1, apps/v1, batch/v1).
POD_PATHS = [
    ("kubernetes:core/v1:Pod", ["spec"]),
    ("kubernetes:core/v1:PodTemplate", ["template", "spec"]),
    ("kubernetes:apps/v1:Deployment", ["spec", "template", "spec"]),
    ("kubernetes:apps/v1:DaemonSet", ["spec", "template", "spec"]),
    ("kubernetes:apps/v1:StatefulSet", ["spec", "template", "spec"]),
    ("kubernetes:apps/v1:ReplicaSet", ["spec", "template", "spec"]),
    ("kubernetes:core/v1:ReplicationController", ["spec", "template", "spec"]),
    ("kubernetes:batch/v1:Job", ["spec", "template", "spec"]),
    ("kubernetes:batch/v1:CronJob", ["spec", "jobTemplate", "spec", "template", "spec"]),
]
PRIVILEGED = {"containers": [{"name": "c", "image": "busybox:1.36.1", "securityContext": {"privileged": True}}]}


def _nested(path: list[str], value: Any) -> dict[str, Any]:
    for key in reversed(path):
        value = {key: value}
    return value


@pytest.mark.parametrize(("typ", "path"), POD_PATHS)
@pytest.mark.parametrize("patch", [False, True], ids=["object", "server-side-apply-patch"])
def test_each_kinds_pod_is_read_where_the_api_keeps_it(typ: str, path: list[str], patch: bool) -> None:
    typ += "Patch" if patch else ""
    res = Res(typ, "w", f"urn:pulumi:dev::p::{typ}::w", _nested(path, PRIVILEGED))
    assert pod_lib.pod_spec(res) == PRIVILEGED
    # The same pod one key short or one key long is not that kind's pod.
    for other in (path[:-1], [*path, "spec"], [path[0], *path]):
        if other:
            assert pod_lib.pod_spec(Res(typ, "w", res.urn, _nested(other, PRIVILEGED))) != PRIVILEGED, other


def test_a_pods_containers_are_its_init_regular_and_ephemeral_ones() -> None:
    spec = {"initContainers": [{"name": "i"}], "containers": [{"name": "c"}], "ephemeralContainers": [{"name": "e"}]}
    assert sorted(c["name"] for c in pod_lib.containers(spec)) == ["c", "e", "i"]


@pytest.mark.parametrize("key", ["tag", "imageTag"])  # charts name an image's tag either way (HAMi: imageTag)
def test_a_moving_image_tag_in_helm_values_is_named_by_its_path(key: str) -> None:
    found = list(pod_lib.helm_value_image_problems({"scheduler": {key: "latest"}}))
    assert [path for path, _ in found] == [f"values.scheduler.{key}"] and found[0][1].startswith("tag ")
    assert list(pod_lib.helm_value_image_problems({"scheduler": {key: "v2.10.0"}})) == []


def test_a_moving_image_in_helm_values_is_named_by_its_path() -> None:
    found = list(pod_lib.helm_value_image_problems({"agent": [{"image": "busybox:latest"}]}))
    assert [path for path, _ in found] == ["values.agent[0].image"] and found[0][1].startswith("image 'busybox:latest'")
    assert list(pod_lib.helm_value_image_problems({"agent": [{"image": "busybox:1.36.1"}]})) == []


# --------------------------------------------------------------------------- control_plane_policies

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


# The namespaces every cluster starts with (default, kube-system, kube-public, kube-node-lease) and Kamaji's own.
@pytest.mark.parametrize("namespace", ["default", "kube-system", "kube-public", "kube-node-lease", "kamaji-system"])
def test_a_control_plane_in_a_shared_namespace_is_refused(namespace: str) -> None:
    stack = copy_stack(dev_stack())
    tcp = owned(stack, TCP, "tenant-a")
    set_both(tcp, ["metadata", "namespace"], namespace)
    assert run_stack_policy(tp.tcp_dedicated_namespace, stack) == [(
        f"TenantControlPlane 'tenant-a' is in shared namespace {namespace!r}; give it its own namespace named after "
        "the tenant ('tenant-a').", tcp.urn)]
    # The closest admitted: its tenant's own namespace.
    set_both(tcp, ["metadata", "namespace"], "tenant-a")
    assert run_stack_policy(tp.tcp_dedicated_namespace, stack) == []


# --------------------------------------------------------------------------- pinning_policies: charts-pinned


def _release(**props: Any) -> Recorded:
    typ = "kubernetes:helm.sh/v3:Release"
    return Recorded(f"urn:pulumi:dev::gpu-tenancy::{typ}::lb", typ, "lb", True, "", "", props, props)


@pytest.mark.parametrize("version", ["latest", "stable", "LATEST"])
def test_a_chart_version_naming_a_channel_is_refused(version: str) -> None:
    repo = {"repo": "https://metallb.github.io/metallb"}
    [(_, message, _)] = run_resource_policy(tp.charts_pinned, [_release(chart="metallb", version=version,
                                                                           repositoryOpts=repo)])
    assert f"version {version!r} is a range; pin an exact version" in message
    assert run_resource_policy(tp.charts_pinned, [_release(chart="metallb", version="0.14.9", repositoryOpts=repo)]) == []


# Helm locates a chart given as an OCI reference or an http(s) URL by itself (helm pkg/action/install.go
# `LocateChart`): no repository is needed, and it is no path of the chart cache.
@pytest.mark.parametrize("chart", ["oci://quay.io/metallb/metallb", "https://example.org/charts/metallb-0.14.9.tgz",
                                   "http://example.org/charts/metallb-0.14.9.tgz"])
def test_a_chart_given_by_url_needs_no_repository(chart: str) -> None:
    assert run_resource_policy(tp.charts_pinned, [_release(chart=chart, version="0.14.9")]) == []
    # The closest refused: the same chart by name alone, with no repository: Helm takes it as a local path.
    [(_, message, _)] = run_resource_policy(tp.charts_pinned, [_release(chart="metallb", version="0.14.9")])
    assert "has no repository" in message


# --------------------------------------------------------------------------- gpu_policies


def _pod(resources: dict[str, Any]) -> Recorded:
    typ = "kubernetes:core/v1:Pod"
    props = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36.1",
                                                                 "resources": resources}]}}
    return Recorded(f"urn:pulumi:dev::gpu-tenancy::{typ}::p", typ, "p", True, "", "", props, props)


def _fractional_findings(resources: dict[str, Any]) -> list[str]:
    return [m for _, m, _ in run_resource_policy(tp.gpu_requests_fractional, [_pod(resources)])]


def test_hami_reads_a_gpu_share_from_requests_where_limits_leave_it_out() -> None:
    # HAMi v2.10.0 pkg/device/nvidia/device.go GenerateResourceRequests: each of nvidia.com/gpu, gpumem,
    # gpumem-percentage and gpucores is read from limits, else from requests.
    gpu = {"nvidia.com/gpu": "1"}
    assert _fractional_findings({"limits": gpu, "requests": {"nvidia.com/gpumem": "4000"}}) == []
    assert _fractional_findings({"limits": gpu, "requests": {"nvidia.com/gpumem-percentage": "25"}}) == []
    [whole] = _fractional_findings({"limits": gpu})
    assert "whole cards" in whole
    [cores] = _fractional_findings({"limits": {**gpu, "nvidia.com/gpumem": "4000"}, "requests": {"nvidia.com/gpucores": "150"}})
    assert "nvidia.com/gpucores=150" in cores
    assert _fractional_findings({"limits": {**gpu, "nvidia.com/gpumem": "4000"}, "requests": {"nvidia.com/gpucores": "100"}}) == []


def test_the_stacks_own_exported_mode_counts_among_the_modes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a configured mode, the pack reads it from the Tenants and the stack's export `mode` (__main__.py).
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    stack = copy_stack(dev_stack())
    root = find(stack, "pulumi:pulumi:Stack")
    root.registered_outputs = {**(root.registered_outputs or {}), "mode": "real"}
    # Within a mode the names are sorted: the engine's order varies between runs, a preview's words must not.
    message, urn = run_stack_policy(tp.no_mock_gpus_in_real, stack)[0]
    assert (message, urn) == (f"the stack mixes modes: real: {root.name}; sim: tenant-a, tenant-b", None)
    message, _ = run_stack_policy(tp.no_mock_gpus_in_real, list(reversed(stack)))[0]
    assert message == f"the stack mixes modes: real: {root.name}; sim: tenant-a, tenant-b"
    root.registered_outputs["mode"] = "sim"
    assert run_stack_policy(tp.no_mock_gpus_in_real, stack) == []


# --------------------------------------------------------------------------- tenant_policies: the pack's policies

# docs/policies.md, in its order: every policy the pack runs.
DOCUMENTED_POLICIES = [
    "known-types", "known-types-in-stack", "type-allowances", "field-allowlist", "attributed-by-identity",
    "installed-controls", "controls-present", "rbac-contained", "tenant-provider-isolation", "tcp-konnectivity-enabled",
    "tcp-dedicated-namespace", "tcp-version-pinned", "images-pinned", "charts-pinned", "gpu-requests-fractional",
    "tenant-cidrs-disjoint", "worker-joins-own-tenant", "no-mock-gpus-in-real", "workload-safety", "gpu-plan-fits",
    "gpu-plan-order",
]


def test_the_pack_runs_every_documented_policy_and_exports_each_by_name() -> None:
    assert sorted(p.name for p in tp.ALL_POLICIES) == sorted(DOCUMENTED_POLICIES)
    assert len(tp.ALL_POLICIES) == len(DOCUMENTED_POLICIES)
    # `from tenant_policies import *` (its __all__) gives each policy under its Python name, and the names the
    # pack's configuration and tests build on.
    names: dict[str, Any] = {}
    exec("from tenant_policies import *", names)
    for policy in DOCUMENTED_POLICIES:
        assert names[policy.replace("-", "_")].name == policy
    for constant in ("ALL_POLICIES", "POLICIES_BY_NAME", "DEFAULT_MANAGEMENT_COMPONENTS", "COMPONENT_LABEL",
                     "TCP_TYPE", "TENANT_TYPE"):
        assert constant in names


# --------------------------------------------------------------------------- data_plane_policies


# kind's defaults for the management cluster: podSubnet 10.244.0.0/16, serviceSubnet 10.96.0.0/16.
@pytest.mark.parametrize(("key", "cidr", "reserved"), [("podCidrs", "10.244.8.0/24", "10.244.0.0/16"),
                                                       ("serviceCidrs", "10.96.8.0/24", "10.96.0.0/16")])
def test_a_tenant_range_inside_kinds_own_ranges_is_refused(key: str, cidr: str, reserved: str) -> None:
    stack = copy_stack(dev_stack())
    tcp = owned(stack, TCP, "tenant-a")
    set_both(tcp, ["spec", "networkProfile", key], [cidr])
    label = "pod" if key == "podCidrs" else "service"
    assert run_stack_policy(tp.tenant_cidrs_disjoint, stack) == [(
        f"tenant 'tenant-a' {label} CIDR {cidr} overlaps reserved range {reserved}; pick another podCidr/serviceCidr.",
        tcp.urn)]
    # The closest admitted: the range right after kind's.
    after = str(ipaddress.ip_network(reserved).broadcast_address + 1) + "/24"
    set_both(tcp, ["spec", "networkProfile", key], [after])
    assert run_stack_policy(tp.tenant_cidrs_disjoint, stack) == []


def _machine(stack: list[Recorded], tenant: str, typ: str, name: str, props: dict[str, Any]) -> Recorded:
    return add_resource(stack, find(stack, tp.TENANT_TYPE, tenant), typ, f"{tenant}-{name}", props)


# The names a machine goes by: a GPU host's node name and address (HostWorker), a remote command's host, a kind
# worker's container name.
@pytest.mark.parametrize(("typ", "props", "key"), [
    ("gpu-tenancy:host_worker:HostWorker", {"nodeName": "gpu-1"}, "node gpu-1"),
    ("gpu-tenancy:host_worker:HostWorker", {"address": "10.0.0.9"}, "host 10.0.0.9"),
    ("command:remote:Command", {"connection": {"host": "10.0.0.9"}}, "host 10.0.0.9"),
    ("docker:index/container:Container", {"name": "w", "labels": [{"label": "gpu-tenancy.io/component",
                                                                   "value": "worker"}]}, "container w"),
])
def test_one_machine_in_two_tenants_is_refused(typ: str, props: dict[str, Any], key: str) -> None:
    def several(stack: list[Recorded]) -> list[str]:
        return [m for m, _ in run_stack_policy(tp.worker_joins_own_tenant, stack) if "several tenants" in m]

    stack = copy_stack(dev_stack())
    _machine(stack, "tenant-a", typ, "m", props)
    second = _machine(stack, "tenant-b", typ, "m", props)
    assert several(stack) == [
        f"{key} is a worker of several tenants ('tenant-a', 'tenant-b'); a GPU machine joins one tenant only."]
    # The closest admitted: the second tenant's machine under another name.
    second.inputs = second.state = json.loads(json.dumps(props).replace("gpu-1", "gpu-2").replace(
        "10.0.0.9", "10.0.0.10").replace('"w"', '"w2"'))
    assert several(stack) == []


# --------------------------------------------------------------------------- plan_policies: the plan's inputs

A100 = {"model": "A100-40GB", "memoryMiB": 40960, "count": 2}
REAL_PODS = 110 - 4 - 3  # kubelet's default maxPods less what runs on every real node (tests/test_device_layers.py)


def test_a_tenants_only_gpu_host_has_the_tenants_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    # Stack config (docs/configuration.md): in mode real a tenant's `workers` are its GPU hosts, each a node; the
    # only host of a tenant may leave its `gpus` to the tenant's.
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-tenancy:mode": "real"}))
    host: dict[str, Any] = {"name": "gpu-1", "address": "10.0.0.1", "numa": [1, 0]}
    tenant = {"name": "team", "gpus": [A100], "workers": [host]}
    assert plan_policies._stack_config_nodes(tenant) == [("gpu-1", [A100], [1, 0], REAL_PODS)]
    own = {**A100, "count": 1}
    host["gpus"] = [own]
    assert plan_policies._stack_config_nodes(tenant) == [("gpu-1", [own], [1, 0], REAL_PODS)]


def test_each_of_a_tenants_gpu_hosts_is_a_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-tenancy:mode": "real"}))
    one, two = {**A100, "count": 1}, {**A100, "count": 3}
    tenant = {"name": "team", "gpus": [{**A100, "count": 4}], "workers": [
        {"name": "gpu-1", "gpus": [one], "numa": [0]}, {"name": "gpu-2", "gpus": [two]}]}
    assert plan_policies._stack_config_nodes(tenant) == [("gpu-1", [one], [0], REAL_PODS),
                                                         ("gpu-2", [two], None, REAL_PODS)]


def test_a_simulated_tenants_one_worker_carries_all_its_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    # sim: the mock-GPU agent registers every card on NUMA node 0 (docs/mock-gpu-agent.md); sim-nvml: HAMi reads
    # NUMA from the mock NVML, not known at preview. The worker container is named `<tenant>-worker`.
    tenant = {"name": "team", "gpus": [A100, {"model": "NVIDIA L4", "memoryMiB": 23034, "count": 1}]}
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-tenancy:mode": "sim"}))
    assert plan_policies._stack_config_nodes(tenant) == [("team-worker", tenant["gpus"], [0, 0, 0], REAL_PODS)]
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-tenancy:mode": "sim-nvml"}))
    (node,) = plan_policies._stack_config_nodes(tenant)
    assert node[:3] == ("team-worker", tenant["gpus"], None)
    # A mode no device layer registers: no NUMA nodes and no pod room known, and no crash.
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-tenancy:mode": "quantum"}))
    assert plan_policies._stack_config_nodes(tenant) == [("team-worker", tenant["gpus"], None, None)]


def test_the_split_count_is_hamis_device_plugin_value() -> None:
    # HAMi's chart: devicePlugin.deviceSplitCount, the tasks one card takes (default 10).
    stack = copy_stack(dev_stack())
    tenant = find(stack, tp.TENANT_TYPE, "tenant-a")
    res = [Res(r.type, r.name, r.urn, r.inputs) for r in stack]
    by_urn = {r.urn: r for r in res}
    for r, recorded in zip(res, stack, strict=True):
        r.parent = by_urn.get(recorded.parent)
    assert plan_policies._split_count(res, "tenant-a") == 10
    release = add_resource(stack, tenant, "kubernetes:helm.sh/v3:Release", "tenant-a-hami-split",
                           {"chart": "hami", "values": {"devicePlugin": {"deviceSplitCount": 4}}})
    res.insert(0, Res(release.type, release.name, release.urn, release.inputs, parent=by_urn[tenant.urn]))
    assert plan_policies._split_count(res, "tenant-a") == 4


def _overlaps(stack: list[Recorded]) -> list[tuple[str, str | None]]:
    return [(m, u) for m, u in run_stack_policy(tp.tenant_cidrs_disjoint, stack) if " overlaps tenant " in m]


def test_an_overlap_is_named_the_same_way_whatever_order_the_engine_lists_resources() -> None:
    # The engine lists resources in the order they registered, which varies between runs.
    stack = copy_stack(dev_stack())
    tcp_a, tcp_b = owned(stack, TCP, "tenant-a"), owned(stack, TCP, "tenant-b")
    set_both(tcp_b, ["spec", "networkProfile", "podCidrs"], ["10.174.16.0/24"])  # inside tenant-a's pod range
    set_both(tcp_a, ["spec", "networkProfile", "podCidrs"], ["10.174.16.0/20"])
    expected = [("tenant 'tenant-a' pod CIDR 10.174.16.0/20 overlaps tenant 'tenant-b' pod CIDR 10.174.16.0/24; give "
                 "every tenant disjoint podCidr/serviceCidr.", tcp_a.urn)]
    assert _overlaps(stack) == _overlaps(stack[::-1]) == expected
    # Two control planes of one tenant (a second one added under tenant-a): named by range, in either order.
    set_both(tcp_b, ["spec", "networkProfile", "podCidrs"], ["10.180.0.0/16"])
    second = add_resource(stack, find(stack, tp.TENANT_TYPE, "tenant-a"), TCP, "tenant-a-second",
                          {"metadata": {"name": "tenant-a", "namespace": "tenant-a"},
                           "spec": {"networkProfile": {"podCidrs": ["10.174.0.0/16"]}}})
    expected = [("tenant 'tenant-a' pod CIDR 10.174.0.0/16 overlaps tenant 'tenant-a' pod CIDR 10.174.16.0/20; give "
                 "every tenant disjoint podCidr/serviceCidr.", second.urn)]
    assert _overlaps(stack) == _overlaps(stack[::-1]) == expected


def test_a_control_plane_under_no_tenant_is_named_by_its_kubernetes_name() -> None:
    stack = copy_stack(dev_stack())
    root = find(stack, "pulumi:pulumi:Stack")
    stray = add_resource(stack, root, TCP, "stray-resource", {"metadata": {"name": "stray", "namespace": "stray"},
                                                              "spec": {"networkProfile": {"podCidrs": ["10.174.16.0/24"]}}})
    assert _overlaps(stack) == [(
        "tenant 'stray' pod CIDR 10.174.16.0/24 overlaps tenant 'tenant-a' pod CIDR 10.174.16.0/20; give every tenant "
        "disjoint podCidr/serviceCidr.", stray.urn)]


def test_a_tenants_registered_gpu_nodes_keep_their_numa_and_pods() -> None:
    # components/tenant.py registers `gpuNodes`: each node's name, gpus, its cards' NUMA nodes and maxPods.
    node = {"name": "gpu-1", "gpus": [A100], "numa": [1, 0], "maxPods": 103}
    tenant = Res(tp.TENANT_TYPE, "team", "urn:pulumi:dev::p::gpu-tenancy:tenant:Tenant::team",
                 {"gpuNodes": [node], "workloads": [], "quota": {}})
    declared = plan_policies._declaration(tenant)
    assert declared is not None and declared["nodes"] == [("gpu-1", [A100], [1, 0], 103)]


# --------------------------------------------------------------------------- allowlist_policies

ALLOWANCES = "gpu-tenancy-policy:allowedTypes"
RUNTIME_CLASS = "kubernetes:node.k8s.io/v1:RuntimeClass"


def _stack_config(monkeypatch: pytest.MonkeyPatch, **values: Any) -> None:
    # The engine hands the pack the stack's config as PULUMI_CONFIG, each value JSON-encoded as a string.
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({k: json.dumps(v) for k, v in values.items()}))


def test_a_stack_without_allowances_allows_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert allowlist_policies.allowances() == ({}, [])
    _stack_config(monkeypatch, **{"gpu-tenancy:mode": "sim"})
    assert allowlist_policies.allowances() == ({}, [])


def test_an_allowance_is_a_list_of_type_and_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = "the team's own cert-manager Issuer"
    _stack_config(monkeypatch, **{ALLOWANCES: [{"type": "kubernetes:cert-manager.io/v1:Issuer", "reason": reason}]})
    assert allowlist_policies.allowances() == ({"kubernetes:cert-manager.io/v1:Issuer": reason}, [])
    _stack_config(monkeypatch, **{ALLOWANCES: {"type": "kubernetes:cert-manager.io/v1:Issuer", "reason": reason}})
    assert allowlist_policies.allowances() == ({}, [f"{ALLOWANCES} must be a list of {{type, reason}}, not dict"])


def test_a_bad_allowance_is_named_by_index_and_key_and_the_good_ones_still_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    good = {"type": "kubernetes:cert-manager.io/v1:Issuer", "reason": "the team's own cert-manager Issuer"}
    _stack_config(monkeypatch, **{ALLOWANCES: [
        {"type": "kubernetes:cert-manager.io/v1:Issuer", "reason": "short"}, good,
        {"type": "kubernetes:apps/v1:DeploymentPatch", "reason": "patch the kube-proxy DaemonSet"}]})
    allowed, problems = allowlist_policies.allowances()
    assert allowed == {good["type"]: good["reason"]}
    assert problems[0].startswith(f"{ALLOWANCES}[0].reason: String should have at least 10 characters")
    assert problems[1] == (f"{ALLOWANCES}[2].type: kubernetes:apps/v1:DeploymentPatch patches objects the program "
                           "does not own and cannot be allowed; remove it")
    assert len(problems) == 2


def test_an_allowance_that_is_no_mapping_is_named_as_an_entry_and_a_patch_stops_no_later_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    good = {"type": "kubernetes:cert-manager.io/v1:Issuer", "reason": "the team's own cert-manager Issuer"}
    _stack_config(monkeypatch, **{ALLOWANCES: [
        "kubernetes:cert-manager.io/v1:Issuer", {"type": "kubernetes:apps/v1:DaemonSetPatch", "reason": "x" * 12}, good]})
    allowed, problems = allowlist_policies.allowances()
    assert allowed == {good["type"]: good["reason"]}
    assert problems[0] == (f"{ALLOWANCES}[0].entry: Input should be a valid dictionary or instance of TypeAllowance "
                           "(give `type: <pulumi type>` and `reason: <why this stack needs it>`)")
    assert len(problems) == 2


def test_a_bad_allowance_is_reported_on_the_stack_resource_only(monkeypatch: pytest.MonkeyPatch) -> None:
    _stack_config(monkeypatch, **{ALLOWANCES: "x"})
    stack = copy_stack(dev_stack())
    root = craft(stack, "pulumi:pulumi:Stack", "gpu-tenancy-dev", {})
    found = run_resource_policy(allowlist_policies.known_types, [root, find(stack, TCP)])
    assert found == [("gpu-tenancy-dev", f"{ALLOWANCES} must be a list of {{type, reason}}, not str", None)]


def test_an_allowed_type_passes_known_types_and_is_printed_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    typ = "kubernetes:cert-manager.io/v1:Issuer"
    stack = copy_stack(dev_stack())
    issuer = craft(stack, typ, "issuer", {"spec": {"selfSigned": {}}})
    unknown = (f"{typ} 'issuer' is of type {typ}, which the program never registers, so no policy reads it; remove "
               f"it, or allow the type in the stack config ({ALLOWANCES}: [{{type, reason}}]).")
    monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    assert [m for _, m, _ in run_resource_policy(allowlist_policies.known_types, [issuer])] == [unknown]
    assert run_stack_policy(allowlist_policies.known_types_in_stack, stack) == [(
        f"{typ} 'issuer' is of type {typ}, which the program never registers or reads; remove it, or allow the type "
        f"in the stack config ({ALLOWANCES}: [{{type, reason}}]).", issuer.urn)]
    assert run_stack_policy(allowlist_policies.type_allowances, stack) == []
    _stack_config(monkeypatch, **{ALLOWANCES: [{"type": typ, "reason": "the team's own cert-manager Issuer"}]})
    assert run_resource_policy(allowlist_policies.known_types, [issuer]) == []
    assert run_stack_policy(allowlist_policies.known_types_in_stack, stack) == []
    assert run_stack_policy(allowlist_policies.type_allowances, stack) == [(
        f"{typ} 'issuer': type allowed by the stack config ({ALLOWANCES}): the team's own cert-manager Issuer",
        issuer.urn)]


def test_an_allowance_of_a_known_type_prints_nothing() -> None:
    stack = dev_stack()
    config = {ALLOWANCES: [{"type": TCP, "reason": "already registered by the program"}]}
    assert run_stack_policy(allowlist_policies.type_allowances, stack, config) == []


@pytest.mark.parametrize(("store", "admitted"), [
    ("default", True),  # the shared etcd's DataStore (gpu_tenancy/builders/kamaji)
    ("tenant-a-etcd", True),  # its own (gpu_tenancy/builders/tenant_datastore)
    ("tenant-b-etcd", False),  # another tenant's
    ("defaults", False),
])
def test_a_control_plane_names_the_shared_or_its_own_datastore(store: str, admitted: bool) -> None:
    stack = copy_stack(dev_stack())
    tcp = owned(stack, TCP, "tenant-a")
    set_both(tcp, ["spec", "dataStore"], store)
    found = [m for _, m, _ in run_resource_policy(allowlist_policies.field_allowlist, [tcp])]
    assert found == ([] if admitted else [
        f"{TCP} 'tenant-a-control-plane-tcp' names DataStore {store!r}, neither the shared 'default' nor its own "
        "'tenant-a-etcd'."])


def test_fields_the_program_never_sets_are_named_with_the_component_that_made_them() -> None:
    stack = copy_stack(dev_stack())
    tcp = owned(stack, TCP, "tenant-a")
    set_both(tcp, ["spec", "zeta"], True)
    set_both(tcp, ["spec", "alpha"], {"beta": 1})
    assert [m for _, m, _ in run_resource_policy(allowlist_policies.field_allowlist, [tcp])] == [
        f"{TCP} 'tenant-a-control-plane-tcp' (made by gpu-tenancy:tenant_control_plane:TenantControlPlane) sets fields "
        "the program never sets on it: spec.alpha.beta, spec.zeta; on a type that runs code or reaches a host only the "
        "program's own fields pass."]


def test_a_releases_fields_name_the_component_that_made_it_not_its_chart() -> None:
    stack = copy_stack(dev_stack())
    release = next(r for r in stack if r.type == "kubernetes:helm.sh/v3:Release" and r.name == "tenant-a-hami-chart")
    set_both(release, ["values", "zeta"], True)
    [found] = [m for _, m, _ in run_resource_policy(allowlist_policies.field_allowlist, [release]) if "sets fields" in m]
    assert found.startswith(f"kubernetes:helm.sh/v3:Release {release.name!r} (made by gpu-tenancy:hami:Hami) sets "
                            "fields the program never sets on it: values.zeta;")


def test_a_control_plane_without_its_tenant_label_may_name_the_shared_datastore_only() -> None:
    # A resource policy sees no parent (pulumi_policy ResourceValidationArgs): without the tenant label nothing
    # says whose own DataStore it may name.
    stack = copy_stack(dev_stack())
    tcp = owned(stack, TCP, "tenant-a")
    for props in (tcp.inputs, tcp.state):
        props["metadata"].pop("labels", None)
    set_both(tcp, ["spec", "dataStore"], "default")
    assert run_resource_policy(allowlist_policies.field_allowlist, [tcp]) == []
    set_both(tcp, ["spec", "dataStore"], "tenant-a-etcd")
    assert [m for _, m, _ in run_resource_policy(allowlist_policies.field_allowlist, [tcp])] == [
        f"{TCP} 'tenant-a-control-plane-tcp' names DataStore 'tenant-a-etcd', neither the shared 'default' nor a "
        "tenant's own (it has no gpu-tenancy.io/tenant label)."]


def test_a_control_plane_passes_only_the_api_server_flags_its_device_layer_sets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # sim-nvml on Kubernetes 1.35 turns on the beta MutatingAdmissionPolicy API (gpu_tenancy/builders/mock_nvml
    # cuda_control.api_server_args); any other flag, or those flags in a mode without CUDA control, is refused.
    own = ["--feature-gates=MutatingAdmissionPolicy=true", "--runtime-config=admissionregistration.k8s.io/v1beta1=true"]
    stack = copy_stack(dev_stack())
    tcp = owned(stack, TCP, "tenant-a")
    set_both(tcp, ["spec", "controlPlane", "deployment", "extraArgs"], {"apiServer": own})

    def flags() -> list[str]:
        return [m for _, m, _ in run_resource_policy(allowlist_policies.field_allowlist, [tcp]) if "flag" in m]

    _stack_config(monkeypatch, **{"gpu-tenancy:mode": "sim-nvml"})
    assert flags() == []
    set_both(tcp, ["spec", "controlPlane", "deployment", "extraArgs"], {"apiServer": [*own, "--anonymous-auth=true"]})
    assert flags() == [f"{TCP} 'tenant-a-control-plane-tcp' passes apiServer flag '--anonymous-auth=true', which the "
                       "program never sets."]
    set_both(tcp, ["spec", "controlPlane", "deployment", "extraArgs"], {"apiServer": own})
    _stack_config(monkeypatch, **{"gpu-tenancy:mode": "sim"})
    assert flags() == [f"{TCP} 'tenant-a-control-plane-tcp' passes apiServer flag {flag!r}, which the program never sets."
                       for flag in own]


@pytest.mark.parametrize(("repository", "admitted"), [(None, True), ({}, True),
                                                      ({"repo": "https://charts.example.org"}, False)])
def test_a_release_names_no_repository(repository: Any, admitted: bool) -> None:
    stack = copy_stack(dev_stack())
    release = next(r for r in stack if r.type == "kubernetes:helm.sh/v3:Release" and r.custom)
    if repository is None:
        release.inputs.pop("repositoryOpts", None)
        release.state.pop("repositoryOpts", None)
    else:
        set_both(release, ["repositoryOpts"], repository)
    found = [m for _, m, _ in run_resource_policy(allowlist_policies.field_allowlist, [release]) if "installs" in m]
    if admitted:
        assert found == []
    else:
        assert len(found) == 1 and found[0].endswith(
            " from 'https://charts.example.org', which names a repository; charts come only from the chart cache, "
            "pulled from the repositories gpu_tenancy/contract/versions.py pins (cert-manager, hami, kamaji, "
            "kamaji-etcd, metallb) by `make charts`.")


@pytest.mark.parametrize(("handler", "admitted"), [("nvidia", False), ("runc", True), ("nvidia-cdi", True)])
def test_a_runtime_class_with_the_vendors_handler_is_refused_under_any_name(handler: str, admitted: bool) -> None:
    # The NVIDIA container toolkit's runtime handler is `nvidia` (gpu_tenancy/hami/protocol.py NVIDIA).
    stack = copy_stack(dev_stack())
    runtime_class = craft(stack, RUNTIME_CLASS, "fast", {"metadata": {"name": "fast"}, "handler": handler})
    found = [m for _, m, _ in run_resource_policy(allowlist_policies.field_allowlist, [runtime_class])
             if "uses handler" in m]
    assert found == ([] if admitted else [
        f"{RUNTIME_CLASS} 'fast' uses handler 'nvidia' (GPUs by runtime, around HAMi) under any class name."])


# --------------------------------------------------------------------------- controls_policies

CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = VAP + "Binding"
MAP = "kubernetes:admissionregistration.k8s.io/v1beta1:MutatingAdmissionPolicy"
MAP_BINDING = MAP + "Binding"


def _user_access_stack() -> list[Recorded]:
    from test_tenant_access import with_user_access

    return policy_support._once(("user access",), lambda: policy_support.record_engine_view(with_user_access()))


def _control(stack: list[Recorded], component: str, typ: str) -> Recorded:
    return next(r for r in stack if r.type == typ and f"{component}$" in r.urn and "tenant-a" in r.urn)


def _rbac(stack: list[Recorded]) -> list[str]:
    return [m for m, _ in run_stack_policy(cp.rbac_contained, stack)]


# What RBAC's good practices name as escalation paths (kubernetes.io/docs/concepts/security/rbac-good-practices):
# the escalate, bind and impersonate verbs, wildcards, Secrets, exec/attach/port-forward, nodes/proxy, token
# requests, RBAC and admission objects themselves, and approving certificate requests.
FORBIDDEN_RULES = [
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}, "grants ['*'] on ['']"),
    ({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["escalate"]},
     "grants ['escalate'] on ['rbac.authorization.k8s.io']"),
    ({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"]},
     "grants ['bind'] on ['rbac.authorization.k8s.io']"),
    ({"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}, "grants ['impersonate'] on ['']"),
    ({"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}, "grants ['get'] on ['*']"),
    *(({"apiGroups": [""], "resources": [resource], "verbs": ["get"]}, f"grants ['get'] on {resource}")
      for resource in ["*", "secrets", "pods/exec", "pods/attach", "pods/portforward", "nodes/proxy",
                       "serviceaccounts/token", "clusterroles", "clusterrolebindings", "roles", "rolebindings",
                       "validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies",
                       "mutatingadmissionpolicybindings", "validatingwebhookconfigurations",
                       "mutatingwebhookconfigurations", "certificatesigningrequests/approval"]),
]


@pytest.mark.parametrize(("rule", "fragment"), FORBIDDEN_RULES, ids=[f for _, f in FORBIDDEN_RULES])
def test_a_role_granting_an_escalation_path_is_refused(rule: dict[str, Any], fragment: str) -> None:
    stack = copy_stack(dev_stack())
    role = find(stack, CLUSTER_ROLE, "tenant-a-mock-gpu-agent-role")
    rules = role.inputs["rules"]
    assert _rbac(stack) == []
    # The closest admitted: the same rule reading pods, which the agent's role grants already.
    set_both(role, ["rules"], [*rules, {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
    assert _rbac(stack) == []
    set_both(role, ["rules"], [*rules, rule])
    assert [m for m in _rbac(stack) if fragment in m] != [], _rbac(stack)
    assert all(m.startswith(f"{CLUSTER_ROLE} 'tenant-a-mock-gpu-agent-role' ") for m in _rbac(stack))


def test_kube_proxy_may_bind_the_built_in_node_proxier_role_and_nothing_else_built_in() -> None:
    # kind's kube-proxy binds system:node-proxier, as kubeadm does (kubernetes/kubernetes cmd/kubeadm/app/phases/
    # addons/proxy: NodeProxierClusterRoleName).
    stack = copy_stack(dev_stack())
    binding = next(r for r in stack if r.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
                   and r.inputs.get("roleRef", {}).get("name") == "system:node-proxier" and "tenant-a" in r.urn)
    assert _rbac(stack) == []
    set_both(binding, ["roleRef", "name"], "system:node")
    assert _rbac(stack) == [f"kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding {binding.name!r} binds "
                            "ClusterRole 'system:node', not a role its own component makes; the program's roles grant "
                            "what its components use, to their own service accounts."]


RBAC_TAIL = "; the program's roles grant what its components use, to their own service accounts."
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"


def test_a_role_aggregating_others_is_refused() -> None:
    # An aggregationRule's role gets the rules of every ClusterRole its selector matches, now and later.
    stack = copy_stack(dev_stack())
    role = find(stack, CLUSTER_ROLE, "tenant-a-mock-gpu-agent-role")
    set_both(role, ["aggregationRule"], {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]})
    assert run_stack_policy(cp.rbac_contained, stack) == [(
        f"{CLUSTER_ROLE} 'tenant-a-mock-gpu-agent-role' aggregates other roles (aggregationRule)" + RBAC_TAIL, role.urn)]


@pytest.mark.parametrize(("change", "problem"), [
    # A namespaced Role's name in a ClusterRoleBinding's roleRef: not the component's ClusterRole.
    ({"roleRef": {"kind": "Role", "apiGroup": "rbac.authorization.k8s.io", "name": "tenant-a-mock-gpu-agent"}},
     "binds Role 'tenant-a-mock-gpu-agent', not a role its own component makes"),
    # Another component's role (kindnet's), and a user, a group, another component's account, no namespace.
    ({"roleRef": {"kind": "ClusterRole", "apiGroup": "rbac.authorization.k8s.io", "name": "kindnet"}},
     "binds ClusterRole 'kindnet', not a role its own component makes"),
    ({"subjects": [{"kind": "User", "name": "tenant-a-mock-gpu-agent", "namespace": "kube-system"}]},
     "binds User 'tenant-a-mock-gpu-agent', not a ServiceAccount its own component makes"),
    ({"subjects": [{"kind": "Group", "name": "system:authenticated"}]},
     "binds Group 'system:authenticated', not a ServiceAccount its own component makes"),
    ({"subjects": [{"kind": "ServiceAccount", "name": "kindnet", "namespace": "kube-system"}]},
     "binds ServiceAccount 'kindnet', not a ServiceAccount its own component makes"),
    ({"subjects": [{"kind": "ServiceAccount", "name": "tenant-a-mock-gpu-agent", "namespace": "default"}]},
     "binds ServiceAccount 'tenant-a-mock-gpu-agent', not a ServiceAccount its own component makes"),
])
def test_a_binding_binds_its_own_components_role_to_its_own_accounts(change: dict[str, Any], problem: str) -> None:
    stack = copy_stack(dev_stack())
    binding = find(stack, CLUSTER_ROLE_BINDING, "tenant-a-mock-gpu-agent-binding")
    for key, value in change.items():
        set_both(binding, [key], value)
    assert _rbac(stack) == [f"{CLUSTER_ROLE_BINDING} 'tenant-a-mock-gpu-agent-binding' {problem}{RBAC_TAIL}"]


@pytest.mark.parametrize("field", ["roleRef", "subjects"])
def test_a_binding_names_its_components_role_and_account_by_their_kind_not_their_name_alone(field: str) -> None:
    # A ConfigMap of the agent's component in kube-system: its name is no ClusterRole and no ServiceAccount.
    stack = copy_stack(dev_stack())
    binding = find(stack, CLUSTER_ROLE_BINDING, "tenant-a-mock-gpu-agent-binding")
    component = next(r for r in stack if r.urn == binding.parent)
    craft(stack, "kubernetes:core/v1:ConfigMap", "tenant-a-impostor",
          {"metadata": {"name": "impostor", "namespace": "kube-system"}}, parent=component)
    if field == "roleRef":
        set_both(binding, ["roleRef", "name"], "impostor")
        problem = "binds ClusterRole 'impostor', not a role its own component makes"
    else:
        set_both(binding, ["subjects"], [{"kind": "ServiceAccount", "name": "impostor", "namespace": "kube-system"}])
        problem = "binds ServiceAccount 'impostor', not a ServiceAccount its own component makes"
    assert _rbac(stack) == [f"{CLUSTER_ROLE_BINDING} 'tenant-a-mock-gpu-agent-binding' {problem}{RBAC_TAIL}"]


def test_a_binding_with_no_subjects_binds_nobody_and_one_under_no_component_binds_nothing_of_its_own() -> None:
    stack = copy_stack(dev_stack())
    binding = find(stack, CLUSTER_ROLE_BINDING, "tenant-a-mock-gpu-agent-binding")
    for props in (binding.inputs, binding.state):
        props.pop("subjects")
    assert _rbac(stack) == []
    # The same binding at the stack's top: no sibling role or account is its own.
    loose = craft(stack, CLUSTER_ROLE_BINDING, "loose-binding", {
        "metadata": {"name": "loose"}, "roleRef": {"kind": "ClusterRole", "apiGroup": "rbac.authorization.k8s.io", "name": "kindnet"},
        "subjects": [{"kind": "ServiceAccount", "name": "kindnet", "namespace": "kube-system"}]})
    assert _rbac(stack) == [
        f"{CLUSTER_ROLE_BINDING} 'loose-binding' binds ClusterRole 'kindnet', not a role its own component makes"
        + RBAC_TAIL,
        f"{CLUSTER_ROLE_BINDING} 'loose-binding' binds ServiceAccount 'kindnet', not a ServiceAccount its own "
        "component makes" + RBAC_TAIL]
    assert loose.urn


def test_a_role_not_known_yet_is_checked_when_known_and_the_next_one_still_is() -> None:
    # A preview's unknown outputs: the role is checked before its step runs, when its rules are known.

    stack = copy_stack(dev_stack())
    first = find(stack, CLUSTER_ROLE, "tenant-a-network-kindnet")
    set_both(first, ["aggregationRule"], ENGINE_UNKNOWN)
    assert _rbac(stack) == []
    role = find(stack, CLUSTER_ROLE, "tenant-a-mock-gpu-agent-role")
    set_both(role, ["aggregationRule"], {"clusterRoleSelectors": []})
    assert len(_rbac(stack)) == 1


REQUIRED_CONTROLS = [
    ("gpu-tenancy:gpu_access:GpuAccessPolicy", VAP), ("gpu-tenancy:gpu_access:GpuAccessPolicy", VAP_BINDING),
    ("gpu-tenancy:tenant_access:TenantAccess", "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"),
    ("gpu-tenancy:tenant_access:TenantAccess", "kubernetes:core/v1:ResourceQuota"),
    ("gpu-tenancy:tenant_access:TenantAccess", VAP), ("gpu-tenancy:tenant_access:TenantAccess", VAP_BINDING),
    ("gpu-tenancy:workloads:Workloads", "kubernetes:core/v1:Namespace"),
    ("gpu-tenancy:workloads:Workloads", "kubernetes:networking.k8s.io/v1:NetworkPolicy"),
    ("gpu-tenancy:mock_gpu_agent:MockGpuAgent", VAP), ("gpu-tenancy:mock_gpu_agent:MockGpuAgent", VAP_BINDING),
]


@pytest.mark.parametrize(("component", "typ"), REQUIRED_CONTROLS)
def test_each_control_removed_is_named(component: str, typ: str) -> None:
    stack = copy_stack(_user_access_stack())
    removed = _control(stack, component, typ)
    owner = next(r for r in stack if r.urn == removed.parent)
    assert [m for m, _ in run_stack_policy(cp.controls_present, stack)] == []
    stack.remove(removed)
    found = [m for m, _ in run_stack_policy(cp.controls_present, stack) if "lacks" in m]
    assert found == [f"{component} {owner.name!r} lacks its {typ}; the program installs it and it may not be removed."]


@pytest.mark.parametrize(("component", "typ", "name"), [
    ("gpu-tenancy:gpu_access:GpuAccessPolicy", VAP, "gpu-tenancy-gpu-access"),
    ("gpu-tenancy:gpu_access:GpuAccessPolicy", VAP_BINDING, "gpu-tenancy-gpu-access"),
    ("gpu-tenancy:tenant_access:TenantAccess", VAP, "gpu-tenancy-user-services"),
    ("gpu-tenancy:tenant_access:TenantAccess", VAP_BINDING, "gpu-tenancy-user-services"),
])
def test_a_control_renamed_is_refused(component: str, typ: str, name: str) -> None:
    stack = copy_stack(_user_access_stack())
    control = _control(stack, component, typ)
    assert control.inputs["metadata"]["name"] == name
    assert run_resource_policy(cp.installed_controls, [control]) == []
    set_both(control, ["metadata", "name"], name + "-v2")
    found = [m for _, m, _ in run_resource_policy(cp.installed_controls, [control]) if "is named" in m]
    assert found == [f"{typ} {control.name!r} (made by {component}) is named {name + '-v2'!r}, not {name!r}: its "
                     "binding and policy find each other by that name."]


@pytest.mark.parametrize(("component", "typ"), [
    ("gpu-tenancy:gpu_access:GpuAccessPolicy", VAP_BINDING), ("gpu-tenancy:tenant_access:TenantAccess", VAP_BINDING),
    ("gpu-tenancy:mock_gpu_agent:MockGpuAgent", VAP_BINDING), ("gpu-tenancy:mock_nvml:MockNvml", MAP_BINDING),
])
def test_a_binding_naming_no_policy_of_its_component_is_refused(component: str, typ: str) -> None:
    stack = copy_stack(nvml_stack() if component.endswith("MockNvml") else _user_access_stack())
    binding = _control(stack, component, typ)
    assert [m for m, _ in run_stack_policy(cp.controls_present, stack)] == []
    set_both(binding, ["spec", "policyName"], "someone-elses-policy")
    assert [m for m, _ in run_stack_policy(cp.controls_present, stack)] == [
        f"{typ} {binding.name!r} binds policy 'someone-elses-policy', which its component does not make; it binds "
        "nothing."]


@pytest.mark.parametrize("typ", [MAP, MAP_BINDING])
def test_a_mutating_admission_policy_outside_sim_nvmls_mutation_is_refused(typ: str) -> None:
    stack = copy_stack(nvml_stack())
    own = _control(stack, "gpu-tenancy:mock_nvml:MockNvml", typ)
    assert run_resource_policy(cp.installed_controls, [own]) == []
    other = craft(stack, typ, "rewrite", own.inputs)
    assert [m for _, m, _ in run_resource_policy(cp.installed_controls, [other])] == [
        f"{typ} 'rewrite': a MutatingAdmissionPolicy rewrites pods after every check of their spec; the program "
        "installs one only, sim-nvml's CUDA-control mutation (gpu-tenancy:mock_nvml:MockNvml)."]


@pytest.mark.parametrize(("component", "typ", "path", "value"), [
    ("gpu-tenancy:gpu_access:GpuAccessPolicy", VAP_BINDING, ["spec", "validationActions"], ["Warn"]),
    ("gpu-tenancy:mock_gpu_agent:MockGpuAgent", VAP_BINDING, ["spec", "validationActions"], ["Warn"]),
    ("gpu-tenancy:workloads:Workloads", "kubernetes:core/v1:Namespace",
     ["metadata", "labels", "pod-security.kubernetes.io/enforce"], "privileged"),
    ("gpu-tenancy:workloads:Workloads", "kubernetes:networking.k8s.io/v1:NetworkPolicy", ["spec", "policyTypes"],
     ["Ingress"]),
])
def test_a_control_changed_from_what_the_program_builds_is_refused(
        component: str, typ: str, path: list[str], value: Any) -> None:
    stack = copy_stack(dev_stack())
    control = _control(stack, component, typ)
    assert run_resource_policy(cp.installed_controls, [control]) == []
    set_both(control, path, value)
    found = [m for _, m, _ in run_resource_policy(cp.installed_controls, [control])]
    assert len(found) == 1 and found[0].startswith(f"{typ} {control.name!r} (made by {component}) has ")


@pytest.mark.parametrize("validations", [
    [{"expression": "object.spec.nodeName == ''"}],  # names no node the agent's policy names
    [{"expression": "true"}],  # no node at all
    [{"message": "no expression"}],
    [],
])
def test_the_agents_policy_that_names_no_node_is_not_as_built(validations: list[Any]) -> None:
    # agent_admission.policy_spec ties the agent's writes to its node: `object.spec.nodeName == '<node>'`.
    stack = copy_stack(dev_stack())
    policy = _control(stack, "gpu-tenancy:mock_gpu_agent:MockGpuAgent", VAP)
    assert run_resource_policy(cp.installed_controls, [policy]) == []
    set_both(policy, ["spec", "validations"], validations)
    found = [m for _, m, _ in run_resource_policy(cp.installed_controls, [policy])]
    assert len(found) == 1 and found[0].startswith(
        f"{VAP} {policy.name!r} (made by gpu-tenancy:mock_gpu_agent:MockGpuAgent) has spec other than the program "
        "builds: ")


@pytest.mark.parametrize(("stack_name", "mode"), [("user access", "sim"), ("dev-nvml", "sim-nvml"), ("gpu", "real")])
def test_every_control_the_program_installs_passes_as_built(
        monkeypatch: pytest.MonkeyPatch, stack_name: str, mode: str) -> None:
    stack = {"user access": _user_access_stack, "dev-nvml": nvml_stack, "gpu": policy_support.gpu_stack}[stack_name]()
    _stack_config(monkeypatch, **{"gpu-tenancy:mode": mode})
    assert run_resource_policy(cp.installed_controls, stack) == []
    assert run_stack_policy(cp.controls_present, stack) == []


def test_the_mock_agents_policy_with_one_validation_changed_is_refused() -> None:
    # Its first validation names the agent's node; the policy is rebuilt for that node and compared whole.
    stack = copy_stack(dev_stack())
    policy = _control(stack, "gpu-tenancy:mock_gpu_agent:MockGpuAgent", VAP)
    validations = policy.inputs["spec"]["validations"]
    assert "object.spec.nodeName == '" in validations[0]["expression"]
    set_both(policy, ["spec", "validations"], [*validations[:-1], {**validations[-1], "expression": "true"}])
    [(_, message, _)] = run_resource_policy(cp.installed_controls, [policy])
    assert message.startswith(f"{VAP} {policy.name!r} (made by gpu-tenancy:mock_gpu_agent:MockGpuAgent) has spec "
                              "other than the program builds")


HOST_WORKER = "gpu-tenancy:host_worker:HostWorker"
FENCE_COMMAND = "command:remote:Command"


def _fence_messages(stack: list[Recorded]) -> list[str]:
    return [m for m, _ in run_stack_policy(cp.controls_present, stack)]


def _fence(stack: list[Recorded], tenant: str) -> Recorded:
    return next(r for r in stack if r.type == FENCE_COMMAND and r.name.startswith(f"host-fences-{tenant}-"))


def test_a_gpu_host_without_its_firewall_is_refused() -> None:
    stack = copy_stack(policy_support.gpu_stack())
    host = next(r for r in stack if r.type == HOST_WORKER and r.inputs["tenant"] == "tenant-a")
    stack.remove(_fence(stack, "tenant-a"))
    assert _fence_messages(stack) == [
        f"{HOST_WORKER} {host.name!r} has 0 host firewalls (gpu-tenancy:host_fence:HostFences), not one."]


@pytest.mark.parametrize("field", ["create", "delete"])
def test_a_firewall_running_another_script_is_refused(field: str) -> None:
    stack = copy_stack(policy_support.gpu_stack())
    command = _fence(stack, "tenant-a")
    set_both(command, [field], command.inputs[field] + "\n# and something else")
    assert _fence_messages(stack) == [
        f"{FENCE_COMMAND} {command.name!r} runs another script than the host firewall's."]


def test_a_firewall_loading_other_rules_is_refused() -> None:
    stack = copy_stack(policy_support.gpu_stack())
    command = _fence(stack, "tenant-a")
    rules = command.inputs["stdin"]
    set_both(command, ["stdin"], rules.replace("reject", "accept", 1))
    assert _fence_messages(stack) == [
        f"{FENCE_COMMAND} {command.name!r} loads other rules than the other tenants' control planes and hosts ask."]


def _host_output(host: Recorded, key: str, value: Any) -> None:
    # A component's properties, as the engine hands them to a stack policy, are the outputs it registered.
    set_both(host, [key], value)
    assert host.registered_outputs is not None
    host.registered_outputs[key] = value


def test_node_port_control_planes_are_fenced_by_port_and_load_balancer_ones_are_not() -> None:
    # NodePort control planes listen on every management node's address: their ports are fenced everywhere
    # (gpu_tenancy/builders/host_worker/fence.py); a TenantControlPlane's serviceType says which.
    from gpu_tenancy.builders.host_worker import fence

    stack = copy_stack(policy_support.gpu_stack())
    hosts = {r.inputs["tenant"]: r for r in stack if r.type == HOST_WORKER}
    # Two management nodes: a foreign control plane on another address is fenced whole, and as a NodePort also
    # by its port on every address.
    endpoints = {"tenant-a": "172.18.0.2:31004", "tenant-b": "172.18.0.3:31010"}
    for tenant, host in hosts.items():
        _host_output(host, "controlPlaneEndpoint", endpoints[tenant])
    for tenant in hosts:
        other = "tenant-b" if tenant == "tenant-a" else "tenant-a"
        rules = fence.fence_rules(endpoints[tenant], [endpoints[other]], [hosts[other].inputs["address"]],
                                  node_ports=True)
        set_both(_fence(stack, tenant), ["stdin"], rules)
    tcps = [r for r in stack if r.type == TCP]
    for tcp in tcps:
        set_both(tcp, ["spec", "controlPlane", "service", "serviceType"], "NodePort")
    assert _fence_messages(stack) == []
    set_both(tcps[0], ["spec", "controlPlane", "service", "serviceType"], "LoadBalancer")
    set_both(tcps[1], ["spec", "controlPlane", "service", "serviceType"], "LoadBalancer")
    assert sorted(_fence_messages(stack)) == sorted(
        f"{FENCE_COMMAND} {_fence(stack, t).name!r} loads other rules than the other tenants' control planes and "
        "hosts ask." for t in hosts)


def test_a_gpu_host_whose_peer_has_no_address_to_fence_is_refused() -> None:
    stack = copy_stack(policy_support.gpu_stack())
    peer = next(r for r in stack if r.type == HOST_WORKER and r.inputs["tenant"] == "tenant-b")
    host = next(r for r in stack if r.type == HOST_WORKER and r.inputs["tenant"] == "tenant-a")
    _host_output(peer, "address", "gpu-b.lab")
    found = _fence_messages(stack)
    assert f"{HOST_WORKER} {host.name!r} cannot be fenced: " in found[0] and "'gpu-b.lab'" in found[0]


@pytest.mark.parametrize("repository", [None, {}])
def test_a_chart_not_from_the_cache_without_a_repository_names_no_repository(repository: Any) -> None:
    stack = copy_stack(dev_stack())
    release = next(r for r in stack if r.type == "kubernetes:helm.sh/v3:Release" and r.custom)
    set_both(release, ["chart"], "metallb")
    if repository is None:
        release.inputs.pop("repositoryOpts", None)
        release.state.pop("repositoryOpts", None)
    else:
        set_both(release, ["repositoryOpts"], repository)
    [found] = [m for _, m, _ in run_resource_policy(allowlist_policies.field_allowlist, [release]) if "installs" in m]
    assert found.startswith(f"kubernetes:helm.sh/v3:Release {release.name!r} installs chart 'metallb', which ")
    assert " from " not in found.split("; charts come only")[0]


@pytest.mark.parametrize(("who", "key"), [("host", "controlPlaneEndpoint"), ("fence", "stdin"),
                                          ("peer", "controlPlaneEndpoint"), ("peer", "address")])
def test_a_firewall_is_checked_once_what_it_is_built_from_is_known(who: str, key: str) -> None:
    # A preview before the control planes exist: an endpoint, a peer's address or the rules are not known yet.

    stack = copy_stack(policy_support.gpu_stack())
    hosts = {r.inputs["tenant"]: r for r in stack if r.type == HOST_WORKER}
    if who == "fence":
        set_both(_fence(stack, "tenant-a"), [key], ENGINE_UNKNOWN)
    else:
        _host_output(hosts["tenant-a" if who == "host" else "tenant-b"], key, ENGINE_UNKNOWN)
    # The firewall built from the unknown value waits. An endpoint is in both hosts' rules, so both wait; tenant-a's
    # rules or tenant-b's address leave tenant-b's firewall to be checked: changed, it is refused.
    assert _fence_messages(stack) == []
    set_both(_fence(stack, "tenant-b"), ["stdin"], "table inet other {}\n")
    assert _fence_messages(stack) == (
        [] if key == "controlPlaneEndpoint" else
        [f"{FENCE_COMMAND} {_fence(stack, 'tenant-b').name!r} loads other rules than the other tenants' control "
         "planes and hosts ask."])


def test_sim_nvmls_mock_nvml_and_its_marker_in_a_stack_of_real_hosts_are_refused() -> None:
    stack = copy_stack(nvml_stack())
    assert _fence_messages(stack) == []
    mock = next(r for r in stack if r.type == "gpu-tenancy:mock_nvml:MockNvml" and "tenant-a" in r.name)
    policy = _control(stack, "gpu-tenancy:gpu_access:GpuAccessPolicy", VAP)
    marker = policy.inputs["spec"]["variables"][0]["expression"]
    craft(stack, HOST_WORKER, "tenant-a-gpu-1", {"tenant": "tenant-a", "nodeName": "gpu-1"})
    found = _fence_messages(stack)
    assert f"gpu-tenancy:mock_nvml:MockNvml {mock.name!r} is sim-nvml's mock NVML in a stack of real GPU hosts." in found
    assert (f"{VAP} {policy.name!r} lets pods set CUDA_DISABLE_CONTROL to {marker}, which only sim-nvml's own mutation "
            "may write (a tenant with gpu-tenancy:mock_nvml:MockNvml and no real host).") in found


def test_a_gpu_host_whose_peer_registers_no_address_is_refused() -> None:
    # A HostWorker made otherwise (a crafted component) may register no address at all: refused, not a crash.
    stack = copy_stack(policy_support.gpu_stack())
    peer = next(r for r in stack if r.type == HOST_WORKER and r.inputs["tenant"] == "tenant-b")
    host = next(r for r in stack if r.type == HOST_WORKER and r.inputs["tenant"] == "tenant-a")
    for props in (peer.inputs, peer.state, peer.registered_outputs or {}):
        props.pop("address")
    assert _fence_messages(stack) == [f"{HOST_WORKER} {host.name!r} cannot be fenced: 'address'."]


# --------------------------------------------------------------------------- identity_policies: whose provider it is

PROVIDER = "pulumi:providers:kubernetes"
SECRET = "kubernetes:core/v1:Secret"
TCP_COMPONENT = "gpu-tenancy:tenant_control_plane:TenantControlPlane"


def _identity(stack: list[Recorded]) -> list[tuple[str, str | None]]:
    return run_stack_policy(tp.attributed_by_identity, stack)


def _kubeconfig_from(stack: list[Recorded], *sources: Recorded) -> Recorded:
    provider = find(stack, PROVIDER, "tenant-a-kubernetes")
    provider.property_dependencies["kubeconfig"] = [s.urn for s in sources]
    provider.dependencies = sorted({*provider.dependencies, *(s.urn for s in sources)})
    return provider


def test_a_provider_whose_kubeconfig_is_no_output_is_named_once() -> None:
    stack = copy_stack(dev_stack())
    assert _identity(stack) == []
    provider = _kubeconfig_from(stack)
    assert _identity(stack) == [(
        "provider 'tenant-a-kubernetes' of tenant 'tenant-a' takes a kubeconfig that is no output of the stack's "
        "resources (a literal, an invoke or config): which cluster it reaches cannot be proven; pass the tenant's "
        "TenantControlPlane kubeconfig.", provider.urn)]


def test_each_source_of_a_kubeconfig_is_checked_its_type_and_its_place() -> None:
    stack = copy_stack(dev_stack())
    # Made in the tenant's own control-plane component, but of a type that gives no kubeconfig.
    component = next(r for r in stack if r.type == TCP_COMPONENT and r.name.startswith("tenant-a"))
    config_map = craft(stack, "kubernetes:core/v1:ConfigMap", "tenant-a-control-plane-extra", {}, parent=component)
    # And another tenant's control plane and admin Secret, of the right types in the wrong tenant: each is named.
    other_tcp, other_secret = find(stack, TCP, "tenant-b-control-plane-tcp"), find(
        stack, SECRET, "tenant-b-control-plane-admin-kubeconfig")
    provider = _kubeconfig_from(stack, config_map, other_tcp, other_secret)
    only = ("; only tenant 'tenant-a''s own control plane and its admin Secret may give it (no StackReference, no "
            "other tenant's output).")
    assert _identity(stack) == [
        (f"provider 'tenant-a-kubernetes' of tenant 'tenant-a' takes its kubeconfig from {source.type} "
         f"{source.name!r}{only}", provider.urn)
        for source in sorted((config_map, other_tcp, other_secret), key=lambda r: r.urn)]


def test_a_secret_read_in_the_tenants_component_counts_only_after_its_own_control_plane() -> None:
    stack = copy_stack(dev_stack())
    own = find(stack, SECRET, "tenant-a-control-plane-admin-kubeconfig")
    namespace = find(stack, "kubernetes:core/v1:Namespace", "tenant-a-control-plane-namespace")
    # Read after its control plane and anything else of the tenant's: still its own.
    own.dependencies = sorted({*own.dependencies, namespace.urn})
    assert _identity(stack) == []
    # Read after another tenant's control plane only, or after no control plane: named.
    own.dependencies = [find(stack, TCP, "tenant-b-control-plane-tcp").urn]
    expected = [(f"provider 'tenant-a-kubernetes' of tenant 'tenant-a' reads {SECRET} "
                 "'tenant-a-control-plane-admin-kubeconfig', which is not read after tenant 'tenant-a''s own "
                 "TenantControlPlane, where its admin Secret comes from.",
                 find(stack, PROVIDER, "tenant-a-kubernetes").urn)]
    assert _identity(stack) == expected
    own.dependencies = [namespace.urn]
    assert _identity(stack) == expected


@pytest.mark.parametrize(("typ", "name", "loose"), [
    ("kubernetes:core/v1:ConfigMap", "management", True),  # the management provider's name, not its type
    (PROVIDER, "rogue", True),  # another top-level Kubernetes provider
    ("pulumi:providers:docker", "rogue", True),  # a provider the program makes itself is in a component
    ("kubernetes:core/v1:ConfigMap", "default-settings", True),  # a default provider's name, not its type
    ("pulumi:providers:command", "default_1_0_0", False),  # the engine's default providers
    (PROVIDER, "default", False),
])
def test_only_the_stack_its_management_provider_and_the_engines_default_providers_stand_outside(
        typ: str, name: str, loose: bool) -> None:
    stack = copy_stack(dev_stack())
    made = craft(stack, typ, name, {})
    expected = [(f"{typ} {name!r} is made outside every gpu-tenancy component, so it belongs to no tenant and to no "
                 "platform component; make it inside the component it serves.", made.urn)]
    assert _identity(stack) == (expected if loose else [])


def test_a_kubernetes_provider_in_another_place_of_a_tenant_is_no_tenant_provider() -> None:
    # Only `<tenant>-kubernetes` in the tenant's TenantControlPlane component is the tenant's provider; one made
    # elsewhere in the Tenant reaches no tenant by its place (provider-attribution refuses what goes through it).
    stack = copy_stack(dev_stack())
    craft(stack, PROVIDER, "tenant-a-kubernetes", {}, parent=find(stack, tp.TENANT_TYPE, "tenant-a"))
    assert _identity(stack) == []


# --------------------------------------------------------------------------- controls_policies: what waits, what is named

GPU_ACCESS_COMPONENT = "gpu-tenancy:gpu_access:GpuAccessPolicy"


def _marker(policy: Recorded, expression: Any) -> None:
    variables = [dict(v) for v in policy.inputs["spec"]["variables"]]
    variables[0] = {**variables[0], "expression": expression}
    set_both(policy, ["spec", "variables"], variables)


def test_the_cuda_control_marker_in_a_tenant_without_the_mock_nvml_is_named_whichever_tenant_comes_first() -> None:
    # sim: no MockNvml, so each tenant's GPU-access policy carries the empty marker `''`.
    stack = copy_stack(dev_stack())
    first, second = (_control(stack, GPU_ACCESS_COMPONENT, VAP),
                     next(r for r in stack if r.type == VAP and f"{GPU_ACCESS_COMPONENT}$" in r.urn and "tenant-b" in r.urn))
    assert first.inputs["spec"]["variables"][0]["expression"] == "''"
    _marker(second, "'gpu-tenancy-cuda-control'")
    assert run_stack_policy(cp.controls_present, stack) == [(
        f"{VAP} {second.name!r} lets pods set CUDA_DISABLE_CONTROL to 'gpu-tenancy-cuda-control', which only "
        "sim-nvml's own mutation may write (a tenant with gpu-tenancy:mock_nvml:MockNvml and no real host).", second.urn)]


def test_a_marker_not_known_yet_waits() -> None:

    stack = copy_stack(dev_stack())
    _marker(_control(stack, GPU_ACCESS_COMPONENT, VAP), ENGINE_UNKNOWN)
    assert run_stack_policy(cp.controls_present, stack) == []


def test_a_tenant_without_its_gpu_access_policy_is_named_on_the_tenant() -> None:
    stack = copy_stack(dev_stack())
    component = next(r for r in stack if r.type == GPU_ACCESS_COMPONENT and "tenant-a" in r.name)
    for r in [r for r in stack if r is component or r.parent == component.urn]:
        stack.remove(r)
    tenant = find(stack, tp.TENANT_TYPE, "tenant-a")
    assert run_stack_policy(cp.controls_present, stack) == [(
        f"{tp.TENANT_TYPE} 'tenant-a' has no {GPU_ACCESS_COMPONENT}: its GPUs would be reachable around HAMi.",
        tenant.urn)]


def test_a_removed_control_is_named_on_its_component() -> None:
    stack = copy_stack(dev_stack())
    component = next(r for r in stack if r.type == GPU_ACCESS_COMPONENT and "tenant-a" in r.name)
    stack.remove(_control(stack, GPU_ACCESS_COMPONENT, VAP_BINDING))
    assert run_stack_policy(cp.controls_present, stack) == [(
        f"{GPU_ACCESS_COMPONENT} {component.name!r} lacks its {VAP_BINDING}; the program installs it and it may not "
        "be removed.", component.urn)]


def test_a_binding_naming_another_policy_is_named_on_the_binding() -> None:
    stack = copy_stack(dev_stack())
    binding = _control(stack, GPU_ACCESS_COMPONENT, VAP_BINDING)
    set_both(binding, ["spec", "policyName"], "another")
    assert [u for _, u in run_stack_policy(cp.controls_present, stack)] == [binding.urn]


@pytest.mark.parametrize("where", ["binding's policyName", "policy's name"])
def test_a_binding_or_policy_name_not_known_yet_waits(where: str) -> None:

    stack = copy_stack(dev_stack())
    if where == "binding's policyName":
        set_both(_control(stack, GPU_ACCESS_COMPONENT, VAP_BINDING), ["spec", "policyName"], ENGINE_UNKNOWN)
    else:
        set_both(_control(stack, GPU_ACCESS_COMPONENT, VAP), ["metadata", "name"], ENGINE_UNKNOWN)
    assert run_stack_policy(cp.controls_present, stack) == []


@pytest.mark.parametrize("key", ["metadata", "spec"])
def test_a_controls_name_or_spec_not_known_yet_is_checked_when_known(key: str) -> None:

    stack = copy_stack(dev_stack())
    policy = _control(stack, GPU_ACCESS_COMPONENT, VAP)
    set_both(policy, [key, "name"] if key == "metadata" else [key], ENGINE_UNKNOWN)
    assert run_resource_policy(cp.installed_controls, [policy]) == []


def test_every_firewall_is_checked_after_one_that_is_missing_or_cannot_be_built() -> None:
    stack = copy_stack(policy_support.gpu_stack())
    # The hosts in the order the stack lists them: the first one's problem must not end the check.
    first, last = [r for r in stack if r.type == HOST_WORKER]
    later = _fence(stack, last.inputs["tenant"])
    set_both(later, ["create"], later.inputs["create"] + "\n# and something else")
    missing = copy_stack(stack)
    missing.remove(_fence(missing, first.inputs["tenant"]))
    assert _fence_messages(missing) == [
        f"{HOST_WORKER} {first.name!r} has 0 host firewalls (gpu-tenancy:host_fence:HostFences), not one.",
        f"{FENCE_COMMAND} {later.name!r} runs another script than the host firewall's."]
    # The first host's rules need the last one's address, which the last host does not register.
    for props in (last.inputs, last.state, last.registered_outputs or {}):
        props.pop("address")
    set_both(later, ["create"], later.inputs["create"].removesuffix("\n# and something else"))
    set_both(later, ["stdin"], "table inet other {}\n")
    assert _fence_messages(stack) == [
        f"{HOST_WORKER} {first.name!r} cannot be fenced: 'address'.",
        f"{FENCE_COMMAND} {later.name!r} loads other rules than the other tenants' control planes and hosts ask."]


def test_only_a_remote_command_under_the_host_fences_is_a_firewall() -> None:
    # Another kind of resource under HostFences, of a firewall's name, is no firewall and hides none.
    stack = copy_stack(policy_support.gpu_stack())
    fence_cmd = _fence(stack, "tenant-a")
    group = next(r for r in stack if r.urn == fence_cmd.parent)
    craft(stack, "command:local:Command", fence_cmd.name, {"create": "true"}, parent=group)
    assert [m for m in _fence_messages(stack) if "firewall" in m] == []
