"""CLI: ``python -m gpu_tenancy.plan_cli plan FILE.json`` / ``report FILE.json [--png out.png]``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpu_tenancy.planner import (
    ContainerRequest,
    Node,
    PlanResult,
    Quota,
    Workload,
    node_from_register,
    plan,
    utilisation,
)


def load(path: str) -> tuple[list[Node], list[Workload], Quota | dict[str, Quota] | None]:
    data = json.loads(Path(path).read_text())
    nodes = [node_from_register(n["name"], n.get("devices", []), n.get("tenant")) for n in data.get("nodes", [])]
    wls = []
    for w in data.get("workloads", []):
        cs = tuple(
            ContainerRequest(
                gpus=int(c.get("gpus", 1)),
                gpumem_mib=c.get("gpumemMiB"),
                gpumem_percentage=c.get("gpumemPercentage"),
                gpucores=int(c.get("gpucores", 0)),
            )
            for c in w.get("containers", [])
        )
        wls.append(
            Workload(
                name=w["name"],
                containers=cs,
                replicas=int(w.get("replicas", 1)),
                use_gpu_type=tuple(w.get("useGpuType", ())),
                nouse_gpu_type=tuple(w.get("noUseGpuType", ())),
                gpu_scheduler_policy=w.get("gpuSchedulerPolicy", "spread"),
                node_scheduler_policy=w.get("nodeSchedulerPolicy", "binpack"),
                tenant=w.get("tenant"),
            )
        )
    q: Any = data.get("quota")
    quota: Quota | dict[str, Quota] | None = None
    if isinstance(q, Mapping) and q:
        if all(k.startswith("limits.") for k in q):
            quota = Quota.from_dict(q)
        else:
            quota = {t: Quota.from_dict(v) for t, v in q.items()}
    return nodes, wls, quota


def result_json(res: PlanResult) -> dict[str, Any]:
    return {
        "fits": res.fits,
        "placements": [asdict(p) for p in res.placements],
        "failures": [
            {"workload": f.workload, "replica": f.replica, "reason": f.reason, "nodeReasons": dict(f.node_reasons)}
            for f in res.failures
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpu_tenancy.plan_cli")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p1 = sub.add_parser("plan")
    p1.add_argument("file")
    p2 = sub.add_parser("report")
    p2.add_argument("file")
    p2.add_argument("--png")
    args = ap.parse_args(argv)
    nodes, wls, quota = load(args.file)
    res = plan(nodes, wls, quota)
    if args.cmd == "plan":
        print(json.dumps(result_json(res), indent=2))
        return 0 if res.fits else 1
    from rich.console import Console
    from rich.table import Table

    u = utilisation(nodes, res, wls)
    table = Table(title="GPU allocation")
    for col in ("tenant", "node", "gpu", "type", "mem MiB", "mem %", "cores", "cores %", "slots"):
        table.add_column(col)
    for g in u.gpus:
        table.add_row(
            g.tenant or "-",
            g.node,
            g.device_id,
            g.type,
            f"{g.mem_allocated}/{g.mem_capacity}",
            f"{g.mem_pct:.0f}",
            f"{g.cores_allocated}/{g.cores_capacity}",
            f"{g.cores_pct:.0f}",
            f"{g.slots_used}/{g.slots_capacity}",
        )
    con = Console(width=160)
    con.print(table)
    con.print(
        f"cards in use {u.cards_in_use}/{u.cards_total}; whole cards without sharing: "
        f"{u.whole_cards_placed} placed, {u.whole_cards_requested} requested"
    )
    for f in res.failures:
        con.print(f"[red]does not fit[/red] {f.workload}[{f.replica}]: {f.reason}")
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(max(4, len(u.gpus)), 3))
        xs = range(len(u.gpus))
        ax.bar([x - 0.2 for x in xs], [g.mem_pct for g in u.gpus], 0.4, label="memory %")
        ax.bar([x + 0.2 for x in xs], [g.cores_pct for g in u.gpus], 0.4, label="cores %")
        ax.set_xticks(list(xs), [g.device_id for g in u.gpus], rotation=30)
        ax.set_ylim(0, 100)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
