"""Pure helpers for the e2e suite: stack selection, polling, HAMi annotation parsing, event filtering, timings.

Nothing here performs I/O at import time.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
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


# The stages the timing report names, in the order a deploy reaches them (per tenant: TENANT_STAGES).
PREREQUISITES_STAGE = "prerequisites"
KIND_STAGE = "kind cluster"
DEPLOY_STAGE = "pulumi preview + up"
FIRST_POD_STAGE = "first GPU pod Running"
TEN_PODS_STAGE = "ten pods on one GPU Running"
DESTROY_STAGE = "destroy"


@dataclass
class StageTimings:
    """Wall time per named stage, in insertion order.

    ``seconds`` is the stage's duration; ``finished_at`` (optional) is when it completed, in seconds
    since the deploy started, which is what matters for stages that overlap (MetalLB and Kamaji deploy
    in parallel, so do the tenants).
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

    def stages(self) -> dict[str, dict[str, float | None]]:
        return {
            name: {"seconds": secs, "finished_at_s": self.finished_at_by_stage.get(name)}
            for name, secs in self.seconds_by_stage.items()
        }

    def to_json(self) -> str:
        return json.dumps({"unit": "seconds", "stages": self.stages()}, indent=2)

    def summary_table(self) -> str:
        width = max([len("stage"), *(len(name) for name in self.seconds_by_stage)])
        lines = [f"{'stage':<{width}}  seconds  done at", f"{'-' * width}  -------  -------"]
        for name, secs in self.seconds_by_stage.items():
            done = self.finished_at_by_stage.get(name)
            lines.append(f"{name:<{width}}  {secs:7.1f}  {'' if done is None else f'{done:7.1f}'}")
        return "\n".join(lines)


# Top-level component types of the program (__main__.py) and the stage each one is.
STAGE_BY_COMPONENT_TYPE = {
    "gpu-tenancy:kind_cluster:KindCluster": KIND_STAGE,
    "gpu-tenancy:metallb:MetalLB": "MetalLB",
    "gpu-tenancy:kamaji:Kamaji": "Kamaji",
    "gpu-tenancy:nvml_mock_image:NvmlMockImage": "mock NVML image built",
}
TENANT_COMPONENT_TYPE = "gpu-tenancy:tenant:Tenant"
# A Tenant's child components (components/tenant.py) and the stage each one ends: the TenantControlPlane waits
# for Kamaji's Ready (control_plane_spec.tcp_wait_conditions), a worker is done once kubeadm join ran (Worker: a kindest/node
# container; HostWorker: a GPU host), HAMi once its Helm release is deployed with --wait (helm.v3.Release awaits).
TENANT_STAGES = {
    "gpu-tenancy:tenant_control_plane:TenantControlPlane": "control plane Ready",
    "gpu-tenancy:worker:Worker": "worker joined",
    "gpu-tenancy:host_worker:HostWorker": "worker joined",
    "gpu-tenancy:hami:Hami": "HAMi Ready",
}


def tenant_stage(tenant: str, part: str | None = None) -> str:
    return f"{tenant} {part}" if part else f"tenant {tenant} ready"


def stages_for_urn(urn: str, tenants: Iterable[str]) -> list[str]:
    """The deployment stages a resource belongs to, from its URN's component types.

    URN: ``urn:pulumi:<stack>::<project>::<parent types joined by $>::<name>``. Tenant children are
    named ``<tenant>-...`` by the Tenant component, so the longest matching tenant prefix wins; a tenant's
    resource counts for the whole tenant and, under one of TENANT_STAGES' components, for that part too.
    """
    parts = urn.split("::")
    if len(parts) < 4:
        return []
    type_chain, name = parts[2].split("$"), "::".join(parts[3:])
    top = type_chain[0]
    if top in STAGE_BY_COMPONENT_TYPE:
        return [STAGE_BY_COMPONENT_TYPE[top]]
    if top == "pulumi:providers:kubernetes" and name == "management":
        return [KIND_STAGE]
    if top == TENANT_COMPONENT_TYPE:
        owners = [t for t in tenants if name == t or name.startswith(f"{t}-")]
        if owners:
            tenant = max(owners, key=len)
            part = TENANT_STAGES.get(type_chain[1]) if len(type_chain) > 1 else None
            return [tenant_stage(tenant), *([tenant_stage(tenant, part)] if part else [])]
    return []


