"""Per-module scores of the last `make mutation` run: what share of each module's mutants the tests killed.

Reads mutmut's per-file results (mutants/<path>.meta, written by `mutmut run`) and prints one row per
module: killed (a test failed, or the mutant hung past mutmut's timeout), survived, not run (no test
reaches the function, or the run was cut short) and the killed share of the mutants that were run. With
--fail-under the exit status is 1 when any module that was run scores below it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# mutmut's exit-code meanings (mutmut/stats.py status_by_exit_code, mutmut 3.8.1).
KILLED = {1, 3, 24, -24, 152, 255, 36, 37}
SURVIVED = {0}


def module_rows(mutants_dir: Path, modules: list[str]) -> list[tuple[str, int, int, int]]:
    rows = []
    for module in modules:
        meta = mutants_dir / f"{module}.meta"
        if not meta.is_file():
            rows.append((module, 0, 0, -1))
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"].values()
        killed = sum(1 for c in codes if c in KILLED)
        survived = sum(1 for c in codes if c in SURVIVED)
        rows.append((module, killed, survived, len(codes) - killed - survived))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="+", help="source paths, e.g. gpu_tenancy/builders/metallb/netpool.py")
    parser.add_argument("--mutants", type=Path, default=Path("mutants"))
    parser.add_argument("--fail-under", type=float, default=None, help="minimum killed share in percent")
    args = parser.parse_args(argv)
    low = []
    print(f"{'module':56} {'killed':>7} {'survived':>9} {'not run':>8} {'score':>7}")
    for module, killed, survived, not_run in module_rows(args.mutants, args.modules):
        if not_run < 0:
            print(f"{module:56} {'no mutmut results (not run yet)':>34}")
            continue
        ran = killed + survived
        score = 100.0 * killed / ran if ran else 0.0
        print(f"{module:56} {killed:7d} {survived:9d} {not_run:8d} {score:6.1f}%")
        if args.fail_under is not None and ran and score < args.fail_under:
            low.append(module)
    if low:
        print(f"below {args.fail_under:g}%: {', '.join(low)}")
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
