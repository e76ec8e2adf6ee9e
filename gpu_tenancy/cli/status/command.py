"""`make status`: who holds which GPU slice in every tenant, read live through each tenant's kubeconfig.

    gpu-tenancy status --stack dev                  # one row per GPU, holders per workload
    gpu-tenancy status --stack dev --pods           # ... and per pod
    gpu-tenancy status --tenant tenant-a --tenant tenant-b --watch 5   # redrawn every 5 s
    gpu-tenancy status --stack dev --json           # for machines
    gpu-tenancy status --stack dev --png status.png # the picture, as `gpu-tenancy plan report`
    gpu-tenancy status --stack dev --save dump.json # the objects read, for --objects
    gpu-tenancy status --objects dump.json          # saved objects instead of the clusters

Tenants and their kubeconfigs come from the stack outputs (`tenants`, `tenantKubeconfigs`); each tenant
is read on its own (in parallel), so one unreachable tenant is reported in one line while the others are
still shown. Table, JSON and picture are gpu_tenancy.cli.allocation_chart's, shared with `plan report`.
Exit codes (gpu_tenancy.cli.status_codes): 0 every tenant read, 1 some tenant (or the stack outputs) could not be read,
2 usage or unreadable --objects file. Pending pods are explained (gpu_tenancy.cli.status.pending) and shown with the
scheduler's own message; they are state, not an error, and do not change the exit code.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from gpu_tenancy.cli import stack_outputs
from gpu_tenancy.cli.base_command import UsageError, command_parser
from gpu_tenancy.cli.status import report as status
from gpu_tenancy.cli.status_codes import FAILURE, SUCCESS, USAGE
from gpu_tenancy.hami.allocation import AllocationView, TenantView

MAX_PARALLEL_READS = 8
# Redraw in place: cursor home, then clear to the end of the screen (ECMA-48 CUP and ED).
REDRAW = "\x1b[H\x1b[J"
pause = time.sleep  # between --watch frames (a test replaces it)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection while API objects are decoded and views built, and what exists at the end is
    moved out of the collector's sight (gc.freeze): decoded API objects are many acyclic dicts and lists, which
    every collection would walk again (measured in docs/benchmarks.md); they still go when unreferenced."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def view_of(tenant: str, objects: status.TenantObjects) -> TenantView:
    """A tenant's view, or its one-line error when its objects make no sense."""
    try:
        return status.tenant_view(tenant, objects)
    except ValueError as error:
        return status.unreachable(tenant, f"unreadable HAMi state: {error}")


def read_tenants(
    names: Sequence[str], kubeconfigs: Mapping[str, str], probes: bool = False
) -> dict[str, status.TenantObjects | str]:
    """Each tenant's objects, or the one line saying why it could not be read; eight tenants at a time.
    Reusable: `make tenants` (and a health check) gathers with it too."""
    from gpu_tenancy.cli.status.kube import TenantUnreachable, read_tenant

    def read(name: str) -> status.TenantObjects | str:
        try:
            return read_tenant(kubeconfigs[name], probes=probes)
        except TenantUnreachable as error:
            return " ".join(str(error).split())

    with collector_paused(), ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL_READS, len(names)))) as pool:
        return dict(zip(names, pool.map(read, names), strict=True))


def stack_tenants(stack: str, only: Sequence[str]) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """(tenant names, their kubeconfigs, the stack outputs) for `only` (all when empty)."""
    outputs = stack_outputs.read_outputs(stack)
    known = sorted(stack_outputs.tenants(outputs, stack))
    names = select(known, only, f"stack {stack}")
    return names, {name: stack_outputs.tenant_kubeconfig(outputs, stack, name) for name in names}, outputs


def select(known: Sequence[str], only: Sequence[str], where: str) -> list[str]:
    unknown = [name for name in only if name not in known]
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise UsageError(f"{where} has no tenant {names} (tenants: {', '.join(known) or 'none'})")
    return [name for name in known if not only or name in only]


def build(read: Mapping[str, status.TenantObjects | str]) -> AllocationView:
    def one(name: str, objects: status.TenantObjects | str) -> TenantView:
        return status.unreachable(name, objects) if isinstance(objects, str) else view_of(name, objects)

    with collector_paused():
        return status.live_view([one(name, objects) for name, objects in read.items()])


def live(stack: str, only: Sequence[str] = ()) -> AllocationView:
    """Every (or `only` these) tenant's view, read from its cluster."""
    names, kubeconfigs, _ = stack_tenants(stack, only)
    return build(read_tenants(names, kubeconfigs))


def objects_of(document: Mapping[str, Mapping[str, Any]]) -> dict[str, status.TenantObjects | str]:
    """A saved dump: tenant -> {"nodes", "pods", "resourcequotas"} (API JSON), or {"error": why}."""
    return {
        name: str(o["error"]) if "error" in o else status.TenantObjects(
            o.get("nodes", []), o.get("pods", []), o.get("resourcequotas", []), o.get("version"), o.get("readyz"))
        for name, o in document.items()
    }


