"""The live suite's timing report (tests/integration/report.py) and the figures the docs draw from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration import report

GIB = 1 << 30
RUN = {
    "stages": {
        "prerequisites": {"seconds": 1.234, "finished_at_s": None},
        "kind cluster": {"seconds": 61.0, "finished_at_s": 62.5},
        "tenant-a worker joined": {"seconds": 40.0, "finished_at_s": 301.0},
        "pulumi preview + up": {"seconds": 754.4, "finished_at_s": None},
        "destroy": {"seconds": 95.5, "finished_at_s": None},
    },
    "footprint": {
        "lab": {"disk_after_up": 9 * GIB, "memory_after_up": int(5.5 * GIB), "containers_memory": None,
                "disk_kept_after_destroy": 3 * GIB},
    },
    "run": {"example": "dev", "mode": "sim", "stack": "e2e-1a2b3c", "date": "2026-09-01T03:40:12Z",
            "runner": "GitHub-hosted ubuntu24 image 20260816.277.1", "cpus": 4, "memory_bytes": 16 * GIB},
    "checks": {"passed": 21, "failed": 1, "errors": 0, "skipped": 0, "not for this mode": 6},
}


def test_a_run_renders_as_the_table_the_job_summary_and_the_readme_show() -> None:
    assert report.render_markdown(RUN) == (
        "#### `make e2e`: copy of `dev`, mode sim, on GitHub-hosted ubuntu24 image 20260816.277.1 (4 CPUs, 16.0 GiB), "
        "2026-09-01\n"
        "\n"
        "22 checks: 21 passed, 1 failed (6 not for this mode)\n"
        "\n"
        "| stage | seconds | done at (s after the deploy started) |\n"
        "|---|---:|---:|\n"
        "| prerequisites | 1.2 |  |\n"
        "| kind cluster | 61.0 | 62.5 |\n"
        "| tenant-a worker joined | 40.0 | 301.0 |\n"
        "| pulumi preview + up | 754.4 |  |\n"
        "| destroy | 95.5 |  |\n"
        "\n"
        "| footprint | |\n"
        "|---|---:|\n"
        "| disk taken by the deploy (images, containers, volumes) | 9.0 GiB |\n"
        "| memory in use after the deploy | 5.5 GiB |\n"
        "| memory of the stack's containers (docker stats) | – |\n"
        "| disk still taken after destroy (cached images) | 3.0 GiB |\n"
    )
    nvml = {**RUN, "run": {**RUN["run"], "example": "dev-nvml", "mode": "sim-nvml"}}
    assert report.render_markdown(nvml).startswith("#### `make e2e-nvml`: copy of `dev-nvml`, mode sim-nvml, on ")


def _block(text: str, begin: str, end: str) -> str:
    assert text.count(begin) == 1 and text.count(end) == 1
    return text[text.index(begin): text.index(end) + len(end)]


def test_the_docs_figures_are_the_recorded_runs_rendered() -> None:
    """docs/live-suite.md's expected times and footprint are exactly the reports under benchmarks/e2e/, rendered:
    no hand-written estimate, and no recorded run without its figures."""
    block = _block(report.TIMINGS_PAGE.read_text(), report.BEGIN, report.END)
    assert block == report.timings_block(report.recorded_reports()), "run `python -m tests.integration.report readme`"


def test_the_front_page_sums_up_the_same_runs() -> None:
    block = _block(report.README.read_text(), report.SUMMARY_BEGIN, report.SUMMARY_END)
    assert block == report.summary_block(report.recorded_reports()), "run `python -m tests.integration.report readme`"


def test_a_run_is_one_line_on_the_front_page() -> None:
    assert report.summary_line(RUN) == (
        "- `make up` of `dev` (mode sim) on GitHub-hosted ubuntu24 image 20260816.277.1 (4 CPUs, 16.0 GiB), "
        "2026-09-01: the deploy took 12 min 34 s; 9.0 GiB of disk and 5.5 GiB of memory in use after it."
    )
    untimed = {**RUN, "stages": {}, "footprint": {}}
    assert "the deploy was not timed; – of disk and – of memory" in report.summary_line(untimed)
    assert report.summary_block([]).count("\n") == 2, "no run: one sentence between the markers"
    assert "docs/live-suite.md#expected-times-and-footprint" in report.summary_block([RUN])


def test_recording_a_run_rewrites_both_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{report.SUMMARY_BEGIN}\nold\n{report.SUMMARY_END}\n\n## next\n")
    page = tmp_path / "live-suite.md"
    page.write_text(f"# y\n\n{report.BEGIN}\nold\n{report.END}\n")
    monkeypatch.setattr(report, "README", readme)
    monkeypatch.setattr(report, "TIMINGS_PAGE", page)
    monkeypatch.setattr(report, "RECORDED_DIR", tmp_path / "recorded")
    downloaded = tmp_path / "timings.json"
    downloaded.write_text(json.dumps(RUN))
    assert report.main(["readme", str(downloaded)]) == 0
    assert json.loads((tmp_path / "recorded" / "dev.json").read_text()) == RUN
    assert readme.read_text() == f"# x\n\n{report.summary_block([RUN])}\n\n## next\n"
    assert page.read_text() == f"# y\n\n{report.timings_block([RUN])}\n"
    (tmp_path / "broken.json").write_text(json.dumps({"stages": {}}))
    assert report.main(["readme", str(tmp_path / "broken.json")]) == 2
