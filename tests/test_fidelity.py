"""What the program declares, checked against upstream CRD schemas and chart values."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pulumi.runtime import MockResourceArgs

from gpu_tenancy.contract import versions
from gpu_tenancy.contract.chart_lock import chart_name
from tests.harness import (
    dev_config,
    gpu_config,
    nodeport_gpu_config,
    nvml_config,
    record_stack,
    registered_gpus,
    unwrap,
)

CRD_FILES = {
    ("kamaji.clastix.io", "TenantControlPlane"): "kamaji.clastix.io_tenantcontrolplanes.yaml",
    ("kamaji.clastix.io", "DataStore"): "kamaji.clastix.io_datastores.yaml",
    ("metallb.io", "IPAddressPool"): "metallb.io_ipaddresspools.yaml",
    ("metallb.io", "L2Advertisement"): "metallb.io_l2advertisements.yaml",
}
CHARTS = {
    "cert-manager": "cert-manager/v1.21.1",
    "metallb": "metallb/0.16.1",
    "kamaji": f"kamaji/{versions.KAMAJI_CHART_VERSION}",
    "hami": "hami/2.10.0",
    "kamaji-etcd": f"kamaji-etcd/{versions.KAMAJI_ETCD_CHART_VERSION}",
}
SUBCHARTS = {"kamaji-etcd": "kamaji-etcd/0.15.0"}
# Maps whose keys are free-form in the upstream chart: resource requirements, pod annotations (HAMi's
# devicePlugin.podAnnotations, rendered with toYaml into the pod template) and kamaji-etcd's
# certManager.issuerRef (`{}`, rendered with toYaml into each Certificate's issuerRef).
FREE_FORM = {"resources", "podAnnotations", "issuerRef"}
CORE_PREFIXES = (
    "kubernetes:core/v1:",
    "kubernetes:apps/v1:",
    "kubernetes:rbac.authorization.k8s.io/v1:",
    "kubernetes:admissionregistration.k8s.io/",
)



def dedicated_config() -> dict[str, Any]:
    """The dev stack with tenant-b on an etcd of its own (tenants[].dataStore: dedicated)."""
    config = dev_config()
    config["tenants"][1]["dataStore"] = "dedicated"
    return config


STACKS = {"dev": dev_config, "dev-nvml": nvml_config, "gpu": gpu_config, "gpu-nodeport": nodeport_gpu_config,
          "dev-dedicated": dedicated_config}


@pytest.fixture(scope="module", params=sorted(STACKS))
def resources(request: pytest.FixtureRequest) -> list[MockResourceArgs]:
    """What each example stack (and the NodePort variant of gpu) declares."""
    config = STACKS[request.param]()
    return record_stack(config, stack=request.param.removesuffix("-nodeport"), node_register=registered_gpus(config))


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The CRD schema with unknown fields rejected (the API server would silently prune them)."""
    schema = copy.deepcopy(schema)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node and not node.get(
                "x-kubernetes-preserve-unknown-fields"
            ):
                node["additionalProperties"] = False
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def crd_schema(shared: Path, group: str, kind: str, version: str) -> dict[str, Any]:
    crd = yaml.safe_load((shared / "schemas" / CRD_FILES[(group, kind)]).read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return closed(served["schema"]["openAPIV3Schema"])


def test_every_custom_resource_validates_against_upstream_crd(shared: Path, resources: list[MockResourceArgs]) -> None:
    custom = [r for r in resources if r.inputs.get("apiVersion") and "." in r.inputs["apiVersion"].split("/")[0]
              and r.typ.split(":")[1].split("/")[0] in {g for g, _ in CRD_FILES}]
    assert len([r for r in custom if r.inputs["kind"] == "TenantControlPlane"]) == 2
    for resource in custom:
        group, version = resource.inputs["apiVersion"].split("/")
        body = {k: unwrap(resource.inputs[k]) for k in ("apiVersion", "kind", "metadata", "spec") if k in resource.inputs}
        jsonschema.validate(body, crd_schema(shared, group, resource.inputs["kind"], version))


def test_crd_check_rejects_a_misspelt_field(shared: Path, resources: list[MockResourceArgs]) -> None:
    tcp = next(r for r in resources if r.inputs.get("kind") == "TenantControlPlane")
    body = unwrap({k: tcp.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")})
    body["spec"]["addons"]["konnectivity"]["agent"]["hostNetwrok"] = True
    with pytest.raises(jsonschema.ValidationError, match="hostNetwrok"):
        jsonschema.validate(body, crd_schema(shared, "kamaji.clastix.io", "TenantControlPlane", "v1alpha1"))


def value_paths(values: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(values, dict) and values and not (prefix and prefix[-1] in FREE_FORM):
        return [p for key, value in values.items() for p in value_paths(value, (*prefix, key))]
    return [prefix]


def path_exists(defaults: Any, path: tuple[str, ...]) -> bool:
    node = defaults
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        if key in FREE_FORM:
            return True
        node = node[key]
    return True


def chart_defaults(shared: Path, chart: str) -> dict[str, Any]:
    return yaml.safe_load((shared / "charts" / chart / "values.yaml").read_text())


def test_every_helm_value_path_exists_upstream(shared: Path, resources: list[MockResourceArgs]) -> None:
    releases = [r for r in resources if r.typ == "kubernetes:helm.sh/v3:Release"]
    # cert-manager, Kamaji, HAMi per tenant, MetalLB where the stack runs it, a dedicated tenant's etcd.
    assert len(releases) == 4 + any(chart_name(r.inputs["chart"]) == "metallb" for r in releases) + sum(
        chart_name(r.inputs["chart"]) == "kamaji-etcd" for r in releases)
    for release in releases:
        chart, values = str(chart_name(release.inputs["chart"])), release.inputs["values"]
        defaults = chart_defaults(shared, CHARTS[chart])
        for path in value_paths(values):
            if path[0] in SUBCHARTS and path[0] in defaults:
                sub_defaults = chart_defaults(shared, SUBCHARTS[path[0]])
                assert path_exists(sub_defaults, path[1:]) or path[1:] == ("deploy",), (chart, path)
            else:
                assert path_exists(defaults, path), f"{chart}: {'.'.join(path)} is not in upstream values.yaml"
        schema_file = shared / "charts" / CHARTS[chart] / "values.schema.json"
        if schema_file.exists():
            merged = merge(defaults, values)
            # Both charts' schemas are draft 07; MetalLB spells its `$schema` with https, which jsonschema
            # does not recognise (it would fall back to the latest draft with a warning).
            jsonschema.Draft7Validator(json.loads(schema_file.read_text())).validate(merged)


def test_value_path_check_catches_a_renamed_key(shared: Path) -> None:
    # HAMi 2.7 renamed kubeScheduler.imageTag to kubeScheduler.image.tag (HAMi #1991).
    assert not path_exists(chart_defaults(shared, CHARTS["hami"]), ("scheduler", "kubeScheduler", "imageTag"))


def merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        return {**base, **{k: merge(base.get(k), v) for k, v in override.items()}}
    return override


def test_kamaji_files_checked_here_are_from_the_commit_versions_names(shared: Path) -> None:
    """The Kamaji chart is a moving build; what pins the check is the commit its files were taken from."""
    rows = [line.split("|") for line in (shared / "PROVENANCE.md").read_text().splitlines()
            if line.startswith("| `") and "| clastix/kamaji |" in line]
    assert {row[1].strip(" `").split("/")[0] for row in rows} == {"charts", "schemas"}
    for row in rows:
        tag, commit = row[3].strip(), row[4].strip(" `")
        assert tag == versions.KAMAJI_IMAGE_TAG and versions.KAMAJI_CHART_CHECKED_COMMIT.startswith(commit), row[1]
    assert (shared / "charts" / CHARTS["kamaji"]).is_dir()


def test_core_objects_validate_against_kubernetes_schemas(resources: list[MockResourceArgs]) -> None:
    core = [r for r in resources if r.typ.startswith(CORE_PREFIXES) and not r.resource_id]
    assert len(core) >= 20
    for resource in core:
        body = unwrap({k: v for k, v in resource.inputs.items() if k in
                       ("apiVersion", "kind", "metadata", "spec", "data", "stringData", "type", "rules", "roleRef", "subjects")})
        kubernetes_validate.validate(body, "1.35.0", strict=True)
