"""The live suite's report: what ran, how long each stage took, what the lab took from its host.

``reports/e2e/timings.json`` (written by conftest at the end of every live run) holds::

    {"unit": "seconds",
     "stages": {"<stage>": {"seconds": 12.3, "finished_at_s": 45.6 | null}, ...},   # support.StageTimings
     "footprint": {"unit": "bytes", "samples": {...}, "lab": {...}, "containers": {...}},  # support.Footprint
     "run": {"example": "dev", "mode": "sim", "stack": "e2e-1a2b3c", "date": "2026-...Z",
             "runner": "...", "cpus": 4, "memory_bytes": ..., "commit": "..."},
     "checks": {"passed": 17, "failed": 0, "errors": 0, "skipped": 0, "not for this mode": 6}}

`render_markdown` turns one into the table the CI job summary shows; the README's expected times are the
same rendering of the reports committed under benchmarks/e2e/ (`python -m tests.integration.report readme
<timings.json>...` copies them there and rewrites the README block).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDED_DIR = REPO_ROOT / "benchmarks" / "e2e"
README = REPO_ROOT / "README.md"
BEGIN, END = "<!-- e2e-timings:begin -->", "<!-- e2e-timings:end -->"
NOT_RECORDED = (
    "No run of the live suite has been recorded here yet, so this section has no figures: the hosted e2e job "
    "prints these tables in its job summary and uploads `timings.json` with its reports."
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


def readme_block(reports: Iterable[Mapping[str, Any]]) -> str:
    rendered = [render_markdown(report) for report in reports]
    body = "\n".join(rendered) if rendered else NOT_RECORDED + "\n"
    return f"{BEGIN}\n{body}{END}"


def recorded_reports(directory: Path | None = None) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted((directory or RECORDED_DIR).glob("*.json"))]


def readme_with(readme_text: str, reports: Iterable[Mapping[str, Any]]) -> str:
    start, end = readme_text.index(BEGIN), readme_text.index(END) + len(END)
    return readme_text[:start] + readme_block(reports) + readme_text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.report")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("markdown", help="print a run's timings.json as Markdown")
    show.add_argument("report", type=Path)
    readme = commands.add_parser(
        "readme", help="record runs under benchmarks/e2e/ (one per example stack) and rewrite the README's block"
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
    README.write_text(readme_with(README.read_text(), recorded_reports()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
