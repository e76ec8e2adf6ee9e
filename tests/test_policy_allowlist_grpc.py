"""What the pack does not know, it refuses: types the program never registers, fields it never sets on the types
that run code or reach a host, and the few values there that alone reach another tenant or a host. Driven over
the analyzer gRPC protocol as the engine drives the pack (tests/test_policy_pack_grpc.py starts it), each attack
added to the real registrations of an example stack; the example stacks themselves draw nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import harness
import pytest
import test_policy_pack_grpc as pack_grpc
from chart_repo import fill_cache
from harness import stack_config
from policy_support import EXAMPLE_STACKS, Recorded, copy_stack, craft, dev_stack, find, nvml_stack, set_both
from test_policy_bypasses_grpc import expect, mandatory, tenant_component
from test_policy_pack_grpc import (  # noqa: F401  (fixtures: the pack's analyzer process, its configuration)
    ADVISORY,
    analyze,
    analyze_stack,
    analyzer,
    default_configuration,
    running_pack,
)

from gpu_tenancy.contract import chart_lock, versions
from gpu_tenancy.contract.config import load_config

REPO = Path(__file__).resolve().parents[1]

PROVIDER = "pulumi:providers:kubernetes"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
RELEASE = "kubernetes:helm.sh/v3:Release"
CONTAINER = "docker:index/container:Container"
COMMAND = "command:local:Command"
OWN_POLICIES = ("known-types", "field-allowlist", "type-allowances", "attributed-by-identity")


def both(pack: Any, stack: list[Recorded], policy: str) -> list[str]:
    return mandatory(analyze(pack, stack) + analyze_stack(pack, stack), policy)


@pytest.mark.parametrize("name", sorted(EXAMPLE_STACKS))
@pytest.mark.parametrize("unknowns", [False, True], ids=["deployed", "first-preview"])
def test_the_example_stacks_pass_with_no_allowance(name: str, unknowns: bool) -> None:
    """Each with its own stack's mode, as the engine hands it to the pack (sim-nvml's API-server flags)."""
    resources = EXAMPLE_STACKS[name](unknowns)
    with running_pack({"gpu-tenancy:mode": stack_config(name)["mode"]}) as own:
        found = analyze(own, resources) + analyze_stack(own, resources)
    assert [(d.policyName, d.message) for d in found if d.policyName in OWN_POLICIES] == []


# --------------------------------------------------------------------------- types


ROOT_TEMPLATE = {
    "spec": {
        "hostPID": True,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10.1", "securityContext": {"privileged": True},
                        "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    }
}


def test_a_daemon_set_patch_on_kube_proxy(pack: Any, stack: list[Recorded]) -> None:
    """Server-side apply onto an object the program did not make: root on every node of the tenant."""
    network = tenant_component(stack, "tenant-a", "gpu-tenancy:tenant_network:TenantNetwork")
    craft(
        stack, "kubernetes:apps/v1:DaemonSetPatch", "tenant-a-kube-proxy-patch",
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
         "spec": {"template": ROOT_TEMPLATE}},
        parent=network, provider=find(stack, PROVIDER, "tenant-a-kubernetes"),
    )
    expect(both(pack, stack, "known-types"), "'tenant-a-kube-proxy-patch'", "kubernetes:apps/v1:DaemonSetPatch")
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-kube-proxy-patch'", "spec.template.spec.hostPID",
           "spec.template.spec.volumes[].hostPath.path")
    expect(mandatory(analyze(pack, stack), "workload-safety"), "'tenant-a-kube-proxy-patch'", "is privileged")


def test_a_custom_resource_carrying_a_pod_template(pack: Any, stack: list[Recorded]) -> None:
    workloads = tenant_component(stack, "tenant-a", "gpu-tenancy:workloads:Workloads")
    craft(
        stack, "kubernetes:argoproj.io/v1alpha1:Workflow", "tenant-a-flow",
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "f", "namespace": "workloads"},
         "spec": {"templates": [{"name": "main", "podSpecPatch": "{\"hostPID\": true}"}]}},
        parent=workloads, provider=find(stack, PROVIDER, "tenant-a-kubernetes"),
    )
    expect(both(pack, stack, "known-types"), "'tenant-a-flow'", "kubernetes:argoproj.io/v1alpha1:Workflow")


def test_a_runtime_class_that_renames_the_gpu_handler(pack: Any, stack: list[Recorded]) -> None:
    """Class `gpu`, handler `nvidia`: the GPU runtime under a name a rule on class names would miss."""
    workloads = tenant_component(stack, "tenant-a", "gpu-tenancy:workloads:Workloads")
    craft(
        stack, "kubernetes:node.k8s.io/v1:RuntimeClass", "tenant-a-gpu-class",
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gpu"}, "handler": "nvidia"},
        parent=workloads, provider=find(stack, PROVIDER, "tenant-a-kubernetes"),
    )
    expect(both(pack, stack, "known-types"), "'tenant-a-gpu-class'", "RuntimeClass")
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-gpu-class'", "handler 'nvidia'")


def test_an_unknown_type_is_refused_before_its_own_step(pack: Any, stack: list[Recorded]) -> None:
    """The engine asks resource policies of each resource as it is registered, before its step runs, in
    `up --skip-preview` as in a preview; the resource alone, with nothing registered after it, is refused."""
    workloads = tenant_component(stack, "tenant-a", "gpu-tenancy:workloads:Workloads")
    craft(stack, "kubernetes:argoproj.io/v1alpha1:Workflow", "tenant-a-flow",
          {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "f", "namespace": "workloads"}},
          parent=workloads, provider=find(stack, PROVIDER, "tenant-a-kubernetes"))
    alone = [r for r in stack if r.name == "tenant-a-flow"]
    expect(mandatory(analyze(pack, alone), "known-types"), "'tenant-a-flow'", "argoproj.io/v1alpha1:Workflow")


def test_a_stack_level_command_against_the_management_cluster(pack: Any, stack: list[Recorded]) -> None:
    craft(stack, COMMAND, "debug", {"create": "kubectl --context kind-gpu-tenancy apply -f root.yaml",
                                    "interpreter": ["/bin/sh", "-c"]})
    expect(both(pack, stack, "field-allowlist"), "'debug'", "(made by the stack)", "create", "interpreter")


# --------------------------------------------------------------------------- fields on known types


def tcp(stack: list[Recorded], tenant: str = "tenant-a") -> Recorded:
    return find(stack, TCP, f"{tenant}-control-plane-tcp")


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["spec", "controlPlane", "deployment", "additionalContainers"],
         [{"name": "root", "image": "registry.k8s.io/pause:3.10.1", "securityContext": {"privileged": True}}],
         "spec.controlPlane.deployment.additionalContainers[].securityContext.privileged"),
        (["spec", "controlPlane", "deployment", "additionalVolumes"], [{"name": "root", "hostPath": {"path": "/"}}],
         "spec.controlPlane.deployment.additionalVolumes[].hostPath.path"),
        (["spec", "dataStoreSchema"], "tenant_b", "spec.dataStoreSchema"),
        (["spec", "dataStoreUsername"], "tenant_b", "spec.dataStoreUsername"),
        (["spec", "controlPlane", "deployment", "extraArgs"], {"apiServer": ["--anonymous-auth=true"]},
         "apiServer flag '--anonymous-auth=true'"),
    ],
    ids=["additionalContainers", "additionalVolumes", "dataStoreSchema", "dataStoreUsername", "extraArgs"],
)
def test_a_control_plane_field_the_program_never_sets(
    pack: Any, stack: list[Recorded], path: list[str], value: Any, field: str
) -> None:
    set_both(tcp(stack), path, value)
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-control-plane-tcp'", field)


def test_an_api_server_flag_where_the_program_passes_its_own(pack: Any) -> None:
    """sim-nvml's control planes carry extraArgs.apiServer (MutatingAdmissionPolicy): the field is known, the flag not."""
    stack = copy_stack(nvml_stack())
    flags = tcp(stack).inputs["spec"]["controlPlane"]["deployment"]["extraArgs"]["apiServer"]
    set_both(tcp(stack), ["spec", "controlPlane", "deployment", "extraArgs", "apiServer"],
             [*flags, "--authorization-mode=AlwaysAllow"])
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-control-plane-tcp'", "'--authorization-mode=AlwaysAllow'")


