"""Evaluate the program under Pulumi mocks for 1, 10, 50 and 100 tenants; print time per count.

Next to each count it prints the SDK floor: the time the same Pulumi SDK takes under the same mocks to
register the same number of plain resources with no program logic. The gap between the two columns is
what the program itself costs; the floor is what no change to this program can remove.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness import record_stack


def config_for(tenants: int) -> dict[str, object]:
    return {
        "mode": "sim",
        "tenants": [
            {"name": f"t{i:03d}", "gpus": [{"model": "NVIDIA L4", "count": 1}],
             "podCidr": f"10.{i // 2}.{(i % 2) * 128}.0/24", "serviceCidr": f"10.{128 + i // 2}.{(i % 2) * 128}.0/24"}
            for i in range(tenants)
        ],
        "metallb": {"poolSize": 128},
    }


class _EchoMocks(Mocks):
    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        return {}


class _Plain(pulumi.CustomResource):
    def __init__(self, name: str, props: dict[str, Any]) -> None:
        super().__init__("bench:index:Plain", name, props)


def sdk_floor(resources: int) -> float:
    """Seconds to register `resources` plain resources (small nested inputs) under mocks."""
    pulumi.runtime.set_mocks(_EchoMocks(), project="bench", stack="bench", preview=False)

    @pulumi.runtime.test
    def program() -> None:
        for index in range(resources):
            _Plain(f"r{index}", {"metadata": {"name": f"r{index}", "labels": {"a": "b"}}, "spec": {"x": [1, 2]}})

    start = time.perf_counter()
    program()
    return time.perf_counter() - start


def main(counts: list[int]) -> None:
    print(f"{'tenants':>8} {'resources':>10} {'seconds':>9} {'ms/tenant':>10} {'sdk floor s':>12}")
    for count in counts:
        start = time.perf_counter()
        resources = record_stack(config_for(count))
        elapsed = time.perf_counter() - start
        floor = sdk_floor(len(resources))
        print(f"{count:>8} {len(resources):>10} {elapsed:>9.2f} {1000 * elapsed / count:>10.1f} {floor:>12.2f}")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [1, 10, 50, 100])
