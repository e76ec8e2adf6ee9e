"""The device-layer registry: one layer per mode, the facts each one states, and what the planner and the policy
pack do with a layer they were not taught."""

from __future__ import annotations

import json
import typing
from dataclasses import replace

import pytest
from policy_support import copy_stack, dev_stack, run_stack_policy

from gpu_tenancy.builders import gpu_nodes
from gpu_tenancy.contract.device_layers import LAYERS, DeviceLayer, find_layer, layer
from gpu_tenancy.contract.stack_config import StackConfig
from gpu_tenancy.contract.tenant_config import TenantConfig

import gpu_policies  # isort: skip
import plan_policies  # isort: skip

A100 = {"model": "A100-40GB", "memoryMiB": 40960, "count": 2}


def test_the_config_offers_exactly_the_registered_modes() -> None:
    offered = typing.get_args(StackConfig.model_fields["mode"].annotation)
    assert sorted(offered) == sorted(LAYERS) == ["real", "sim", "sim-nvml"]
    assert all(LAYERS[mode].mode == mode for mode in LAYERS)


# Expected facts, typed from what each mode deploys (docs/architecture.md), never read from the layers.
@pytest.mark.parametrize(("mode", "registrar", "simulated", "cuda_control", "plugin"), [
    ("sim", "mock-agent", True, False, "mock-gpu-agent"),
    ("sim-nvml", "nvml-mock", True, True, "hami-device-plugin"),
    ("real", "nvidia", False, False, "hami-device-plugin"),
])
def test_each_layer_states_who_registers_its_cards(
    mode: str, registrar: str, simulated: bool, cuda_control: bool, plugin: str
) -> None:
    found = layer(mode)
    assert (found.registrar, found.simulated, found.cuda_control) == (registrar, simulated, cuda_control)
    assert plugin in found.node_daemonsets
    assert {"kindnet", "kube-proxy", "konnectivity-agent"} <= set(found.node_daemonsets)
    assert gpu_nodes.NODE_DAEMONSETS[registrar] == found.node_daemonsets


def test_an_unregistered_mode_is_no_layer() -> None:
    with pytest.raises(KeyError):
        layer("cloud")
    # Read from a stack file, an export or the engine's config, anything but a registered mode is no layer.
    for unknown in ("cloud", "", None, 3, ["sim"], {"mode": "sim"}):
        assert find_layer(unknown) is None
    assert find_layer("sim-nvml") is layer("sim-nvml")


def _tenant(**extra: object) -> TenantConfig:
    return TenantConfig.model_validate({"name": "team", "gpus": [A100]} | extra)


@pytest.mark.parametrize(("mode", "numa"), [("sim", [0, 0]), ("sim-nvml", [None, None])])
def test_a_simulated_layer_puts_every_card_on_the_tenants_kind_worker(mode: str, numa: list[int | None]) -> None:
    [node] = gpu_nodes.tenant_gpu_nodes(layer(mode), "lab", _tenant())
    assert (node.name, node.tenant, list(node.numa)) == ("lab-team-worker", "team", numa)


def test_the_real_layer_puts_each_hosts_cards_on_its_own_node() -> None:
    hosts = [{"name": "gpu-1", "address": "10.0.0.1", "user": "ubuntu", "gpus": [A100], "numa": [1, 0]},
             {"name": "gpu-2", "address": "10.0.0.2", "user": "ubuntu", "gpus": [A100]}]
    tenant = _tenant(workers=hosts, gpus=[{**A100, "count": 4}])
    nodes = gpu_nodes.tenant_gpu_nodes(layer("real"), "lab", tenant)
    assert [(n.name, n.device_key, list(n.numa)) for n in nodes] == [
        ("gpu-1", "team/gpu-1", [1, 0]), ("gpu-2", "team/gpu-2", [None, None])]


def test_a_layer_placing_cards_in_a_way_the_planner_does_not_know_is_refused() -> None:
    toy = replace(layer("real"), mode="toy", placement="cloud")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="places its cards in an unknown way"):
        gpu_nodes.tenant_gpu_nodes(toy, "lab", _tenant())


def _toy(registrar: str) -> DeviceLayer:
    return replace(layer("sim"), mode="toy", registrar=registrar)  # type: ignore[arg-type]


def test_the_pack_refuses_a_layer_whose_registrar_it_has_no_check_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LAYERS, "toy", _toy("toy-plugin"))
    violations = run_stack_policy(gpu_policies.no_mock_gpus_in_real, copy_stack(dev_stack()), {"mode": "toy"})
    assert violations == [(
        "mode 'toy': this pack has no check for what registers its GPUs ('toy-plugin'); teach "
        "policies/gpu_policies.py that device layer before deploying it.", None)]


