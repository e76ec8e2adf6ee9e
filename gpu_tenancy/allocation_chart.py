"""The one rendering of an `AllocationView`: a terminal table (`render_table`) and a picture (`render_png`).

`plan_cli report` (planned) and `status` (live) both call these, so a plan and the cluster look alike.
The picture has one panel per tenant and two bar charts in it, GPU memory and GPU cores, one row per GPU
labelled ``node / model #index`` plus an "all GPUs" row on which the tenant's quota is drawn as a line.
Each row is stacked by workload (one colour per workload, legend outside the bars), in percent of that
GPU's (or the tenant's) capacity so cards of different sizes compare. Replicas or pods that hold no GPU
are listed in red under their tenant with the scheduler's reason; the title carries the verdict.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from gpu_tenancy.allocation import AllocationView, GpuView, QuotaUse, TenantView

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["FIGURE_WIDTH_PX", "build_figure", "render_json", "render_png", "render_table", "workload_totals"]

FIGURE_WIDTH_PX = 1200
_DPI = 100
_MEMORY_KEY = "limits.nvidia.com/gpumem"
_CORES_KEY = "limits.nvidia.com/gpucores"
_GPU_KEY = "limits.nvidia.com/gpu"


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
        f"{q.key.rsplit('/', 1)[-1]} {q.used}/{q.limit}{units.get(q.key, '')}" for q in quota
    )


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


def _tenant_table(tenant: TenantView, width: int, live: bool) -> Table:
    table = Table(title=f"[b]{tenant.tenant}[/b]", title_justify="left", expand=True, show_lines=False)
    longest = max((len(g.label) for g in tenant.gpus), default=10)
    # The label is what the user looks for: keep it on one line while the table has room.
    wide = width >= longest + 80
    table.add_column("GPU (node / model #index)", overflow="fold", min_width=longest if wide else None)
    table.add_column("memory MiB", justify="right")
    table.add_column("cores", justify="right", no_wrap=True)
    table.add_column("slots", justify="right", no_wrap=True)
    table.add_column("held by", overflow="fold")
    for gpu in tenant.gpus:
        if live:  # which pod holds which slice
            holders = "\n".join(f"{s.pod}: {s.memory_mib} MiB, {s.cores}%" for s in gpu.slices) or "-"
        else:  # planned pods are just numbered replicas: sum them per workload
            holders = "\n".join(f"{w} ×{n}: {m} MiB, {c}%" for w, n, m, c in workload_totals(gpu)) or "-"
        table.add_row(
            gpu.label,
            f"{gpu.memory_allocated}/{gpu.memory_mib} ({_pct(gpu.memory_allocated, gpu.memory_mib)})",
            f"{gpu.cores_allocated}/{gpu.cores}",
            f"{gpu.slots_used}/{gpu.split_count}",
            holders,
        )
    return table


def render_table(view: AllocationView, width: int, *, color: bool = False) -> str:
    """The view as text ``width`` columns wide: one table per tenant, its quota, what holds no GPU."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=color, no_color=not color, highlight=False)
    parts: list[Table | Text] = []
    for tenant in view.tenants:
        if tenant.error:
            parts.append(Text.assemble((tenant.tenant, "bold"), ": ", (tenant.error, "red")))
            continue
        parts.append(_tenant_table(tenant, width, view.source == "live"))
        if tenant.quota:
            parts.append(Text(f"  quota: {_quota_text(tenant.quota)}"))
        for u in tenant.unplaced:
            what = "" if view.source == "planned" else "pending "
            parts.append(Text.assemble("  ", ("✗ ", "red"), (f"{what}{u.pod} ({u.workload}): {u.reason}", "red")))
    verdict_style = "green" if view.fits else "bold red"
    parts.append(Text(_title(view), style=verdict_style))
    console.print(Group(*parts))
    return out.getvalue()


# --------------------------------------------------------------------------- picture


def _colours(view: AllocationView) -> dict[tuple[str, str], tuple[float, float, float, float]]:
    from matplotlib import colormaps

    keys: list[tuple[str, str]] = []
    for tenant in view.tenants:
        for gpu in tenant.gpus:
            for s in gpu.slices:
                if (tenant.tenant, s.workload) not in keys:
                    keys.append((tenant.tenant, s.workload))
    palette = colormaps["tab20" if len(keys) > 10 else "tab10"]
    return {k: palette(i % palette.N) for i, k in enumerate(keys)}


def _quota_limits(tenant: TenantView) -> dict[str, QuotaUse]:
    return {q.key: q for q in tenant.quota}


# Panel geometry in inches: header, one row per bar, x axis and its label, one line per unplaced replica.
_HEAD, _ROW, _AXIS, _LINE, _GAP = 0.45, 0.42, 0.55, 0.2, 0.15
_LABEL_WRAP = 30
MAX_UNPLACED_LINES = 8


def _unplaced_lines(tenant: TenantView, what: str = "not placed") -> list[str]:
    lines = [f"✗ {what}: {u.pod} ({u.workload}): {u.reason}" for u in tenant.unplaced]
    if len(lines) > MAX_UNPLACED_LINES:
        rest = len(lines) - (MAX_UNPLACED_LINES - 1)
        lines = [*lines[: MAX_UNPLACED_LINES - 1], f"✗ … and {rest} more (see the table)"]
    return lines


def _panel_height(tenant: TenantView) -> float:
    if tenant.error:
        return _HEAD + 0.4
    rows = len(tenant.gpus) + 1
    return _HEAD + _ROW * rows + _AXIS + _LINE * len(_unplaced_lines(tenant)) + _GAP


def _gpu_label(gpu: GpuView) -> str:
    label = gpu.label
    return label if len(label) <= _LABEL_WRAP else label.replace(" / ", " /\n", 1)


