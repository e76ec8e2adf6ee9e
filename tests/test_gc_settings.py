"""The program defers full garbage collections while it runs, and the test suite keeps its own settings."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from gpu_tenancy.gc_settings import FULL_COLLECTION_EVERY, defer_full_collections
from tests import harness


def test_defer_keeps_young_collections_and_restore_puts_everything_back() -> None:
    before = gc.get_threshold()
    restore = defer_full_collections()
    try:
        assert gc.get_threshold() == (before[0], before[1], FULL_COLLECTION_EVERY)
        assert gc.isenabled()
    finally:
        restore()
    assert gc.get_threshold() == before


def test_the_program_runs_with_full_collections_deferred_and_the_suite_gets_its_settings_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[int, int, int]] = []
    register = harness.LabMocks.new_resource

    def probe(self: harness.LabMocks, args: Any) -> Any:
        seen.append(gc.get_threshold())
        return register(self, args)

    monkeypatch.setattr(harness.LabMocks, "new_resource", probe)
    before = gc.get_threshold()
    assert before[2] != FULL_COLLECTION_EVERY
    harness.record_stack()
    assert seen and {threshold[2] for threshold in seen} == {FULL_COLLECTION_EVERY}
    assert gc.get_threshold() == before
