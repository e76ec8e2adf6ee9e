"""Helpers for the live fault checks (test_faults.py): run `pulumi` as a user does and interrupt it at a given
step, read what a preview would change, and run `make doctor` against the throwaway stack.

The pure parts (event-log reading, change extraction) are unit-tested offline (tests/test_integration_faults.py).
Engine events follow pulumi v3.272 `sdk/go/common/apitype/events.go` as `pulumi --event-log` writes them: one
JSON object per line, a step's start as `resourcePreEvent.metadata` with `op` and `urn`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a step that creates something is called in the engine's events (apitype.OpType).
CREATING_OPS = ("create", "create-replacement", "replace")
# Steps that change nothing (a preview showing only these shows no changes).
UNCHANGED_OPS = ("same", "read", "refresh", "discard", "read-discard")


def step_started(event_lines: Iterable[str], name: str, ops: tuple[str, ...] = CREATING_OPS) -> str | None:
    """The URN of the first step in `ops` on a resource named `name` (the URN's last part), if one started."""
    for line in event_lines:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line still being written
        metadata = (event.get("resourcePreEvent") or {}).get("metadata") or {}
        urn = str(metadata.get("urn") or "")
        if metadata.get("op") in ops and urn.rsplit("::", 1)[-1] == name:
            return urn
    return None


def step_finished(event_lines: Iterable[str], urn: str) -> bool:
    """Whether the step on `urn` completed: the engine wrote its outputs (`resOutputsEvent`). A step cut off by
    the interrupt has a start and no outputs (a failure, `resOpFailedEvent`, is not a completion)."""
    for line in event_lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        metadata = (event.get("resOutputsEvent") or {}).get("metadata") or {}
        if metadata.get("urn") == urn:
            return True
    return False


def changes(events: Iterable[Any]) -> list[str]:
    """'<op> <urn>' of every step an Automation API preview or up reports that changes something."""
    found = []
    for event in events:
        step = getattr(event, "resource_pre_event", None)
        if step is None:
            continue
        op = getattr(step.metadata.op, "value", step.metadata.op)
        if op not in UNCHANGED_OPS:
            found.append(f"{op} {step.metadata.urn}")
    return found


@dataclass
class Interrupted:
    urn: str | None  # the step that had started when the run was interrupted (None: it finished or failed first)
    returncode: int
    log: str
    finished: bool = False  # that step completed anyway: the interrupt came too late to cut it off

    @property
    def cut_off(self) -> bool:
        """The interrupt landed inside the step: what the documented recovery is for."""
        return self.urn is not None and not self.finished


def pulumi_env(workspace_env: Mapping[str, str]) -> dict[str, str]:
    return {**os.environ, **workspace_env}


def interrupt_up_at(
    stack: str,
    name: str,
    cwd: Path,
    env: Mapping[str, str],
    log_dir: Path,
    policy_pack: Path,
    timeout_s: float = 1800,
    clock: Callable[[], float] = time.monotonic,
) -> Interrupted:
    """`pulumi up` as `make up` runs it, interrupted with Ctrl-C twice (SIGINT: cancel, then terminate) as soon
    as the step creating `name` has started; twice, so that the step itself is cut off and left pending."""
    event_log = log_dir / f"interrupt-{name}.events.jsonl"
    output = log_dir / f"interrupt-{name}.log"
    event_log.unlink(missing_ok=True)
    command = ["pulumi", "up", "--stack", stack, "--yes", "--skip-preview", "--non-interactive", "--refresh",
               "--policy-pack", str(policy_pack), "--event-log", str(event_log)]
    with output.open("w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
        deadline = clock() + timeout_s
        urn = None
        while process.poll() is None and clock() < deadline:
            if event_log.exists():
                urn = step_started(event_log.read_text().splitlines(), name)
                if urn:
                    # The step has started: cancel, then terminate, so that it is cut off where it is.
                    process.send_signal(signal.SIGINT)
                    time.sleep(0.5)
                    if process.poll() is None:
                        process.send_signal(signal.SIGINT)
                    break
            time.sleep(0.2)
        try:
            process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    finished = bool(urn) and event_log.exists() and step_finished(event_log.read_text().splitlines(), str(urn))
    return Interrupted(urn, process.returncode, output.read_text(), finished)


def run_doctor(stack: str, cwd: Path, env: Mapping[str, str], *args: str, stack_file: Path | None = None,
               state_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`make doctor` for the throwaway stack (its stack file and backend come from the workspace env)."""
    command = [sys.executable, "-m", "gpu_tenancy", "doctor", "--stack", stack, *args]
    if stack_file is not None:
        command += ["--stack-file", str(stack_file)]
    if state_dir is not None:
        command += ["--state-dir", str(state_dir)]
    return subprocess.run(command, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=600)


def doctor_problems(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.removeprefix("problem: ") for line in result.stdout.splitlines() if line.startswith("problem: ")]


# `make doctor`'s lab and state subjects (gpu_tenancy/cli/doctor/lab.py); the host's (inotify, proxy, ...) are what
# the runner brings and are not the lab's to recover.
LAB_SUBJECTS = ("container ", "tenant ", "management cluster", "kind cluster", "stack ")


def lab_problems(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in doctor_problems(result) if line.startswith(LAB_SUBJECTS)]


def documented_helm_fix(problem: str) -> list[str] | None:
    """The `kubectl -n <ns> delete secret <record>` a pending-Helm-release problem names, as argv (kubeconfig
    to be added by the caller)."""
    marker = "`kubectl -n "
    if "Helm release" not in problem or marker not in problem:
        return None
    command = problem.split(marker, 1)[1].split("`", 1)[0]
    return ["kubectl", "-n", *command.split()]
