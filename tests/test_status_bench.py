"""benchmarks/status_bench.py still runs standalone (its numbers are printed, not asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "status_bench.py"


def test_status_benchmark_runs_small() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "2", "8", "20"], capture_output=True, text=True,
                            timeout=300, cwd="/")
    assert result.returncode == 0, result.stderr
    assert re.search(r"views of 2 tenants x 8 GPUs x 20 pods \(36 slices, 4 pending\) built in [\d.]+ s", result.stdout)
    assert re.search(r"live path \(HTTP, 8 tenants at a time\) in [\d.]+ s", result.stdout), result.stdout
