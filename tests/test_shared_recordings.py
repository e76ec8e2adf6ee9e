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


def test_mutants_of_the_policy_pack_share_one_recording_on_disk(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(policy_support, "REPO", tmp_path)
    (tmp_path / "__main__.py").write_text("program")
    (tmp_path / "components").mkdir()
    program = tmp_path / "components" / "worker.py"
    program.write_text("before")
    made: list[str] = []

    def record() -> str:
        made.append(f"recording {len(made)}")
        return made[-1]

    _mutant(monkeypatch, "policies.gpu_lib.x_card_fits__mutmut_3")
    for _ in range(2):
        _new_process(monkeypatch)
        assert policy_support._once("dev", record) == "recording 0"
    assert made == ["recording 0"]

    program.write_text("after")  # a changed program is recorded again
    _new_process(monkeypatch)
    assert policy_support._once("dev", record) == "recording 1"

    # A mutant of the program itself changes what the program registers: recorded in each process.
    _mutant(monkeypatch, "gpu_tenancy.contract.addressing.x_pool__mutmut_1")
    for expected in ("recording 2", "recording 3"):
        _new_process(monkeypatch)
        assert policy_support._once("dev", record) == expected
    assert len(list(tmp_path.rglob("*.pickle"))) == 2
