"""The rehearsal predicts production: the same tenants and workloads, registered as sim's agent registers
them, as HAMi registers the mock NVML's devices and as HAMi registers real cards, reach the same verdict for
every replica and the same per-node totals; `make promotion-diff` names what would change.

The three registers come from three independent paths:
- sim: the agent's own code (gpu_tenancy.hami.agent: load_inventory, hami.device_inventory) on the inventory the
  program hands the MockGpuAgent under the mocks;
- sim-nvml: the mock NVML configuration the program writes, through the register.go double
  (tests/hami_register.py);
- real: cards recorded from published nvidia-smi output (tests/fixtures/nvidia_smi/cards.json) through the
  same double.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_support import shared_recording

from gpu_tenancy.cli.plan import command as plan_cli
from gpu_tenancy.cli.plan import plan_input
from gpu_tenancy.cli.promotion import command as promotion_plan
from gpu_tenancy.contract.config import SECRET_KEYS
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent.__main__ import load_inventory
from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Workload, node_from_register
from gpu_tenancy.hami.planner.schedule import plan
from tests import hami_register
from tests.harness import dev_config, gpu_config, nvml_config, record_stack, registered_gpus, unwrap

H100 = {"model": "NVIDIA H100 80GB HBM3", "count": 1}


def _edge_workloads(tenant: str) -> list[dict[str, Any]]:
    """Requests at the edge of each card's registered memory, type filters and percentages."""
    edge = {
        "tenant-a": [("a-whole", 81920, None), ("a-over", 81921, None), ("a-type", 1024, ["A100-SXM4"])],
        "tenant-b": [("b-whole", 23034, None), ("b-over", 23035, None), ("b-dash", 1024, ["NVIDIA-L4"])],
        "tenant-c": [("c-whole", 81559, None), ("c-marketed", 81920, None), ("c-type", 1024, ["h100"])],
    }[tenant]
    workloads = [
        {"name": name, "replicas": 1, "containers": [{"gpus": 1, "gpumemMiB": mib, "gpucores": 0}],
         **({"useGpuType": types} if types else {})}
        for name, mib, types in edge
    ]
    workloads.append({"name": f"{tenant[-1]}-half", "replicas": 3, "containers": [{"gpus": 1, "gpumemPercentage": 50}]})
    return workloads


def _with_tenant_c(config: dict[str, Any], host: str | None) -> dict[str, Any]:
    """The example stack plus an H100 tenant with three 50 % halves, quotas left out: the cards' verdicts,
    not the quotas', are at stake."""
    config = copy.deepcopy(config)
    config["tenants"].append({"name": "tenant-c", "gpus": [H100], "workloads": [
        {"name": "c-half", "replicas": 3, "containers": [{"gpus": 1, "gpumemPercentage": 50}]}]})
    if host:
        config["tenants"][-1]["workers"] = [{"name": host, "address": "10.20.0.13", "user": "ubuntu"}]
    for tenant in config["tenants"]:
        tenant.pop("quota", None)
    return config


def _alone(config: dict[str, Any], workload: dict[str, Any], tenant: str) -> dict[str, Any]:
    """The stack with one workload only, on `tenant`'s idle cards."""
    config = copy.deepcopy(config)
    for entry in config["tenants"]:
        entry["workloads"] = [workload] if entry["name"] == tenant else []
    return config


def _workloads(config: dict[str, Any]) -> list[Workload]:
    document = plan_input.PlanDocument.model_validate({
        "nodes": [{"name": "n", "devices": [{"id": "x", "type": "NVIDIA", "count": 1}]}],
        "workloads": [{**w, "tenant": t["name"]} for t in config["tenants"] for w in t["workloads"]],
    })
    return plan_input.planner_inputs(document)[1]


