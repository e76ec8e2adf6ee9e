"""The planner at 10,000 replicas over 1,000 GPUs (125 nodes x 8 A100, split 10) and at ten times both
(100,000 replicas over 10,000 GPUs), and the ratio of the two times: 10 is linear. Target: <= 1 s for the
first, a ratio within 15.

Each plan is followed by its order verdicts (gpu_tenancy.hami.planner.orders: fits whatever the order, in
none, or depends), timed with it: "plan + verdicts".

Then what `cli.plan report` adds on top: the allocation view and its table for the same 1,000 GPUs, and the
picture for 3 tenants x 8 GPUs (a picture of 1,000 bars would be unreadable, so it is not timed here).

Times are CPU seconds, the lowest of ``--repeat`` runs (on a shared machine, wall time mostly measures the
other processes).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_tenancy.cli.plan.command import planned_view
from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Quota, Workload
from gpu_tenancy.hami.planner.orders import OrderVerdicts, verdicts
from gpu_tenancy.hami.planner.report import PlanResult
from gpu_tenancy.hami.planner.schedule import plan

A100 = "NVIDIA A100-SXM4-80GB"
T = TypeVar("T")


def inventory(nodes: int) -> list[Node]:
    return [
        Node(f"node-{n}", tuple(Device(f"n{n}-g{i}", A100, 81920, 100, 10, index=i) for i in range(8)))
        for n in range(nodes)
    ]


def workloads(count: int, replicas: int) -> list[Workload]:
    return [
        Workload(f"w{k}", (ContainerRequest(gpumem_mib=8192, gpucores=10),), replicas=replicas) for k in range(count)
    ]


def lowest(run: Callable[[], T], repeat: int) -> tuple[float, T]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        result = run()
        best = min(best, time.process_time() - start)
    assert result is not None
    return best, result


def plan_and_verdicts(nodes: list[Node], wls: list[Workload]) -> tuple[PlanResult, OrderVerdicts]:
    quota: Quota | None = None
    declared = plan(nodes, wls, quota)
    return declared, verdicts(nodes, wls, quota, declared=declared)


def main(repeat: int) -> None:
    nodes, wls = inventory(125), workloads(10, 1000)
    small, res = lowest(partial(plan, nodes, wls), repeat)
    print(f"10,000 replicas over 1,000 GPUs: placed {len(res.placements)} failed {len(res.failures)} in {small:.3f} s")
    big_nodes = inventory(1250)
    for count, replicas in ((10, 10_000), (100, 1_000)):
        big, res = lowest(partial(plan, big_nodes, workloads(count, replicas)), repeat)
        print(f"100,000 replicas ({count} workloads) over 10,000 GPUs: placed {len(res.placements)} failed "
              f"{len(res.failures)} in {big:.3f} s, {big / small:.1f}x the time of 10,000 over 1,000")

    small_v, (_, found) = lowest(partial(plan_and_verdicts, nodes, wls), repeat)
    print(f"plan + order verdicts, 10,000 over 1,000 GPUs: {found.verdict} in {small_v:.3f} s")
    for count, replicas in ((10, 10_000), (100, 1_000)):
        big_v, (_, found) = lowest(partial(plan_and_verdicts, big_nodes, workloads(count, replicas)), repeat)
        print(f"plan + order verdicts, 100,000 ({count} workloads) over 10,000 GPUs: {found.verdict} in "
              f"{big_v:.3f} s, {big_v / small_v:.1f}x")

    from gpu_tenancy.cli.allocation_chart import build_figure, render_table

    t = time.perf_counter()
    text = render_table(planned_view(nodes, wls, None, plan(nodes, wls)), 120)
    dt = time.perf_counter() - t
    print(f"report table for {len(nodes) * 8} GPUs ({len(text.splitlines())} lines) in {dt:.3f} s")

    small_nodes = [
        Node(f"t{k}-worker", tuple(Device(f"t{k}-g{i}", A100, 81920, 100, 10, index=i) for i in range(8)), f"t{k}")
        for k in range(3)
    ]
    swls = [Workload(f"t{k}-w", (ContainerRequest(gpumem_mib=8192, gpucores=10),), replicas=60, tenant=f"t{k}")
            for k in range(3)]
    view = planned_view(small_nodes, swls, None, plan(small_nodes, swls))
    t = time.perf_counter()
    build_figure(view).canvas.draw()
    dt = time.perf_counter() - t
    print(f"picture for 3 tenants x 8 GPUs drawn in {dt:.3f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size; the lowest time is printed (default 3)")
    main(parser.parse_args().repeat)