def test_the_pack_checks_a_new_layer_by_its_registrar(monkeypatch: pytest.MonkeyPatch) -> None:
    # A new mode whose cards HAMi's plugin registers from the driver is held to real's rules, under its own name:
    # the dev stack's mock-GPU agents and its HAMi without device plugin are named.
    monkeypatch.setitem(LAYERS, "toy", _toy("nvidia"))
    violations = run_stack_policy(gpu_policies.no_mock_gpus_in_real, copy_stack(dev_stack()), {"mode": "toy"})
    found = sorted(message.split(" (")[0] for message, _ in violations)
    assert found == [
        "mode is 'toy' but tenant 'tenant-a' installs HAMi with devicePlugin.enabled=false",
        "mode is 'toy' but tenant 'tenant-a' still runs the mock-GPU agent",
        "mode is 'toy' but tenant 'tenant-a' still runs the mock-GPU agent",
        "mode is 'toy' but tenant 'tenant-b' installs HAMi with devicePlugin.enabled=false",
        "mode is 'toy' but tenant 'tenant-b' still runs the mock-GPU agent",
        "mode is 'toy' but tenant 'tenant-b' still runs the mock-GPU agent",
    ]


@pytest.mark.parametrize(("mode", "pods", "numa"), [("sim", 110 - 4 - 3, [0, 0]), ("sim-nvml", 110 - 5 - 3, None),
                                                    ("real", 110 - 4 - 3, None)])
def test_the_packs_plan_reads_the_node_pods_and_numa_from_the_layer(
    monkeypatch: pytest.MonkeyPatch, mode: str, pods: int, numa: list[int] | None
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-tenancy:mode": mode}))
    [(name, _, found_numa, max_pods)] = plan_policies._stack_config_nodes({"name": "team", "gpus": [A100]})
    assert (name, found_numa, max_pods) == ("team-worker", numa, pods)


def test_the_packs_plan_knows_no_pods_for_a_mode_no_layer_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"gpu-tenancy:mode": "cloud"}))
    [(_, _, numa, max_pods)] = plan_policies._stack_config_nodes({"name": "team", "gpus": [A100]})
    assert (numa, max_pods) == (None, None)


# --------------------------------------------------------------------------- the seam, end to end


def test_every_registered_layer_has_its_wiring() -> None:
    from components.device_layers import DeviceLayerWiring, wiring

    for registered in LAYERS.values():
        found = wiring(registered)
        assert isinstance(found, DeviceLayerWiring) and type(found).deploy is not DeviceLayerWiring.deploy
        assert registered.wiring == f"components.device_layers.{registered.mode.replace('-', '_')}"


def test_a_layer_whose_module_has_no_wiring_is_refused() -> None:
    from components.device_layers import wiring

    with pytest.raises(TypeError, match="has no WIRING"):
        wiring(replace(layer("sim"), wiring="gpu_tenancy.contract.device_layers.sim"))


def test_a_new_layer_is_its_modules_and_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dev stack run by the program with its layer replaced by tests/toy_device_layer.py: the tenant layer
    (components/tenant.py) asks the registry, and the toy's hooks are all that change."""
    from harness import dev_config
    from policy_support import record_engine_view

    toy = replace(layer("sim"), wiring="toy_device_layer", registrar="mock-agent",
                  node_daemonsets=("kindnet", "kube-proxy", "konnectivity-agent", "toy-agent"))
    monkeypatch.setitem(LAYERS, "sim", toy)
    config = dev_config()
    cards_declared = {t["name"]: str(sum(g.get("count", 1) for g in t["gpus"])) for t in config["tenants"]}
    recorded = record_engine_view(config, stack="toy")
    by_name = {r.name: r for r in recorded}
    types = {r.type for r in recorded}
    # sim's own parts are gone; the toy's are there, each where the hooks put it.
    assert not types & {"gpu-tenancy:worker:Worker", "gpu-tenancy:mock_gpu_agent:MockGpuAgent"}
    tenants = [r for r in recorded if r.type == "gpu-tenancy:tenant:Tenant"]
    assert sorted(t.name for t in tenants) == ["tenant-a", "tenant-b"]
    for tenant in tenants:
        cards = by_name[f"{tenant.name}-toy-cards"]
        assert cards.parent == tenant.urn and cards.inputs["data"] == {"cards": cards_declared[tenant.name], "shared": "True"}
        assert cards.provider.startswith(by_name[f"{tenant.name}-kubernetes"].urn)
        assert by_name[f"{tenant.name}-hami"].parent == tenant.urn
        # The workloads wait for what the layer says is ready (a component stands for its resources: the SDK
        # expands it into them, pulumi sdk/python/lib/pulumi/runtime/resource.py `_expand_dependencies`).
        workloads = by_name[f"{tenant.name}-workloads"]
        assert {cards.urn, by_name[f"{tenant.name}-hami-chart"].urn} <= set(workloads.dependencies)
        assert tenant.registered_outputs is not None and tenant.registered_outputs["nodes"] == [f"{tenant.name}-toy-node"]
        # The control plane's flags and the GPU-access marker are the layer's.
        tcp = next(r for r in recorded if r.type.endswith(":TenantControlPlane") and r.custom
                   and r.parent == by_name[f"{tenant.name}-control-plane"].urn)
        assert "--toy-flag=" in json.dumps(tcp.inputs["spec"]["controlPlane"]["deployment"]["extraArgs"])
        policy = next(r for r in recorded if r.type.endswith(":ValidatingAdmissionPolicy")
                      and r.name.startswith(f"{tenant.name}-"))
        assert policy.inputs["spec"]["variables"][0]["expression"] == "'Y'"
        declared = tenant.inputs["gpuNodes"]
        assert [n["maxPods"] for n in declared] == [110 - 4 - 3]
    assert by_name["toy-stack"].inputs["data"] == {"tenants": "2"}
    after = by_name["toy-after"]
    assert after.inputs["data"] == {"tenants": "tenant-a,tenant-b"}
    # After every tenant: the tenants stand for their resources, the toy cards among them.
    assert {by_name[f"{t.name}-toy-cards"].urn for t in tenants} <= set(after.dependencies)


