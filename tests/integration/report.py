"""The live suite's report: what ran, how long each stage took, what the lab took from its host.

``reports/e2e/timings.json`` (written by conftest at the end of every live run) holds::

    {"unit": "seconds",
     "stages": {"<stage>": {"seconds": 12.3, "finished_at_s": 45.6 | null}, ...},   # support.StageTimings
     "footprint": {"unit": "bytes", "samples": {...}, "lab": {...}, "containers": {...}},  # support.Footprint
     "run": {"example": "dev", "mode": "sim", "stack": "e2e-1a2b3c", "date": "2026-...Z",
             "runner": "...", "cpus": 4, "memory_bytes": ..., "commit": "..."},
     "checks": {"passed": 17, "failed": 0, "errors": 0, "skipped": 0, "not for this mode": 6}}

`render_markdown` turns one into the table the CI job summary shows. The docs' expected times
(docs/live-suite.md) are the same rendering of the reports committed under benchmarks/e2e/, and the front page
(README.md) sums each up in one line (`python -m tests.integration.report readme <timings.json>...` copies the
reports there and rewrites both blocks).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.integration.support import DEPLOY_STAGE  # the `make up` of the copied stack

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDED_DIR = REPO_ROOT / "benchmarks" / "e2e"
README = REPO_ROOT / "README.md"
TIMINGS_PAGE = REPO_ROOT / "docs" / "live-suite.md"
BEGIN, END = "<!-- e2e-timings:begin -->", "<!-- e2e-timings:end -->"
SUMMARY_BEGIN, SUMMARY_END = "<!-- e2e-summary:begin -->", "<!-- e2e-summary:end -->"
NOT_RECORDED = (
    "No run of the live suite has been recorded here yet, so this section has no figures: the hosted e2e job "
    "prints these tables in its job summary and uploads `timings.json` with its reports."
)
TIMINGS_LINK = "[Expected times and footprint](docs/live-suite.md#expected-times-and-footprint)"
SUMMARY_NOT_RECORDED = (
    "No run of the live suite has been recorded yet, so there is no figure here. Each run times every stage of "
    f"the deploy and measures the footprint; recorded runs appear in {TIMINGS_LINK}."
)


def gib(value: int | None) -> str:
    return "–" if value is None else f"{value / (1 << 30):.1f} GiB"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def describe_run(run: Mapping[str, Any]) -> str:
    machine = ", ".join(
        part for part in (f"{run['cpus']} CPUs" if run.get("cpus") else "", gib(run.get("memory_bytes"))
                          if run.get("memory_bytes") else "") if part
    )
    return f"{run.get('runner', 'unknown host')} ({machine}), {str(run.get('date', '?'))[:10]}"


def checks_line(checks: Mapping[str, int]) -> str:
    ran = sum(checks.get(key, 0) for key in ("passed", "failed", "errors", "skipped"))
    counted = ", ".join(f"{checks[key]} {key}" for key in ("passed", "failed", "errors", "skipped") if checks.get(key))
    other = checks.get("not for this mode", 0)
    return f"{ran} checks: {counted or 'none ran'}" + (f" ({other} not for this mode)" if other else "")


def render_markdown(report: Mapping[str, Any]) -> str:
    """One run as Markdown: heading (stack, mode, runner, date), checks, stage table, footprint."""
    run = report.get("run", {})
    lines = [
        f"#### `make {'e2e' if run.get('example') == 'dev' else 'e2e-nvml'}`: copy of `{run.get('example', '?')}`, "
        f"mode {run.get('mode', '?')}, on {describe_run(run)}",
        "",
        checks_line(report.get("checks", {})),
        "",
        "| stage | seconds | done at (s after the deploy started) |",
        "|---|---:|---:|",
    ]
    for stage, values in report.get("stages", {}).items():
        lines.append(f"| {stage} | {_seconds(values.get('seconds'))} | {_seconds(values.get('finished_at_s'))} |")
    lab = report.get("footprint", {}).get("lab", {})
    lines += [
        "",
        "| footprint | |",
        "|---|---:|",
        f"| disk taken by the deploy (images, containers, volumes) | {gib(lab.get('disk_after_up'))} |",
        f"| memory in use after the deploy | {gib(lab.get('memory_after_up'))} |",
        f"| memory of the stack's containers (docker stats) | {gib(lab.get('containers_memory'))} |",
        f"| disk still taken after destroy (cached images) | {gib(lab.get('disk_kept_after_destroy'))} |",
    ]
    return "\n".join(lines) + "\n"


def timings_block(reports: Iterable[Mapping[str, Any]]) -> str:
    """The docs' block: every recorded run rendered in full."""
    rendered = [render_markdown(report) for report in reports]
    body = "\n".join(rendered) if rendered else NOT_RECORDED + "\n"
    return f"{BEGIN}\n{body}{END}"


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def summary_line(report: Mapping[str, Any]) -> str:
    """One run in one line for the front page: how long the deploy took, and the lab's footprint."""
    run = report.get("run", {})
    stages = report.get("stages", {})
    deploy = stages.get(DEPLOY_STAGE, {}).get("seconds")
    lab = report.get("footprint", {}).get("lab", {})
    took = f"the deploy took {_minutes(deploy)}" if deploy is not None else "the deploy was not timed"
    return (
        f"- `make up` of `{run.get('example', '?')}` (mode {run.get('mode', '?')}) on {describe_run(run)}: {took}; "
        f"{gib(lab.get('disk_after_up'))} of disk and {gib(lab.get('memory_after_up'))} of memory in use after it."
    )


