"""Property tests run derandomised (the same examples on every run, in CI and locally), so a verdict never depends
on the seed; HYPOTHESIS_PROFILE=local draws fresh ones, with more examples (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

PROBE = """
import sys
sys.path.insert(0, {tests!r})
import conftest
from hypothesis import settings
print(settings().derandomize, settings().max_examples, settings().database is None)
"""


def _active_profile(**environment: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE")} | environment
    result = subprocess.run([sys.executable, "-c", PROBE.format(tests=str(TESTS))], env=env, capture_output=True,
                            text=True, check=True, cwd=TESTS.parent)
    return result.stdout.split()


@pytest.mark.parametrize("ci", ["true", ""])
def test_the_properties_run_derandomised_without_an_example_database(ci: str) -> None:
    assert _active_profile(CI=ci) == ["True", "100", "True"]


def test_the_local_profile_is_randomised_with_more_examples() -> None:
    assert _active_profile(HYPOTHESIS_PROFILE="local") == ["False", "400", "False"]
