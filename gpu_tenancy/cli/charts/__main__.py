"""`python -m gpu_tenancy.cli.charts --stack dev [--relock kamaji]`: what `make charts` runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_tenancy.cli.charts.pull import pull
from gpu_tenancy.contract.chart_lock import PROJECT_DIR, ChartCacheError, stack_charts
from gpu_tenancy.contract.config import ConfigError
from gpu_tenancy.contract.stack_file import load_stack_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_tenancy.cli.charts", description=__doc__)
    parser.add_argument("--stack", required=True, help="the stack whose charts to pull (Pulumi.<stack>.yaml)")
    parser.add_argument("--relock", action="append", default=[], metavar="CHART",
                        help="take what the repository publishes now for this chart, even if the lock differs")
    parser.add_argument("--root", type=Path, default=PROJECT_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        wanted = stack_charts(load_stack_file(args.root / f"Pulumi.{args.stack}.yaml"))
    except ConfigError as error:
        print(f"problem: charts: {error}")
        return 1
    unknown = sorted(set(args.relock) - {ref.name for ref in wanted})
    if unknown:
        print(f"problem: charts: RELOCK={','.join(unknown)} names no chart of stack {args.stack} "
              f"(its charts: {', '.join(ref.name for ref in wanted)})")
        return 1
    try:
        done, problems = pull(args.root, wanted, stack=args.stack, relock=frozenset(args.relock))
    except ChartCacheError as error:
        print(f"problem: charts: {error}")
        return 1
    for line in done + problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
