"""Each tenant at a glance (`make tenants`): version, control plane, nodes, GPUs, pods, and whether it is healthy.

`health()` is pure: it reads what one tenant's API server returned (gpu_tenancy.cli.status.report.TenantObjects with
its `/version` and `/readyz` answers), or the one line saying why it could not be read. `gather()` reads
every tenant of a stack (stack outputs, then each tenant's API through its own kubeconfig, eight at a
time) and is what other day-two checks reuse. Counted as HAMi counts (gpu_tenancy.cli.status.report): GPUs from
`hami.io/node-nvidia-register`, pods holding GPUs by their `hami.io/vgpu-node` until they terminate,
pending GPU pods as no scheduler has placed them. Declared GPUs come from the stack file
(`Pulumi.<stack>.yaml`, `gpu-tenancy:tenants[].gpus[].count`), the same declaration the program and the
planner read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from gpu_tenancy.cli.status import report as status
from gpu_tenancy.contract.config import NAMESPACE, first_error_line
from gpu_tenancy.contract.tenant_config import TenantConfig
from gpu_tenancy.hami import protocol as hami


@dataclass(frozen=True)
class TenantHealth:
    tenant: str
    endpoint: str = ""
    version: str | None = None  # the API server's gitVersion
    control_plane: str = "unreachable"  # "ready", "not ready: <checks>", "unreachable"
    nodes_ready: int = 0
    nodes_total: int = 0
    gpus_registered: int = 0
    gpus_declared: int | None = None  # None: no stack file to compare with
    pods_holding_gpus: int = 0
    pending_gpu_pods: int = 0
    problems: tuple[str, ...] = field(default_factory=tuple)  # empty when healthy

    @property
    def healthy(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "problems": list(self.problems), "healthy": self.healthy}


def _ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", "?"))


def health(
    tenant: str, read: status.TenantObjects | str, endpoint: str, declared: int | None
) -> TenantHealth:
    """One tenant's row: `read` is what its API server returned, or why it could not be read."""
    if isinstance(read, str):
        return TenantHealth(tenant, endpoint, gpus_declared=declared, problems=(f"unreachable: {read}",))
    problems: list[str] = []
    ready = read.readyz == "ok"
    control_plane = "ready" if ready else (read.readyz or "not probed")
    if not ready:
        problems.append(f"control plane {control_plane}")
    not_ready = [_name(n) for n in read.nodes if not _ready(n)]
    if not read.nodes:
        problems.append("no node joined")
    elif not_ready:
        problems.append(f"node(s) not Ready: {', '.join(sorted(not_ready))}")
    registered = 0
    unhealthy = 0
    for node in read.nodes:
        value = ((node.get("metadata") or {}).get("annotations") or {}).get(hami.NODE_REGISTER_ANNOTATION)
        try:
            devices = hami.parse_register_annotation(value) if value else []
        except (ValueError, AttributeError):  # malformed text; not text at all (a hand-edited `--objects` dump)
            problems.append(f"node {_name(node)}: unreadable {hami.NODE_REGISTER_ANNOTATION}")
            continue
        registered += len(devices)
        unhealthy += sum(1 for d in devices if not d.get("health", False))
    if declared is not None and registered != declared:
        problems.append(f"{registered} GPU(s) registered, {declared} declared")
    if unhealthy:
        problems.append(f"{unhealthy} GPU(s) registered unhealthy")
    holding = sum(1 for pod in read.pods if status.is_counted(pod))
    pending = sum(1 for pod in read.pods if status.is_pending(pod))
    return TenantHealth(
        tenant=tenant, endpoint=endpoint, version=read.version, control_plane=control_plane,
        nodes_ready=len(read.nodes) - len(not_ready), nodes_total=len(read.nodes), gpus_registered=registered,
        gpus_declared=declared, pods_holding_gpus=holding, pending_gpu_pods=pending, problems=tuple(problems),
    )


def declared_gpus(stack_file: Path) -> dict[str, int] | None:
    """Tenant -> GPUs declared in the stack file (validated with the stack config's models), or None when
    there is no such file. A file that does not validate raises ValueError with one line."""
    if not stack_file.is_file():
        return None
    try:
        document = yaml.safe_load(stack_file.read_text())
        raw = ((document or {}).get("config") or {}).get(f"{NAMESPACE}:tenants") or []
        tenants = TypeAdapter(list[TenantConfig]).validate_python(raw)
    except ValidationError as error:  # as the program says it: `gpu-tenancy:tenants[0].name: ...`
        raise ValueError(f"{stack_file}: {first_error_line(error, under=('tenants',))}") from None
    except yaml.YAMLError as error:
        raise ValueError(f"{stack_file}: not YAML: {str(error).splitlines()[0]}") from None
    except AttributeError:  # a list or a value where the file or its `config:` should be a mapping
        raise ValueError(f"{stack_file}: not a stack file: expected a mapping with a `config:` mapping") from None
    return {t.name: sum(g.count for g in t.gpus) for t in tenants}


def gather(stack: str, only: Sequence[str] = (), stack_file: Path | None = None) -> list[TenantHealth]:
    """Every (or `only` these) tenant of a deployed stack, read live; raises
    gpu_tenancy.cli.stack_outputs.OutputsError when the stack outputs cannot be read."""
    from gpu_tenancy.cli import stack_outputs
    from gpu_tenancy.cli.status import command as status_cli

    names, kubeconfigs, outputs = status_cli.stack_tenants(stack, only)
    endpoints = {name: entry.endpoint for name, entry in stack_outputs.tenants(outputs, stack).items()}
    declared = declared_gpus(stack_file or Path(f"Pulumi.{stack}.yaml"))
    read = status_cli.read_tenants(names, kubeconfigs, probes=True)
    # A tenant still deployed but no longer in the stack file declares nothing (until the next `make up`).
    return [health(name, read[name], endpoints.get(name, ""), None if declared is None else declared.get(name, 0))
            for name in names]