def summary_block(reports: Iterable[Mapping[str, Any]]) -> str:
    """The front page's block: one line per recorded run, and where the full tables are."""
    lines = [summary_line(report) for report in reports]
    body = "\n".join([*lines, "", f"Every stage and the footprint: {TIMINGS_LINK}."]) if lines else SUMMARY_NOT_RECORDED
    return f"{SUMMARY_BEGIN}\n{body}\n{SUMMARY_END}"


def recorded_reports(directory: Path | None = None) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((directory or RECORDED_DIR).glob("*.json"))]


def _with_block(text: str, begin: str, end: str, block: str) -> str:
    start, stop = text.index(begin), text.index(end) + len(end)
    return text[:start] + block + text[stop:]


def timings_page_with(page_text: str, reports: Iterable[Mapping[str, Any]]) -> str:
    return _with_block(page_text, BEGIN, END, timings_block(reports))


def readme_with(readme_text: str, reports: Iterable[Mapping[str, Any]]) -> str:
    return _with_block(readme_text, SUMMARY_BEGIN, SUMMARY_END, summary_block(reports))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.report")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("markdown", help="print a run's timings.json as Markdown")
    show.add_argument("report", type=Path)
    readme = commands.add_parser(
        "readme",
        help="record runs under benchmarks/e2e/ (one per example stack) and rewrite the figures in README.md and "
        "docs/live-suite.md",
    )
    readme.add_argument("reports", type=Path, nargs="*")
    args = parser.parse_args(argv)
    if args.command == "markdown":
        print(render_markdown(json.loads(args.report.read_text())), end="")
        return 0
    RECORDED_DIR.mkdir(parents=True, exist_ok=True)
    for path in args.reports:
        report = json.loads(path.read_text())
        example = report.get("run", {}).get("example")
        if not example or not report.get("stages"):
            print(f"{path}: not a live-suite timings.json (no run.example or stages)", file=sys.stderr)
            return 2
        (RECORDED_DIR / f"{example}.json").write_text(json.dumps(report, indent=2) + "\n")
    recorded = recorded_reports()
    TIMINGS_PAGE.write_text(timings_page_with(TIMINGS_PAGE.read_text(), recorded))
    README.write_text(readme_with(README.read_text(), recorded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
