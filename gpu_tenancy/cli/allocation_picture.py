"""The picture of an `AllocationView` (`render_png`), shared by `gpu-tenancy plan report` and `status --png`.

One panel per tenant, two panels side by side (a single tenant: one), each 1200 px wide: the tenant, its
node(s) and GPU quota, its own legend (workloads in name order, colours distinct within the tenant), two
bar charts (GPU memory and GPU cores), one row per GPU labelled ``model #index`` (``node / model #index``
when the tenant has several nodes) plus an "all GPUs" row on which the tenant's quota is a dashed line.
Each row is stacked by workload in percent of that GPU's (or the tenant's) capacity, so cards of
different sizes compare. What holds no GPU is listed in red under its tenant. The title carries the
verdict and, when given, where the view comes from and when (stack and time).

So that a page stays readable (8 tenants × 8 GPUs fit in 2,400 px of height): a page holds at most
`TENANTS_PER_PAGE` tenants, more go to further pages (`<name>-2.png`, ...), and the title says
"page 1/13"; a tenant with more than `MAX_GPU_ROWS` GPUs shows its busiest ones and sums the rest in one
row, and says so; a tenant's legend and its list of waiting pods are capped the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpu_tenancy.hami.allocation import AllocationView, GpuView, QuotaUse, Slice, TenantView
from gpu_tenancy.hami.protocol import NVIDIA

if TYPE_CHECKING:
    from matplotlib.figure import Figure, SubFigure

PANEL_WIDTH_PX = 1200
FIGURE_WIDTH_PX = 2 * PANEL_WIDTH_PX  # two tenants side by side; one tenant alone is one panel wide
COLUMNS = 2
TENANTS_PER_PAGE = 8
MAX_GPU_ROWS = 8
MAX_UNPLACED_LINES = 4
MAX_LEGEND_ENTRIES = 8
MAX_PAGE_HEIGHT_PX = 2400
_DPI = 100
_MEMORY_KEY = f"limits.{NVIDIA.resource_memory}"
_CORES_KEY = f"limits.{NVIDIA.resource_cores}"
_GPU_KEYS = (f"limits.{NVIDIA.resource_count}", f"requests.{NVIDIA.resource_count}")
# Panel geometry in inches: header, legend line, one row per bar, x axis and its label, one line per
# waiting pod, gap below.
_HEAD, _LEGEND, _ROW, _AXIS, _LINE, _GAP = 0.5, 0.24, 0.34, 0.55, 0.2, 0.15
_TITLE = 0.7
_LINE_CHARS = 150
Colour = tuple[float, float, float, float]


def _title(view: AllocationView) -> str:
    what = "Planned" if view.source == "planned" else "Live"
    return f"{what} GPU allocation: {view.verdict}"


def _workload_totals(gpu: GpuView) -> list[tuple[str, int, int]]:
    totals: dict[str, list[int]] = {}
    for s in gpu.slices:
        t = totals.setdefault(s.workload, [0, 0])
        t[0] += s.memory_mib
        t[1] += s.cores
    return [(w, m, c) for w, (m, c) in totals.items()]


def tenant_colours(tenant: TenantView) -> dict[str, Colour]:
    """Workload -> colour, in name order: tab10 up to 10 workloads, tab20 up to 20, beyond that evenly
    spaced hues, so no two workloads of one tenant share a colour."""
    from matplotlib import colormaps

    names = sorted({s.workload for g in tenant.gpus for s in g.slices})
    if len(names) <= 20:
        palette = colormaps["tab10" if len(names) <= 10 else "tab20"]
        return {name: palette(i) for i, name in enumerate(names)}
    hues = colormaps["hsv"]
    return {name: hues(i / len(names)) for i, name in enumerate(names)}


def shown_gpus(tenant: TenantView) -> tuple[list[GpuView], str]:
    """The GPUs drawn as rows (the busiest `MAX_GPU_ROWS - 1` and one row summing the others, when there
    are more than `MAX_GPU_ROWS`), and a note saying so ("" when all are drawn)."""
    if len(tenant.gpus) <= MAX_GPU_ROWS:
        return list(tenant.gpus), ""
    keep = MAX_GPU_ROWS - 1
    busiest = sorted(range(len(tenant.gpus)), key=lambda i: (-tenant.gpus[i].memory_allocated, i))[:keep]
    chosen = [tenant.gpus[i] for i in sorted(busiest)]
    rest = [g for i, g in enumerate(tenant.gpus) if i not in set(busiest)]
    summed = GpuView(
        node="", model=f"… {len(rest)} more GPUs, summed", index=-1, uuid="",
        memory_mib=sum(g.memory_mib for g in rest), cores=sum(g.cores for g in rest),
        split_count=sum(g.split_count for g in rest), slices=tuple(s for g in rest for s in g.slices),
    )
    note = f"{keep} busiest of {len(tenant.gpus)} GPUs drawn, the other {len(rest)} summed in one row"
    return [*chosen, summed], note


def _row_label(gpu: GpuView, several_nodes: bool) -> str:
    if gpu.index < 0 and not gpu.node:
        return gpu.model
    label = f"{gpu.model} #{gpu.index}"
    return f"{gpu.node} /\n{label}" if several_nodes else label


def unplaced_lines(tenant: TenantView, live: bool) -> list[str]:
    """One line per waiting pod (live: per group of pods waiting for the same reason), capped with a
    closing "… and N more" line; long lines end in "…"."""
    from gpu_tenancy.cli.allocation_chart import unplaced_groups

    what = "pending" if live else "not placed"
    groups = unplaced_groups(tenant.unplaced) if live else [(u, 1) for u in tenant.unplaced]
    lines = []
    for u, count in groups:
        who = f"{u.pod} ({u.workload})" if count == 1 else f"{count} pods of {u.workload}"
        line = f"✗ {what}: {who}: {u.explanation or u.reason}"
        lines.append(line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…")
    if len(lines) > MAX_UNPLACED_LINES:
        rest = sum(count for _, count in groups[MAX_UNPLACED_LINES - 1:])
        lines = [*lines[: MAX_UNPLACED_LINES - 1], f"✗ … and {rest} more (see the table)"]
    return lines


def _legend_rows(tenant: TenantView) -> int:
    return 1 if any(g.slices for g in tenant.gpus) else 0


def panel_height(tenant: TenantView, live: bool) -> float:
    """Inches."""
    if tenant.error:
        return _HEAD + 0.5
    rows = len(shown_gpus(tenant)[0]) + 1
    return (_HEAD + _LEGEND * _legend_rows(tenant) + _ROW * rows + _AXIS + _LINE * len(unplaced_lines(tenant, live))
            + _GAP)


def _header(tenant: TenantView, note: str) -> str:
    nodes = sorted({g.node for g in tenant.gpus if g.node})
    header = tenant.tenant
    if len(nodes) == 1:
        header += f"  ·  node {nodes[0]}"
    gpu_quota = next((q for q in tenant.quota if q.key in _GPU_KEYS), None)
    if gpu_quota is not None:
        header += f"  ·  quota: {gpu_quota.used}/{gpu_quota.limit} GPUs requested"
    return header + (f"\n({note})" if note else "")


def _draw_tenant(subfig: SubFigure, tenant: TenantView, live: bool, height: float) -> None:
    """Draw into a cell `height` inches tall (the tallest panel of its grid row), from the top."""
    from matplotlib.patches import Patch

    spare = height - panel_height(tenant, live)  # left empty at the bottom
    gpus, note = shown_gpus(tenant)
    subfig.text(0.01, 1 - 0.05 / height, _header(tenant, note), fontsize=11, fontweight="bold", va="top")
    if tenant.error:
        subfig.text(0.01, 1 - (_HEAD + 0.25) / height, f"✗ unreachable: {tenant.error}", color="tab:red",
                    fontsize=10, va="center")
        return
    colours = tenant_colours(tenant)
    legend_rows = _legend_rows(tenant)
    if colours:
        names = list(colours)
        handles = [Patch(color=colours[n], label=n) for n in names[:MAX_LEGEND_ENTRIES]]
        if len(names) > MAX_LEGEND_ENTRIES:
            handles[-1] = Patch(color="white", label=f"… {len(names) - MAX_LEGEND_ENTRIES + 1} more")
        subfig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.2, 1 - _HEAD / height), ncols=len(handles),
                      fontsize=8, frameon=False, borderaxespad=0, handlelength=1.2)
    lines = unplaced_lines(tenant, live)
    top = _HEAD + _LEGEND * legend_rows
    bottom = spare + _AXIS + _LINE * len(lines) + _GAP
    axes = subfig.subplots(1, 2, sharey=True)
    subfig.subplots_adjust(left=0.2, right=0.98, top=1 - top / height, bottom=bottom / height, wspace=0.05)
    several_nodes = len({g.node for g in tenant.gpus}) > 1
    labels = [_row_label(g, several_nodes) for g in gpus] + ["all GPUs, with quota"]
    limits: Mapping[str, QuotaUse] = {q.key: q for q in tenant.quota}
    rows = list(range(len(labels)))
    total_row = len(gpus)
    for ax, kind in zip(axes, ("memory", "cores"), strict=True):
        _draw_chart(ax, kind, gpus, tenant.gpus, colours, limits, rows, total_row)
    axes[0].set_yticks(rows, labels, fontsize=8)
    axes[0].invert_yaxis()
    for i, line in enumerate(lines):
        y = (spare + _GAP + _LINE * (len(lines) - i - 0.5)) / height
        subfig.text(0.01, y, line, color="tab:red", fontsize=8.5, va="center")


def _draw_chart(ax: object, kind: str, gpus: Sequence[GpuView], every_gpu: Sequence[GpuView],
                colours: Mapping[str, Colour], limits: Mapping[str, QuotaUse], rows: list[int],
                total_row: int) -> None:
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    memory = kind == "memory"
    unit = " MiB" if memory else "%"
    quota = limits.get(_MEMORY_KEY if memory else _CORES_KEY)
    capacity_total = sum(g.memory_mib if memory else g.cores for g in every_gpu)
    ax.barh(rows, [100] * len(rows), color="#f0f0f0", edgecolor="#b0b0b0", height=0.7)
    tenant_total: dict[str, int] = {}
    for row, gpu in enumerate(gpus):
        capacity = gpu.memory_mib if memory else gpu.cores
        left = 0.0
        for workload, mem, cores in _workload_totals(gpu):
            amount = mem if memory else cores
            tenant_total[workload] = tenant_total.get(workload, 0) + amount
            width = 100 * amount / capacity if capacity else 0
            ax.barh(row, width, left=left, height=0.7, color=colours[workload])
            left += width
        used = sum(s.memory_mib if memory else s.cores for s in gpu.slices)
        note = f"{used}/{capacity}{unit}"
        if memory:
            note += f"  ·  {len(gpu.slices)}/{gpu.split_count} slots"
        ax.text(99, row, note, va="center", ha="right", fontsize=7.5, color="#222222",
                bbox={"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 1})
    left = 0.0
    for workload in sorted(tenant_total):
        width = 100 * tenant_total[workload] / capacity_total if capacity_total else 0
        ax.barh(total_row, width, left=left, height=0.7, color=colours[workload])
        left += width
    used_total = sum(tenant_total.values())
    total_unit = " MiB" if memory else " cores"
    ax.text(1, total_row, f"{used_total}/{capacity_total}{total_unit}", va="center", ha="left", fontsize=7.5,
            color="#222222", bbox={"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 1})
    xmax = 100.0
    if quota is not None and capacity_total:
        at = 100 * quota.limit / capacity_total
        xmax = max(xmax, at)
        ax.vlines(at, total_row - 0.48, total_row + 0.48, colors="tab:red", linestyles="--", linewidth=2, zorder=4)
        ax.text(max(at, 100) + 2, total_row, f"quota (dashed)\n{quota.used}/{quota.limit}{total_unit}",
                va="center", ha="left", fontsize=7.5, color="tab:red", fontweight="bold")
    ax.set_xlim(0, xmax + 40)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel(f"GPU {kind}, % of capacity", fontsize=8)
    ax.tick_params(axis="x", labelsize=7.5)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def pages(view: AllocationView) -> list[tuple[TenantView, ...]]:
    tenants = view.tenants or (TenantView("(no tenant)"),)
    return [tenants[i:i + TENANTS_PER_PAGE] for i in range(0, len(tenants), TENANTS_PER_PAGE)]


def build_figure(view: AllocationView, title: str | None = None, page: int = 0) -> Figure:
    """One page of the picture as a matplotlib Figure (tests read its texts before it is saved)."""
    from matplotlib.figure import Figure

    all_pages = pages(view)
    tenants = all_pages[page]
    live = view.source == "live"
    columns = min(COLUMNS, len(tenants))
    grid = [tenants[i:i + columns] for i in range(0, len(tenants), columns)]
    heights = [_TITLE] + [max(panel_height(t, live) for t in row) for row in grid]
    fig = Figure(figsize=(PANEL_WIDTH_PX * columns / _DPI, sum(heights)), dpi=_DPI)
    subfigs = fig.subfigures(len(heights), 1, height_ratios=heights, squeeze=False)[:, 0]
    heading = _title(view)
    if len(all_pages) > 1:
        first = page * TENANTS_PER_PAGE + 1
        heading += (f"  ·  page {page + 1}/{len(all_pages)} (tenants {first}–{first + len(tenants) - 1} "
                    f"of {len(view.tenants)})")
    subfigs[0].text(0.01 / columns, 0.62, heading, fontsize=14, fontweight="bold", va="center",
                    color="black" if view.fits else "tab:red")
    if title:
        subfigs[0].text(0.01 / columns, 0.2, title, fontsize=10, va="center", color="#444444")
    for subfig, row, height in zip(subfigs[1:], grid, heights[1:], strict=True):
        cells = subfig.subfigures(1, columns, squeeze=False)[0, :]
        for cell, tenant in zip(cells, row, strict=False):
            _draw_tenant(cell, tenant, live, height)
    return fig


def page_paths(path: Path, count: int) -> list[Path]:
    """`status.png`, then `status-2.png`, `status-3.png`, ... beside it."""
    return [path if i == 0 else path.with_name(f"{path.stem}-{i + 1}{path.suffix}") for i in range(count)]


def render_png(view: AllocationView, path: str | Path, title: str | None = None) -> list[Path]:
    """Write the picture to ``path`` (PNG), further pages beside it; return every file written."""
    targets = page_paths(Path(path), len(pages(view)))
    for page, target in enumerate(targets):
        build_figure(view, title, page).savefig(target, dpi=_DPI, format="png")
    return targets


__all__ = ["FIGURE_WIDTH_PX", "MAX_UNPLACED_LINES", "Slice", "build_figure", "render_png"]
