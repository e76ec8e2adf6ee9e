"""10,000 replicas over 1,000 GPUs (125 nodes x 8 A100, split 10). Target <= 1 s.

Then what `plan_cli report` adds on top: the allocation view and its table for the same 1,000 GPUs, and the
picture for 3 tenants x 8 GPUs (a picture of 1,000 bars would be unreadable, so it is not timed here).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_tenancy.plan_cli import planned_view
from gpu_tenancy.planner import ContainerRequest, Device, Node, Workload, plan

A100 = "NVIDIA A100-SXM4-80GB"


def main() -> None:
    nodes = [
        Node(f"node-{n}", tuple(Device(f"n{n}-g{i}", A100, 81920, 100, 10, index=i) for i in range(8)))
        for n in range(125)
    ]
    wls = [Workload(f"w{k}", (ContainerRequest(gpumem_mib=8192, gpucores=10),), replicas=1000) for k in range(10)]
    t = time.perf_counter()
    res = plan(nodes, wls)
    dt = time.perf_counter() - t
    print(f"placed {len(res.placements)} failed {len(res.failures)} in {dt:.3f} s")

    from gpu_tenancy.allocation_chart import build_figure, render_table

    t = time.perf_counter()
    text = render_table(planned_view(nodes, wls, None, res), 120)
    dt = time.perf_counter() - t
    print(f"report table for {len(nodes) * 8} GPUs ({len(text.splitlines())} lines) in {dt:.3f} s")

    small = [
        Node(f"t{k}-worker", tuple(Device(f"t{k}-g{i}", A100, 81920, 100, 10, index=i) for i in range(8)), f"t{k}")
        for k in range(3)
    ]
    swls = [Workload(f"t{k}-w", (ContainerRequest(gpumem_mib=8192, gpucores=10),), replicas=60, tenant=f"t{k}")
            for k in range(3)]
    view = planned_view(small, swls, None, plan(small, swls))
    t = time.perf_counter()
    build_figure(view).canvas.draw()
    dt = time.perf_counter() - t
    print(f"picture for 3 tenants x 8 GPUs drawn in {dt:.3f} s")


if __name__ == "__main__":
    main()