# --------------------------------------------------------------------------- what a layer needs of the config


def _first_error(config: dict[str, object]) -> str:
    from harness import TEST_SECRETS

    from gpu_tenancy.contract.config import ConfigError, load_config

    with pytest.raises(ConfigError) as raised:
        load_config(config, frozenset(TEST_SECRETS))
    return str(raised.value)


def test_a_layer_holding_few_cards_per_host_refuses_a_fuller_host(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import gpu_config

    config = gpu_config()
    tenant = config["tenants"][0]  # type: ignore[index]
    first = tenant["workers"][0]
    cards = sum(g.get("count", 1) for g in first.get("gpus") or tenant["gpus"])
    monkeypatch.setitem(LAYERS, "real", replace(layer("real"), max_cards_per_node=(cards - 1, "the toy holds fewer")))
    assert _first_error(config) == (
        f"gpu-tenancy:tenants[0].workers[0].gpus: {cards} GPUs on host {first['name']}; the toy holds fewer")


def test_a_layer_with_cuda_control_needs_the_mutating_policy_api_in_any_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import TEST_SECRETS, gpu_config

    from gpu_tenancy.contract.config import load_config
    from gpu_tenancy.contract.config_checks import mode_errors

    raw = gpu_config()
    config = load_config(raw, frozenset(TEST_SECRETS))
    before_the_api = config.model_copy(update={"versions": config.versions.model_copy(update={"kubernetes": "v1.33.2"})})
    assert [key for key, _ in mode_errors(before_the_api, raw)] == []
    monkeypatch.setitem(LAYERS, "real", replace(layer("real"), cuda_control=True))
    [(key, problem)] = mode_errors(before_the_api, raw)
    assert key == "versions.kubernetes" and "(MutatingAdmissionPolicy), not v1.33.2" in problem


# Typed from docs/live-suite.md ("Footprint"): kind control plane 1.5 GB and the platform 0.8 GB; per tenant a
# 0.6 GB control plane and a 0.8 GB worker, 0.2 GB more in sim-nvml; disk 8 GB and 1 GB per tenant, 2.5 GB more
# for the mock NVML image and its build cache.
@pytest.mark.parametrize(("mode", "memory_gib", "disk_gib"), [
    ("sim", 2.3 + 2 * 1.4, 8 + 2), ("sim-nvml", 2.3 + 2 * 1.6, 8 + 2 + 2.5),
])
def test_the_doctor_sizes_a_lab_by_its_layer(mode: str, memory_gib: float, disk_gib: float) -> None:
    from gpu_tenancy.cli.doctor import host as doctor_host

    shape = doctor_host.LabShape("lab", mode, "gpu-tenancy-lab", "kind", ("a", "b"))
    assert shape.simulated
    assert doctor_host.footprint_bytes(shape) == (int(memory_gib * 2**30), int(disk_gib * 2**30))


def test_the_doctor_takes_a_mode_no_layer_registers_as_no_lab() -> None:
    from gpu_tenancy.cli.doctor import host as doctor_host

    assert not doctor_host.LabShape("lab", "cloud", "gpu-tenancy-lab", "kind", ("a",)).simulated
