"""Planner input: a stack file or the planner's JSON form, validated with the stack config's own models.

A stack file (``Pulumi.<stack>.yaml``) is validated whole, as the program validates it (gpu_tenancy/contract/
stack_file.py: secure values are never decrypted); the JSON form holds ``nodes`` as HAMi registers them,
``workloads`` and ``quota`` (what ``python -m gpu_tenancy.builders.workloads.workloads`` writes). Unknown keys are
errors; every error is an ``InputError`` with one line naming the file and the key.
"""


from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, cast

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from gpu_tenancy.builders import gpu_nodes
from gpu_tenancy.builders.workloads.workloads import (
    DEFAULT_GPU_SCHEDULER_POLICY,
    DEFAULT_NODE_SCHEDULER_POLICY,
    plan_document,
    stack_name,
)
from gpu_tenancy.cli.base_command import UsageError
from gpu_tenancy.contract.config import NAMESPACE, ConfigError, stack_key_location
from gpu_tenancy.contract.stack_file import load_stack_file
from gpu_tenancy.contract.tenant_config import TenantConfig, WorkloadConfig
from gpu_tenancy.hami.planner.model import (
    KUBELET_MAX_PODS,
    MAX_DEVICES_PER_NODE,
    ContainerRequest,
    Node,
    Policy,
    Quota,
    Workload,
    node_from_register,
)

UNASSIGNED = "(no tenant)"

Inputs = tuple[list[Node], list[Workload], Quota | dict[str, Quota] | None]


class InputError(UsageError):
    """Unusable input; the message is one line naming the file and the key."""


# --------------------------------------------------------------------------- the JSON form, validated

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
QuotaLimits = Annotated[dict[str, int], AfterValidator(TenantConfig._quota_keys)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, strict=True)


class RegisteredDevice(_Strict):
    """One entry of HAMi's ``hami.io/node-nvidia-register`` annotation (pkg/device/devices.go DeviceInfo,
    read with UnMarshalNodeDevices), restricted to what the planner models: no MIG profiles or custom info.

    Every DeviceInfo field is ``omitempty`` and decoded by plain json.Unmarshal, so an absent key is Go's
    zero value: no ``health`` means an unhealthy card, no ``count`` no slots, no ``devcore`` no cores."""

    id: NonEmpty
    index: int = Field(default=0, ge=0)
    count: int = Field(default=0, ge=0)
    devmem: int = Field(default=0, ge=0)
    devcore: int = Field(default=0, ge=0)
    type: NonEmpty
    # null: the planner's spelling for a NUMA node nobody declared (every tie-break is then possible).
    numa: int | None = Field(default=0, ge=0)
    mode: str = ""
    health: bool = False

    @field_validator("mode")
    @classmethod
    def _no_mig(cls, value: str) -> str:
        if value == "mig":
            raise ValueError("MIG mode is not modelled by the planner")
        return value


class RegisteredNode(_Strict):
    name: NonEmpty
    tenant: NonEmpty | None = None
    # Pods the kubelet admits for workloads there (its maxPods minus the program's own pods).
    max_pods: int = Field(default=KUBELET_MAX_PODS, alias="maxPods", ge=0)
    devices: list[RegisteredDevice] = Field(min_length=1)

    @field_validator("devices")
    @classmethod
    def _device_order_modelled(cls, devices: list[RegisteredDevice]) -> list[RegisteredDevice]:
        if len(devices) > MAX_DEVICES_PER_NODE:
            raise ValueError(
                f"{len(devices)} GPUs on one node; the planner reproduces HAMi's device order only up to "
                f"{MAX_DEVICES_PER_NODE} per node (Go's sort.Sort is not stable above that)"
            )
        return devices


class PlannedWorkload(WorkloadConfig):
    """A stack-config workload plus the tenant whose nodes it may use (none: every node)."""

    tenant: NonEmpty | None = None


class PlanDocument(_Strict):
    nodes: list[RegisteredNode] = Field(min_length=1)
    workloads: list[PlannedWorkload] = Field(default_factory=list)
    # Per tenant ({"tenant-a": {"limits.nvidia.com/gpumem": ...}}) or one quota for every workload;
    # checked by _check_document, which can name the key that is wrong.
    quota: dict[str, Any] = Field(default_factory=dict)


_QUOTA_LIMITS = TypeAdapter(QuotaLimits)


# --------------------------------------------------------------------------- loading


def _key(location: Sequence[int | str], prefix: str = "") -> str:
    key = prefix
    for part in location:
        if isinstance(part, int):
            key += f"[{part}]"
        else:
            key += f".{part}" if key else str(part)
    return key or "(top level)"


def _error_line(path: str, error: ValidationError, prefix: str = "") -> str:
    detail = error.errors(include_url=False)[0]
    location = list(stack_key_location(tuple(p for p in detail["loc"] if not str(p).startswith("function-"))))
    message = str(detail["msg"]).removeprefix("Value error, ")
    if detail["type"] == "missing":
        message = "is required"
    elif detail["type"] == "extra_forbidden":
        message = "is not a known setting"
    elif str(detail["type"]).endswith("_type") or detail["type"] == "literal_error":
        message = f"{message} (got {detail.get('input')!r})"
    if location and location[-1] == "gpumemPercentage" and detail.get("input") == 0:
        message += "; HAMi ignores 0 and gives the whole card, so leave it out for a whole card"
    return f"{path}: {_key(location, prefix)}: {message}"


