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
    """Wall time per named stage, in insertion order.

    ``seconds`` is the stage's duration; ``finished_at`` (optional) is when it completed, in seconds
    since the run started, which is what matters for stages that overlap (MetalLB and Kamaji deploy
    in parallel).
    """

    clock: Callable[[], float] = time.monotonic
    seconds_by_stage: dict[str, float] = field(default_factory=dict)
    finished_at_by_stage: dict[str, float] = field(default_factory=dict)

    def record(self, stage: str, seconds: float, finished_at: float | None = None) -> None:
        self.seconds_by_stage[stage] = round(seconds, 3)
        if finished_at is not None:
            self.finished_at_by_stage[stage] = round(finished_at, 3)

    def measure(self, stage: str, action: Callable[[], T]) -> T:
        started = self.clock()
        try:
            return action()
        finally:
            self.record(stage, self.clock() - started)

    def to_json(self) -> str:
        stages = {
            name: {"seconds": secs, "finished_at_s": self.finished_at_by_stage.get(name)}
            for name, secs in self.seconds_by_stage.items()
        }
        return json.dumps({"unit": "seconds", "stages": stages}, indent=2)

    def summary_table(self) -> str:
        width = max([len("stage"), *(len(name) for name in self.seconds_by_stage)])
        lines = [f"{'stage':<{width}}  seconds  done at", f"{'-' * width}  -------  -------"]
        for name, secs in self.seconds_by_stage.items():
            done = self.finished_at_by_stage.get(name)
            lines.append(f"{name:<{width}}  {secs:7.1f}  {'' if done is None else f'{done:7.1f}'}")
        return "\n".join(lines)


# Top-level component types of the program (__main__.py) and the stage each one is.
STAGE_BY_COMPONENT_TYPE = {
    "gpu-tenancy:kind_cluster:KindCluster": "cluster",
    "gpu-tenancy:metallb:MetalLB": "MetalLB",
    "gpu-tenancy:kamaji:Kamaji": "Kamaji",
}
TENANT_COMPONENT_TYPE = "gpu-tenancy:tenant:Tenant"


def tenant_stage(tenant: str) -> str:
    return f"tenant {tenant} ready"


def stage_for_urn(urn: str, tenants: Iterable[str]) -> str | None:
    """The deployment stage a resource belongs to, from its URN's top-level component type.

    URN: ``urn:pulumi:<stack>::<project>::<parent types joined by $>::<name>``. Tenant children are
    named ``<tenant>-...`` by the Tenant component, so the longest matching tenant prefix wins.
    """
    parts = urn.split("::")
    if len(parts) < 4:
        return None
    type_chain, name = parts[2], "::".join(parts[3:])
    top = type_chain.split("$", 1)[0]
    if top in STAGE_BY_COMPONENT_TYPE:
        return STAGE_BY_COMPONENT_TYPE[top]
    if top == "pulumi:providers:kubernetes" and name == "management":
        return "cluster"
    if top == TENANT_COMPONENT_TYPE:
        owners = [t for t in tenants if name == t or name.startswith(f"{t}-")]
        if owners:
            return tenant_stage(max(owners, key=len))
    return None


