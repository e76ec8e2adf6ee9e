"""Why a pending GPU pod waits, in the tenant's own terms, and the scheduler's message made readable.

The pod's request is read as HAMi v2.10.0 reads it (pkg/device/nvidia/device.go
`GenerateResourceRequests`: each container's `limits`, else `requests`, of `nvidia.com/gpu`, `gpumem`,
`gpumem-percentage`, `gpucores`; the pod annotations `nvidia.com/use-gputype`/`nouse-gputype` and
`hami.io/gpu-scheduler-policy`/`node-scheduler-policy`), then replayed through the planner
(`gpu_tenancy.hami.planner.schedule.plan`, the same model as `cli.plan`) on the tenant's registered GPUs with what they
hold now. The planner has no notion of "already allocated", so what a card holds is replayed first as one
filler container pinned to that card (a type filter only that card matches) whose memory and cores are
what the card holds; the card's split count is lowered so that one filler takes as many slots as its
holders do. Fit's checks then see the card as HAMi does: free slots, free MiB, free cores, "in use"
(exclusive requests) and "cores used up" (requests without cores). The namespace quota HAMi enforces
(`limits.nvidia.com/gpumem`, `gpucores`) is passed with what the namespace already uses.

The planner's HAMi reasons (`2/2 CardTypeMismatch`, ...) are then put into words with the numbers behind
them: what the pod asks, what the tenant has, the largest free slice and where. Not modelled (said when
it matters): init containers (HAMi counts the peak of init and app use), a pod that would fit now (the
scheduler retries on its own schedule, or waits on something else: a node lock, a taint).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from gpu_tenancy.builders.workloads.workload_names import (
    DEFAULT_GPU_SCHEDULER_POLICY,
    DEFAULT_NODE_SCHEDULER_POLICY,
    GPU_SCHEDULER_POLICY_ANNOTATION,
    NODE_SCHEDULER_POLICY_ANNOTATION,
    NOUSE_GPU_TYPE_ANNOTATION,
    USE_GPU_TYPE_ANNOTATION,
)
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.allocation import GpuView
from gpu_tenancy.hami.planner.fit import (
    ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_INSUFFICIENT_CORE,
    CARD_INSUFFICIENT_MEMORY,
    CARD_NOT_HEALTH,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_TYPE_MISMATCH,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    NODE_INSUFFICIENT_DEVICE,
    RESOURCE_QUOTA_NOT_FIT,
)
from gpu_tenancy.hami.planner.model import ContainerRequest, Node, Policy, Quota, Workload, node_from_register
from gpu_tenancy.hami.planner.schedule import plan

# Invisible separators around a card's number: no registered type and no type filter contains them, so
# the filter MARK<n>MARK matches exactly one card and a user's filter matches what it matched before.
_MARK = "\u2063"
_PENDING = "\u2063pending"
_REQUEST_ANNOTATIONS = (USE_GPU_TYPE_ANNOTATION, NOUSE_GPU_TYPE_ANNOTATION, GPU_SCHEDULER_POLICY_ANNOTATION,
                        NODE_SCHEDULER_POLICY_ANNOTATION)
_REASON = re.compile(r"^(\d+)/(\d+) (\w+)$")
# kube-scheduler's PostFilter (preemption) adds these when preempting cannot help: noise for a GPU pod.
_PREEMPTION_NOISE = re.compile(
    r"\s*preemption: (?:\d+/\d+ nodes are available: )?(?:\d+ )?"
    r"(?:No preemption victims found for incoming pod|Preemption is not helpful for scheduling)\.?",
    re.IGNORECASE,
)


def clean_scheduler_message(message: str) -> str:
    """kube-scheduler's FitError text, readable: one line, no preemption boilerplate, no doubled period.

    FitError.Error() (kubernetes pkg/scheduler/framework/types.go) appends every part with
    SeparatorFormat " %v." and the preemption part already ends with a period, hence "pod.."."""
    text = " ".join(message.split())
    text = _PREEMPTION_NOISE.sub("", text)
    text = re.sub(r"\.{2,}", ".", text).strip()
    return text.rstrip(".").strip()


# --------------------------------------------------------------------------- the pod's request


def _quantity(value: Any) -> int:
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    from kubernetes.utils.quantity import parse_quantity  # only for suffixed forms: it is slow to import

    return int(parse_quantity(text))


def _resource(resources: Mapping[str, Any], name: str) -> int | None:
    for section in ("limits", "requests"):  # HAMi: Limits, else Requests
        values = resources.get(section) or {}
        if name in values:
            return _quantity(values[name])
    return None


def _types(annotation: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in (annotation or "").split(",") if t.strip())


def _policy(value: str | None, default: str) -> Policy:
    return cast(Policy, value if value in ("binpack", "spread") else default)


def pod_request(pod: Mapping[str, Any], name: str, tenant: str) -> Workload:
    """The pod as one planner replica; ValueError when HAMi could not read it either."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    containers = []
    for container in (pod.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") or {}
        gpus = _resource(resources, hami.RESOURCE_GPU)
        if not gpus:
            containers.append(ContainerRequest(gpus=0))
            continue
        containers.append(ContainerRequest(
            gpus=gpus,
            gpumem_mib=_resource(resources, hami.RESOURCE_GPU_MEMORY),
            gpumem_percentage=_resource(resources, hami.RESOURCE_GPU_MEMORY_PERCENTAGE),
            gpucores=_resource(resources, hami.RESOURCE_GPU_CORES),
        ))
    return Workload(
        name=name,
        containers=tuple(containers),
        use_gpu_type=_types(annotations.get(USE_GPU_TYPE_ANNOTATION)),
        nouse_gpu_type=_types(annotations.get(NOUSE_GPU_TYPE_ANNOTATION)),
        gpu_scheduler_policy=_policy(annotations.get(GPU_SCHEDULER_POLICY_ANNOTATION), DEFAULT_GPU_SCHEDULER_POLICY),
        node_scheduler_policy=_policy(annotations.get(NODE_SCHEDULER_POLICY_ANNOTATION),
                                      DEFAULT_NODE_SCHEDULER_POLICY),
        tenant=tenant,
    )


def _asks(workload: Workload) -> str:
    parts = []
    for c in workload.containers:
        if not c.gpus:
            continue
        if c.gpumem_mib:
            memory = f"{c.gpumem_mib} MiB"
        elif c.percentage is not None and c.percentage < 100:
            memory = f"{c.percentage} % of a card's memory"
        else:
            memory = "a whole card's memory"
        what = f"{memory}, {c.cores} % cores" + (" (whole card)" if c.exclusive else "")
        parts.append(f"{c.gpus} × ({what})" if c.gpus > 1 else what)
    return " + ".join(parts)


def _type_filter(workload: Workload) -> str:
    parts = []
    if workload.use_gpu_type:
        parts.append(" or ".join(workload.use_gpu_type))
    if workload.nouse_gpu_type:
        parts.append("not " + " or ".join(workload.nouse_gpu_type))
    return ", ".join(parts)


# --------------------------------------------------------------------------- the tenant now


@dataclass(frozen=True)
class NamespaceQuota:
    """HAMi-managed quota of the pod's namespace: limit and what the namespace already uses (None: unset)."""

    gpumem: tuple[int, int] | None = None  # (used MiB, limit MiB)
    gpucores: tuple[int, int] | None = None  # (used %, limit %)


@dataclass(frozen=True)
class TenantGpus:
    """A tenant's registered cards (as HAMi decodes `hami.io/node-nvidia-register`) and what they hold."""

    tenant: str
    registered: Mapping[str, Sequence[Mapping[str, Any]]]  # node -> devices, registration order
    gpus: Sequence[GpuView]  # the live view's cards, with their slices

    def model_counts(self) -> str:
        counts = Counter(str(d.get("type", "?")) for devices in self.registered.values() for d in devices)
        return ", ".join(f"{n} × {model}" for model, n in sorted(counts.items())) or "no GPU registered"


def _type_ok(model: str, workload: Workload) -> bool:
    # HAMi's checkType: the type filter is a case-insensitive substring of the card type.
    t = model.lower()
    if workload.use_gpu_type and not any(u.lower() in t for u in workload.use_gpu_type):
        return False
    return not any(u.lower() in t for u in workload.nouse_gpu_type)


def _nodes(tenant: TenantGpus, empty: bool) -> tuple[list[Node], list[Workload]]:
    """Planner nodes for the tenant's cards (each type marked with its number), and one filler workload per
    card that holds something (none when `empty`)."""
    held = {(g.node, g.uuid): g for g in tenant.gpus}
    nodes: list[Node] = []
    fillers: list[Workload] = []
    number = 0
    for node, devices in tenant.registered.items():
        marked = []
        for device in devices:
            number += 1
            mark = f"{_MARK}{number}{_MARK}"
            entry = dict(device)
            entry["type"] = f"{device.get('type', '')}{mark}"
            gpu = held.get((node, str(device.get("id"))))
            if not empty and gpu is not None and gpu.slots_used:
                count, devmem, devcore = int(device.get("count", 0)), int(device.get("devmem", 0)), \
                    int(device.get("devcore", 0))
                # One filler takes one slot: leave it as many free slots as the card has now.
                entry["count"] = max(count - gpu.slots_used + 1, 1)
                memory = min(max(gpu.memory_allocated, 1), devmem) if devmem else 1
                cores = min(gpu.cores_allocated, devcore)
                fillers.append(Workload(
                    name=f"{_MARK}holders{number}", tenant=tenant.tenant, use_gpu_type=(mark,),
                    containers=(ContainerRequest(gpus=1, gpumem_mib=memory, gpucores=cores),),
                ))
            marked.append(entry)
        nodes.append(node_from_register(node, marked, tenant.tenant))
    return nodes, fillers


def _quota(quota: NamespaceQuota | None, fillers: Sequence[Workload], empty: bool) -> Quota | None:
    """The namespace quota as the planner applies it to the fillers and the pod together: the fillers
    replay what every namespace holds, so the limit is shifted to leave the pod what its namespace has left."""
    if quota is None or (quota.gpumem is None and quota.gpucores is None):
        return None
    filled_mem = sum(c.gpumem_mib or 0 for w in fillers for c in w.containers)
    filled_cores = sum(c.gpucores or 0 for w in fillers for c in w.containers)

    def shifted(entry: tuple[int, int] | None, filled: int) -> int | None:
        if entry is None:
            return None
        used, limit = entry
        return limit if empty else filled + max(limit - used, 0)

    return Quota(gpumem=shifted(quota.gpumem, filled_mem), gpucores=shifted(quota.gpucores, filled_cores))


def _reasons(text: str) -> Counter[str]:
    """HAMi reason names in a planner failure (`n/N Reason, ...` per node, `node: ...` joined by `; `)."""
    found: Counter[str] = Counter()
    for part in text.split("; "):
        # several nodes: "<node>: <reasons>"; the webhook's quota denial: "ResourceQuotaNotFit at admission: ..."
        per_node = part if part.startswith(RESOURCE_QUOTA_NOT_FIT) else part.split(": ", 1)[-1]
        if per_node.startswith(RESOURCE_QUOTA_NOT_FIT):
            found[RESOURCE_QUOTA_NOT_FIT] += 1
            continue
        for entry in per_node.split(", "):
            match = _REASON.match(entry.strip())
            if match:
                found[match.group(3)] += int(match.group(1))
            elif entry.strip():
                found[entry.strip()] += 1
    return found


def _free(gpu: GpuView) -> tuple[int, int, int]:
    return gpu.memory_mib - gpu.memory_allocated, gpu.cores - gpu.cores_allocated, gpu.split_count - gpu.slots_used


def _clauses(reasons: Counter[str], workload: Workload, tenant: TenantGpus, quota: NamespaceQuota | None,
             idle: bool) -> list[str]:
    """The planner's reasons in words; `idle`: why it fails even with every card free (no holders, no quota
    used), else why it fails now."""
    cards = [g for g in tenant.gpus if g.index >= 0]
    if idle:
        cards = [dataclasses.replace(g, slices=()) for g in cards]
        if quota is not None:
            quota = NamespaceQuota(*(None if q is None else (0, q[1]) for q in (quota.gpumem, quota.gpucores)))
    eligible = [g for g in cards if _type_ok(g.model, workload)]
    clauses: list[str] = []
    cards_asked = max((c.gpus for c in workload.containers), default=0)
    if CARD_TYPE_MISMATCH in reasons and not eligible:
        clauses.append(f"asks {cards_asked} × {_type_filter(workload)} (type filter); "
                       f"{tenant.tenant} has {tenant.model_counts()}")
    elif CARD_TYPE_MISMATCH in reasons:
        models = sorted({g.model for g in eligible})
        clauses.append(f"type filter {_type_filter(workload)} leaves {len(eligible)} of {len(cards)} cards "
                       f"({', '.join(models)})")
    requests = [c for c in workload.containers if c.gpus]
    if CARD_INSUFFICIENT_MEMORY in reasons and eligible and requests:
        best = max(eligible, key=lambda g: (_free(g)[0], -g.index))
        need = max(c.gpumem_mib or best.memory_mib * (c.percentage or 100) // 100 for c in requests)
        clauses.append(f"asks {need} MiB; the largest card has {best.memory_mib} MiB ({best.label})" if idle
                       else f"asks {need} MiB; largest free slice {_free(best)[0]} MiB on {best.label}")
    if CARD_INSUFFICIENT_CORE in reasons and eligible and requests:
        best = max(eligible, key=lambda g: (_free(g)[1], -g.index))
        need = max(c.cores for c in requests)
        clauses.append(f"asks {need} % cores; most free {_free(best)[1]} % on {best.label}")
    if CARD_TIME_SLICING_EXHAUSTED in reasons:
        full = [g for g in eligible if _free(g)[2] <= 0]
        clauses.append(f"every slot taken on {len(full)} card(s): " + ", ".join(
            f"{g.label} {g.slots_used}/{g.split_count}" for g in full[:3]) + (" …" if len(full) > 3 else ""))
    if EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT in reasons:
        busy = [g for g in eligible if g.slots_used]
        clauses.append(f"asks a whole card (100 % cores); {len(busy)} of {len(eligible)} cards hold other pods")
    if CARD_COMPUTE_UNITS_EXHAUSTED in reasons:
        spent = [g for g in eligible if g.cores and g.cores_allocated >= g.cores]
        clauses.append(f"asks no cores share; cores fully allocated on {len(spent)} card(s)")
    if CARD_NOT_HEALTH in reasons:
        unhealthy = [d for devices in tenant.registered.values() for d in devices if not d.get("health", False)]
        clauses.append(f"{len(unhealthy)} card(s) unhealthy")
    if NODE_INSUFFICIENT_DEVICE in reasons:
        most = max((len(devices) for devices in tenant.registered.values()), default=0)
        asks = max((c.gpus for c in requests), default=0)
        clauses.append(f"asks {asks} cards in one container; the largest node has {most}")
    if ALLOCATED_CARDS_INSUFFICIENT_REQUEST in reasons:
        asks = max((c.gpus for c in requests), default=0)
        clauses.append(f"asks {asks} cards in one container; not that many fit on one node")
    if RESOURCE_QUOTA_NOT_FIT in reasons and quota is not None:
        over = []
        mem = sum(c.gpus * (c.gpumem_mib or 0) for c in requests)
        cores = sum(c.gpus * c.cores for c in requests)
        if quota.gpumem is not None:
            used, limit = quota.gpumem
            over.append(f"gpumem {used} used + {mem or 'its share'} > {limit} MiB" if used + mem > limit
                        else f"gpumem {used}/{limit} MiB")
        if quota.gpucores is not None:
            used, limit = quota.gpucores
            over.append(f"gpucores {used} used + {cores} > {limit} %" if used + cores > limit
                        else f"gpucores {used}/{limit} %")
        clauses.append("quota: " + ", ".join(over))
    return clauses


class Explainer:
    """Explains a tenant's pending pods; identical requests in one namespace are planned once."""

    def __init__(self, tenant: TenantGpus, quotas: Mapping[str, NamespaceQuota]) -> None:
        self.tenant = tenant
        self.quotas = quotas
        self._cache: dict[str, str] = {}

    def explain(self, pod: Mapping[str, Any]) -> str:
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        annotations = meta.get("annotations") or {}
        # Pods of one workload ask alike: key on what HAMi reads, before building anything.
        key = json.dumps([namespace, [c.get("resources") for c in (pod.get("spec") or {}).get("containers") or ()],
                          [annotations.get(a) for a in _REQUEST_ANNOTATIONS]], sort_keys=True, default=str)
        explanation = self._cache.get(key)
        if explanation is None:
            try:
                workload = pod_request(pod, _PENDING, self.tenant.tenant)
            except ValueError as error:
                explanation = f"HAMi cannot read its request: {error}"
            else:
                explanation = self._explain(workload, self.quotas.get(namespace))
            self._cache[key] = explanation
        return explanation

    def _verdict(self, workload: Workload, quota: NamespaceQuota | None, empty: bool) -> tuple[str | None, str]:
        """(the planner's reason, or None when it places the pod; the card it would take)."""
        nodes, fillers = _nodes(self.tenant, empty)
        planner_quota = _quota(quota, fillers, empty)
        result = plan(nodes, [*fillers, workload], {self.tenant.tenant: planner_quota} if planner_quota else None,
                      exact_device_order=False)
        for failure in result.failures:
            if failure.workload == workload.name:
                return failure.reason, ""
        labels = {(g.node, g.uuid): g.label for g in self.tenant.gpus}
        placed = [labels.get((p.node, p.device_id), p.device_id) for p in result.placements
                  if p.workload == workload.name]
        return None, ", ".join(dict.fromkeys(placed))

    def _explain(self, workload: Workload, quota: NamespaceQuota | None) -> str:
        if not self.tenant.registered or not any(self.tenant.registered.values()):
            return f"{self.tenant.tenant} has no GPU registered (is the device plugin or mock-GPU agent up?)"
        asks = _asks(workload)
        now, where = self._verdict(workload, quota, empty=False)
        if now is None:
            return (f"asks {asks}; fits now on {where} by HAMi's rules: the scheduler has not retried yet, or "
                    f"it waits for something the planner does not model (a node lock, a taint, init containers)")
        idle, _ = self._verdict(workload, quota, empty=True)
        # What stops it even on free cards, when that is so; else what stops it now.
        reason = idle if idle is not None else now
        clauses = _clauses(_reasons(reason), workload, self.tenant, quota, idle=idle is not None) or [reason]
        prefix = f"asks {asks}; " if not clauses[0].startswith("asks") else ""
        text = prefix + "; ".join(clauses)
        # Whether it would fit once the other pods leave: the same pod on the same cards, all free.
        if idle is not None:
            return f"never fits: {text}"
        only_quota = set(_reasons(now)) == {RESOURCE_QUOTA_NOT_FIT}
        return f"waits for {'quota' if only_quota else 'capacity'}: {text}"
