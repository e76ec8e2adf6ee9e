"""benchmarks/status_bench.py still runs standalone and prints both ratios (printed, never asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "status_bench.py"
RATIO = r"ratio [\d.]+x wall, [\d.]+x CPU"


def test_status_benchmark_runs_small() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "2", "8", "20"], capture_output=True, text=True,
                            timeout=300, cwd="/")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"^2 tenants x 8 GPUs x 20 pods \(36 slices, 4 pending\)", out, re.M), out
    assert re.search(r"^offline `status --objects`: .*interpreter start \+ json.load of the same file.*" + RATIO, out,
                     re.M), out
    assert re.search(r"^live `status` \(HTTP, 8 tenants at a time\): .*the same pages fetched and decoded.*" + RATIO,
                     out, re.M), out
