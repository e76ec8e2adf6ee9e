from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpu_tenancy.plan_cli", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_dev_fits() -> None:
    r = run("plan", "examples/plan-dev.json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fits"] is True


def test_overcommit_fails() -> None:
    r = run("plan", "examples/plan-overcommit.json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    reasons = {f["reason"] for f in out["failures"]}
    assert "1/1 CardInsufficientCore" in reasons and "NodeInsufficientDevice" in reasons


def test_report_png(tmp_path: Path) -> None:
    png = tmp_path / "u.png"
    r = run("report", "examples/plan-dev.json", "--png", str(png))
    assert r.returncode == 0, r.stderr
    assert png.stat().st_size > 0 and "GPU-a100-0" in r.stdout
