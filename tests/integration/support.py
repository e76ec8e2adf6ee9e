"""Pure helpers for the e2e suite: polling, HAMi annotation parsing, event filtering, timings.

Nothing here performs I/O at import time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

NODE_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
DEVICES_ALLOCATED_ANNOTATION = "hami.io/vgpu-devices-allocated"
FILTERING_FAILED_REASON = "FilteringFailed"


class WaitTimeout(AssertionError):
    """Raised when a polled condition did not hold before its deadline."""


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    message: str,
    interval_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``probe`` until it returns a truthy value; raise WaitTimeout naming ``message``."""
    deadline = clock() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            result = probe()
            if result:
                return result
        except Exception as error:  # transient API errors are retried
            last_error = error
        if clock() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise WaitTimeout(f"timed out after {timeout_s:.0f}s waiting for {message}{detail}")
        sleep(interval_s)


def parse_register_annotation(value: str) -> list[dict[str, Any]]:
    """Parse ``hami.io/node-nvidia-register`` (JSON list of DeviceInfo, HAMi >= 2.8)."""
    devices = json.loads(value)
    if not isinstance(devices, list):
        raise ValueError(f"{NODE_REGISTER_ANNOTATION} must be a JSON list, got {type(devices).__name__}")
    return [dict(device) for device in devices]


def parse_devices_allocated(value: str) -> list[list[dict[str, Any]]]:
    """Parse ``hami.io/vgpu-devices-allocated``: ``UUID,NVIDIA,<mem>,<cores>:`` per device, ``;`` per container."""
    if not value.strip():
        return []
    containers: list[list[dict[str, Any]]] = []
    for container_part in value.split(";"):
        devices: list[dict[str, Any]] = []
        for device_part in container_part.split(":"):
            if not device_part.strip():
                continue
            fields = device_part.split(",")
            if len(fields) != 4:
                raise ValueError(f"{DEVICES_ALLOCATED_ANNOTATION}: malformed device entry {device_part!r}")
            uuid, vendor, memory, cores = fields
            devices.append({"uuid": uuid, "type": vendor, "usedmem": int(memory), "usedcores": int(cores)})
        containers.append(devices)
    # A trailing ';' produces one empty element after the last container.
    if containers and value.endswith(";") and not containers[-1]:
        containers.pop()
    return containers


def filtering_failed_messages(events: Iterable[Mapping[str, Any]], pod_name: str) -> list[str]:
    """Messages of FilteringFailed events about ``pod_name`` from event dicts (``involvedObject`` + ``reason``)."""
    messages: list[str] = []
    for event in events:
        involved = event.get("involvedObject") or event.get("involved_object") or {}
        if event.get("reason") == FILTERING_FAILED_REASON and involved.get("name") == pod_name:
            messages.append(str(event.get("message", "")))
    return messages


def ipv4_in_range(address: str, address_range: str) -> bool:
    """True if ``address`` (optionally ``ip:port``) lies inside the inclusive range ``"a-b"``."""
    import ipaddress

    host = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
    start, end = (ipaddress.IPv4Address(part.strip()) for part in address_range.split("-", 1))
    return start <= ipaddress.IPv4Address(host) <= end


@dataclass
class StageTimings:
    """Wall time per named stage, in insertion order."""

    clock: Callable[[], float] = time.monotonic
    seconds_by_stage: dict[str, float] = field(default_factory=dict)

    def record(self, stage: str, seconds: float) -> None:
        self.seconds_by_stage[stage] = round(seconds, 3)

    def measure(self, stage: str, action: Callable[[], T]) -> T:
        started = self.clock()
        try:
            return action()
        finally:
            self.record(stage, self.clock() - started)

    def to_json(self) -> str:
        return json.dumps(self.seconds_by_stage, indent=2)

    def summary_table(self) -> str:
        width = max([len("stage"), *(len(name) for name in self.seconds_by_stage)])
        lines = [f"{'stage':<{width}}  seconds", f"{'-' * width}  -------"]
        lines += [f"{name:<{width}}  {secs:7.1f}" for name, secs in self.seconds_by_stage.items()]
        return "\n".join(lines)


REQUIRED_TOOLS = ("pulumi", "kind", "kubectl")


def missing_prerequisites(which: Callable[[str], str | None], docker_reachable: Callable[[], bool]) -> list[str]:
    """Names of missing prerequisites: 'docker' (engine not reachable) and each tool not on PATH."""
    missing = [] if which("docker") and docker_reachable() else ["docker (engine reachable via `docker info`)"]
    return missing + [tool for tool in REQUIRED_TOOLS if which(tool) is None]