def test_a_control_plane_on_another_tenants_datastore(pack: Any, stack: list[Recorded]) -> None:
    set_both(tcp(stack), ["spec", "dataStore"], "tenant-b-etcd")
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-control-plane-tcp'", "DataStore 'tenant-b-etcd'")


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("mounts", [{"target": "/host", "source": "/", "type": "bind"}], "mounts[].source"),
        ("volumes", [{"containerPath": "/x", "fromContainer": "gpu-tenancy-control-plane"}], "volumes[].fromContainer"),
        ("pidMode", "container:gpu-tenancy-control-plane", "pidMode"),
        ("networkMode", "container:gpu-tenancy-control-plane", "networkMode"),
        ("gpus", "all", "gpus"),
    ],
)
def test_a_worker_container_field_the_program_never_sets(
    pack: Any, stack: list[Recorded], key: str, value: Any, field: str
) -> None:
    worker = find(stack, CONTAINER, "tenant-a-worker-container")
    set_both(worker, [key], value)
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-worker-container'", field)


def test_hami_from_another_repository_with_a_post_renderer(pack: Any, stack: list[Recorded]) -> None:
    release = find(stack, RELEASE, "tenant-a-hami-chart")
    set_both(release, ["chart"], "hami")
    set_both(release, ["repositoryOpts"], {"repo": "https://charts.example.com"})
    set_both(release, ["postrender"], "/bin/sh")
    messages = both(pack, stack, "field-allowlist")
    expect(messages, "'tenant-a-hami-chart'", "postrender")
    expect(messages, "'tenant-a-hami-chart'", "from 'https://charts.example.com'")


