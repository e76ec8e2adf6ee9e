"""Per-module scores of the last `make mutation` run: what share of each module's mutants the tests killed.

Reads mutmut's per-file results (mutants/<path>.meta, written by `mutmut run`; where there is none,
mutants/fresh/<path>.json: mutmut's mutants each run in a fresh pytest by `tests/mutation_operators.py run
--mutmut`) and those of the operators mutmut lacks (mutants/extra/<path>.json, written by
tests/mutation_operators.py) and prints one row per
module: killed (a test failed, or the mutant hung past its timeout), survived and not run (no test reaches
the function, or the run was cut short) for mutmut's mutants, killed and survived for the extra ones, and the
killed share of all the mutants that were run. With --fail-under the exit status is 1 when any module that
was run scores below it.
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
        fresh = mutants_dir / "fresh" / f"{module}.json"
        if not meta.is_file() and fresh.is_file():
            # mutmut's mutants each run in a fresh pytest (tests/mutation_operators.py run --mutmut)
            statuses = [m["status"] for m in json.loads(fresh.read_text())["mutants"]]
            killed = sum(1 for s in statuses if s in ("killed", "timeout"))
            rows.append((module, killed, len(statuses) - killed, 0))
            continue
        if not meta.is_file():
            rows.append((module, 0, 0, -1))
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"].values()
        killed = sum(1 for c in codes if c in KILLED)
        survived = sum(1 for c in codes if c in SURVIVED)
        rows.append((module, killed, survived, len(codes) - killed - survived))
    return rows


def extra_counts(mutants_dir: Path, module: str) -> tuple[int, int]:
    """Killed (a timeout included) and survived of tests/mutation_operators.py's mutants; (0, 0) if not run."""
    record = mutants_dir / "extra" / f"{module}.json"
    if not record.is_file():
        return 0, 0
    statuses = [m["status"] for m in json.loads(record.read_text())["mutants"]]
    return sum(1 for s in statuses if s in ("killed", "timeout")), sum(1 for s in statuses if s == "survived")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="+", help="source paths, e.g. gpu_tenancy/builders/metallb/netpool.py")
    parser.add_argument("--mutants", type=Path, default=Path("mutants"))
    parser.add_argument("--fail-under", type=float, default=None, help="minimum killed share in percent")
    args = parser.parse_args(argv)
    low = []
    print(f"{'module':56} {'killed':>7} {'survived':>9} {'not run':>8} {'extra k':>8} {'extra s':>8} {'score':>7}")
    for module, killed, survived, not_run in module_rows(args.mutants, args.modules):
        extra_killed, extra_survived = extra_counts(args.mutants, module)
        if not_run < 0 and not extra_killed + extra_survived:
            print(f"{module:56} {'no mutmut results (not run yet)':>34}")
            continue
        killed, survived, not_run = killed + extra_killed, survived + extra_survived, max(not_run, 0)
        ran = killed + survived
        score = 100.0 * killed / ran if ran else 0.0
        print(f"{module:56} {killed - extra_killed:7d} {survived - extra_survived:9d} {not_run:8d} "
              f"{extra_killed:8d} {extra_survived:8d} {score:6.1f}%")
        if args.fail_under is not None and ran and score < args.fail_under:
            low.append(module)
    if low:
        print(f"below {args.fail_under:g}%: {', '.join(low)}")
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
