"""Evaluate the program under Pulumi mocks for 1, 10, 50 and 100 tenants; print time per count."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness import record_stack


def config_for(tenants: int) -> dict[str, object]:
    return {
        "mode": "sim",
        "tenants": [
            {"name": f"t{i:03d}", "gpus": [{"model": "NVIDIA-L4", "memoryMiB": 24576, "count": 1}],
             "podCidr": f"10.{i // 2}.{(i % 2) * 128}.0/24", "serviceCidr": f"10.{128 + i // 2}.{(i % 2) * 128}.0/24"}
            for i in range(tenants)
        ],
        "metallb": {"headroom": 8},
    }


def main() -> None:
    print(f"{'tenants':>8} {'resources':>10} {'seconds':>9} {'ms/tenant':>10}")
    for count in (1, 10, 50, 100):
        start = time.perf_counter()
        resources = record_stack(config_for(count))
        elapsed = time.perf_counter() - start
        print(f"{count:>8} {len(resources):>10} {elapsed:>9.2f} {1000 * elapsed / count:>10.1f}")


if __name__ == "__main__":
    main()
