"""The benchmark scripts still run as `make bench` runs them (numbers are printed, not asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize(
    ("script", "args", "output"),
    [
        ("program_eval.py", ["1", "2", "--repeat", "1"], r"^\s+2\s+\d+(\s+[\d.]+){7}$"),
        ("agent_reconcile.py", [], r"reconciled 100 nodes / 1000 pods in [\d.]+ ms"),
        ("planner_bench.py", ["--repeat", "1"],
         r"placed 10000 failed 0 in [\d.]+ s\n100,000 replicas \(10 workloads\) over 10,000 GPUs: placed 100000 "
         r"failed 0 in [\d.]+ s, [\d.]+x the time"),
    ],
)
def test_benchmark_runs_standalone(script: str, args: list[str], output: str) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True, timeout=300, cwd="/"
    )
    assert result.returncode == 0, result.stderr
    assert re.search(output, result.stdout, re.MULTILINE), result.stdout


def test_the_default_tenant_counts_are_stacks_the_program_accepts() -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import program_eval
    finally:
        sys.path.remove(str(BENCHMARKS))
    from gpu_tenancy.contract.config import load_config

    for count in program_eval.DEFAULT_COUNTS:
        assert len(load_config(program_eval.config_for(count)).tenants) == count


def test_more_tenants_than_a_stack_may_declare_is_refused_in_one_line() -> None:
    result = subprocess.run([sys.executable, str(BENCHMARKS / "program_eval.py"), "10", "300"], capture_output=True,
                            text=True, timeout=120, cwd="/")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith(
        "tenant counts must be 1 to 100: a stack declares at most 100 tenants"), result.stderr
