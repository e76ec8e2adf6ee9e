"""The one rendering of an `AllocationView`: a terminal table (`render_table`), JSON (`render_json`) and a
picture (`render_png`, drawn by gpu_tenancy.cli.allocation_picture).

`gpu-tenancy plan report` (planned) and `status` (live) both call these, so a plan and the cluster look alike:
one row per GPU labelled ``node / model #index``, its memory, cores and slots allocated vs total, its
holders summed per workload (``a-infer ×4: 40960 MiB, 80%``; per pod on request), the quota in one order
(GPUs, memory, cores), and what holds no GPU with the reason.
"""

from __future__ import annotations

import dataclasses
import io
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gpu_tenancy.cli.console import text_console
from gpu_tenancy.hami.allocation import AllocationView, GpuView, QuotaUse, TenantView, Unplaced, quota_sort_key
from gpu_tenancy.hami.protocol import NVIDIA

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["build_figure", "render_json", "render_png", "render_table", "workload_totals"]

_MEMORY_KEY = f"limits.{NVIDIA.resource_memory}"
_CORES_KEY = f"limits.{NVIDIA.resource_cores}"


def _title(view: AllocationView) -> str:
    what = "Planned" if view.source == "planned" else "Live"
    return f"{what} GPU allocation: {view.verdict}"


def workload_totals(gpu: GpuView) -> list[tuple[str, int, int, int]]:
    """(workload, slices, memory MiB, cores) per workload on one GPU, in first-seen order."""
    totals: dict[str, list[int]] = {}
    for s in gpu.slices:
        t = totals.setdefault(s.workload, [0, 0, 0])
        t[0] += 1
        t[1] += s.memory_mib
        t[2] += s.cores
    return [(w, n, m, c) for w, (n, m, c) in totals.items()]


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _quota_text(quota: Iterable[QuotaUse]) -> str:
    units = {_MEMORY_KEY: " MiB", _CORES_KEY: "%"}
    return " · ".join(
        f"{q.key.rsplit('/', 1)[-1]} {q.used}/{q.limit}{units.get(q.key, '')}"
        for q in sorted(quota, key=lambda q: quota_sort_key(q.key))
    )


def holders_text(gpu: GpuView, per_pod: bool) -> str:
    """Who holds a GPU: one line per workload (`a-infer ×4: 40960 MiB, 80%`), or per pod with `per_pod`."""
    if per_pod:
        return "\n".join(f"{s.pod}: {s.memory_mib} MiB, {s.cores}%" for s in gpu.slices) or "-"
    return "\n".join(f"{w} ×{n}: {m} MiB, {c}%" for w, n, m, c in workload_totals(gpu)) or "-"


def unplaced_groups(unplaced: Iterable[Unplaced]) -> list[tuple[Unplaced, int]]:
    """Pods waiting for the same reason, in first-seen order, with how many: `(first, count)`."""
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for u in unplaced:
        group = groups.setdefault((u.workload, u.reason, u.explanation), [u, 0])
        group[1] += 1
    return [(first, count) for first, count in groups.values()]


def _unplaced_text(u: Unplaced, count: int, live: bool) -> list[Padding]:
    """The pod (or pods) and why, then the scheduler's own words; wrapped lines stay indented."""
    what = "pending " if live else ""
    who = f"{u.pod} ({u.workload})" if count == 1 else f"{count} pods of {u.workload} (e.g. {u.pod})"
    first = Text.assemble(("✗ ", "red"), (f"{what}{who}: {u.explanation or u.reason}", "red"))
    lines = [Padding(first, (0, 0, 0, 2), expand=False)]
    if u.explanation:
        lines.append(Padding(Text(f"scheduler: {u.reason}"), (0, 0, 0, 4), expand=False))
    return lines


# --------------------------------------------------------------------------- JSON


def render_json(view: AllocationView) -> dict[str, Any]:
    """The view as plain data for ``--json``: its fields plus the derived verdict, per-tenant fits and
    per-GPU label and totals, so a machine reads what the table shows."""
    document = dataclasses.asdict(view)
    document["fits"], document["verdict"] = view.fits, view.verdict
    for tenant, data in zip(view.tenants, document["tenants"], strict=True):
        data["fits"] = tenant.fits
        for gpu, gpu_data in zip(tenant.gpus, data["gpus"], strict=True):
            gpu_data.update(label=gpu.label, memory_allocated=gpu.memory_allocated,
                            cores_allocated=gpu.cores_allocated, slots_used=gpu.slots_used)
    return document


