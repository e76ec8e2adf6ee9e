"""`make mutation`'s score table (tests/mutation_scores.py) read from mutmut's per-file results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mutation_scores import main, module_rows


def _meta(mutants: Path, module: str, codes: dict[str, int | None]) -> None:
    path = mutants / f"{module}.meta"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code_by_key": codes, "durations_by_key": {}}))


def test_killed_survived_and_not_run_per_module(tmp_path: Path) -> None:
    # mutmut 3.8.1 mutmut/stats.py status_by_exit_code: 1 a test failed, 0 all passed (survived),
    # 36 timeout (counted killed: the mutant hangs), None not run.
    _meta(tmp_path, "gpu_tenancy/hami/protocol.py", {"a": 1, "b": 1, "c": 36, "d": 0, "e": None})
    assert module_rows(tmp_path, ["gpu_tenancy/hami/protocol.py", "policies/policy_common.py"]) == [
        ("gpu_tenancy/hami/protocol.py", 3, 1, 1),
        ("policies/policy_common.py", 0, 0, -1),
    ]


@pytest.mark.parametrize(("codes", "status"), [
    ({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1, "h": 1, "i": 1, "j": 0}, 0),  # 90 %
    ({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 0}, 1),  # 83.3 %
    ({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 0, "g": None, "h": None}, 1),  # not run does not help
])
def test_fails_under_the_threshold_of_the_mutants_run(tmp_path: Path, codes: dict[str, int | None], status: int,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _meta(tmp_path, "gpu_tenancy/builders/metallb/netpool.py", codes)
    assert main(["--mutants", str(tmp_path), "--fail-under", "85", "gpu_tenancy/builders/metallb/netpool.py"]) == status
    out = capsys.readouterr().out
    assert ("below 85%: gpu_tenancy/builders/metallb/netpool.py" in out) == bool(status)


def test_a_module_not_run_yet_is_shown_and_does_not_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--mutants", str(tmp_path), "--fail-under", "85", "gpu_tenancy/contract/config.py"]) == 0
    assert "gpu_tenancy/contract/config.py" in capsys.readouterr().out
