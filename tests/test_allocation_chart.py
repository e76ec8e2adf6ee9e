"""The one rendering of an AllocationView: what the picture and the table say, read from what they draw."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.text import Text

from gpu_tenancy.allocation import AllocationView, GpuView, QuotaUse, Slice, TenantView, Unplaced
from gpu_tenancy.allocation_chart import (
    FIGURE_WIDTH_PX,
    MAX_UNPLACED_LINES,
    build_figure,
    render_json,
    render_png,
    render_table,
)

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


def test_picture_labels_every_gpu_tenant_workload_quota_and_the_verdict() -> None:
    fig = build_figure(view())
    drawn = strings(fig)
    assert "Planned GPU allocation: 1 replica(s) do not fit" in drawn
    assert {"tenant-a    quota: 5/6 GPUs requested", "tenant-b"} <= drawn
    # One bar label per GPU, `node / model #index` (a long one wrapped after the node).
    assert {"tenant-a-worker /\nNVIDIA-A100-SXM4-80GB #0", "tenant-b-worker / NVIDIA-L4 #0",
            "tenant-b-worker / NVIDIA-L4 #1"} <= drawn
    assert {"a-infer (tenant-a)", "b-notebook (tenant-b)"} <= drawn  # legend
    assert "quota (dashed)\n40960/61440 MiB" in drawn and "quota (dashed)\n30/150 cores" in drawn
    assert "40960/81920 MiB  ·  4/10 slots" in drawn and "12288/24576 MiB  ·  1/10 slots" in drawn
    assert {"GPU memory, % of capacity", "GPU cores, % of capacity"} <= drawn


def test_unplaced_replicas_are_listed_in_red_with_the_reason() -> None:
    red = [t for t in texts(build_figure(view())) if t.get_text().startswith("✗")]
    assert [t.get_text() for t in red] == ["✗ not placed: a-infer-4 (a-infer): 1/1 CardInsufficientCore"]
    assert red[0].get_color() == "tab:red" or to_rgba(red[0].get_color()) == to_rgba("tab:red")


def test_many_unplaced_are_summarised_not_drawn_off_the_page() -> None:
    tenant = TenantView("t", (gpu("n", A100, 0, 81920),),
                        tuple(Unplaced("w", f"w-{r}", "1/1 CardInsufficientMemory") for r in range(40)))
    red = [t.get_text() for t in texts(build_figure(AllocationView("planned", (tenant,))))
           if t.get_text().startswith("✗")]
    assert len(red) == MAX_UNPLACED_LINES and red[-1] == "✗ … and 33 more (see the table)"


def test_live_view_with_an_unreachable_tenant() -> None:
    live = AllocationView("live", (*view("live").tenants, TenantView("tenant-c", error="connection refused")))
    drawn = strings(build_figure(live))
    assert "Live GPU allocation: 1 pending; 1 tenant(s) unreachable" in drawn
    assert "✗ unreachable: connection refused" in drawn
    assert "✗ pending: a-infer-4 (a-infer): 1/1 CardInsufficientCore" in drawn


def test_png_is_1200_px_wide(tmp_path: Path) -> None:
    from matplotlib.image import imread

    path = render_png(view(), tmp_path / "v.png")
    height, width = imread(path).shape[:2]
    assert width == FIGURE_WIDTH_PX and height > 300


def test_tables_are_never_cropped_at_any_terminal_width() -> None:
    """rich crops a table wider than the console; every row must keep its right border."""
    for width in range(40, 201):
        for line in render_table(view(), width).splitlines():
            assert len(line) <= width
            if line[:1] in "┏┃┡│└":
                assert line.rstrip()[-1] in "┓┃┩│┘", (width, line)


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_table_fits_the_width_and_names_gpus_holders_quota_and_reasons(width: int) -> None:
    text = render_table(view(), width)
    flat = " ".join(text.split())
    for expected in ("tenant-a", "tenant-b", "quota: gpu 5/6 · gpumem 40960/61440 MiB",
                     "a-infer-4 (a-infer): 1/1 CardInsufficientCore",
                     "Planned GPU allocation: 1 replica(s) do not fit"):
        assert expected in flat, (width, expected)
    if width >= 120:
        assert "tenant-a-worker / NVIDIA-A100-SXM4-80GB #0" in text
        assert "a-infer ×4: 40960 MiB, 80%" in text


def test_live_table_names_the_pods_holding_each_slice() -> None:
    text = " ".join(render_table(view("live"), 160).split())
    assert all(f"a-infer-{r}: 10240 MiB, 20%" in text for r in range(4))
    assert "✗ pending a-infer-4 (a-infer): 1/1 CardInsufficientCore" in text
    assert "Live GPU allocation: 1 pending" in text


def test_table_has_no_escape_codes_unless_asked() -> None:
    assert "\x1b[" not in render_table(view(), 100)
    assert "\x1b[" in render_table(view(), 100, color=True)


def test_json_carries_what_the_table_shows() -> None:
    document = render_json(view())
    assert document["fits"] is False and document["verdict"] == "1 replica(s) do not fit"
    a = document["tenants"][0]
    assert a["fits"] is False and a["unplaced"][0]["reason"] == "1/1 CardInsufficientCore"
    assert a["gpus"][0]["label"] == "tenant-a-worker / NVIDIA-A100-SXM4-80GB #0"
    assert (a["gpus"][0]["memory_allocated"], a["gpus"][0]["cores_allocated"], a["gpus"][0]["slots_used"]) == (
        40960, 80, 4)
    assert a["quota"][1] == {"key": "limits.nvidia.com/gpumem", "used": 40960, "limit": 61440}
