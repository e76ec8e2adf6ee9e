"""10,000 replicas over 1,000 GPUs (125 nodes x 8 A100, split 10). Target <= 1 s."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_tenancy.planner import ContainerRequest, Device, Node, Workload, plan

A100 = "NVIDIA-A100-SXM4-80GB"


def main() -> None:
    nodes = [
        Node(
            f"node-{n}", tuple(Device(f"n{n}-g{i}", "NVIDIA-A100-SXM4-80GB", 81920, 100, 10, index=i) for i in range(8))
        )
        for n in range(125)
    ]
    wls = [Workload(f"w{k}", (ContainerRequest(gpumem_mib=8192, gpucores=10),), replicas=1000) for k in range(10)]
    t = time.perf_counter()
    res = plan(nodes, wls)
    dt = time.perf_counter() - t
    print(f"placed {len(res.placements)} failed {len(res.failures)} in {dt:.3f} s")


if __name__ == "__main__":
    main()
