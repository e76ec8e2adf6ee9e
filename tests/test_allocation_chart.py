"""The one rendering of an AllocationView as text and JSON (the picture: test_allocation_picture.py)."""

from __future__ import annotations

import re

import pytest

from gpu_tenancy.cli.allocation_chart import render_json, render_table
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


def test_live_table_sums_holders_per_workload_and_lists_pods_on_request() -> None:
    compact = " ".join(render_table(view("live"), 160).split())
    assert "a-infer ×4: 40960 MiB, 80%" in compact and "a-infer-0" not in compact
    assert "✗ pending a-infer-4 (a-infer): 1/1 CardInsufficientCore" in compact
    assert "Live GPU allocation: 1 pending" in compact
    detail = " ".join(render_table(view("live"), 160, per_pod=True).split())
    assert all(f"a-infer-{r}: 10240 MiB, 20%" in detail for r in range(4))


def test_live_table_is_one_row_per_gpu_whatever_the_number_of_pods() -> None:
    many = tuple(Slice(f"w{i % 3}", f"w{i % 3}-{i:04d}", 100, 1) for i in range(90))
    live = AllocationView("live", (TenantView("t", (GpuView("n", "NVIDIA L4", 0, "GPU-0", 23034, 100, 100, many),)),))
    lines = render_table(live, 200).splitlines()
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 3  # one line per workload of the one GPU
    assert "w0 ×30: 3000 MiB, 30%" in rows[0] and "w2 ×30: 3000 MiB, 30%" in rows[2]
    assert len(render_table(live, 200, per_pod=True).splitlines()) > 90


def test_pending_pods_waiting_for_the_same_reason_are_one_line_with_the_explanation_first() -> None:
    waiting = tuple(Unplaced("b-train", f"b-train-{i}", "0/1 nodes are available: 1 2/2 CardTypeMismatch",
                             "never fits: asks 1 × A100 (type filter); tenant-b has 2 × NVIDIA L4") for i in range(50))
    live = AllocationView("live", (TenantView("tenant-b", unplaced=waiting),))
    text = render_table(live, 200)
    assert text.count("✗") == 1
    assert ("✗ pending 50 pods of b-train (e.g. b-train-0): never fits: asks 1 × A100 (type filter); tenant-b has "
            "2 × NVIDIA L4") in text
    assert "    scheduler: 0/1 nodes are available: 1 2/2 CardTypeMismatch" in text
    assert render_table(live, 200, per_pod=True).count("✗") == 50


def test_quota_in_one_order_in_plan_and_live() -> None:
    """GPUs, memory, cores: the order `plan report` prints, whatever order the quota came in."""
    shuffled = (QuotaUse("limits.nvidia.com/gpucores", 60, 150), QuotaUse("requests.nvidia.com/gpu", 3, 4),
                QuotaUse("limits.nvidia.com/gpumem", 24576, 36864))
    for source in ("planned", "live"):
        text = render_table(AllocationView(source, (TenantView("t", quota=shuffled),)), 120)  # type: ignore[arg-type]
        assert "quota: gpu 3/4 · gpumem 24576/36864 MiB · gpucores 60/150%" in text


def test_title_above_the_tables() -> None:
    assert render_table(view("live"), 120, title="stack dev at 2026-12-03 12:00:00 UTC").splitlines()[0] == (
        "stack dev at 2026-12-03 12:00:00 UTC")


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


def _label_cells(text: str, column: int, starts: int) -> list[list[str]]:
    """The lines of cell ``column`` of each row of every table in ``text`` (a row starts where cell ``starts`` is
    set)."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        cells = line.split("│")
        if len(cells) < max(column, starts) + 2:
            continue
        cell = cells[column].strip()
        if cells[starts].strip():
            rows.append([cell])
        elif rows and cell:
            rows[-1].append(cell)
    return rows


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("command", ["report", "plan"])
def test_node_names_are_cut_between_their_parts_never_inside_one(
    width: int, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpu_tenancy.cli.plan.command import main

    main([command, "Pulumi.dev.yaml", "--width", str(width)])
    out = capsys.readouterr().out
    assert all(len(line) <= width for line in out.splitlines()), out
    rows = _label_cells(out, *((1, 2) if command == "report" else (4, 2)))
    assert rows, out
    for lines in rows:
        label = ""
        for line in lines:
            label += line if not label or label.endswith("-") else f" {line}"
        # A cut inside a part ("gpu-tenancy-dev-te" / "nant-a-worker") would not join back into the name.
        assert label.split(" / ")[0] in ("gpu-tenancy-dev-tenant-a-worker", "gpu-tenancy-dev-tenant-b-worker"), lines


def test_no_color_takes_the_colours_away_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """NO_COLOR (https://no-color.org) set: `make status` on a terminal keeps its bold, loses its colours."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")  # rich styles nothing for TERM=dumb
    coloured = render_table(view(), 100, color=True)
    assert re.search(r"\x1b\[[0-9;]*3[0-7]m", coloured)  # a foreground colour
    monkeypatch.setenv("NO_COLOR", "1")
    plain = render_table(view(), 100, color=True)
    assert "\x1b[1m" in plain and not re.search(r"\x1b\[[0-9;]*3[0-7]m", plain)
