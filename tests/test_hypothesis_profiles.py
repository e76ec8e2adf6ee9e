"""Property tests run derandomised in CI (`.ci/run`, where CI=true): the same examples on every run, so a
verdict never depends on the seed; locally they are randomised with more examples (tests/conftest.py)."""

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


def test_ci_runs_the_properties_derandomised_without_an_example_database() -> None:
    assert _active_profile(CI="true") == ["True", "100", "True"]


def test_a_local_run_is_randomised_with_more_examples() -> None:
    assert _active_profile() == ["False", "400", "False"]


@pytest.mark.parametrize("profile", ["ci", "local"])
def test_hypothesis_profile_picks_either_explicitly(profile: str) -> None:
    assert _active_profile(CI="true", HYPOTHESIS_PROFILE=profile)[0] == str(profile == "ci")
