"""The planner CLI's order verdicts: per replica, fits whatever the order, fits in none, or depends on it
(gpu_tenancy.hami.planner.orders), as text lines, JSON and an exit code.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gpu_tenancy.cli.status_codes import DEPENDS, FAILURE, SUCCESS
from gpu_tenancy.contract.config import NAMESPACE
from gpu_tenancy.hami.planner.model import Node, Quota, Workload
from gpu_tenancy.hami.planner.orders import OrderVerdicts, verdicts
from gpu_tenancy.hami.planner.report import PlanResult


def ordered_tenants(path: str, workloads: Sequence[Workload]) -> frozenset[str | None]:
    """Every tenant when the stack file sets `orderedWorkloads: true` (the JSON form has no such setting)."""
    if not path.endswith((".yaml", ".yml")):
        return frozenset()
    try:
        config = (yaml.safe_load(Path(path).read_text()) or {}).get("config") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return frozenset()
    if config.get(f"{NAMESPACE}:orderedWorkloads") is not True:
        return frozenset()
    return frozenset(w.tenant for w in workloads)


def order_verdicts(
    path: str, nodes: Sequence[Node], workloads: Sequence[Workload],
    quota: Quota | dict[str, Quota] | None, declared: PlanResult,
) -> OrderVerdicts:
    return verdicts(nodes, workloads, quota, ordered=ordered_tenants(path, workloads), declared=declared)


def exit_code(found: OrderVerdicts) -> int:
    return {"fits": SUCCESS, "never": FAILURE, "depends": DEPENDS}[found.verdict]


def verdicts_json(found: OrderVerdicts) -> dict[str, Any]:
    return {
        "verdict": found.verdict,
        "replicas": [
            {"workload": r.workload, "replica": r.replica, "verdict": r.verdict, "because": r.because}
            for r in found.replicas
        ],
    }


def summary(found: OrderVerdicts) -> str:
    """The whole plan's verdict in a few words (the text's last line, the picture's subtitle)."""
    never, depends = len(found.of("never")), len(found.of("depends"))
    if not never and not depends:
        return "fits, whatever order Kubernetes and HAMi take"
    parts = [f"{never} replica(s) fit in no order"] if never else []
    parts += [f"{depends} replica(s) fit in some orders only"] if depends else []
    return "; ".join(parts)


def verdict_lines(found: OrderVerdicts) -> str:
    """One line per replica that is not certain to fit, then the whole plan's verdict."""
    lines = []
    for r in found.replicas:
        if r.verdict == "never":
            lines.append(f"does not fit in any order: {r.workload} replica {r.replica}: {r.because}")
        elif r.verdict == "depends":
            lines.append(f"fits in some orders only: {r.workload} replica {r.replica}: depends on {r.because}")
    lines.append(f"Verdict: {summary(found)}")
    return "\n".join(lines) + "\n"