def stage_for_urn(urn: str, tenants: Iterable[str]) -> str | None:
    """The coarsest stage of a resource (a whole tenant rather than its part)."""
    stages = stages_for_urn(urn, tenants)
    return stages[0] if stages else None


def deploy_stage_order(tenants: Iterable[str]) -> list[str]:
    parts = list(dict.fromkeys(TENANT_STAGES.values()))
    per_tenant = [tenant_stage(t, part) for t in tenants for part in [*parts, None]]
    return [KIND_STAGE, "MetalLB", "Kamaji", "mock NVML image built", *per_tenant]


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
            now = self.clock() - self.started
            for stage in stages_for_urn(step.metadata.urn, self.tenants):
                if is_start:
                    self.first_start.setdefault(stage, now)
                else:
                    self.last_done[stage] = now

    def record_into(self, timings: StageTimings) -> None:
        for stage in deploy_stage_order(self.tenants):
            if stage in self.last_done:
                started = self.first_start.get(stage, 0.0)
                timings.record(stage, self.last_done[stage] - started, finished_at=self.last_done[stage])


# ------------------------------------------------------------------ footprint: what the lab takes from its host

# docker stats' MEM USAGE column: go-units BytesSize (CustomSize("%.4g%s", size, 1024.0, binaryAbbrs)), as
# docker/cli v28 cli/command/container/formatter_stats.go MemUsage prints it: "<usage> / <limit>".
_BINARY_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}
_BYTES_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:e\+[0-9]+)?)\s*(B|KiB|MiB|GiB|TiB|PiB)\s*$")
CONTAINER_STATS_FORMAT = "{{.Name}}\t{{.MemUsage}}"


def bytes_size(text: str) -> int:
    """Bytes of a go-units BytesSize string ("1.5GiB", "512MiB", "0B"); ValueError otherwise."""
    match = _BYTES_SIZE.match(text)
    if not match:
        raise ValueError(f"not a docker memory size: {text!r}")
    return round(float(match[1]) * _BINARY_UNITS[match[2]])


def container_memory(stats: str, cluster: str) -> dict[str, int]:
    """Memory in use per container of ``cluster`` from `docker stats --no-stream --format CONTAINER_STATS_FORMAT`."""
    used = {}
    for line in stats.splitlines():
        name, _, usage = line.partition("\t")
        # "-- / --": no stats for that container (formatter_stats.go, IsInvalid)
        if name.startswith(f"{cluster}-") and " / " in usage and not usage.startswith("--"):
            used[name] = bytes_size(usage.split(" / ", 1)[0])
    return used


def memory_in_use(meminfo: str) -> int:
    """Bytes the host has in use: MemTotal - MemAvailable of /proc/meminfo (proc(5): values in kB = KiB)."""
    values = {}
    for line in meminfo.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields:
            values[key] = int(fields[0]) * 1024
    return values["MemTotal"] - values["MemAvailable"]


@dataclass
class Footprint:
    """Disk (the Docker root's filesystem) and memory in use on the host at each point of the run, and the
    stack's containers' memory after the deploy. The lab's share is the difference to ``before``."""

    samples: dict[str, dict[str, int]] = field(default_factory=dict)
    containers: dict[str, int] = field(default_factory=dict)

    def sample(self, label: str, disk_used: int | None, memory_used: int | None) -> None:
        values = {"disk_used_bytes": disk_used, "memory_used_bytes": memory_used}
        self.samples[label] = {key: value for key, value in values.items() if value is not None}

    def growth(self, label: str, key: str) -> int | None:
        before, after = self.samples.get("before", {}).get(key), self.samples.get(label, {}).get(key)
        return None if before is None or after is None else after - before

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": "bytes",
            "samples": self.samples,
            "lab": {
                "disk_after_up": self.growth("after up", "disk_used_bytes"),
                "memory_after_up": self.growth("after up", "memory_used_bytes"),
                "disk_kept_after_destroy": self.growth("after destroy", "disk_used_bytes"),
                "containers_memory": sum(self.containers.values()) if self.containers else None,
            },
            "containers": self.containers,
        }


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