def test_hami_from_its_pinned_repository_instead_of_the_chart_cache(pack: Any, stack: list[Recorded]) -> None:
    """Fetched at every Check (helm_release.go `locateChart` with a RepoURL): what the repository serves then."""
    release = find(stack, RELEASE, "tenant-a-hami-chart")
    set_both(release, ["chart"], "hami")
    set_both(release, ["repositoryOpts"], {"repo": versions.HAMI_CHART_REPO})
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-hami-chart'",
           f"from {versions.HAMI_CHART_REPO!r}, which is not a path in the chart cache")


def test_the_cached_archive_with_a_repository_beside_it(pack: Any, stack: list[Recorded]) -> None:
    release = find(stack, RELEASE, "tenant-a-hami-chart")
    set_both(release, ["repositoryOpts"], {"repo": "https://charts.example.com"})
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-hami-chart'",
           "from 'https://charts.example.com', which names a repository")


@pytest.mark.parametrize(("chart", "version"), [
    ("/home/someone/hami-2.10.0.tgz", "2.10.0"),  # any file on the host that runs `pulumi up`
    ("hami", "2.10.0"),  # no repository: a directory ./hami beside Pulumi.yaml would be taken first
    (".charts/sha256-" + "a" * 64 + "/hami-2.9.0.tgz", "2.10.0"),  # an archive of another version
    (".charts/sha256-" + "a" * 64 + "/nvidia-device-plugin-0.17.0.tgz", "0.17.0"),  # a chart the program never pins
])
def test_a_local_chart_that_is_not_the_cached_pin(pack: Any, stack: list[Recorded], chart: str, version: str) -> None:
    release = find(stack, RELEASE, "tenant-a-hami-chart")
    set_both(release, ["chart"], chart)
    set_both(release, ["version"], version)
    found = analyze(pack, stack)
    expect(mandatory(found, "field-allowlist"), "'tenant-a-hami-chart'", f"installs chart {chart!r}, which is not")
    expect(mandatory(found, "charts-pinned"), "'tenant-a-hami-chart'", "has no repository and is not")