def dump_of(read: Mapping[str, status.TenantObjects | str]) -> dict[str, Any]:
    """What --save writes and --objects reads back."""
    document: dict[str, Any] = {}
    for name, objects in read.items():
        if isinstance(objects, str):
            document[name] = {"error": objects}
            continue
        entry: dict[str, Any] = {"nodes": list(objects.nodes), "pods": list(objects.pods),
                                 "resourcequotas": list(objects.quotas)}
        if objects.version is not None:
            entry.update(version=objects.version, readyz=objects.readyz)
        document[name] = entry
    return document


def load_dump(path: Path, only: Sequence[str] = ()) -> dict[str, status.TenantObjects | str]:
    try:
        with collector_paused():
            document = json.loads(path.read_bytes())
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: {getattr(error, 'strerror', None) or error}") from None
    if not isinstance(document, dict) or not all(isinstance(v, dict) for v in document.values()):
        raise UsageError(f"{path}: expected an object: tenant -> {{nodes, pods, resourcequotas}}")
    names = select(sorted(document), only, str(path))
    return objects_of({name: document[name] for name in names})


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "status",
        description="Live GPU allocation per tenant: one row per GPU with memory, cores and slots allocated "
        "vs total and its holders per workload, why each pending pod waits (in the tenant's terms, then "
        "the scheduler's own message), and quota used vs limit.",
    )
    p.add_argument("--stack", default="dev", help="Pulumi stack whose tenants to read (default: dev)")
    p.add_argument("--tenant", action="append", default=[], metavar="NAME",
                   help="only this tenant (repeat for several; default: all)")
    p.add_argument("--pods", action="store_true", help="list every pod holding a slice, and every pending pod")
    p.add_argument("--json", action="store_true", help="print the view as JSON instead of a table")
    p.add_argument("--objects", type=Path, help="read tenants from a saved JSON file (what --save writes: "
                   "tenant -> nodes, pods, resourcequotas) instead of their clusters")
    p.add_argument("--save", metavar="FILE", type=Path, help="also write the objects read to FILE (mode 0600; "
                   "pod specs included: review before sharing), for --objects")
    p.add_argument("--png", metavar="PATH", type=Path, help="also draw the allocation to this PNG (one panel "
                   "per tenant in a grid)")
    p.add_argument("--watch", metavar="SECONDS", type=float, nargs="?", const=5.0,
                   help="redraw in place every SECONDS (default 5) until interrupted")
    p.add_argument("--width", type=int, help="table width (default: the terminal's)")
    return p


def _read(args: argparse.Namespace) -> tuple[dict[str, status.TenantObjects | str], str]:
    """(objects per tenant, what they come from)."""
    if args.objects is not None:
        return load_dump(args.objects, args.tenant), str(args.objects)
    names, kubeconfigs, _ = stack_tenants(args.stack, args.tenant)
    # A dump also serves `make tenants --objects`: it then needs /version and /readyz too.
    return read_tenants(names, kubeconfigs, probes=args.save is not None), f"stack {args.stack}"


def _frame(args: argparse.Namespace, out: TextIO) -> int:
    from gpu_tenancy.cli.allocation_chart import render_json, render_png, render_table

    read, source = _read(args)
    view = build(read)
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    title = f"{source} at {stamp}"
    if args.save is not None:
        from gpu_tenancy.cli.kubeconfig import write_private

        try:
            write_private(args.save, json.dumps(dump_of(read)))
        except OSError as error:
            raise UsageError(f"cannot write {args.save}: {error.strerror or error}") from None
    for tenant in view.tenants:
        if tenant.error and args.watch is None:
            print(f"status: {tenant.tenant}: {tenant.error}", file=sys.stderr)
    if args.png is not None:
        try:
            pictures = render_png(view, args.png, title=title)
        except OSError as error:
            raise UsageError(f"cannot write {args.png}: {error.strerror or error}") from None
        if len(pictures) > 1 and args.watch is None:
            print(f"status: {len(view.tenants)} tenants drawn on {len(pictures)} pages: "
                  f"{', '.join(map(str, pictures))}", file=sys.stderr)
    if args.json:
        out.write(json.dumps(render_json(view), indent=2) + "\n")
    else:
        width = args.width or shutil.get_terminal_size((120, 24)).columns
        text = render_table(view, width, color=out.isatty(), per_pod=args.pods, title=title)
        out.write((REDRAW if args.watch is not None else "") + text)
    out.flush()
    return FAILURE if any(t.error for t in view.tenants) else SUCCESS


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    stream = out or sys.stdout
    if args.watch is not None and (args.watch <= 0 or args.json):
        print("status: --watch takes a positive number of seconds and a table (not --json)", file=sys.stderr)
        return USAGE
    try:
        code = _frame(args, stream)
        while args.watch is not None:
            pause(args.watch)
            # The last frame's objects are gone; what it left frozen (collector_paused) may hold cycles
            # (the picture's): let the collector see it again while the heap is small.
            gc.unfreeze()
            gc.collect()
            code = _frame(args, stream)
    except KeyboardInterrupt:
        return SUCCESS  # leaving --watch is how it ends
    except UsageError as error:
        print(f"status: {error}", file=sys.stderr)
        return USAGE
    except stack_outputs.OutputsError as error:
        print(f"status: {error}", file=sys.stderr)
        return FAILURE
    return code

