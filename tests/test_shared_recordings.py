"""Stack recordings shared between tests (tests/policy_support.py): made once, except while mutmut learns which
test reaches which function."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import policy_support
import pytest
from policy_support import shared_recording


def test_a_recording_is_made_once_and_per_test_while_mutmut_collects_its_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[object] = []

    @shared_recording
    def recording() -> object:
        made.append(object())
        return made[-1]

    # Whatever runs this test (mutmut included), it sees the mutant name set here.
    trampoline = types.ModuleType("mutmut.mutation.trampoline")
    monkeypatch.setitem(sys.modules, "mutmut.mutation.trampoline", trampoline)
    trampoline.get_mutant_under_test = lambda: ""  # type: ignore[attr-defined]
    assert recording() is recording() and len(made) == 1
    trampoline.get_mutant_under_test = lambda: "stats"  # type: ignore[attr-defined]
    assert recording() is not recording() and len(made) == 3
    trampoline.get_mutant_under_test = lambda: "gpu_tenancy.x_f__mutmut_1"  # type: ignore[attr-defined]
    assert recording() is made[0]


def _mutant(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    trampoline = types.ModuleType("mutmut.mutation.trampoline")
    trampoline.get_mutant_under_test = lambda: name  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mutmut.mutation.trampoline", trampoline)


def _new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a mutant's fresh process starts with: no recording in memory."""
    monkeypatch.setattr(policy_support, "_CACHE", {})


def _program(root: Path) -> Path:
    """A repository whose program imports components/worker.py, which imports gpu_tenancy/contract/config.py."""
    for name, text in {
        "__main__.py": "from components import worker\n",
        "components/worker.py": "from gpu_tenancy.contract.config import load_config\n",
        "gpu_tenancy/contract/config.py": "def load_config(): ...\n",
        "gpu_tenancy/hami/planner/fit.py": "def card_fits(): ...\n",
        "tests/harness.py": "import recorder\n",
        "tests/recorder.py": "from gpu_tenancy.hami import protocol\n",
        "gpu_tenancy/hami/protocol.py": "",
        "tests/policy_support.py": "",
        "policies/gpu_lib.py": "from gpu_tenancy.hami.planner import fit\n",
        **{f"{package}/__init__.py": "" for package in (
            "components", "gpu_tenancy", "gpu_tenancy/contract", "gpu_tenancy/hami", "gpu_tenancy/hami/planner")},
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / "components" / "worker.py"


def test_the_program_reaches_what_it_and_its_recorder_import(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(policy_support, "REPO", tmp_path)
    _program(tmp_path)
    assert policy_support.program_modules() == {
        "components", "components.worker", "gpu_tenancy", "gpu_tenancy.contract", "gpu_tenancy.contract.config",
        "tests.recorder", "gpu_tenancy.hami", "gpu_tenancy.hami.protocol"}


def test_the_real_program_reaches_its_components_and_contract_not_the_pack_planner_or_commands() -> None:
    reached = policy_support.program_modules()
    assert {"components.worker", "gpu_tenancy.contract.config", "gpu_tenancy.hami.protocol",
            "gpu_tenancy.builders.worker.worker_join"} <= reached
    assert not [m for m in reached if m.startswith(("policies", "gpu_tenancy.cli", "gpu_tenancy.hami.planner"))]


def test_mutants_the_program_cannot_reach_share_one_recording_on_disk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(policy_support, "REPO", tmp_path)
    program = _program(tmp_path)
    made: list[str] = []

    def record() -> str:
        made.append(f"recording {len(made)}")
        return made[-1]

    for mutant in ("policies.gpu_lib.x_card_fits__mutmut_3", "gpu_tenancy.hami.planner.fit.x_card_fits__mutmut_1"):
        _mutant(monkeypatch, mutant)
        _new_process(monkeypatch)
        assert policy_support._once("dev", record) == "recording 0"
    assert made == ["recording 0"]

    program.write_text("from gpu_tenancy.contract.config import load_config  # changed\n")
    _new_process(monkeypatch)  # a changed program is recorded again
    assert policy_support._once("dev", record) == "recording 1"

    # A mutant in what the program runs changes what it registers: recorded in each process.
    for mutant, expected in (("components.worker.xǁWorkerǁ__init____mutmut_1", "recording 2"),
                             ("gpu_tenancy.contract.config.x_load_config__mutmut_1", "recording 3"),
                             ("gpu_tenancy.hami.protocol.x_device_type__mutmut_2", "recording 4")):
        _mutant(monkeypatch, mutant)
        _new_process(monkeypatch)
        assert policy_support._once("dev", record) == expected
    assert len(list(tmp_path.rglob("*.pickle"))) == 2


def test_a_recording_hangs_under_its_own_stack_whatever_was_recorded_before() -> None:
    """Each `pulumi up` has its own root Stack; the SDK's mocks keep the first one of the process unless reset,
    so the order tests run in decided the URNs the pack saw."""
    policy_support.record_engine_view(stack="other")
    recorded = policy_support.record_engine_view()
    tenant = policy_support.find(recorded, "gpu-tenancy:tenant:Tenant", "tenant-a")
    assert tenant.parent == "urn:pulumi:dev::gpu-tenancy::pulumi:pulumi:Stack::gpu-tenancy-dev"
    assert tenant.urn == "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant::tenant-a"
