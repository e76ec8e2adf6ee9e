"""sim-nvml's CUDA-control MutatingAdmissionPolicy alone in a real kube-apiserver (1.36.3), as dev-nvml registers it
for a 1.35 tenant (admissionregistration.k8s.io/v1beta1) and as v1, the version a 1.36 tenant is sent: the schemas
the server serves for both compared first, then every pod of the CEL test's table (tests/test_cuda_control.py)
created and read back. With the GPU-access policy beside it: tests/realcp/test_admission.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from test_cuda_control import MATCH_CASES, _mutated
from test_gpu_access import ctr, pod

from tests.realcp import admission_support as adm
from tests.realcp.cluster import RealControlPlane

V1, V1BETA1 = f"{adm.ADMISSION}/v1", f"{adm.ADMISSION}/v1beta1"


@pytest.fixture(scope="module")
def namespace(admin_api: client.ApiClient) -> Iterator[str]:
    yield from adm.fresh_namespace(admin_api)


def _schema_without(schema: Any, version: str, keys: tuple[str, ...]) -> Any:
    if isinstance(schema, dict):
        return {k: _schema_without(v, version, keys) for k, v in schema.items() if k not in keys}
    if isinstance(schema, list):
        return [_schema_without(v, version, keys) for v in schema]
    if isinstance(schema, str):
        return schema.replace(f"admissionregistration.{version}.", "admissionregistration.VERSION.")
    return schema


def _reachable(schemas: dict[str, Any], root: str) -> dict[str, Any]:
    """The schemas `root` refers to, transitively, keyed by name."""
    seen: dict[str, Any] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen[name] = schemas[name]
        text = str(schemas[name])
        todo += [ref.split("'")[0] for ref in text.split("'#/components/schemas/")[1:]]
    return seen


def _served(real_control_plane: RealControlPlane, version: str, kind: str, keys: tuple[str, ...]) -> dict[str, Any]:
    schemas = real_control_plane.get_json(f"/openapi/v3/apis/{adm.ADMISSION}/{version}")["components"]["schemas"]
    reachable = _reachable(schemas, f"io.k8s.api.admissionregistration.{version}.{kind}")
    return {name.replace(f".{version}.", ".VERSION."): _schema_without(schema, version, keys)
            for name, schema in reachable.items() if "admissionregistration" in name}


def _enum_misses(schemas: dict[str, Any], schema: dict[str, Any], value: Any, where: str) -> list[str]:
    """Where `value` holds a string its schema's enum does not list."""
    refs = [schema.get("$ref")] + [s.get("$ref") for s in schema.get("allOf", [])]
    for ref in filter(None, refs):
        schema = {**schemas[ref.rsplit("/", 1)[1]], **{k: v for k, v in schema.items() if k not in ("$ref", "allOf")}}
    misses = [f"{where}: {value!r} not in {schema['enum']}"] if "enum" in schema and value not in schema["enum"] else []
    if isinstance(value, dict):
        for key, item in value.items():
            misses += _enum_misses(schemas, schema.get("properties", {}).get(key, {}), item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            misses += _enum_misses(schemas, schema.get("items", {}), item, f"{where}[{index}]")
    return misses


def _only_enums_added(v1: Any, beta: Any, where: str = "") -> list[str]:
    """Where v1 differs from v1beta1 other than by an enum v1beta1 does not declare."""
    if isinstance(v1, dict) and isinstance(beta, dict):
        found = [f"{where}.enum" for _ in [0] if "enum" in beta and v1.get("enum") != beta["enum"]]
        if v1.keys() - {"enum"} != beta.keys() - {"enum"}:
            return [*found, f"{where}: keys {sorted(v1.keys() ^ beta.keys())}"]
        return found + [m for key in beta.keys() - {"enum"} for m in _only_enums_added(v1[key], beta[key],
                                                                                       f"{where}.{key}")]
    return [] if v1 == beta else [where]


def test_the_v1_schema_of_the_mutating_policy_is_the_v1beta1_one_with_enums(
    real_control_plane: RealControlPlane,
) -> None:
    """What the API server serves for both versions, documentation aside: the same fields, types and defaults; v1
    adds enums (failurePolicy, matchPolicy), which the registered objects keep to. So the registered v1beta1
    objects are sent as v1 with only apiVersion changed."""
    for kind in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"):
        v1, beta = (_served(real_control_plane, v, kind, ("description",)) for v in ("v1", "v1beta1"))
        assert len(v1) >= 5 and v1.keys() == beta.keys(), sorted(v1.keys() ^ beta.keys())
        own = f"io.k8s.api.admissionregistration.VERSION.{kind}"
        differ = {name for name in v1 if v1[name] != beta[name] and name != own}
        assert differ <= {"io.k8s.api.admissionregistration.VERSION.MatchResources",
                          "io.k8s.api.admissionregistration.VERSION.MutatingAdmissionPolicySpec"}, differ
        # The kind's own schema differs only in its group-version-kind, the others only in v1's enums.
        v1, beta = (_served(real_control_plane, v, kind, ("description", "x-kubernetes-group-version-kind"))
                    for v in ("v1", "v1beta1"))
        assert _only_enums_added(v1, beta) == [], kind
        schemas = real_control_plane.get_json(f"/openapi/v3/apis/{adm.ADMISSION}/v1")["components"]["schemas"]
        for body in (o for o in adm.admission_objects("dev-nvml") if o["kind"] == kind):
            assert body["apiVersion"] == V1BETA1
            root = schemas[f"io.k8s.api.admissionregistration.v1.{kind}"]
            assert _enum_misses(schemas, root, body, kind) == []


@pytest.fixture(scope="class", params=[None, V1], ids=["v1beta1-as-registered", "v1"])
def mutation_only(request: pytest.FixtureRequest, admin_api: client.ApiClient, namespace: str) -> Iterator[None]:
    """sim-nvml's MutatingAdmissionPolicy and binding alone, so every pod of the table reaches the store."""
    objects = [adm.with_version(o, request.param) if request.param else o
               for o in adm.admission_objects("dev-nvml") if "MutatingAdmissionPolicy" in o["kind"]]
    assert {o["apiVersion"] for o in objects} == {request.param or V1BETA1}
    generator = adm.installed(admin_api, objects)
    next(generator)
    gpu = adm.as_pod(pod(ctr(gpu=True)), "probe", namespace)

    def mutated() -> bool:
        return "env" in adm.create(admin_api, gpu, dry_run=True).body.get("spec", {"containers": [{}]})["containers"][0]

    try:
        adm.wait_until("the mutation", mutated)
        yield
    finally:
        next(generator, None)
        adm.wait_until("the mutation to be gone", lambda: not mutated())


class TestTheCudaControlMutation:
    @pytest.mark.parametrize(("case", "obj", "matched"), MATCH_CASES, ids=[c[0] for c in MATCH_CASES])
    def test_the_created_pod_carries_what_the_cel_tests_expect(
        self, admin_api: client.ApiClient, namespace: str, mutation_only: None, case: str, obj: dict[str, Any],
        matched: bool,
    ) -> None:
        body = adm.as_pod(obj, f"{adm.slug(case)}-{uuid.uuid4().hex[:4]}", namespace)
        created = adm.create(admin_api, body)
        try:
            assert created.status == 201 and created.policy_warnings == [], created.message
            stored = adm.ok(adm.read(admin_api, body), "read back")
            env = {c["name"]: c.get("env", []) for c in stored["spec"]["containers"]}
            assert env == {c["name"]: c.get("env", []) for c in _mutated(body)["spec"]["containers"]}
            assert (env != {c["name"]: c.get("env", []) for c in body["spec"]["containers"]}) is matched
        finally:
            adm.delete(admin_api, body)
