"""`gpu-tenancy charts --stack dev [--relock kamaji]`: what `make charts` runs.

`--keep-with-backend` (CI, whose checkout is cleaned on every run): `.charts` becomes a link to `charts/` in the
directory of a file:// `PULUMI_BACKEND_URL`, so the lock lives as long as the state it deployed; with any other
backend, to `~/.cache/gpu-tenancy/charts` of the runner, which is kept between runs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gpu_tenancy.cli.base_command import command_parser
from gpu_tenancy.cli.charts.pull import pull
from gpu_tenancy.cli.pull_requests.report import file_backend_dir
from gpu_tenancy.cli.status_codes import FAILURE, SUCCESS
from gpu_tenancy.contract.chart_lock import CACHE_DIR, PROJECT_DIR, ChartCacheError, stack_charts
from gpu_tenancy.contract.config import ConfigError
from gpu_tenancy.contract.stack_file import load_stack_file


def keep_with_backend(root: Path, backend_url: str, home: Path | None = None) -> str | None:
    """Link `<root>/.charts` to where the cache outlives the checkout; a problem line, or None."""
    directory = file_backend_dir(backend_url)
    target = directory / "charts" if directory else (home or Path.home()) / ".cache" / "gpu-tenancy" / "charts"
    link = root / CACHE_DIR
    target.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and link.resolve() == target.resolve():
        return None
    if link.exists() or link.is_symlink():
        return f"{link} already exists; remove it (or move its contents to {target}) to keep the cache with the state"
    link.symlink_to(target, target_is_directory=True)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("charts", description=__doc__)
    parser.add_argument("--stack", required=True, help="the stack whose charts to pull (Pulumi.<stack>.yaml)")
    parser.add_argument("--relock", action="append", default=[], metavar="CHART",
                        help="take what the repository publishes now for this chart, even if the lock differs")
    parser.add_argument("--keep-with-backend", action="store_true",
                        help="keep the cache beside the state of a file:// PULUMI_BACKEND_URL (CI)")
    parser.add_argument("--root", type=Path, default=PROJECT_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.keep_with_backend:
        problem = keep_with_backend(args.root, os.environ.get("PULUMI_BACKEND_URL", ""))
        if problem:
            print(f"problem: charts: {problem}")
            return FAILURE
    try:
        wanted = stack_charts(load_stack_file(args.root / f"Pulumi.{args.stack}.yaml"))
    except ConfigError as error:
        print(f"problem: charts: {error}")
        return FAILURE
    unknown = sorted(set(args.relock) - {ref.name for ref in wanted})
    if unknown:
        print(f"problem: charts: RELOCK={','.join(unknown)} names no chart of stack {args.stack} "
              f"(its charts: {', '.join(ref.name for ref in wanted)})")
        return FAILURE
    try:
        done, problems = pull(args.root, wanted, stack=args.stack, relock=frozenset(args.relock))
    except ChartCacheError as error:
        print(f"problem: charts: {error}")
        return FAILURE
    for line in done + problems:
        print(line)
    return FAILURE if problems else SUCCESS

