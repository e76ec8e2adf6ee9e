"""The picture of an AllocationView: what it says, read from what it draws, and that a page stays one page."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.image import imread
from matplotlib.legend import Legend
from matplotlib.text import Text

from gpu_tenancy.cli.allocation_picture import (
    MAX_GPU_ROWS,
    MAX_PAGE_HEIGHT_PX,
    MAX_UNPLACED_LINES,
    PANEL_WIDTH_PX,
    TENANTS_PER_PAGE,
    build_figure,
    render_png,
)
from gpu_tenancy.hami.allocation import AllocationView, GpuView, QuotaUse, Slice, TenantView, Unplaced

A100 = "NVIDIA-A100-SXM4-80GB"


def gpu(node: str, model: str, index: int, mem: int, *slices: Slice) -> GpuView:
    return GpuView(node, model, index, f"GPU-{node}-{index}", mem, 100, 10, tuple(slices))


def view(source: str = "planned") -> AllocationView:
    a = TenantView(
        "tenant-a",
        (gpu("tenant-a-worker", A100, 0, 81920, *(Slice("a-infer", f"a-infer-{r}", 10240, 20) for r in range(4))),),
        (Unplaced("a-infer", "a-infer-4", "1/1 CardInsufficientCore"),),
        (QuotaUse("limits.nvidia.com/gpu", 5, 6), QuotaUse("limits.nvidia.com/gpumem", 40960, 61440)),
    )
    b = TenantView(
        "tenant-b",
        (gpu("tenant-b-worker", "NVIDIA-L4", 0, 24576),
         gpu("tenant-b-worker", "NVIDIA-L4", 1, 24576, Slice("b-notebook", "b-notebook-0", 12288, 30))),
        quota=(QuotaUse("limits.nvidia.com/gpucores", 30, 150),),
    )
    return AllocationView(source, (a, b))  # type: ignore[arg-type]


def texts(fig: Figure) -> list[Text]:
    fig.canvas.draw()  # lays out tick labels and the legend, as saving does
    return [t for t in fig.findobj(Text) if t.get_text()]


def strings(fig: Figure) -> set[str]:
    return {t.get_text() for t in texts(fig)}


def fleet(tenants: int, gpus: int, workloads: int = 3, waiting: int = 0) -> AllocationView:
    def card(t: int, i: int) -> GpuView:
        held = tuple(Slice(f"w{(i + k) % workloads}", f"p{i}-{k}", 4096, 5) for k in range((i * 3 + t) % 9))
        return GpuView(f"gpu-tenancy-dev-tenant-{t:03d}-worker", "NVIDIA A100-SXM4-80GB", i, f"GPU-{t}-{i}",
                       81920, 100, 10, held)

    return AllocationView("live", tuple(
        TenantView(f"tenant-{t:03d}", tuple(card(t, i) for i in range(gpus)),
                   tuple(Unplaced("w1", f"w1-{k}", "0/1 nodes are available: 1 8/8 CardInsufficientMemory",
                                  f"waits for capacity: asks 30000 MiB ({k % 7})") for k in range(waiting)),
                   (QuotaUse("requests.nvidia.com/gpu", 8, 10), QuotaUse("limits.nvidia.com/gpumem", 1, 2)))
        for t in range(tenants)))


def test_picture_labels_every_gpu_tenant_workload_quota_and_the_verdict() -> None:
    drawn = strings(build_figure(view(), title="stack dev at 2026-12-03 12:00:00 UTC"))
    assert "Planned GPU allocation: 1 replica(s) do not fit" in drawn
    assert "stack dev at 2026-12-03 12:00:00 UTC" in drawn
    assert {"tenant-a  ·  node tenant-a-worker  ·  quota: 5/6 GPUs requested",
            "tenant-b  ·  node tenant-b-worker"} <= drawn
    # One bar label per GPU; the panel header names the node when the tenant has one.
    assert {f"{A100} #0", "NVIDIA-L4 #0", "NVIDIA-L4 #1"} <= drawn
    assert "quota (dashed)\n40960/61440 MiB" in drawn and "quota (dashed)\n30/150 cores" in drawn
    assert "40960/81920 MiB  ·  4/10 slots" in drawn and "12288/24576 MiB  ·  1/10 slots" in drawn
    assert {"GPU memory, % of capacity", "GPU cores, % of capacity"} <= drawn


def test_each_tenant_has_its_own_legend_in_name_order_with_distinct_colours() -> None:
    workloads = ["zeta", "alpha", "mid"] + [f"w{i:02d}" for i in range(9)]  # 12: more than tab10 holds
    tenant = TenantView("t", tuple(gpu("n", A100, i, 81920, Slice(w, f"{w}-0", 1024, 1))
                                   for i, w in enumerate(workloads[:8])) , ())
    other = TenantView("u", (gpu("m", A100, 0, 81920, Slice("zeta", "zeta-0", 1024, 1),
                                 Slice("alpha", "alpha-0", 1024, 1)),))
    fig = build_figure(AllocationView("live", (tenant, other)))
    fig.canvas.draw()
    legends = [legend for legend in fig.findobj(Legend)]
    assert len(legends) == 2
    labels = [[t.get_text() for t in legend.get_texts()] for legend in legends]
    assert labels[0] == sorted(workloads[:8]) and labels[1] == ["alpha", "zeta"]
    colours = [tuple(to_rgba(h.get_facecolor())) for h in legends[0].legend_handles]  # type: ignore[union-attr]
    assert len(set(colours)) == 8


def test_waiting_pods_are_listed_in_red_with_the_explanation_and_capped() -> None:
    red = [t for t in texts(build_figure(view())) if t.get_text().startswith("✗")]
    assert [t.get_text() for t in red] == ["✗ not placed: a-infer-4 (a-infer): 1/1 CardInsufficientCore"]
    assert to_rgba(red[0].get_color()) == to_rgba("tab:red")
    lines = [t.get_text() for t in texts(build_figure(fleet(1, 2, waiting=40))) if t.get_text().startswith("✗")]
    # 40 pods, 7 distinct explanations: grouped, then capped with what is left.
    assert len(lines) == MAX_UNPLACED_LINES and lines[-1] == "✗ … and 22 more (see the table)"
    assert lines[0] == "✗ pending: 6 pods of w1: waits for capacity: asks 30000 MiB (0)"


def test_unreachable_tenant_says_so() -> None:
    live = AllocationView("live", (*view("live").tenants, TenantView("tenant-c", error="connection refused")))
    drawn = strings(build_figure(live))
    assert "Live GPU allocation: 1 pending; 1 tenant(s) unreachable" in drawn
    assert "✗ unreachable: connection refused" in drawn


def test_eight_tenants_of_eight_gpus_fit_one_page_of_2400_px(tmp_path: Path) -> None:
    (path,) = render_png(fleet(8, 8, workloads=6, waiting=30), tmp_path / "s.png", title="stack dev at now")
    height, width = imread(path).shape[:2]
    assert width == 2 * PANEL_WIDTH_PX and height <= MAX_PAGE_HEIGHT_PX


def test_one_tenant_is_one_panel_wide(tmp_path: Path) -> None:
    (path,) = render_png(fleet(1, 2), tmp_path / "one.png")
    assert imread(path).shape[1] == PANEL_WIDTH_PX


def test_more_tenants_go_to_further_pages_and_the_title_says_so(tmp_path: Path) -> None:
    many = fleet(TENANTS_PER_PAGE * 2 + 1, 2)
    paths = render_png(many, tmp_path / "s.png")
    assert [p.name for p in paths] == ["s.png", "s-2.png", "s-3.png"]
    assert all(p.stat().st_size > 0 for p in paths)
    drawn = strings(build_figure(many, page=2))
    assert any("page 3/3 (tenants 17–17 of 17)" in s for s in drawn)
    assert "tenant-016  ·  node gpu-tenancy-dev-tenant-016-worker  ·  quota: 8/10 GPUs requested" in drawn


def test_more_gpus_than_rows_are_summed_and_the_panel_says_so() -> None:
    (tenant,) = fleet(1, 12).tenants
    drawn = strings(build_figure(AllocationView("live", (tenant,))))
    assert any("7 busiest of 12 GPUs drawn, the other 5 summed in one row" in s for s in drawn)
    assert "… 5 more GPUs, summed" in drawn
    gpu_rows = {s for s in drawn if s.startswith("NVIDIA A100-SXM4-80GB #")}
    assert len(gpu_rows) == MAX_GPU_ROWS - 1
    # busiest by memory: card i holds (3 i) % 9 pods: 6 on #2, #5, #8, #11, 3 on #1, #4, #7, #10, none on the rest;
    # ties go to the lower index, in index order.
    assert gpu_rows == {f"NVIDIA A100-SXM4-80GB #{i}" for i in (1, 2, 4, 5, 7, 8, 11)}


@pytest.mark.parametrize("source", ["planned", "live"])
def test_several_nodes_label_rows_with_the_node(source: str) -> None:
    tenant = TenantView("t", (gpu("n1", A100, 0, 81920), gpu("n2", A100, 0, 81920)))
    drawn = strings(build_figure(AllocationView(source, (tenant,))))  # type: ignore[arg-type]
    assert {f"n1 /\n{A100} #0", f"n2 /\n{A100} #0"} <= drawn