def test_a_chart_archive_whose_digest_the_lock_does_not_hold(pack: Any, stack: list[Recorded]) -> None:
    """Any archive at `.charts/sha256-<other hex>/hami-<version>.tgz` would be installed as it is: the path's digest
    must be the sha256 the project's lock records (tests/harness.py CHART_PROJECT, filled as `make charts` would)."""
    release = find(stack, RELEASE, "tenant-a-hami-chart")
    version = release.inputs["version"]
    chart = f".charts/sha256-{'0' * 64}/hami-{version}.tgz"
    assert chart != release.inputs["chart"]
    set_both(release, ["chart"], chart)
    found = analyze(pack, stack)
    lock = harness.CHART_PROJECT.resolve() / ".charts" / "lock.json"
    expected = f"is not the archive the chart lock {lock} records for hami {version} (sha256 "
    expect(mandatory(found, "field-allowlist"), "'tenant-a-hami-chart'", f"installs chart {chart!r}, which {expected}",
           "`make charts STACK=")
    expect(mandatory(found, "charts-pinned"), "'tenant-a-hami-chart'", f"has no repository and {expected}")


def test_the_pack_reads_the_lock_of_the_project_it_sits_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as the engine runs it (cwd = the pack's directory) from a copy of the project with its own lock and no
    override: the example stack passes, and with that lock gone its charts are refused."""
    project = tmp_path / "project"
    for folder in ("policies", "gpu_tenancy"):
        shutil.copytree(REPO / folder, project / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for ref in chart_lock.stack_charts(load_config(harness.dev_config(), frozenset())):
        fill_cache(project, ref.name, ref.version, ref.repo)
    monkeypatch.delenv("GPU_TENANCY_CHART_PROJECT")
    monkeypatch.setattr(pack_grpc, "POLICIES", project / "policies")
    stack = dev_stack()
    with running_pack() as pack:
        assert [d.message for d in analyze(pack, stack) if "chart" in d.message] == []
        (project / ".charts" / "lock.json").unlink()
        found = analyze(pack, stack)
    for policy in ("field-allowlist", "charts-pinned"):
        expect(mandatory(found, policy), "'tenant-a-hami-chart'",
               f"cannot be checked: there is no chart lock at {project.resolve()}/.charts/lock.json")


def test_a_chart_named_hami_from_an_oci_registry(pack: Any, stack: list[Recorded]) -> None:
    release = find(stack, RELEASE, "tenant-a-hami-chart")
    set_both(release, ["chart"], "oci://registry.example.com/charts/hami")
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-hami-chart'", "oci://registry.example.com/charts/hami")


# --------------------------------------------------------------------------- allowances


WORKFLOW = "kubernetes:argoproj.io/v1alpha1:Workflow"


def _with_workflow() -> list[Recorded]:
    stack = copy_stack(dev_stack())
    workloads = tenant_component(stack, "tenant-a", "gpu-tenancy:workloads:Workloads")
    craft(stack, WORKFLOW, "tenant-a-flow",
          {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "f", "namespace": "workloads"}},
          parent=workloads, provider=find(stack, PROVIDER, "tenant-a-kubernetes"))
    return stack


def test_a_type_the_stack_allows_passes_and_the_preview_prints_why() -> None:
    reason = "batch pipelines run as Argo workflows in this lab"
    with running_pack({"gpu-tenancy-policy:allowedTypes": [{"type": WORKFLOW, "reason": reason}]}) as own:
        found = analyze(own, _with_workflow()) + analyze_stack(own, _with_workflow())
    assert [d for d in found if d.policyName == "known-types"] == []
    notes = [d.message for d in found if d.policyName == "type-allowances" and d.enforcementLevel == ADVISORY]
    assert len(notes) == 1 and "'tenant-a-flow'" in notes[0] and reason in notes[0]


@pytest.mark.parametrize(
    ("allowances", "fragment"),
    [
        ([{"type": WORKFLOW}], "allowedTypes[0].reason: Field required"),
        ([{"type": WORKFLOW, "reason": "because"}], "allowedTypes[0].reason: String should have at least 10"),
        ([{"type": "apps/v1:DaemonSetPatch", "reason": "long enough here"}], "allowedTypes[0].type: String should"),
        ([{"type": "kubernetes:apps/v1:DaemonSetPatch", "reason": "fix kube-proxy in place"}],
         "allowedTypes[0].type: kubernetes:apps/v1:DaemonSetPatch patches objects"),
        ({"type": WORKFLOW}, "must be a list"),
    ],
    ids=["no-reason", "short-reason", "not-a-type", "patch-kind", "not-a-list"],
)
def test_a_bad_allowance_is_one_line_naming_the_key(allowances: Any, fragment: str) -> None:
    with running_pack({"gpu-tenancy-policy:allowedTypes": allowances}) as own:
        messages = mandatory(analyze(own, _with_workflow()), "known-types")
    expect(messages, "gpu-tenancy-policy:allowedTypes", fragment)
    expect(messages, "'tenant-a-flow'", WORKFLOW)  # a bad allowance allows nothing


# --------------------------------------------------------------------------- every configuration


def _sampled() -> list[tuple[str, str, Any]]:
    import test_config_reference as reference

    return [(key, stack, change) for key, samples in reference.SAMPLES.items() for stack, change, _ in samples]


@pytest.mark.parametrize(("key", "stack_name", "change"), _sampled(), ids=[f"{k}@{s}" for k, s, _ in _sampled()])
def test_every_sampled_configuration_passes(
    key: str, stack_name: str, change: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setting of any config key (tests/test_config_reference.py's sample of each) makes nothing the pack refuses."""
    import test_config_reference as reference
    from policy_support import run_resource_policy, run_stack_policy

    import allowlist_policies as allowlist  # isort: skip  (policies/ is put on sys.path by policy_support)
    import identity_policies as identity  # isort: skip
    import controls_policies as controls  # isort: skip

    settings = reference.CONFIGS[stack_name]()
    change(settings)
    resources = reference._record("gpu" if stack_name == "gpu-nodeport" else stack_name, settings)
    # The engine hands the pack the stack's config; the mode decides sim-nvml's flags and GPU-access marker.
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-tenancy:mode": settings["mode"]}))
    # A new field the program sets: print and review the difference with tests/allowed_fields.py.
    assert run_resource_policy(allowlist.field_allowlist, resources) == []
    assert run_resource_policy(allowlist.known_types, resources) == []
    assert run_stack_policy(identity.attributed_by_identity, resources) == []
    assert run_resource_policy(controls.installed_controls, resources) == []
    assert run_stack_policy(controls.controls_present, resources) == []
    assert run_stack_policy(controls.rbac_contained, resources) == []


def test_a_bridged_providers_defaults_are_not_the_programs_fields(pack: Any, stack: list[Recorded]) -> None:
    """pulumi-docker's Check fills in the Terraform schema's defaults and lists them in `__defaults`, and the engine
    hands analyzers the checked inputs: those fields pass; one the list does not name is still the program's."""
    worker = find(stack, CONTAINER, "tenant-a-worker-container")
    defaults = {"mustRun": True, "start": True, "attach": False, "logs": False, "rm": False, "wait": False}
    worker.inputs.update({**defaults, "__defaults": sorted(defaults)})
    assert both(pack, stack, "field-allowlist") == []
    worker.inputs["gpus"] = "all"
    expect(both(pack, stack, "field-allowlist"), "'tenant-a-worker-container'", "gpus")
