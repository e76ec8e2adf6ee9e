"""Stack recordings shared between tests (tests/policy_support.py): made once, except while mutmut learns which
test reaches which function."""

from __future__ import annotations

import sys
import types

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
