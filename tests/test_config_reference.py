"""docs/configuration.md: generated from the config models, and its "on change" facts hold under the engine's rules.

The page is `gpu_tenancy.cli.config_reference.page.render()`; the committed file must equal it. Every key the models
accept has an entry (and no entry names a key they do not accept). What each entry says a change replaces
is checked against tests/replacement_model.py: the example stack is registered before and after a sample
change of that key, and the replaced resources must be exactly those the entry names (in that stack's mode).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from harness import TEST_SECRETS, dev_config, gpu_config, nodeport_gpu_config, nvml_config, registered_gpus
from policy_support import EXAMPLE_STACKS, Recorded, record_engine_view
from replacement_model import replacements
from test_lifecycle import CHANGES, _baseline, _changed

from gpu_tenancy.cli.config_reference import model_fields, page
from gpu_tenancy.cli.config_reference.keys import KEYS, QUOTA, Key
from gpu_tenancy.contract import tenant_config

MODE = {"dev": "sim", "dev-nvml": "sim-nvml", "gpu": "real", "gpu-nodeport": "real"}
CONFIGS: dict[str, Callable[[], dict[str, Any]]] = {
    "dev": dev_config, "dev-nvml": nvml_config, "gpu": gpu_config, "gpu-nodeport": nodeport_gpu_config,
}
_RECORDED: dict[str, list[Recorded]] = {}


def _record(stack: str, settings: dict[str, Any]) -> list[Recorded]:
    if stack == "dev":
        return record_engine_view(settings)
    if stack == "dev-nvml":
        return record_engine_view(settings, stack="dev-nvml")
    return record_engine_view(settings, stack="gpu", node_register=registered_gpus(settings))


def _before(stack: str) -> list[Recorded]:
    if stack == "gpu-nodeport":
        if stack not in _RECORDED:
            _RECORDED[stack] = _record(stack, nodeport_gpu_config())
        return _RECORDED[stack]
    return EXAMPLE_STACKS[stack]()


Change = Callable[[dict[str, Any]], None]


def tenant(index: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda settings: settings["tenants"][index]


def host(index: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda settings: settings["tenants"][index]["workers"][0]


def workload(index: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda settings: settings["tenants"][index]["workloads"][0]


def container(index: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda settings: settings["tenants"][index]["workloads"][0]["containers"][0]


def setting(where: Callable[[dict[str, Any]], dict[str, Any]], **values: Any) -> Change:
    return lambda settings: where(settings).update(values)


def top(**values: Any) -> Change:
    return lambda settings: settings.update(values)


def to_nodeport(settings: dict[str, Any]) -> None:
    settings["metallb"] = {"enabled": False}
    settings["controlPlane"] = {"serviceType": "NodePort"}
    for index, each in enumerate(settings["tenants"]):
        each["controlPlaneAddress"] = f"10.20.0.{2 + index}"


def add_host(settings: dict[str, Any]) -> None:
    l4 = [{"model": "NVIDIA L4", "count": 1}]
    first = settings["tenants"][1]["workers"][0]
    second = {"name": "gpu-l4-02", "address": "10.20.0.13", "user": "ubuntu", "hostKey": first["hostKey"], "gpus": l4}
    settings["tenants"][1]["workers"] = [{**first, "gpus": l4}, second]


OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIImAiJ07k41NSloCF89Tr9UDm2QEHVtAR8LBvBcVh0GS"
VERSION_CHANGE = {  # key -> the case of tests/test_lifecycle.py that changes it
    "versions.kindNodeImage": "kind node image", "versions.kubernetes": "kubernetes version",
    "versions.hami": "hami version", "versions.kamajiImageTag": "kamaji image tag",
    "versions.kamajiChart": "kamaji chart", "versions.certManager": "cert-manager version",
    "versions.metallb": "metallb version", "versions.kindnetdImage": "kindnetd image",
    "versions.nvmlMockCommit": "nvml mock commit",
}
VERSION_STACKS = {"versions.kindNodeImage": ("dev", "dev-nvml"), "versions.nvmlMockCommit": ("dev-nvml",),
                  "versions.kubernetes": ("dev", "dev-nvml", "gpu")}
# key -> (stack, change, {placeholder: value} for the tenant/host the change concerns).
SAMPLES: dict[str, list[tuple[str, Change, dict[str, str]]]] = {
    "mode": [("dev", top(mode="sim-nvml"), {})],
    "tenants": [("dev", lambda s: s.update(tenants=s["tenants"][1:]), {})],
    "inventoryMismatch": [("gpu", top(inventoryMismatch="warn"), {})],
    "orderedWorkloads": [("dev", top(orderedWorkloads=True), {})],
    "orderDependentPlan": [("dev", top(orderDependentPlan="refuse"), {})],
    "managementKubeconfig": [("gpu", top(managementKubeconfig=TEST_SECRETS["managementKubeconfig"] + "# new\n"), {})],
    "sshPrivateKey": [("gpu", top(sshPrivateKey=TEST_SECRETS["sshPrivateKey"].replace("test", "new")), {})],
    "tenants[].name": [("dev", setting(tenant(1), name="tenant-c"), {})],
    "tenants[].gpus": [
        ("dev", setting(tenant(1), gpus=[{"model": "NVIDIA L4", "count": 3}]), {"tenant": "tenant-b"}),
        ("dev-nvml", setting(tenant(1), gpus=[{"model": "NVIDIA L4", "count": 3}]), {"tenant": "tenant-b"}),
        ("gpu", setting(tenant(1), gpus=[{"model": "NVIDIA L4", "count": 1}]), {"tenant": "tenant-b"}),
    ],
    "tenants[].gpus[].model": [
        ("dev", setting(lambda s: s["tenants"][1]["gpus"][0], model="NVIDIA L40S"), {"tenant": "tenant-b"}),
        ("dev-nvml", setting(lambda s: s["tenants"][1]["gpus"][0], model="NVIDIA L40S"), {"tenant": "tenant-b"}),
    ],
    "tenants[].gpus[].count": [
        ("dev-nvml", setting(lambda s: s["tenants"][0]["gpus"][0], count=2), {"tenant": "tenant-a"}),
    ],
    "tenants[].workers": [("gpu", add_host, {})],
    "tenants[].controlPlaneAddress": [("gpu-nodeport", setting(tenant(0), controlPlaneAddress="10.20.0.9"), {})],
    "tenants[].nodePort": [("gpu-nodeport", setting(tenant(0), nodePort=32000), {})],
    "tenants[].podCidr": [("dev", setting(tenant(1), podCidr="10.200.0.0/20"), {})],
    "tenants[].serviceCidr": [("dev", setting(tenant(1), serviceCidr="10.210.0.0/22"), {})],
    "tenants[].workloads": [
        ("dev", lambda s: s["tenants"][0]["workloads"].append(
            {"name": "a-extra", "containers": [{"gpumemMiB": 1024, "gpucores": 5}]}), {}),
    ],
    "tenants[].quota": [("dev", lambda s: s["tenants"][1]["quota"].update({"limits.nvidia.com/gpumem": 30000}), {})],
    "tenants[].dataStore": [("dev", setting(tenant(1), dataStore="dedicated"), {})],
    "tenants[].userAccess": [("dev", setting(tenant(1), userAccess=True), {}),
                             ("gpu", setting(tenant(1), userAccess=True), {})],
    "tenants[].workers[].name": [("gpu", setting(host(0), name="gpu-a100-09"), {})],
    "tenants[].workers[].address": [
        ("gpu", setting(host(0), address="10.20.0.21"), {"tenant": "tenant-a", "host": "gpu-a100-01"}),
    ],
    "tenants[].workers[].user": [("gpu", setting(host(0), user="admin"), {})],
    "tenants[].workers[].port": [("gpu", setting(host(0), port=2222), {})],
    "tenants[].workers[].hostKey": [("gpu", setting(host(0), hostKey=OTHER_KEY), {})],
    "tenants[].workers[].gpus": [("gpu", add_host, {})],
    "tenants[].workers[].numa": [("gpu", setting(host(0), numa=[1]), {})],
    "tenants[].workloads[].name": [("dev", setting(workload(1), name="b-nb"), {})],
    "tenants[].workloads[].replicas": [("dev", setting(workload(1), replicas=3), {})],
    "tenants[].workloads[].image": [("dev", setting(workload(1), image="registry.k8s.io/pause@sha256:" + "2" * 64), {})],
    "tenants[].workloads[].containers": [
        ("dev", setting(workload(1), containers=[{"gpumemPercentage": 25}, {"gpumemPercentage": 25}]), {}),
    ],
    "tenants[].workloads[].useGpuType": [("dev", setting(workload(1), useGpuType=["L4"]), {})],
    "tenants[].workloads[].noUseGpuType": [("dev", setting(workload(1), noUseGpuType=["A100"]), {})],
    "tenants[].workloads[].gpuSchedulerPolicy": [("dev", setting(workload(1), gpuSchedulerPolicy="spread"), {})],
    "tenants[].workloads[].nodeSchedulerPolicy": [("dev", setting(workload(1), nodeSchedulerPolicy="spread"), {})],
    "tenants[].workloads[].containers[].gpus": [("dev", setting(container(1), gpus=2), {})],
    "tenants[].workloads[].containers[].gpumemMiB": [("dev", setting(container(0), gpumemMiB=8192), {})],
    "tenants[].workloads[].containers[].gpumemPercentage": [("dev", setting(container(1), gpumemPercentage=40), {})],
    "tenants[].workloads[].containers[].gpucores": [("dev", setting(container(1), gpucores=10), {})],
    "versions.workerImage": [
        ("dev", top(versions={"workerImage": "kindest/node:v1.35.5@sha256:" + "1" * 64}), {}),
        ("dev-nvml", top(versions={"workerImage": "kindest/node:v1.35.5@sha256:" + "1" * 64}), {}),
    ],
    "versions.hamiImageTag": [("dev", top(versions={"hamiImageTag": "v2.10.1"}), {})],
    "kind.clusterName": [("dev", top(kind={"clusterName": "other"}), {})],
    "kind.network": [("dev", top(kind={"network": "lab-b"}), {})],
    "metallb.enabled": [("gpu", to_nodeport, {})],
    "metallb.poolSize": [("dev", top(metallb={"poolSize": 32}), {})],
    "metallb.addresses": [("gpu", lambda s: s["metallb"].update(addresses=["10.20.0.230-10.20.0.250"]), {})],
    "controlPlane.serviceType": [("gpu", to_nodeport, {})],
    "controlPlane.nodePortBase": [("gpu-nodeport", lambda s: s["controlPlane"].update(nodePortBase=31500), {})],
    "datastore.volumeMiB": [("dev", top(datastore={"volumeMiB": 4096}), {})],
    "metrics.serviceMonitors": [("dev", top(metrics={"serviceMonitors": True}), {})],
    "metrics.labels": [("dev", top(metrics={"serviceMonitors": True, "labels": {"release": "prom"}}), {})],
}
NOT_SAMPLED = {
    "versions": "a group: its keys are sampled",
    "kind": "a group: its keys are sampled",
    "metallb": "a group: its keys are sampled",
    "controlPlane": "a group: its keys are sampled",
    "datastore": "a group: its keys are sampled",
    "metrics": "a group: its keys are sampled",
    "tenants[].gpus[].memoryMiB": "a catalogue card's memory cannot change; another card's changes with its model",
}


def test_the_committed_page_is_the_generated_one() -> None:
    assert page.PAGE.read_text() == page.render(), (
        "run `.venv/bin/gpu-tenancy config-reference --write`"
    )


def test_every_accepted_key_is_documented_and_every_entry_is_a_key() -> None:
    accepted = [key for key, _ in model_fields.documented_keys()]
    assert len(accepted) == len(set(accepted))
    assert set(accepted) == set(KEYS)
    assert set(QUOTA) == set(tenant_config.QUOTA_KEYS)


def test_a_new_setting_is_found_in_any_model() -> None:
    """The walk reaches every model: a key added to a nested model shows up (and then needs an entry)."""
    walked = {key for key, _ in model_fields.model_keys()}
    assert {"tenants[].workloads[].containers[].gpucores", "tenants[].workers[].hostKey", "metallb.headroom",
            "versions.nvmlMockCommit", "tenants[].workers[].gpus"} <= walked
    assert "tenants[].workers[].gpus[].model" not in walked, "a model met again is not walked twice"


def _field(path: str) -> Any:
    return dict(model_fields.model_keys())[path]


@pytest.mark.parametrize(("path", "expected"), [
    ("mode", "one of `sim`, `sim-nvml`, `real`"),
    ("tenants", "list of objects, 1–100 entries"),
    ("tenants[].workers", "list of objects, ≤ 64 entries"),
    ("tenants[].gpus[].count", "integer, 1–16"),
    ("tenants[].workers[].port", "integer, 1–65535"),
    ("tenants[].workloads[].replicas", "integer, 0–1000"),
    ("tenants[].workloads[].containers[].gpumemMiB", "integer, 1–2147483647"),
    ("tenants[].quota", "map of string to integer"),
    ("tenants[].workloads[].useGpuType", "list of strings"),
    ("managementKubeconfig", "secret string"),
    ("metallb.enabled", "boolean"),
    ("versions", "object"),
])
def test_types_come_with_their_bounds(path: str, expected: str) -> None:
    assert model_fields.type_text(_field(path)) == expected


@pytest.mark.parametrize(("path", "expected"), [
    ("mode", "required"),
    ("tenants[].workers[].port", "`22`"),
    ("tenants[].dataStore", "`shared`"),
    ("tenants[].userAccess", "`false`"),
    ("tenants[].quota", "none"),
    ("tenants[].controlPlaneAddress", "none"),
    ("versions.hami", "`2.10.0`"),
    ("metallb.poolSize", "`16`"),
    ("versions", "see below"),
])
def test_defaults_are_the_models(path: str, expected: str) -> None:
    assert model_fields.default_text(_field(path), KEYS[path]) == expected


def test_anchors_follow_github() -> None:
    assert page.anchor("Control plane exposure") == "control-plane-exposure"


def test_every_key_has_a_sampled_change_or_a_reason() -> None:
    sampled = set(SAMPLES) | set(VERSION_CHANGE)
    assert sampled.isdisjoint(NOT_SAMPLED)
    assert sampled | set(NOT_SAMPLED) == set(KEYS)


def _pattern(text: str, names: dict[str, str], tenants: list[str]) -> re.Pattern[str]:
    any_tenant = "|".join(re.escape(name) for name in tenants)
    parts = re.split(r"(<tenant>|<host>|<node>|\*)", text)
    regex = ""
    for part in parts:
        if part == "<tenant>":
            regex += re.escape(names["tenant"]) if "tenant" in names else f"(?:{any_tenant})"
        elif part in ("<host>", "<node>"):
            placeholder = part.strip("<>")
            regex += re.escape(names[placeholder]) if placeholder in names else "[a-z0-9-]+"
        elif part == "*":
            regex += ".*"
        else:
            regex += re.escape(part)
    return re.compile(f"^{regex}$")


def _check(key: Key, stack: str, before: list[Recorded], after: list[Recorded], names: dict[str, str]) -> None:
    mode = MODE[stack]
    replaced = {r.name for r in replacements(before, after).values()}
    tenants = [t["name"] for t in CONFIGS[stack]()["tenants"]]
    patterns = [(p.pattern, _pattern(p.pattern, names, tenants)) for p in key.replaces if mode in p.modes]
    unnamed = sorted(name for name in replaced if not any(regex.match(name) for _, regex in patterns))
    assert not unnamed, f"{stack}: replaced but not in the entry: {unnamed}"
    existing = {r.name for r in before}
    for text, regex in patterns:
        matching = {name for name in existing if regex.match(name)}
        assert matching, f"{stack}: {text!r} names nothing in this stack"
        if "*" in text:
            assert matching & replaced, f"{stack}: nothing of {text!r} is replaced"
        else:
            assert matching <= replaced, f"{stack}: {sorted(matching - replaced)} not replaced"


@pytest.mark.parametrize(("path", "index"), [(path, i) for path, samples in SAMPLES.items() for i in range(len(samples))])
def test_a_change_replaces_what_the_reference_says(path: str, index: int) -> None:
    stack, change, names = SAMPLES[path][index]
    settings = copy.deepcopy(CONFIGS[stack]())
    change(settings)
    before = _before(stack)
    after = _record(stack, settings)
    assert [r.inputs for r in before] != [r.inputs for r in after] or {r.urn for r in before} != {
        r.urn for r in after
    }, "the sample changes nothing"
    _check(KEYS[path], stack, before, after, names)


@pytest.mark.parametrize(("path", "stack"), [
    (path, stack) for path in VERSION_CHANGE for stack in VERSION_STACKS.get(path, ("dev", "gpu"))
])
def test_a_version_change_replaces_what_the_reference_says(path: str, stack: str) -> None:
    assert CHANGES[VERSION_CHANGE[path]]
    _check(KEYS[path], stack, _baseline(stack), _changed(stack, VERSION_CHANGE[path]), {})


def test_a_key_with_replacements_names_them_in_its_own_modes() -> None:
    for path, key in KEYS.items():
        for replaced in key.replaces:
            assert set(replaced.modes) <= set(key.modes), (path, replaced)