def _sim_registers(config: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per node: what the mock-GPU agent registers, from the inventory and env the program gives it."""
    resources = record_stack(config, stack="dev")
    registers = {}
    for daemon_set in [r for r in resources if r.typ == "kubernetes:apps/v1:DaemonSet" and r.name.endswith("-mock-gpu-agent-daemonset")]:
        tenant = daemon_set.name.removesuffix("-mock-gpu-agent-daemonset")
        (inventory,) = [r for r in resources if r.name == f"{tenant}-mock-gpu-agent-inventory"]
        (container,) = unwrap(daemon_set.inputs)["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        groups = load_inventory(unwrap(inventory.inputs)["data"]["inventory.json"])
        registers[f"gpu-tenancy-dev-{tenant}-worker"] = hami.device_inventory(env["TENANT"], groups, int(env["SPLIT_COUNT"]))
    return registers


def _nvml_registers(config: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per node: what HAMi's device plugin registers over the mock NVML configuration the program writes."""
    resources = record_stack(config, stack="dev-nvml")
    registers = {}
    for config_map in [r for r in resources if r.name.endswith("-mock-nvml-config")]:
        tenant = config_map.name.removesuffix("-mock-nvml-config")
        mock = yaml.safe_load(unwrap(config_map.inputs)["data"]["config.yaml"])
        registers[f"gpu-tenancy-dev-nvml-{tenant}-worker"] = hami_register.register(hami_register.mock_nvml_devices(mock))
    return registers


def _real_registers(config: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {node: json.loads(value) for node, value in registered_gpus(config).items()}


def _tenant_of(config: dict[str, Any], node: str) -> str:
    for tenant in config["tenants"]:
        if node.endswith(f"-{tenant['name']}-worker") or node in [w["name"] for w in tenant.get("workers", [])]:
            return str(tenant["name"])
    raise AssertionError(node)


def _outcome(config: dict[str, Any], registers: dict[str, list[dict[str, Any]]]) -> tuple[Any, Any]:
    nodes = [node_from_register(n, d, _tenant_of(config, n)) for n, d in sorted(registers.items())]
    workloads = _workloads(config)
    result = plan(nodes, workloads, None)
    verdicts = {(f.workload, f.replica): f.reason for f in result.failures}
    verdicts |= {(p.workload, p.replica): "fits" for p in result.placements}
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    tenant_of = {n.name: n.tenant for n in nodes}
    for p in result.placements:
        held = totals[str(tenant_of[p.node])]
        held[0], held[1], held[2] = held[0] + p.mem_mib, held[1] + p.cores, held[2] + 1
    return verdicts, {t: tuple(v) for t, v in totals.items()}


REGISTERS = {"sim": _sim_registers, "sim-nvml": _nvml_registers, "real": _real_registers}


def _stacks() -> dict[str, dict[str, Any]]:
    return {
        "sim": _with_tenant_c(dev_config(), None),
        "sim-nvml": _with_tenant_c(nvml_config(), None),
        "real": _with_tenant_c(gpu_config(), "gpu-h100-01"),
    }


@pytest.fixture
@shared_recording
def registers() -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per mode, node -> register (the workloads do not change what a node registers)."""
    return {mode: REGISTERS[mode](config) for mode, config in _stacks().items()}


@pytest.fixture
@shared_recording
def outcomes(registers: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, tuple[Any, Any]]:
    return {mode: _outcome(config, registers[mode]) for mode, config in _stacks().items()}


def test_sim_sim_nvml_and_real_reach_the_same_verdict_for_every_replica(outcomes: dict[str, tuple[Any, Any]]) -> None:
    sim, nvml, real = (outcomes[m][0] for m in ("sim", "sim-nvml", "real"))
    assert sim == nvml == real
    # The H100's third half does not fit: half of 81559 MiB is 40779, twice that leaves 1 MiB.
    assert [sim[("c-half", r)] for r in range(3)] == ["fits", "fits", "1/1 CardInsufficientMemory"]


def test_sim_sim_nvml_and_real_hold_the_same_per_node_totals(outcomes: dict[str, tuple[Any, Any]]) -> None:
    sim, nvml, real = (outcomes[m][1] for m in ("sim", "sim-nvml", "real"))
    assert sim == nvml == real
    # MiB, cores, slots. Two 50 % notebooks hold 2 x 11517 MiB: half of the 23034 MiB an L4 registers.
    assert sim == {"tenant-a": (40960, 80, 4), "tenant-b": (23034, 60, 2), "tenant-c": (81558, 0, 2)}


EDGES = [
    # (tenant, request MiB, type filter, verdict): a card's whole registered memory fits, one MiB more or the
    # marketed size does not; HAMi's type filter is a case-insensitive substring of the registered type.
    ("tenant-a", 81920, None, "fits"),
    ("tenant-a", 81921, None, "1/1 CardInsufficientMemory"),
    ("tenant-a", 1024, ["a100-sxm4"], "fits"),
    ("tenant-b", 23034, None, "fits"),
    ("tenant-b", 23035, None, "2/2 CardInsufficientMemory"),
    ("tenant-b", 24576, None, "2/2 CardInsufficientMemory"),
    ("tenant-b", 1024, ["NVIDIA-L4"], "2/2 CardTypeMismatch"),
    ("tenant-b", 1024, ["NVIDIA L4"], "fits"),
    ("tenant-c", 81559, None, "fits"),
    ("tenant-c", 81920, None, "1/1 CardInsufficientMemory"),
    ("tenant-c", 1024, ["H100"], "fits"),
    ("tenant-c", 1024, ["A100"], "1/1 CardTypeMismatch"),
]


@pytest.mark.parametrize(("tenant", "mib", "types", "verdict"), EDGES)
def test_requests_at_the_edge_of_a_card_get_the_same_verdict_in_every_mode(
    registers: dict[str, dict[str, list[dict[str, Any]]]], tenant: str, mib: int, types: list[str] | None, verdict: str
) -> None:
    workload = {"name": "edge", "containers": [{"gpus": 1, "gpumemMiB": mib, "gpucores": 0}],
                **({"useGpuType": types} if types else {})}
    for mode, config in _stacks().items():
        alone = _alone(config, workload, tenant)
        verdicts, _ = _outcome(alone, registers[mode])
        assert verdicts == {("edge", 0): verdict}, mode


def test_the_verdicts_do_not_depend_on_the_order_hami_registers_cards() -> None:
    """register.go ranges over a Go map: on sim-nvml and real hosts the register order changes between
    registrations. Fit and per-node totals must not depend on it (which card among equals may)."""
    config = _with_tenant_c(gpu_config(), "gpu-h100-01")
    config["tenants"][1]["gpus"] = [{"model": "NVIDIA L4", "count": 4}]
    nvml = hami_register.real_host_nvml("gpu-l4-01", config["tenants"][1]["gpus"])
    registers = _real_registers(config)
    outcomes = set()
    for order in itertools.permutations(range(4)):
        registers["gpu-l4-01"] = hami_register.register(nvml, order)
        verdicts, totals = _outcome(config, registers)
        outcomes.add((tuple(sorted(verdicts.items())), tuple(sorted(totals.items()))))
    assert len(outcomes) == 1


def _stack_file(tmp_path: Path, name: str, config: dict[str, Any]) -> str:
    path = tmp_path / f"Pulumi.{name}.yaml"
    # Credentials as a stack file holds them: encrypted by `pulumi config set --secret`.
    secure = {k: {"secure": "v1:AAAAAAAAAAA=:ciphertext"} if k in SECRET_KEYS else v for k, v in config.items()}
    path.write_text(yaml.safe_dump({"config": {f"gpu-tenancy:{k}": v for k, v in secure.items()}}))
    return str(path)


def test_the_example_promotions_change_no_plan() -> None:
    root = Path(__file__).resolve().parent.parent
    for source, target in (("dev", "gpu"), ("dev", "dev-nvml"), ("dev-nvml", "gpu")):
        assert promotion_plan.plan_changes(str(root / f"Pulumi.{source}.yaml"), str(root / f"Pulumi.{target}.yaml")) == []


def test_two_one_gpu_hosts_are_not_one_two_gpu_node(tmp_path: Path) -> None:
    dev = dev_config()
    dev["tenants"][1]["workloads"] = [{"name": "b-pair", "containers": [{"gpus": 2, "gpumemMiB": 1024}]}]
    gpu = copy.deepcopy(gpu_config())
    gpu["tenants"][1]["workloads"] = dev["tenants"][1]["workloads"]
    l4 = {"model": "NVIDIA L4", "count": 1}
    key = gpu["tenants"][1]["workers"][0]["hostKey"]  # the program refuses a worker without one
    gpu["tenants"][1]["workers"] = [
        {"name": "gpu-l4-01", "address": "10.20.0.12", "user": "ubuntu", "gpus": [l4], "hostKey": key},
        {"name": "gpu-l4-02", "address": "10.20.0.14", "user": "ubuntu", "gpus": [l4], "hostKey": key},
    ]
    lines = promotion_plan.plan_changes(_stack_file(tmp_path, "dev", dev), _stack_file(tmp_path, "gpu", gpu))
    assert lines == [
        "tenant tenant-b: cards node 1: 2 x NVIDIA L4 (23034 MiB) -> node 1: 1 x NVIDIA L4 (23034 MiB); "
        "node 2: 1 x NVIDIA L4 (23034 MiB)",
        "tenant tenant-b: b-pair replica 0: fits -> gpu-l4-01: NodeInsufficientDevice; gpu-l4-02: NodeInsufficientDevice",
        "tenant tenant-b: holds 2048 MiB, 0 % cores, 2 slots -> 0 MiB, 0 % cores, 0 slots",
    ]
    assert promotion_plan.main([_stack_file(tmp_path, "dev", dev), _stack_file(tmp_path, "gpu", gpu)]) == 1
    # The other way round: a tenant that held nothing before counts as holding 0 of each.
    lines = promotion_plan.plan_changes(_stack_file(tmp_path, "gpu", gpu), _stack_file(tmp_path, "dev", dev))
    assert lines[-1] == "tenant tenant-b: holds 0 MiB, 0 % cores, 0 slots -> 2048 MiB, 0 % cores, 2 slots"


def test_an_uncatalogued_card_declared_differently_is_named(tmp_path: Path) -> None:
    dev, gpu = dev_config(), copy.deepcopy(gpu_config())
    dev["tenants"][0]["gpus"] = [{"model": "NVIDIA RTX 9000", "memoryMiB": 98304, "count": 1}]
    gpu["tenants"][0]["gpus"] = [{"model": "NVIDIA RTX 9000", "memoryMiB": 97280, "count": 1}]
    lines = promotion_plan.plan_changes(_stack_file(tmp_path, "dev", dev), _stack_file(tmp_path, "gpu", gpu))
    assert lines[0] == (
        "tenant tenant-a: cards node 1: 1 x NVIDIA RTX 9000 (98304 MiB) -> node 1: 1 x NVIDIA RTX 9000 (97280 MiB)"
    )


# --------------------------------------------------------------------------- what the card order changes

_requests = st.builds(
    ContainerRequest,
    gpus=st.integers(1, 2),
    gpumem_mib=st.one_of(st.none(), st.integers(1, 24000)),
    gpumem_percentage=st.one_of(st.none(), st.integers(1, 100)),
    gpucores=st.one_of(st.none(), st.integers(0, 100)),
)


def _order_outcome(cards: list[Device], workloads: list[Workload]) -> tuple[Any, Any]:
    result = plan([Node("n", tuple(cards))], workloads)
    verdicts = sorted([((f.workload, f.replica), f.reason) for f in result.failures]
                      + [((p.workload, p.replica), "fits") for p in result.placements])
    return verdicts, (sum(p.mem_mib for p in result.placements), sum(p.cores for p in result.placements),
                      len(result.placements))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    cards=st.integers(2, 4),
    workloads=st.lists(st.tuples(st.lists(_requests, min_size=1, max_size=2), st.integers(1, 5), st.booleans()),
                       min_size=1, max_size=4),
)
def test_on_a_node_of_one_model_the_register_order_changes_no_verdict_and_no_total(
    cards: int, workloads: list[tuple[list[ContainerRequest], int, bool]]
) -> None:
    planned = [Workload(f"w{i}", tuple(cs), replicas=r, gpu_scheduler_policy="binpack" if b else "spread")
               for i, (cs, r, b) in enumerate(workloads)]
    outcomes = {
        repr(_order_outcome([Device(f"g{i}", "NVIDIA L4", 23034, index=i) for i in order], planned))
        for order in itertools.permutations(range(cards))
    }
    assert len(outcomes) == 1


def test_on_a_node_mixing_models_the_register_order_decides_where_a_whole_card_goes() -> None:
    """What `report` warns about: the scores of an idle L4 and an idle A100 tie for a whole-card request."""
    l4, a100 = Device("l4", "NVIDIA L4", 23034, index=0), Device("a100", "NVIDIA A100-SXM4-80GB", 81920, index=1)
    whole = [Workload("w", (ContainerRequest(gpus=1),))]
    assert _order_outcome([l4, a100], whole)[1] == (81920, 100, 1)
    assert _order_outcome([a100, l4], whole)[1] == (23034, 100, 1)
    assert "mix card models" in plan_cli.card_order_note([Node("n", (l4, a100))], "real")
    assert plan_cli.card_order_note([Node("n", (l4, a100))], "sim") == ""
    assert plan_cli.card_order_note([Node("n", (l4,))], None) == plan_cli.CARD_CHOICE_NOTE


def test_the_command_says_whether_the_plan_holds_and_exits_by_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dev = dev_config()
    source = _stack_file(tmp_path, "dev", dev)
    assert promotion_plan.main([source, source]) == 0
    assert capsys.readouterr().out == f"plan {source} -> {source}: holds\n"
    # A tenant-b workload added in the target, then only in the source: "not declared" on the side without it.
    changed = copy.deepcopy(dev)
    changed["tenants"][1]["workloads"] = [*changed["tenants"][1]["workloads"],
                                          {"name": "b-extra", "containers": [{"gpus": 1, "gpumemMiB": 1024,
                                                                              "gpucores": 30}]}]
    target = _stack_file(tmp_path, "dev2", changed)
    assert promotion_plan.main([source, target]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"plan {source} -> {target}: 2 change(s)"
    assert out[1] == "  - tenant tenant-b: b-extra replica 0: not declared -> fits"
    assert out[2].startswith("  - tenant tenant-b: holds ") and out[2].endswith(" slots")
    # 30 % more cores and one slot more than before, in the target.
    old, new = out[2].removeprefix("  - tenant tenant-b: holds ").split(" -> ")
    old_mib, old_cores, old_slots = (int(part.split()[0]) for part in old.split(", "))
    new_mib, new_cores, new_slots = (int(part.split()[0]) for part in new.split(", "))
    assert (new_mib - old_mib, new_cores - old_cores, new_slots - old_slots) == (1024, 30, 1)
    assert promotion_plan.plan_changes(target, source)[0] == "tenant tenant-b: b-extra replica 0: fits -> not declared"


def test_each_stacks_quota_decides_its_own_plan(tmp_path: Path) -> None:
    dev = dev_config()
    dev["tenants"][1]["quota"] = {}
    limited = copy.deepcopy(dev)
    limited["tenants"][1]["quota"] = {"limits.nvidia.com/gpu": 1}
    free, tight = _stack_file(tmp_path, "dev", dev), _stack_file(tmp_path, "tight", limited)
    assert [line for line in promotion_plan.plan_changes(free, tight) if "replica 1" in line] == [
        "tenant tenant-b: b-notebook replica 1: fits -> ResourceQuotaNotFit: limits.nvidia.com/gpu 1+1 > 1"]
    assert [line for line in promotion_plan.plan_changes(tight, free) if "replica 1" in line] == [
        "tenant tenant-b: b-notebook replica 1: ResourceQuotaNotFit: limits.nvidia.com/gpu 1+1 > 1 -> fits"]


def test_a_node_of_two_models_is_named_card_by_card(tmp_path: Path) -> None:
    dev = dev_config()
    mixed = copy.deepcopy(dev)
    mixed["tenants"][1]["gpus"] = [{"model": "NVIDIA L4", "count": 1}, {"model": "NVIDIA T4", "memoryMiB": 15360, "count": 1}]
    lines = promotion_plan.plan_changes(_stack_file(tmp_path, "dev", dev), _stack_file(tmp_path, "mixed", mixed))
    assert lines[0].endswith("-> node 1: 1 x NVIDIA L4 (23034 MiB) + 1 x NVIDIA T4 (15360 MiB)"), lines[0]


def test_the_commands_help_names_its_two_stack_files(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        promotion_plan.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Does the plan hold on promotion? The same tenants planned on the nodes of two stacks, compared." in out
    assert "the stack file promoted from, e.g. Pulumi.dev.yaml" in out
    assert "the stack file promoted to, e.g. Pulumi.gpu.yaml" in out


def test_a_tenant_on_one_side_only_has_no_cards_on_the_other(tmp_path: Path) -> None:
    def l4(index: int) -> dict[str, Any]:
        return {"id": f"GPU-{index}", "index": index, "count": 10, "devmem": 23034, "devcore": 100,
                "type": "NVIDIA L4", "numa": 0, "mode": "hami-core", "health": True}

    workloads = [{"name": "w", "tenant": "t", "replicas": 1, "containers": [{"gpus": 1, "gpumemMiB": 1000}]}]
    source, target = tmp_path / "source.json", tmp_path / "target.json"
    source.write_text(json.dumps({"workloads": workloads, "nodes": [
        {"name": "n1", "tenant": "t", "devices": [l4(0)]}, {"name": "u1", "tenant": "u", "devices": [l4(0)]}]}))
    target.write_text(json.dumps({"workloads": workloads, "nodes": [
        {"name": "n1", "tenant": "t", "devices": [l4(0)]}, {"name": "v1", "tenant": "v", "devices": [l4(0), l4(1)]}]}))
    assert promotion_plan.plan_changes(str(source), str(target)) == [
        "tenant u: cards node 1: 1 x NVIDIA L4 (23034 MiB) -> none",
        "tenant v: cards none -> node 1: 2 x NVIDIA L4 (23034 MiB)",
    ]
