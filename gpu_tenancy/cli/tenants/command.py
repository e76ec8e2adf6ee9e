"""`make tenants`: one row per tenant with its health, read live through each tenant's kubeconfig.

    gpu-tenancy tenants --stack dev           # table
    gpu-tenancy tenants --stack dev --json    # for machines
    gpu-tenancy tenants --objects dump.json   # what `status --save` wrote, offline

Per tenant: the API server's Kubernetes version, whether its control plane is ready (`/readyz`), its
endpoint, nodes Ready of total, GPUs registered (HAMi's node annotation) vs declared (the stack file),
pods holding GPUs and GPU pods pending. A tenant that cannot be read is a row that says why.
Exit codes (gpu_tenancy.cli.status_codes): 0 every tenant healthy, 1 some tenant is not (or the stack outputs
could not be read), 2 usage or unreadable input.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from gpu_tenancy.cli import stack_outputs
from gpu_tenancy.cli.base_command import UsageError, command_parser
from gpu_tenancy.cli.status import command as status_cli
from gpu_tenancy.cli.status_codes import FAILURE, SUCCESS, USAGE
from gpu_tenancy.cli.tenants import health as tenants
from gpu_tenancy.cli.tenants.health import TenantHealth


def render_table(rows: Sequence[TenantHealth], width: int, color: bool = False) -> str:
    from rich.table import Table

    from gpu_tenancy.cli.console import text_console

    table = Table(expand=False, box=None, pad_edge=False, header_style="bold")
    for column in ("TENANT", "VERSION", "CONTROL PLANE", "ENDPOINT", "NODES", "GPUS", "HOLDING", "PENDING"):
        table.add_column(column, no_wrap=column in ("TENANT", "VERSION", "NODES", "GPUS"),
                         justify="right" if column in ("NODES", "GPUS", "HOLDING", "PENDING") else "left")
    table.add_column("HEALTH", overflow="fold")
    for row in rows:
        declared = "?" if row.gpus_declared is None else str(row.gpus_declared)
        reachable = not row.problems or not row.problems[0].startswith("unreachable")
        table.add_row(
            row.tenant, row.version or "-", row.control_plane, row.endpoint or "-",
            f"{row.nodes_ready}/{row.nodes_total}" if reachable else "-",
            f"{row.gpus_registered}/{declared}" if reachable else f"-/{declared}",
            str(row.pods_holding_gpus) if reachable else "-", str(row.pending_gpu_pods) if reachable else "-",
            "[green]healthy[/green]" if row.healthy else "[red]" + "; ".join(row.problems) + "[/red]",
        )
    out = io.StringIO()
    console = text_console(out, width, color)
    console.print(table)
    unhealthy = sum(1 for row in rows if not row.healthy)
    console.print(f"{len(rows)} tenant(s), " + (f"{unhealthy} not healthy" if unhealthy else "all healthy")
                  + " (NODES: Ready/total, GPUS: registered/declared)")
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "tenants",
        description="List tenants and their health: version, control plane, endpoint, nodes, GPUs registered "
        "vs declared, pods holding GPUs, pending GPU pods. Exit 1 when any tenant is not healthy.",
    )
    p.add_argument("--stack", default="dev", help="Pulumi stack whose tenants to read (default: dev)")
    p.add_argument("--tenant", action="append", default=[], metavar="NAME", help="only this tenant (repeatable)")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument("--objects", type=Path, help="read a dump written by `status --save` instead of the clusters")
    p.add_argument("--stack-file", type=Path, help="where the declared GPUs are (default: Pulumi.<stack>.yaml)")
    p.add_argument("--width", type=int, help="table width (default: the terminal's)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.objects is not None:
            read = status_cli.load_dump(args.objects, args.tenant)
            declared = tenants.declared_gpus(args.stack_file) if args.stack_file else None
            rows = [tenants.health(name, objects, "", None if declared is None else declared.get(name, 0))
                    for name, objects in read.items()]
        else:
            rows = tenants.gather(args.stack, args.tenant, args.stack_file)
    except (UsageError, ValueError) as error:
        print(f"tenants: {error}", file=sys.stderr)
        return USAGE
    except stack_outputs.OutputsError as error:
        print(f"tenants: {error}", file=sys.stderr)
        return FAILURE
    if args.json:
        print(json.dumps([row.as_json() for row in rows], indent=2))
    else:
        width = args.width or shutil.get_terminal_size((120, 24)).columns
        print(render_table(rows, width, color=sys.stdout.isatty()), end="")
    return SUCCESS if all(row.healthy for row in rows) else FAILURE

