"""Tenant workloads in the program under mocks: right tenant, its provider only, after HAMi; capacity plan."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.mocks import MockResourceArgs

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.workloads import workloads as wl
from gpu_tenancy.cli.plan import command as plan_cli
from gpu_tenancy.hami.planner.model import Node, Workload
from gpu_tenancy.hami.planner.schedule import plan
from tests.harness import DEV_STACK_FILE, REPO, dev_config, record_stack

COMPONENT = "gpu-tenancy:workloads:Workloads"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
NAMESPACE = "kubernetes:core/v1:Namespace"
QUOTA = "kubernetes:core/v1:ResourceQuota"
WORKLOAD_TYPES = (COMPONENT, DEPLOYMENT, QUOTA, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
# Pulumi.dev.yaml's quotas as the tenant API server must hold them: Kubernetes' quota controller counts an
# extended resource only under `requests.` (the GPU count), HAMi counts `limits.nvidia.com/gpumem`/`gpucores`.
DEV_QUOTA_HARD = {
    "tenant-a": {"requests.nvidia.com/gpu": "6", "limits.nvidia.com/gpumem": "61440", "limits.nvidia.com/gpucores": "100"},
    "tenant-b": {"requests.nvidia.com/gpu": "4", "limits.nvidia.com/gpumem": "36864", "limits.nvidia.com/gpucores": "150"},
}


@pytest.fixture
def registrations(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[str, Any]]]:
    """URN -> {name, dependencies} of every registered resource (MockResourceArgs has neither)."""
    seen: dict[str, dict[str, Any]] = {}
    original = pulumi_mocks.MockMonitor.RegisterResource

    def register(self: Any, request: Any) -> Any:
        response = original(self, request)
        seen[response.urn] = {"name": request.name, "dependencies": list(request.dependencies)}
        return response

    monkeypatch.setattr(pulumi_mocks.MockMonitor, "RegisterResource", register)
    yield seen


def of_type(resources: list[MockResourceArgs], typ: str) -> list[MockResourceArgs]:
    return [r for r in resources if r.typ == typ]


def workload_namespaces(resources: list[MockResourceArgs]) -> list[MockResourceArgs]:
    return [r for r in of_type(resources, NAMESPACE)
            if r.inputs["metadata"]["labels"][kube_objects.COMPONENT_LABEL] == wl.COMPONENT]


def tenant_label(resource: MockResourceArgs) -> str:
    return str(resource.inputs["metadata"]["labels"][kube_objects.TENANT_LABEL])


def without_workloads(config: dict[str, Any], *tenants: str) -> dict[str, Any]:
    config = copy.deepcopy(config)
    for tenant in config["tenants"]:
        if not tenants or tenant["name"] in tenants:
            tenant.pop("workloads", None)
            tenant.pop("quota", None)
    return config


def test_dev_stack_workloads_land_in_their_tenant_through_its_provider() -> None:
    resources = record_stack()
    declared = {t["name"]: t for t in dev_config()["tenants"]}
    assert len(of_type(resources, COMPONENT)) == len(declared)
    for tenant, spec in declared.items():
        provider = f"::{tenant}-kubernetes::"
        others = [f"::{o}-kubernetes::" for o in declared if o != tenant]
        mine = [r for r in resources if r.typ in (DEPLOYMENT, QUOTA) and tenant_label(r) == tenant]
        mine += [r for r in workload_namespaces(resources) if tenant_label(r) == tenant]
        assert sorted(r.typ for r in mine) == sorted(
            [DEPLOYMENT] * len(spec["workloads"]) + [QUOTA, NAMESPACE])
        for resource in mine:
            assert provider in resource.provider, resource.name
            assert "::management::" not in resource.provider and not any(o in resource.provider for o in others)
            assert resource.name.startswith(f"{tenant}-workloads-")
        deployments = {r.inputs["metadata"]["name"]: r.inputs for r in mine if r.typ == DEPLOYMENT}
        assert set(deployments) == {w["name"] for w in spec["workloads"]}
        for w in spec["workloads"]:
            inputs = deployments[w["name"]]
            assert inputs["metadata"]["namespace"] == wl.WORKLOAD_NAMESPACE
            assert inputs["spec"]["replicas"] == w["replicas"]
            pod = inputs["spec"]["template"]["spec"]
            assert pod["schedulerName"] == "hami-scheduler"
            assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == str(w["containers"][0]["gpus"])
        (quota,) = [r for r in mine if r.typ == QUOTA]
        assert quota.inputs["metadata"]["namespace"] == wl.WORKLOAD_NAMESPACE
        assert quota.inputs["spec"]["hard"] == DEV_QUOTA_HARD[tenant]


def test_workloads_are_children_of_their_tenant_and_wait_for_hami(registrations: dict[str, dict[str, Any]]) -> None:
    record_stack()
    by_name = {r["name"]: (urn, r["dependencies"]) for urn, r in registrations.items()}
    for tenant in ("tenant-a", "tenant-b"):
        component_urn, _ = by_name[f"{tenant}-workloads"]
        assert "gpu-tenancy:tenant:Tenant$gpu-tenancy:workloads:Workloads::" in component_urn
        ns_urn, ns_deps = by_name[f"{tenant}-workloads-namespace"]
        assert "gpu-tenancy:workloads:Workloads$kubernetes:core/v1:Namespace::" in ns_urn
        # HAMi's webhook and scheduler (the component or its Helm release) and the sim device registration.
        assert any(f"::{tenant}-hami" in d for d in ns_deps), ns_deps
        assert any(f"::{tenant}-mock-gpu-agent" in d for d in ns_deps), ns_deps
        quota_urn, quota_deps = by_name[f"{tenant}-workloads-quota"]
        assert ns_urn in quota_deps
        deployments = [(urn, deps) for name, (urn, deps) in by_name.items()
                       if name.startswith(f"{tenant}-workloads-") and ":Deployment::" in urn]
        assert deployments
        for _, deps in deployments:
            assert ns_urn in deps and quota_urn in deps


def test_tenant_without_workloads_or_quota_gets_nothing_extra() -> None:
    base = record_stack(without_workloads(dev_config()))
    assert not [r for r in base if r.typ in WORKLOAD_TYPES] and not workload_namespaces(base)
    only_a = record_stack(without_workloads(dev_config(), "tenant-b"))
    added = [r for r in only_a if r.typ in WORKLOAD_TYPES] + workload_namespaces(only_a)
    assert added and {tenant_label(r) for r in added if r.typ != COMPONENT} == {"tenant-a"}
    assert [r.name for r in of_type(only_a, COMPONENT)] == ["tenant-a-workloads"]
    # Everything else is exactly the stack without workloads.
    rest = Counter(r.typ for r in only_a if r not in added)
    assert rest == Counter(r.typ for r in base)


def test_quota_only_tenant_gets_namespace_and_quota() -> None:
    config = without_workloads(dev_config())
    config["tenants"][1]["quota"] = {"limits.nvidia.com/gpumem": 24576}
    resources = record_stack(config)
    assert not of_type(resources, DEPLOYMENT)
    (quota,) = of_type(resources, QUOTA)
    assert quota.inputs["spec"]["hard"] == {"limits.nvidia.com/gpumem": "24576"}
    assert [tenant_label(r) for r in workload_namespaces(resources)] == ["tenant-b"]


def test_fresh_stack_preview_registers_the_workloads() -> None:
    known = record_stack()
    preview = record_stack(unknowns=True)
    assert Counter(r.typ for r in preview) == Counter(r.typ for r in known)
    for typ in (DEPLOYMENT, QUOTA):
        assert len(of_type(preview, typ)) == len(of_type(known, typ)) > 0
    # Manifests do not depend on any unknown output: the preview shows the real specs.
    preview_specs = {r.name: r.inputs["spec"] for r in of_type(preview, DEPLOYMENT)}
    assert preview_specs == {r.name: r.inputs["spec"] for r in of_type(known, DEPLOYMENT)}


# --------------------------------------------------------------------------- capacity plan


def dev_plan() -> tuple[list[Node], list[Workload], Any]:
    """The dev stack's declared GPUs, workloads and quotas, read the way `cli.plan` reads its input."""
    import tempfile

    document = wl.plan_document(wl.load_stack_file(DEV_STACK_FILE), "gpu-tenancy-dev")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "plan.json"
        path.write_text(json.dumps(document))
        return plan_cli.load(str(path))