def _check_document(path: str, document: PlanDocument) -> PlanDocument:
    """What one field's validation cannot see: names unique, tenants known, quota keys."""
    names = [n.name for n in document.nodes]
    for i, name in enumerate(names):
        if names.count(name) > 1:
            raise InputError(f"{path}: nodes[{i}].name: duplicate node name {name!r}")
    tenants = {n.tenant for n in document.nodes if n.tenant}
    for i, w in enumerate(document.workloads):
        if w.tenant is not None and w.tenant not in tenants:
            raise InputError(f"{path}: workloads[{i}].tenant: no node belongs to tenant {w.tenant!r}")
    quota = document.quota
    shared = all(k.startswith("limits.") for k in quota)
    for tenant, limits in ({"": quota} if shared else quota).items():
        key = "quota" + (f".{tenant}" if tenant else "")
        if tenant and tenant not in tenants:
            raise InputError(f"{path}: {key}: no node belongs to tenant {tenant!r}")
        try:
            _QUOTA_LIMITS.validate_python(limits, strict=True)
        except ValidationError as error:
            raise InputError(_error_line(path, error, prefix=key)) from None
    return document


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read it ({error.__class__.__name__}: {error})") from None


def _is_stack_file(path: str) -> bool:
    return Path(path).suffix.lower() in (".yaml", ".yml")


def _load_json(path: str, text: str) -> PlanDocument:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: (top level): must be an object with nodes, workloads and quota")
    try:
        document = PlanDocument.model_validate(data)
    except ValidationError as error:
        raise InputError(_error_line(path, error)) from None
    return _check_document(path, document)


def _load_stack(path: str) -> PlanDocument:
    # The program's own validation of the whole file (gpu_tenancy/contract/stack_file.py), so the planner refuses
    # what the program refuses, in the same words.
    try:
        stack = load_stack_file(path)
    except ConfigError as error:
        raise InputError(str(error)) from None
    key = f"{NAMESPACE}:tenants"
    names = [t.name for t in stack.tenants]
    for node in gpu_nodes.gpu_nodes(stack, stack.cluster_name(stack_name(path))):
        cards = sum(g.count for g in node.gpus)
        if cards > MAX_DEVICES_PER_NODE:
            index = names.index(node.tenant)
            raise InputError(
                f"{path}: {key}[{index}].gpus: {cards} GPUs on node {node.name}; the planner reproduces HAMi's "
                f"device order only up to {MAX_DEVICES_PER_NODE} per node"
            )
    return PlanDocument.model_validate(plan_document(stack, stack.cluster_name(stack_name(path))))


def stack_mode(path: str) -> str | None:
    """The `gpu-tenancy:mode` of a stack file; None for the JSON form (registers of unknown origin) or when
    the file cannot say."""
    if not _is_stack_file(path):
        return None
    try:
        mode = (yaml.safe_load(Path(path).read_text()) or {}).get("config", {}).get(f"{NAMESPACE}:mode")
    except (OSError, yaml.YAMLError, AttributeError):
        return None
    return mode if isinstance(mode, str) else None


def load_document(path: str) -> PlanDocument:
    """Read and validate ``path`` (stack file or JSON form); raise InputError with one line."""
    if _is_stack_file(path):
        return _load_stack(path)
    return _load_json(path, _read(path))


def planner_inputs(document: PlanDocument) -> Inputs:
    """The validated document as planner inputs (gpu_tenancy.hami.planner.model)."""
    nodes = [
        node_from_register(n.name, [d.model_dump() for d in n.devices], n.tenant, n.max_pods)
        for n in document.nodes
    ]
    workloads = [
        Workload(
            name=w.name,
            containers=tuple(
                ContainerRequest(
                    gpus=c.gpus,
                    gpumem_mib=c.gpumem_mib,
                    gpumem_percentage=c.gpumem_percentage,
                    gpucores=c.gpucores,
                )
                for c in w.containers
            ),
            replicas=w.replicas,
            use_gpu_type=tuple(w.use_gpu_type),
            nouse_gpu_type=tuple(w.nouse_gpu_type),
            gpu_scheduler_policy=cast(Policy, w.gpu_scheduler_policy or DEFAULT_GPU_SCHEDULER_POLICY),
            node_scheduler_policy=cast(Policy, w.node_scheduler_policy or DEFAULT_NODE_SCHEDULER_POLICY),
            tenant=w.tenant,
        )
        for w in document.workloads
    ]
    quota: Quota | dict[str, Quota] | None = None
    if document.quota:
        if all(k.startswith("limits.") for k in document.quota):
            quota = Quota.from_dict(document.quota)
        else:
            quota = {t: Quota.from_dict(q) for t, q in document.quota.items()}
    return nodes, workloads, quota


def load(path: str) -> Inputs:
    """(nodes, workloads, quota) from a stack file or the JSON form; raises InputError."""
    return planner_inputs(load_document(path))
