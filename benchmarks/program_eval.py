"""Evaluate the program under Pulumi mocks for 10, 30 and 100 tenants; print the cost per tenant and its
ratio to the cost per tenant at the first count (1.00 everywhere is linear). 100 is the most a stack may
declare (gpu_tenancy/contract/tenant_config.py MAX_TENANTS).

Next to each count it prints the SDK floor: the time the same Pulumi SDK takes under the same mocks, with
the same garbage-collection settings as the program (full collections deferred: gpu_tenancy/gc_settings.py),
to register the same number of plain resources with no program logic. The gap between the two is what the
program itself costs; the floor is what no change to this program can remove.

Times are CPU seconds of this process (all threads), the lowest of ``--repeat`` runs: on a shared machine,
wall time mostly measures the other processes. Wall time is printed too.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_tenancy.contract.tenant_config import MAX_TENANTS
from gpu_tenancy.gc_settings import defer_full_collections
from tests.harness import record_stack

DEFAULT_COUNTS = (10, 30, MAX_TENANTS)


def config_for(tenants: int) -> dict[str, object]:
    """`tenants` tenants of one L4 each, with explicit CIDRs: derived ones would collide beyond a few dozen
    tenants (a name hash into 1,024 slots)."""
    return {
        "mode": "sim",
        "tenants": [
            {"name": f"t{i:03d}", "gpus": [{"model": "NVIDIA L4", "count": 1}],
             "podCidr": f"10.{100 + i // 250}.{i % 250}.0/24", "serviceCidr": f"10.{110 + i // 250}.{i % 250}.0/24"}
            for i in range(tenants)
        ],
        "metallb": {"poolSize": 1024},
    }


class _EchoMocks(Mocks):
    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        return {}


class _Plain(pulumi.CustomResource):
    def __init__(self, name: str, props: dict[str, Any]) -> None:
        super().__init__("bench:index:Plain", name, props)


def sdk_floor(resources: int) -> None:
    """Register `resources` plain resources (small nested inputs) under mocks, GC as the program sets it."""
    pulumi.runtime.set_mocks(_EchoMocks(), project="bench", stack="bench", preview=False)

    @pulumi.runtime.test
    def program() -> None:
        defer_full_collections()
        for index in range(resources):
            _Plain(f"r{index}", {"metadata": {"name": f"r{index}", "labels": {"a": "b"}}, "spec": {"x": [1, 2]}})

    threshold = gc.get_threshold()
    try:
        program()
    finally:
        gc.set_threshold(*threshold)


def measure(run: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(lowest CPU seconds, lowest wall seconds, the last result) over `repeat` runs, each from a collected heap."""
    cpu, wall, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        gc.collect()
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        result = run()
        cpu = min(cpu, time.process_time() - cpu_start)
        wall = min(wall, time.perf_counter() - wall_start)
    return cpu, wall, result


def main(counts: list[int], repeat: int) -> None:
    record_stack(config_for(1))  # imports and first-run caches out of the measurement
    print(f"{'tenants':>8} {'resources':>10} {'cpu s':>8} {'wall s':>8} {'ms/tenant':>10} {'ratio':>6} "
          f"{'floor s':>8} {'floor ms/t':>10} {'ratio':>6}")
    base: tuple[float, float] | None = None
    for count in counts:
        cpu, wall, resources = measure(partial(record_stack, config_for(count)), repeat)
        floor, _, _ = measure(partial(sdk_floor, len(resources)), repeat)
        per_tenant, floor_per_tenant = 1000 * cpu / count, 1000 * floor / count
        base = base or (per_tenant, floor_per_tenant)
        ratio, floor_ratio = per_tenant / base[0], floor_per_tenant / base[1]
        print(f"{count:>8} {len(resources):>10} {cpu:>8.2f} {wall:>8.2f} {per_tenant:>10.1f} {ratio:>6.2f} "
              f"{floor:>8.2f} {floor_per_tenant:>10.1f} {floor_ratio:>6.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("counts", nargs="*", type=int, default=list(DEFAULT_COUNTS),
                        help=f"tenant counts, each 1 to {MAX_TENANTS} (default: {' '.join(map(str, DEFAULT_COUNTS))})")
    parser.add_argument("--repeat", type=int, default=3, help="runs per count; the lowest time is printed (default 3)")
    arguments = parser.parse_args()
    if any(not 1 <= count <= MAX_TENANTS for count in arguments.counts):
        parser.error(f"tenant counts must be 1 to {MAX_TENANTS}: a stack declares at most {MAX_TENANTS} tenants")
    main(arguments.counts, arguments.repeat)