# ------------------------------------------------------------------ which example stack the suite deploys

STACK_ENV = "GPU_TENANCY_E2E_STACK"


@dataclass(frozen=True)
class E2EStack:
    """An example stack the suite deploys a throwaway copy of (`make e2e`, `make e2e-nvml`)."""

    name: str  # the value of GPU_TENANCY_E2E_STACK
    stack_file: str  # relative to the repository root
    mode: str  # gpu-tenancy:mode of the throwaway copy
    prefix: str  # the throwaway stack is <prefix>-<6 hex>, its kind cluster gpu-tenancy-<that>


E2E_STACKS = {
    "dev": E2EStack("dev", "Pulumi.dev.yaml", "sim", "e2e"),
    "dev-nvml": E2EStack("dev-nvml", "Pulumi.dev-nvml.yaml", "sim-nvml", "e2e-nvml"),
}
DEFAULT_STACK = "dev"


def select_stack(env_value: str | None) -> E2EStack:
    """The stack GPU_TENANCY_E2E_STACK names (unset or empty: dev); ValueError naming the choices otherwise."""
    name = (env_value or "").strip() or DEFAULT_STACK
    if name not in E2E_STACKS:
        raise ValueError(f"{STACK_ENV}={name!r} names no e2e stack; choose one of {', '.join(E2E_STACKS)}")
    return E2E_STACKS[name]


def mode_skip_reason(modes: Collection[str], stack: E2EStack, why: str = "") -> str | None:
    """Why a check meant for ``modes`` does not run against ``stack`` (None: it runs)."""
    if stack.mode in modes:
        return None
    reason = f"mode {' or '.join(modes)} only; {STACK_ENV}={stack.name} deploys mode {stack.mode}"
    return f"{reason}: {why}" if why else reason


# ------------------------------------------------------------------ mode sim-nvml: HAMi's device plugin on a mock NVML

# Where NVIDIA's mock NVML (k8s-test-infra v0.3.0 deployments/nvml-mock/scripts/setup.sh) lays out its driver root
# on the worker: usr/lib64/libnvidia-ml.so.1, usr/bin/nvidia-smi (RUNPATH $ORIGIN/../lib64), dev/nvidia<i>,
# config/config.yaml (found by the library through /proc/self/maps).
NVML_MOCK_DRIVER_ROOT = "/var/lib/nvml-mock/driver"
NVML_MOCK_IMAGE_REPOSITORY = "gpu-tenancy/nvml-mock"
NVML_MOCK_COMPONENT_SELECTOR = "gpu-tenancy.io/component=nvml-mock"
MOCK_GPU_AGENT_SELECTOR = "gpu-tenancy.io/component=mock-gpu-agent"
DEVICE_PLUGIN_SELECTOR = "app.kubernetes.io/component=hami-device-plugin"  # HAMi chart 2.10.0 daemonsetnvidia.yaml
DEVICES_TO_ALLOCATE_ANNOTATION = "hami.io/vgpu-devices-to-allocate"


def recorded_card_memory() -> dict[str, int]:
    """NVML name -> total MiB of real cards, recorded from published nvidia-smi output (not from the program)."""
    data = json.loads((Path(__file__).parent.parent / "fixtures" / "nvidia_smi" / "cards.json").read_text())
    return {card["name"]: int(card["memory_total_mib"]) for card in data["cards"]}