def test_dev_stack_workloads_plan_without_failures() -> None:
    nodes, workloads, quota = dev_plan()
    assert workloads, "the dev stack declares example workloads"
    result = plan(nodes, workloads, quota)
    assert result.fits, [(f.workload, f.replica, f.reason) for f in result.failures]
    placed = Counter(p.workload for p in result.placements)
    assert placed == {w.name: w.replicas * len(w.containers) for w in workloads}
    # Each tenant's replicas only land on that tenant's node.
    tenant_of = {w.name: w.tenant for w in workloads}
    node_tenant = {n.name: n.tenant for n in nodes}
    assert all(node_tenant[p.node] == tenant_of[p.workload] for p in result.placements)


def test_dev_stack_quota_binds() -> None:
    """The non-fitting change on docs/planner.md: two more b-notebook replicas fit the cards but not tenant-b's gpumem quota."""
    nodes, workloads, quota = dev_plan()
    grown = [dataclasses.replace(w, replicas=4) if w.name == "b-notebook" else w for w in workloads]
    result = plan(nodes, grown, quota)
    assert [(f.workload, f.replica, f.reason) for f in result.failures] == [
        ("b-notebook", 3, "2/2 ResourceQuotaNotFit")]
    # Without the quota the same change fits: it is the quota, not the L4s, that says no.
    assert plan(nodes, grown, None).fits