class UpProgress:
    """Turns `pulumi up` engine events into stage timings: first step started -> last step done."""

    def __init__(self, tenants: Iterable[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.tenants = list(tenants)
        self.clock = clock
        self.started = clock()
        self.first_start: dict[str, float] = {}
        self.last_done: dict[str, float] = {}

    def __call__(self, event: Any) -> None:
        for attribute, is_start in (("resource_pre_event", True), ("res_outputs_event", False)):
            step = getattr(event, attribute, None)
            if step is None:
                continue
            stage = stage_for_urn(step.metadata.urn, self.tenants)
            if stage is None:
                continue
            now = self.clock() - self.started
            if is_start:
                self.first_start.setdefault(stage, now)
            else:
                self.last_done[stage] = now

    def record_into(self, timings: StageTimings) -> None:
        for stage in ["cluster", "MetalLB", "Kamaji", *(tenant_stage(t) for t in self.tenants)]:
            if stage in self.last_done:
                started = self.first_start.get(stage, 0.0)
                timings.record(stage, self.last_done[stage] - started, finished_at=self.last_done[stage])


REQUIRED_TOOLS = ("pulumi", "kind", "kubectl")


def missing_prerequisites(which: Callable[[str], str | None], docker_reachable: Callable[[], bool]) -> list[str]:
    """Names of missing prerequisites: 'docker' (engine not reachable) and each tool not on PATH."""
    if which("docker") is None:
        missing = ["docker (CLI not on PATH)"]
    elif not docker_reachable():
        missing = ["docker (engine not reachable via `docker info`)"]
    else:
        missing = []
    return missing + [tool for tool in REQUIRED_TOOLS if which(tool) is None]


def conflicting_clusters(kind_clusters: Iterable[str], own_prefix: str = "gpu-tenancy-") -> list[str]:
    """kind clusters of other gpu-tenancy stacks: they share the kind network and the MetalLB pool."""
    return sorted(name for name in kind_clusters if name.startswith(own_prefix))


def opted_in(markexpr: str, env_value: str | None) -> bool:
    """True if the run selects the e2e marker (`-m e2e`, `-m "e2e and not slow"`) or GPU_TENANCY_E2E=1."""
    if env_value == "1":
        return True
    if not markexpr.strip():
        return False
    try:
        from _pytest.mark.expression import Expression

        return bool(Expression.compile(markexpr).evaluate(lambda name, **_: name == "e2e"))
    except Exception:
        return False


def worker_nodes(outputs: Mapping[str, Any], tenant: str) -> list[str]:
    """A tenant's node names from the stack output ``tenants.<t>.nodes``."""
    entry = (outputs.get("tenants") or {}).get(tenant) or {}
    if entry.get("nodes"):
        return [str(node) for node in entry["nodes"]]
    raise AssertionError(f"stack outputs name no node for tenant {tenant!r} (tenants.{tenant}.nodes)")


def stack_resources_left(container_names: Iterable[str], network_names: Iterable[str], cluster: str) -> list[str]:
    """What a destroyed stack left behind on the Docker host: containers and networks named after it."""
    left = [f"container {name}" for name in container_names if name.startswith(f"{cluster}-")]
    left += [f"network {name}" for name in network_names if name.startswith(cluster)]
    return left


MANDATORY = "mandatory"  # apitype.Mandatory; advisory violations are "advisory" (pulumi sdk/go/common/apitype)


class PolicyGateError(AssertionError):
    """The preview before an Automation API `up` failed or reported a mandatory policy violation."""


def mandatory_violations(events: Iterable[Any]) -> list[str]:
    """One line per mandatory policy violation among Automation API engine events (``event.policy_event``)."""
    lines = []
    for event in events:
        policy = getattr(event, "policy_event", None)
        if policy is not None and policy.enforcement_level == MANDATORY:
            where = f" ({policy.resource_urn})" if policy.resource_urn else ""
            lines.append(f"{policy.policy_pack_name}/{policy.policy_name}: {policy.message.strip()}{where}")
    return lines


def preview_then_up(
    stack: Any,
    policy_packs: list[str],
    on_output: Callable[[str], Any],
    on_event: Callable[[Any], Any] | None = None,
) -> Any:
    """`pulumi up` as the CLI runs it: a preview with the policy packs first, no update if it fails.

    The Automation API's ``Stack.up`` runs ``pulumi up --yes --skip-preview`` (pulumi 3.272.0
    ``pulumi/automation/_stack.py``), and the engine analyzes stack policies only once every step has
    run (pulumi/pulumi ``pkg/resource/deploy/deployment_executor.go``, ``AnalyzeResources`` after
    ``WaitForCompletion``): without this preview a mandatory stack policy fails the deploy only after
    it has created everything. A mandatory violation makes ``pulumi preview`` exit non-zero, which
    ``Stack.preview`` raises as ``CommandError``.
    """
    from pulumi import automation as auto

    events: list[Any] = []
    try:
        stack.preview(on_output=on_output, on_event=events.append, policy_packs=policy_packs, color="never")
    except auto.CommandError as error:
        violations = mandatory_violations(events)
        detail = "; ".join(violations) if violations else (str(error).strip().splitlines() or ["?"])[-1]
        raise PolicyGateError(f"preview with {policy_packs} failed, nothing deployed: {detail}") from error
    violations = mandatory_violations(events)
    if violations:
        raise PolicyGateError(f"preview with {policy_packs} reported mandatory violations: {'; '.join(violations)}")
    return stack.up(on_output=on_output, on_event=on_event, policy_packs=policy_packs, color="never")