def _draw_tenant(
    subfig: Figure, tenant: TenantView, colours: Mapping[tuple[str, str], tuple[float, ...]], what: str
) -> None:
    height = _panel_height(tenant)
    gpu_quota = _quota_limits(tenant).get(_GPU_KEY)
    header = tenant.tenant
    if gpu_quota is not None:
        header += f"    quota: {gpu_quota.used}/{gpu_quota.limit} GPUs requested"
    subfig.text(0.01, 1 - 0.22 / height, header, fontsize=12, fontweight="bold", va="center")
    if tenant.error:
        subfig.text(0.01, 0.25, f"✗ unreachable: {tenant.error}", color="tab:red", fontsize=10, va="center")
        return
    lines = _unplaced_lines(tenant, what)
    bottom = _AXIS + _LINE * len(lines) + _GAP
    axes = subfig.subplots(1, 2, sharey=True)
    subfig.subplots_adjust(left=0.22, right=0.98, top=1 - _HEAD / height, bottom=bottom / height, wspace=0.05)
    labels = [_gpu_label(g) for g in tenant.gpus] + ["all GPUs, with quota"]
    limits = _quota_limits(tenant)
    rows = list(range(len(labels)))
    total_row = len(tenant.gpus)
    for ax, kind in zip(axes, ("memory", "cores"), strict=True):
        unit = " MiB" if kind == "memory" else "%"
        quota = limits.get(_MEMORY_KEY if kind == "memory" else _CORES_KEY)
        capacity_total = sum(g.memory_mib if kind == "memory" else g.cores for g in tenant.gpus)
        ax.barh(rows, [100] * len(rows), color="#f0f0f0", edgecolor="#b0b0b0", height=0.7)
        tenant_total: dict[str, int] = {}
        for row, gpu in enumerate(tenant.gpus):
            capacity = gpu.memory_mib if kind == "memory" else gpu.cores
            left = 0.0
            for workload, _n, mem, cores in workload_totals(gpu):
                amount = mem if kind == "memory" else cores
                tenant_total[workload] = tenant_total.get(workload, 0) + amount
                width = 100 * amount / capacity if capacity else 0
                ax.barh(row, width, left=left, height=0.7, color=colours[(tenant.tenant, workload)])
                left += width
            used = gpu.memory_allocated if kind == "memory" else gpu.cores_allocated
            note = f"{used}/{capacity}{unit}"
            if kind == "memory":
                note += f"  ·  {gpu.slots_used}/{gpu.split_count} slots"
            ax.text(99, row, note, va="center", ha="right", fontsize=8, color="#222222",
                    bbox={"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 1})
        left = 0.0
        for workload, amount in tenant_total.items():
            width = 100 * amount / capacity_total if capacity_total else 0
            ax.barh(total_row, width, left=left, height=0.7, color=colours[(tenant.tenant, workload)])
            left += width
        used_total = sum(tenant_total.values())
        total_unit = " MiB" if kind == "memory" else " cores"
        ax.text(1, total_row, f"{used_total}/{capacity_total}{total_unit}", va="center", ha="left", fontsize=8,
                color="#222222", bbox={"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 1})
        xmax = 100.0
        if quota is not None and capacity_total:
            at = 100 * quota.limit / capacity_total
            xmax = max(xmax, at)
            ax.vlines(at, total_row - 0.48, total_row + 0.48, colors="tab:red", linestyles="--", linewidth=2,
                      zorder=4)
            ax.text(max(at, 100) + 2, total_row, f"quota (dashed)\n{quota.used}/{quota.limit}{total_unit}", va="center",
                    ha="left", fontsize=8, color="tab:red", fontweight="bold")
        ax.set_xlim(0, xmax + 40)
        ax.set_xticks([0, 25, 50, 75, 100])
        ax.set_xlabel(f"GPU {kind}, % of capacity", fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[0].set_yticks(rows, labels, fontsize=9)
    axes[0].invert_yaxis()
    for i, line in enumerate(lines):
        y = (_GAP + _LINE * (len(lines) - i - 0.5)) / height
        subfig.text(0.01, y, line, color="tab:red", fontsize=9, va="center")


def build_figure(view: AllocationView) -> Figure:
    """The picture as a matplotlib Figure, 1200 px wide (tests read its texts before it is saved)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    colours = _colours(view)
    legend_rows = (len(colours) + 3) // 4
    header = 0.6 + 0.25 * (legend_rows + 1 if colours else 0)
    heights = [header] + [_panel_height(t) for t in view.tenants]
    fig = Figure(figsize=(FIGURE_WIDTH_PX / _DPI, sum(heights)), dpi=_DPI)
    subfigs = fig.subfigures(len(heights), 1, height_ratios=heights, squeeze=False)[:, 0]
    head = subfigs[0]
    head.text(0.01, 1 - 0.32 / header, _title(view), fontsize=14, fontweight="bold", va="center",
              color="black" if view.fits else "tab:red")
    if colours:
        handles = [Patch(color=c, label=f"{w} ({t})") for (t, w), c in colours.items()]
        head.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.22, 0.0), ncols=4, fontsize=9,
                    frameon=False, title="workloads (tenant)", title_fontsize=9, alignment="left")
    for subfig, tenant in zip(subfigs[1:], view.tenants, strict=True):
        _draw_tenant(subfig, tenant, colours, "not placed" if view.source == "planned" else "pending")
    return fig


def render_png(view: AllocationView, path: str | Path) -> Path:
    """Write the picture to ``path`` (PNG, 1200 px wide) and return the path."""
    target = Path(path)
    build_figure(view).savefig(target, dpi=_DPI, format="png")
    return target