# --------------------------------------------------------------------------- table


def label_lines(label: str, width: int) -> str:
    """``label`` in lines of at most ``width`` columns, broken after a hyphen or at a space, so a node name is cut
    between its parts (rich would fold a long word wherever the column ends); only a part longer than the
    column is cut inside."""
    return "\n".join(textwrap.wrap(label, width=max(width, 8), break_on_hyphens=True)) or label


def label_width(width: int, columns: int, others: Iterable[int]) -> int:
    """What a table ``width`` wide leaves its GPU label column, the other columns taking ``others`` (a border
    between columns and at each side, one space of padding on each side of every cell)."""
    return width - (columns + 1) - 2 * columns - sum(others)


def _tenant_table(tenant: TenantView, width: int, per_pod: bool) -> Table:
    table = Table(title=f"[b]{tenant.tenant}[/b]", title_justify="left", expand=True, show_lines=False)
    longest = max((len(g.label) for g in tenant.gpus), default=10)
    rows = [(
        f"{gpu.memory_allocated}/{gpu.memory_mib} ({_pct(gpu.memory_allocated, gpu.memory_mib)})",
        f"{gpu.cores_allocated}/{gpu.cores}",
        f"{gpu.slots_used}/{gpu.split_count}",
    ) for gpu in tenant.gpus]
    fixed = [max([len(header), *(len(row[i]) for row in rows)]) for i, header in enumerate(("memory MiB", "cores",
                                                                                               "slots"))]
    # The label is what the user looks for: on one line while the table has room, else cut between name parts,
    # leaving "held by" at least 16 columns. Never wrapped by rich, which would fold inside a word.
    room = max(label_width(width, 5, [*fixed, 16]), 12)
    header = "GPU (node / model #index)"
    table.add_column(header if len(header) <= room else label_lines(header, room), no_wrap=True)
    table.add_column("memory MiB", justify="right")
    table.add_column("cores", justify="right", no_wrap=True)
    table.add_column("slots", justify="right", no_wrap=True)
    table.add_column("held by", overflow="fold")
    for gpu, (memory, cores, slots) in zip(tenant.gpus, rows, strict=True):
        table.add_row(gpu.label if longest <= room else label_lines(gpu.label, room), memory, cores, slots,
                      holders_text(gpu, per_pod))
    return table


def render_table(view: AllocationView, width: int, *, color: bool = False, per_pod: bool = False,
                 title: str | None = None) -> str:
    """The view as text ``width`` columns wide: one table per tenant with one row per GPU and its holders
    summed per workload (per pod with ``per_pod``), its quota, and what holds no GPU (live: pods waiting
    for the same reason in one line unless ``per_pod``). ``title`` goes above it all (e.g. stack and time)."""
    out = io.StringIO()
    console = text_console(out, width, color)
    parts: list[Table | Text | Padding] = [Text(title, style="bold")] if title else []
    live = view.source == "live"
    for tenant in view.tenants:
        if tenant.error:
            parts.append(Text.assemble((tenant.tenant, "bold"), ": ", (tenant.error, "red")))
            continue
        parts.append(_tenant_table(tenant, width, per_pod and live))
        if tenant.quota:
            parts.append(Text(f"  quota: {_quota_text(tenant.quota)}"))
        # Planned replicas are few and numbered: each on its line, as `plan` lists them.
        grouped = unplaced_groups(tenant.unplaced) if live and not per_pod else [(u, 1) for u in tenant.unplaced]
        for u, count in grouped:
            parts.extend(_unplaced_text(u, count, live))
    verdict_style = "green" if view.fits else "bold red"
    parts.append(Text(_title(view), style=verdict_style))
    console.print(Group(*parts))
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())  # rich pads to the width


# --------------------------------------------------------------------------- picture


def build_figure(view: AllocationView, title: str | None = None, page: int = 0) -> Figure:
    """One page of the picture (gpu_tenancy.cli.allocation_picture; matplotlib is imported only for it)."""
    from gpu_tenancy.cli import allocation_picture

    return allocation_picture.build_figure(view, title, page)


def render_png(view: AllocationView, path: str | Path, title: str | None = None) -> list[Path]:
    """Write the picture to ``path`` (further pages beside it) and return every file written."""
    from gpu_tenancy.cli import allocation_picture

    return allocation_picture.render_png(view, path, title)