def test_dev_stack_planner_cli_round_trip(tmp_path: Path) -> None:
    import subprocess
    import sys

    plan_input = tmp_path / "plan.json"
    made = subprocess.run([sys.executable, "-m", "gpu_tenancy.builders.workloads.workloads", str(DEV_STACK_FILE)],
                          cwd=REPO, capture_output=True, text=True, check=True)
    plan_input.write_text(made.stdout)
    run = subprocess.run([sys.executable, "-m", "gpu_tenancy", "plan", "plan", "--json", str(plan_input)],
                         cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["fits"] is True


def test_examples_plan_dev_mirrors_the_dev_stack() -> None:
    """examples/plan-dev.json (readable device ids) declares the same workloads and quotas as Pulumi.dev.yaml."""
    nodes, workloads, quota = dev_plan()
    ex_nodes, ex_workloads, ex_quota = plan_cli.load(str(REPO / "examples" / "plan-dev.json"))
    assert ex_workloads == workloads
    assert ex_quota == quota

    def shape(ns: list[Node]) -> list[tuple[str | None, list[tuple[str, int, int, int]]]]:
        return [(n.tenant, [(d.type, d.devmem, d.devcore, d.count) for d in n.devices]) for n in ns]

    assert shape(ex_nodes) == shape(nodes)


def test_program_workload_objects_validate_against_kubernetes_schemas() -> None:
    """What test_fidelity checks for all core/apps objects, pinned here for these three kinds."""
    import kubernetes_validate

    from tests.harness import unwrap

    resources = record_stack()
    mine = [r for r in resources if r.typ in (DEPLOYMENT, QUOTA)] + workload_namespaces(resources)
    assert Counter(r.typ for r in mine) == {DEPLOYMENT: 2, QUOTA: 2, NAMESPACE: 2}
    for resource in mine:
        body = unwrap({k: v for k, v in resource.inputs.items() if k in ("apiVersion", "kind", "metadata", "spec")})
        kubernetes_validate.validate(body, "1.35.0", strict=True)


@pytest.mark.parametrize("file_name", ["Pulumi.lab.yaml", "Pulumi.lab.yml"])
def test_the_plan_input_names_the_nodes_of_the_stack_its_file_configures(
    file_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stack named by `Pulumi.<stack>.yaml` (or .yml) names the kind cluster, hence the nodes."""
    stack_file = tmp_path / file_name
    stack_file.write_text(DEV_STACK_FILE.read_text())
    assert wl.main([str(stack_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith('{\n  "nodes": [\n    {\n'), out[:40]  # indented for reading and diffing
    document = json.loads(out)
    assert [(n["name"], n["tenant"]) for n in document["nodes"]] == [
        ("gpu-tenancy-lab-tenant-a-worker", "tenant-a"),
        ("gpu-tenancy-lab-tenant-b-worker", "tenant-b"),
    ]
    assert [w["name"] for w in document["workloads"]] == ["a-infer", "b-notebook"]


def test_the_plan_input_wants_one_stack_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert wl.main([]) == 2
    assert wl.main(["Pulumi.dev.yaml", "Pulumi.gpu.yaml"]) == 2
    assert capsys.readouterr().err == (
        "usage: python -m gpu_tenancy.builders.workloads.workloads Pulumi.<stack>.yaml\n" * 2
    )


def test_the_plan_input_reads_its_stack_file_from_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["workloads.py", str(DEV_STACK_FILE)])
    assert wl.main() == 0
    assert [n["name"] for n in json.loads(capsys.readouterr().out)["nodes"]] == [
        "gpu-tenancy-dev-tenant-a-worker", "gpu-tenancy-dev-tenant-b-worker"]


def test_ordered_workloads_chain_a_tenants_deployments_in_declaration_order(
    registrations: dict[str, dict[str, Any]]
) -> None:
    """orderedWorkloads: each Deployment depends on the one declared before it (pulumi-kubernetes awaits its
    rollout), so HAMi sees a tenant's workloads in the planned order; without it they are created at once."""
    config = copy.deepcopy(dev_config())
    (tenant,) = [t for t in config["tenants"] if t["name"] == "tenant-a"]
    tenant["workloads"] = [
        {"name": name, "replicas": 1, "containers": [{"gpus": 1, "gpumemMiB": 1024, "gpucores": 10}]}
        for name in ("first", "second", "third")
    ]

    def chained() -> list[bool]:
        by_name = {r["name"]: (urn, r["dependencies"]) for urn, r in registrations.items()}
        urns = [by_name[f"tenant-a-workloads-{n}"] for n in ("first", "second", "third")]
        return [urns[i - 1][0] in urns[i][1] for i in (1, 2)]

    record_stack(config)
    assert chained() == [False, False]
    registrations.clear()
    record_stack({**config, "orderedWorkloads": True})
    assert chained() == [True, True]
