"""Time `make status` over 100 tenants x 8 GPUs x 1,000 pods per tenant of recorded objects.

    python benchmarks/status_bench.py [tenants] [gpus] [pods]

The objects are the recorded real-mode tenant (tests/fixtures/status/real.json) scaled up: each tenant
one node registering `gpus` A100s (split count high enough for 90 % of the pods), its pods placed
round-robin with HAMi's allocation annotation, the rest pending with the scheduler's reason. Printed:
building the views from objects, then rendering table and JSON, then the whole live path (each tenant
read over HTTP from its own fake API server through its kubeconfig, as `make status` reads clusters).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_apiserver import fake_cluster, recorded  # noqa: E402

from gpu_tenancy import hami, status, status_cli  # noqa: E402
from gpu_tenancy.allocation import TenantView  # noqa: E402
from gpu_tenancy.allocation_chart import render_json, render_table  # noqa: E402
from gpu_tenancy.status_kube import read_tenant  # noqa: E402

PLACED_SHARE = 0.9


def tenant_objects(name: str, gpus: int, pods: int) -> dict[str, list[dict[str, Any]]]:
    template = recorded("real")
    placed_pod = template["tenant-a"]["pods"][0]
    pending_pod = template["tenant-b"]["pods"][2]
    node = copy.deepcopy(template["tenant-a"]["nodes"][0])
    node_name = f"{name}-gpu-01"
    node["metadata"]["name"] = node_name
    placed = int(pods * PLACED_SHARE)
    split = -(-placed // gpus)
    memory = 81920 // split
    devices = [{"id": f"GPU-{name}-{i:04d}", "index": i, "count": split, "devmem": 81920, "devcore": 100,
                "type": "NVIDIA A100-SXM4-80GB", "mode": "hami-core", "health": True} for i in range(gpus)]
    node["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION] = json.dumps(devices, separators=(",", ":"))
    pod_list = []
    for i in range(pods):
        pod = copy.deepcopy(placed_pod if i < placed else pending_pod)
        pod["metadata"]["name"] = f"w{i % 10}-{i:05d}"
        annotations = pod["metadata"]["annotations"]
        if i < placed:
            allocated = f"{devices[i % gpus]['id']},NVIDIA,{memory},0:;"
            annotations.update({hami.ASSIGNED_NODE_ANNOTATION: node_name, hami.DEVICES_ALLOCATED_ANNOTATION: allocated})
        pod_list.append(pod)
    return {"nodes": [node], "pods": pod_list, "resourcequotas": copy.deepcopy(template["tenant-a"]["resourcequotas"])}


def main(argv: list[str]) -> None:
    # The fake API servers listen on loopback in this process; a proxy from the environment (which the
    # kubernetes client honours, like kubectl) must not be asked for them.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(name, None)
    tenants, gpus, pods = (int(a) for a in (argv + ["100", "8", "1000"][len(argv):]))
    objects = {f"tenant-{t:03d}": tenant_objects(f"tenant-{t:03d}", gpus, pods) for t in range(tenants)}

    started = time.perf_counter()
    view = status_cli.recorded(objects)
    built = time.perf_counter() - started
    slices = sum(g.slots_used for t in view.tenants for g in t.gpus)
    pending = sum(len(t.unplaced) for t in view.tenants)
    print(f"views of {tenants} tenants x {gpus} GPUs x {pods} pods ({slices} slices, {pending} pending) "
          f"built in {built:.2f} s")

    started = time.perf_counter()
    table = render_table(view, 160)
    document = json.dumps(render_json(view))
    print(f"rendered table ({len(table.splitlines())} lines) and JSON ({len(document) // 1024} KiB) "
          f"in {time.perf_counter() - started:.2f} s")

    with fake_cluster(objects) as servers:
        kubeconfigs = {name: server.kubeconfig() for name, server in servers.items()}
        started = time.perf_counter()
        def read(name: str) -> TenantView:
            return status_cli.view_of(name, lambda: read_tenant(kubeconfigs[name]))

        with ThreadPoolExecutor(max_workers=status_cli.MAX_PARALLEL_READS) as pool:
            views = list(pool.map(read, sorted(objects)))
        live = status.live_view(views)
        elapsed = time.perf_counter() - started
    assert not any(t.error for t in live.tenants), [t.error for t in live.tenants if t.error][:1]
    print(f"live path (HTTP, {status_cli.MAX_PARALLEL_READS} tenants at a time) in {elapsed:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
