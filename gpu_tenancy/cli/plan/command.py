"""Planner CLI: will the declared workloads fit the declared GPUs, as HAMi would place them?

    gpu-tenancy plan plan Pulumi.dev.yaml            # table; --json for machines
    gpu-tenancy plan report examples/plan-dev.json --png plan.png

Input is a stack file (``Pulumi.<stack>.yaml``: validated whole as the program validates it, secure values never
decrypted, gpu_tenancy/contract/stack_file.py) or the planner's JSON form (``nodes`` as HAMi registers them,
``workloads``, ``quota``; what ``python -m gpu_tenancy.builders.workloads.workloads`` writes), validated with the
stack config's own models (gpu_tenancy.contract.tenant_config), unknown keys included. Exit codes
(gpu_tenancy.cli.status_codes): 0 everything fits whatever the order, 1 some replica fits in no order, 2 the command
line or the input is wrong (one line on stderr naming the file and the key), 3 some replica fits in some orders only
(gpu_tenancy.hami.planner.orders).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from gpu_tenancy.cli.base_command import CommandParser, command_parser
from gpu_tenancy.cli.plan import order_verdicts, plan_input
from gpu_tenancy.cli.plan.plan_input import UNASSIGNED, InputError, load
from gpu_tenancy.cli.status_codes import USAGE
from gpu_tenancy.contract.device_layers import find_layer
from gpu_tenancy.hami.allocation import AllocationView, GpuView, QuotaUse, Slice, TenantView, Unplaced
from gpu_tenancy.hami.planner.model import QUOTA_GPU, QUOTA_GPUCORES, QUOTA_GPUMEM, Node, Quota, Workload
from gpu_tenancy.hami.planner.report import PlanResult
from gpu_tenancy.hami.planner.schedule import plan

# Whether cards register in a stable order is the device layer's (DeviceLayer.stable_card_order); an unknown
# mode is taken as unstable.
CARD_CHOICE_NOTE = (
    "The verdicts hold in every order; the placements are one order's. On sim-nvml and real hosts which of "
    "two equal cards a slice lands on can differ (HAMi registers cards in a different order each time).\n"
)


def card_order_note(nodes: Sequence[Node], mode: str | None) -> str:
    """What of the plan holds whatever order HAMi registers the cards in (nothing to say for sim)."""
    layer = find_layer(mode)
    if layer is not None and layer.stable_card_order:
        return ""
    mixed = sorted(n.name for n in nodes if len({(d.type, d.devmem) for d in n.devices}) > 1)
    if not mixed:
        return CARD_CHOICE_NOTE
    return (
        f"Node(s) {', '.join(mixed)} mix card models; where HAMi's scores tie, which model a slice lands on "
        "changes with the order HAMi registers the cards in, and with it each card's totals. The placements are "
        "one possible outcome; the verdicts take every tie into account.\n"
    )


# --------------------------------------------------------------------------- results


def result_json(res: PlanResult) -> dict[str, Any]:
    return {
        "fits": res.fits,
        "placements": [asdict(p) for p in res.placements],
        "failures": [
            {"workload": f.workload, "replica": f.replica, "reason": f.reason, "nodeReasons": dict(f.node_reasons)}
            for f in res.failures
        ],
    }


def _quota_uses(
    quota: Quota | None, tenant_pods: Sequence[tuple[Workload, int]], res: PlanResult, tenant_nodes: set[str]
) -> tuple[QuotaUse, ...]:
    if quota is None:
        return ()
    placed = [p for p in res.placements if p.node in tenant_nodes]
    refused = {(f.workload, f.replica) for f in res.failures if not f.admitted}
    # The API server counts every admitted pod, placed or pending, against the GPU count.
    gpus = sum(sum(c.gpus for c in w.containers) for w, r in tenant_pods if (w.name, r) not in refused)
    used = {QUOTA_GPU: gpus, QUOTA_GPUMEM: sum(p.mem_mib for p in placed), QUOTA_GPUCORES: sum(p.cores for p in placed)}
    return tuple(QuotaUse(key, used[key], limit) for key, limit in quota.to_dict().items())


def planned_view(
    nodes: Sequence[Node], workloads: Sequence[Workload], quota: Quota | Mapping[str, Quota] | None, res: PlanResult
) -> AllocationView:
    """The plan as the shared AllocationView: one TenantView per node tenant, in input order."""
    tenants: list[str] = []
    for n in nodes:
        if (n.tenant or UNASSIGNED) not in tenants:
            tenants.append(n.tenant or UNASSIGNED)
    for w in workloads:
        if (w.tenant or UNASSIGNED) not in tenants:
            tenants.append(w.tenant or UNASSIGNED)
    slices: dict[tuple[str, str], list[Slice]] = {}
    for p in res.placements:
        held = Slice(p.workload, f"{p.workload}-{p.replica}", p.mem_mib, p.cores)
        slices.setdefault((p.node, p.device_id), []).append(held)
    views = []
    for tenant in tenants:
        mine = [n for n in nodes if (n.tenant or UNASSIGNED) == tenant]
        gpus = tuple(
            GpuView(n.name, d.type, d.index, d.id, d.devmem, d.devcore, d.count, tuple(slices.get((n.name, d.id), ())))
            for n in mine
            for d in n.devices
        )
        tenant_workloads = [w for w in workloads if (w.tenant or UNASSIGNED) == tenant]
        names = {w.name for w in tenant_workloads}
        unplaced = tuple(
            Unplaced(f.workload, f"{f.workload}-{f.replica}", f.reason) for f in res.failures if f.workload in names
        )
        tenant_quota = quota if isinstance(quota, Quota) or quota is None else quota.get(tenant)
        pods = [(w, r) for w in tenant_workloads for r in range(w.replicas) if any(c.gpus for c in w.containers)]
        views.append(TenantView(tenant, gpus, unplaced, _quota_uses(tenant_quota, pods, res, {n.name for n in mine})))
    return AllocationView("planned", tuple(views))


def _plan_table(view: AllocationView, res: PlanResult, width: int) -> str:
    from rich.console import Console
    from rich.table import Table

    from gpu_tenancy.cli.allocation_chart import label_lines, label_width

    gpu_label = {(g.node, g.uuid): g.label for t in view.tenants for g in t.gpus}
    rows = [(p.workload, str(p.replica), str(p.container), gpu_label.get((p.node, p.device_id), p.device_id),
             str(p.mem_mib), f"{p.cores}%") for p in res.placements]
    headers = ("workload", "replica", "ctr", "GPU (node / model #index)", "memory MiB", "cores")
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    # The GPU label gets what the other columns leave; it is cut between name parts, not inside one.
    room = max(label_width(width, 6, [widths[0], *widths[1:3], *widths[4:]]), 12)
    table = Table(expand=True)
    table.add_column("workload", overflow="fold")
    for column in ("replica", "ctr"):
        table.add_column(column, justify="right", no_wrap=True)
    header = headers[3] if len(headers[3]) <= room else label_lines(headers[3], room)
    table.add_column(header, no_wrap=True)  # cut by label_lines, between name parts
    for column in ("memory MiB", "cores"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        label = row[3] if room >= widths[3] else label_lines(row[3], room)
        table.add_row(*row[:3], label, *row[4:])
    out = io.StringIO()
    console = Console(file=out, width=width, no_color=True, highlight=False)
    if res.placements:
        console.print(table)
    for f in res.failures:
        console.print(f"not placed in this order: {f.workload} replica {f.replica}: {f.reason}")
    what = "everything placed" if res.fits else f"{len(res.failures)} replica(s) not placed"
    console.print(f"In declaration order: {len(res.placements)} GPU slice(s) placed; {what}")
    return out.getvalue()


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    common = CommandParser(add_help=False)
    common.add_argument(
        "file",
        help="a stack file (Pulumi.<stack>.yaml; validated as the program does, no secrets needed) "
        "or the planner's JSON form (nodes, workloads, quota; see examples/plan-*.json)",
    )
    common.add_argument("--json", action="store_true", help="print machine-readable JSON instead of a table")
    common.add_argument("--width", type=int, default=None, help="table width in columns (default: the terminal's)")
    ap = command_parser(
        "plan",
        description="Plan GPU workloads the way HAMi v2.10 places them. Exit 0: everything fits whatever the "
        "order; 1: a replica fits in no order; 2: bad command line or input; 3: a replica fits in some orders only.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{plan,report}", parser_class=CommandParser)
    sub.add_parser(
        "plan", parents=[common], help="place every replica; list placements and what does not fit",
        description="Place every replica as HAMi would and list placements and, with HAMi's reason, what does "
        "not fit. --json prints {fits, placements, failures}.",
    )
    report = sub.add_parser(
        "report", parents=[common], help="per-tenant, per-GPU allocation table and an optional PNG",
        description="Show what the plan allocates per tenant and per GPU (memory, cores, slots, who holds it, "
        "quota used) and what does not fit. --json prints the allocation view; --png draws it.",
    )
    report.add_argument("--png", metavar="PATH", help="also draw the allocation to this PNG (1200 px wide)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.width is not None and args.width < 40:
        print(f"{_parser().prog}: --width must be at least 40", file=sys.stderr)
        return USAGE
    try:
        nodes, workloads, quota = load(args.file)
        res = plan(nodes, workloads, quota)
        found = order_verdicts.order_verdicts(args.file, nodes, workloads, quota, res)
    except InputError as error:
        print(error, file=sys.stderr)
        return USAGE
    except ValueError as error:  # the planner refusing what it does not model
        print(f"{args.file}: {error}", file=sys.stderr)
        return USAGE
    code = order_verdicts.exit_code(found)
    width = args.width or shutil.get_terminal_size().columns
    note = card_order_note(nodes, plan_input.stack_mode(args.file))
    view = planned_view(nodes, workloads, quota, res)
    if args.cmd == "plan":
        if args.json:
            print(json.dumps({**result_json(res), "order": order_verdicts.verdicts_json(found)}, indent=2))
        else:
            print(_plan_table(view, res, width) + order_verdicts.verdict_lines(found) + note, end="")
        return code
    from gpu_tenancy.cli.allocation_chart import render_json, render_png, render_table

    if args.png:
        try:
            render_png(view, args.png, f"Verdict: {order_verdicts.summary(found)}")
        except OSError as error:
            print(f"{args.png}: cannot write it ({error.strerror or error})", file=sys.stderr)
            return USAGE
    if args.json:
        print(json.dumps({**render_json(view), "order": order_verdicts.verdicts_json(found)}, indent=2))
    else:
        table = render_table(view, width, color=sys.stdout.isatty())
        print(table + order_verdicts.verdict_lines(found) + note, end="")
    if args.png:
        print(f"picture: {args.png}", file=sys.stderr)
    return code