def hami_device_type(name: str) -> str:
    """The device type HAMi v2.10.0 registers for an NVML name (register.go getAPIDevices)."""
    return name if name.startswith("NVIDIA") else f"NVIDIA-{name}"


def nvml_inventory(tenants: Iterable[Mapping[str, Any]]) -> dict[str, Counter[tuple[str, int]]]:
    """Per tenant, the devices HAMi's plugin must register over the mock: (type, MiB) -> how many.

    A stack declares a card by NVML's name; the mock is configured with what NVML reports for that card on a
    real host and HAMi registers total / 1024 / 1024 (deviceMemoryScaling 1): so the memory is exactly the
    recorded total of a real card of that model (or the declared MiB of a model nobody recorded).
    """
    recorded = recorded_card_memory()
    inventory: dict[str, Counter[tuple[str, int]]] = {}
    for tenant in tenants:
        wanted: Counter[tuple[str, int]] = Counter()
        for group in tenant.get("gpus", []):
            model = str(group["model"])
            memory = int(group["memoryMiB"]) if "memoryMiB" in group else recorded[model]
            wanted[(hami_device_type(model), memory)] += int(group["count"])
        inventory[str(tenant["name"])] = wanted
    return inventory


def _devices_text(devices: Mapping[tuple[str, int], int]) -> str:
    return " + ".join(f"{count} x {kind} ({mib} MiB)" for (kind, mib), count in sorted(devices.items()) if count) or "none"


def register_problems(
    devices: Iterable[Mapping[str, Any]], expected: Mapping[tuple[str, int], int], split_count: int
) -> list[str]:
    """What is wrong, one line each, with a node's registered devices (decoded ``hami.io/node-nvidia-register``)
    against the declared ones: type and memory exact, each healthy with ``split_count`` slots, ids unique."""
    devices = list(devices)
    problems = []
    found = Counter((str(device.get("type", "?")), int(device.get("devmem", 0))) for device in devices)
    if found != Counter(expected):
        problems.append(f"registered {_devices_text(found)}, declared {_devices_text(expected)}")
    for device in devices:
        if device.get("health") is not True:
            problems.append(f"GPU {device.get('id', '?')} is not healthy")
        if int(device.get("count", 0)) != split_count:
            problems.append(
                f"GPU {device.get('id', '?')} offers {device.get('count')} slots (deviceSplitCount), expected {split_count}"
            )
    ids = Counter(str(device.get("id")) for device in devices)
    twice = sorted(uuid for uuid, count in ids.items() if count > 1)
    if twice:
        problems.append(f"GPU ids registered twice: {', '.join(twice)}")
    return problems


def allocation_consumed(value: str | None) -> bool:
    """True when ``hami.io/vgpu-devices-to-allocate`` names no device any more.

    HAMi's scheduler writes the devices per container; the device plugin's Allocate erases each container's
    entry it serves (v2.10.0 plugin/util.go popNextContainerDevices, patchErasedAnnotation), leaving ';;' for a
    one-container pod (the decoded list keeps an empty trailing entry). The mock-GPU agent of mode sim never
    touches it.
    """
    if not value:
        return False
    return all(not container for container in parse_devices_allocated(value))


_NVIDIA_SMI_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Za-z-]+)\)\s*$")


def nvidia_smi_gpus(output: str) -> list[tuple[int, str, str]]:
    """(index, name, UUID) per ``GPU <i>: <name> (UUID: GPU-...)`` line of ``nvidia-smi -L``; MIG lines are skipped."""
    return [
        (int(match[1]), match[2], match[3])
        for line in output.splitlines()
        if (match := _NVIDIA_SMI_GPU.match(line.strip()))
    ]


def nvml_mock_image(commit: str | None) -> str | None:
    """The mock's image the program builds and loads into the workers: tagged with the pinned commit's first
    12 hex digits. None when ``commit`` is no full commit id (gpu_tenancy.contract.versions.NVML_MOCK_COMMIT)."""
    if not commit or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    return f"{NVML_MOCK_IMAGE_REPOSITORY}:{commit[:12]}"
