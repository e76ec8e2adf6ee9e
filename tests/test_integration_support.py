"""Offline tests of tests/integration/support.py and of the e2e skip path."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.support import (
    StageTimings,
    WaitTimeout,
    filtering_failed_messages,
    ipv4_in_range,
    missing_prerequisites,
    parse_devices_allocated,
    parse_register_annotation,
    wait_for,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_wait_for_returns_first_truthy_value() -> None:
    clock = FakeClock()
    answers = iter([None, "", "ready"])
    assert wait_for(lambda: next(answers), timeout_s=10, message="x", clock=clock, sleep=clock.sleep) == "ready"


def test_wait_for_times_out_with_message_and_last_error() -> None:
    clock = FakeClock()

    def failing() -> None:
        raise RuntimeError("connection refused")

    with pytest.raises(WaitTimeout, match=r"timed out after 5s waiting for pod x.*connection refused"):
        wait_for(failing, timeout_s=5, message="pod x", clock=clock, sleep=clock.sleep)


def test_parse_register_annotation() -> None:
    value = json.dumps([{"id": "GPU-0", "count": 10, "devmem": 81920, "type": "NVIDIA-A100-SXM4-80GB", "health": True}])
    assert parse_register_annotation(value)[0]["devmem"] == 81920
    with pytest.raises(ValueError, match="node-nvidia-register"):
        parse_register_annotation("{}")


def test_parse_devices_allocated_per_container() -> None:
    parsed = parse_devices_allocated("GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;GPU-c,NVIDIA,100,0:;")
    assert [[d["uuid"] for d in c] for c in parsed] == [["GPU-a", "GPU-b"], ["GPU-c"]]
    assert parsed[0][0] == {"uuid": "GPU-a", "type": "NVIDIA", "usedmem": 3000, "usedcores": 30}
    assert parse_devices_allocated("") == []
    with pytest.raises(ValueError, match="malformed"):
        parse_devices_allocated("GPU-a,NVIDIA:;")


def test_filtering_failed_messages_selects_reason_and_pod() -> None:
    events = [
        {"reason": "FilteringFailed", "involved_object": {"name": "p"}, "message": "1 nodes CardInsufficientMemory(n)"},
        {"reason": "FilteringFailed", "involvedObject": {"name": "other"}, "message": "no"},
        {"reason": "Scheduled", "involvedObject": {"name": "p"}, "message": "no"},
    ]
    assert filtering_failed_messages(events, "p") == ["1 nodes CardInsufficientMemory(n)"]


def test_ipv4_in_range_accepts_host_port() -> None:
    assert ipv4_in_range("172.18.255.201:6443", "172.18.255.200-172.18.255.250")
    assert not ipv4_in_range("172.18.0.5", "172.18.255.200-172.18.255.250")


def test_stage_timings_table_and_json() -> None:
    clock = FakeClock()
    timings = StageTimings(clock=clock)
    timings.measure("cluster", lambda: clock.sleep(12.5))
    timings.record("destroy", 3)
    assert json.loads(timings.to_json()) == {"cluster": 12.5, "destroy": 3}
    assert "cluster     12.5" in timings.summary_table()


def test_missing_prerequisites_names_each_tool() -> None:
    missing = missing_prerequisites(lambda tool: None if tool in {"docker", "pulumi"} else f"/bin/{tool}", lambda: True)
    assert missing == ["docker (engine reachable via `docker info`)", "pulumi"]
    assert missing_prerequisites(lambda tool: f"/bin/{tool}", lambda: False)[0].startswith("docker")


def _path_without(*tools: str) -> str:
    keep = []
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not any((Path(directory) / tool).exists() for tool in tools):
            keep.append(directory)
    return os.pathsep.join(keep)


def test_e2e_opt_in_skips_and_names_missing_tools() -> None:
    env = {**os.environ, "PATH": _path_without("docker", "pulumi"), "GPU_TENANCY_E2E": ""}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/integration", "-m", "e2e", "-rs", "-q", "-p", "no:cacheprovider"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(r"\b0 passed\b", output) is None and " passed" not in output, output
    skipped = re.search(r"(\d+) skipped", output)
    assert skipped and int(skipped.group(1)) >= 13, output
    assert "e2e prerequisites missing" in output and "docker" in output and "pulumi" in output, output
