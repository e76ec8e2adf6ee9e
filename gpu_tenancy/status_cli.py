"""`make status`: who holds which GPU slice in every tenant, read live through each tenant's kubeconfig.

    python -m gpu_tenancy.status_cli --stack dev            # table, terminal width
    python -m gpu_tenancy.status_cli --stack dev --json     # for machines
    python -m gpu_tenancy.status_cli --stack dev --png status.png   # the picture, as `plan_cli report`
    python -m gpu_tenancy.status_cli --objects dump.json    # recorded objects instead of the clusters

Tenants and their kubeconfigs come from the stack outputs (`tenants`, `tenantKubeconfigs`); each tenant
is read on its own (in parallel), so one unreachable tenant is reported in one line while the others are
still shown. Table, JSON and picture are gpu_tenancy.allocation_chart's, shared with `plan_cli report`.
Exit codes: 0 every tenant read, 1 some tenant (or the stack outputs) could not be read,
2 usage or unreadable --objects file. Pending pods are shown with the scheduler's reason; they are state,
not an error, and do not change the exit code.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpu_tenancy import stack_outputs, status
from gpu_tenancy.allocation import AllocationView, TenantView
from gpu_tenancy.allocation_chart import render_json, render_png, render_table

MAX_PARALLEL_READS = 8


def view_of(tenant: str, read: Callable[[], status.TenantObjects]) -> TenantView:
    """A tenant's view, or its one-line error when it cannot be read or its objects make no sense."""
    from gpu_tenancy.status_kube import TenantUnreachable  # the kubernetes client only when reading clusters

    try:
        return status.tenant_view(tenant, read())
    except TenantUnreachable as error:
        return status.unreachable(tenant, str(error))
    except ValueError as error:
        return status.unreachable(tenant, f"unreadable HAMi state: {error}")


def live(stack: str) -> AllocationView:
    from gpu_tenancy.status_kube import read_tenant

    outputs = stack_outputs.read_outputs(stack)
    names = sorted(stack_outputs.tenants(outputs, stack))
    kubeconfigs = {name: stack_outputs.tenant_kubeconfig(outputs, stack, name) for name in names}
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL_READS, len(names)))) as pool:
        views = pool.map(lambda name: view_of(name, lambda: read_tenant(kubeconfigs[name])), names)
        return status.live_view(views)


def recorded(objects: Mapping[str, Mapping[str, Any]]) -> AllocationView:
    """The view from saved objects: tenant -> {"nodes", "pods", "resourcequotas"} (API JSON)."""
    def reader(o: Mapping[str, Any]) -> Callable[[], status.TenantObjects]:
        return lambda: status.TenantObjects(o.get("nodes", []), o.get("pods", []), o.get("resourcequotas", []))

    return status.live_view(view_of(name, reader(o)) for name, o in objects.items())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m gpu_tenancy.status_cli",
        description="Live GPU allocation per tenant and GPU: memory, cores and slots allocated vs total, "
        "which pods hold which slice (HAMi's annotations), pending pods with the scheduler's reason, "
        "and quota used vs limit.",
    )
    p.add_argument("--stack", default="dev", help="Pulumi stack whose tenants to read (default: dev)")
    p.add_argument("--json", action="store_true", help="print the view as JSON instead of a table")
    p.add_argument("--objects", type=Path, help="read tenants from a saved JSON file "
                   "(tenant -> nodes, pods, resourcequotas) instead of their clusters")
    p.add_argument("--png", metavar="PATH", type=Path, help="also draw the allocation to this PNG (1200 px wide)")
    p.add_argument("--width", type=int, help="table width (default: the terminal's)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.objects is not None:
        try:
            objects = json.loads(args.objects.read_text())
        except (OSError, json.JSONDecodeError) as error:
            print(f"status: {args.objects}: {getattr(error, 'strerror', None) or error}", file=sys.stderr)
            return 2
        if not isinstance(objects, dict) or not all(isinstance(v, dict) for v in objects.values()):
            print(f"status: {args.objects}: expected an object: tenant -> {{nodes, pods, resourcequotas}}",
                  file=sys.stderr)
            return 2
        view = recorded(objects)
    else:
        try:
            view = live(args.stack)
        except stack_outputs.OutputsError as error:
            print(f"status: {error}", file=sys.stderr)
            return 1
    for tenant in view.tenants:
        if tenant.error:
            print(f"status: {tenant.tenant}: {tenant.error}", file=sys.stderr)
    if args.png is not None:
        try:
            render_png(view, args.png)
        except OSError as error:
            print(f"status: cannot write {args.png}: {error.strerror or error}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(render_json(view), indent=2))
    else:
        width = args.width or shutil.get_terminal_size((120, 24)).columns
        print(render_table(view, width, color=sys.stdout.isatty()), end="")
    return 1 if any(t.error for t in view.tenants) else 0


if __name__ == "__main__":
    sys.exit(main())
