"""`make status` at scale: 100 tenants × 8 GPUs × 1,000 pods per tenant, as ratios to what cannot be avoided.

    python benchmarks/status_bench.py [tenants] [gpus] [pods]

The objects are the recorded real-mode tenant (tests/fixtures/status/real.json) scaled up: each tenant
one node registering `gpus` A100s (split count high enough for 90 % of the pods), its pods placed
round-robin with HAMi's allocation annotation, the rest pending with the scheduler's reason.

Two ratios, each the best of a few rounds, in wall-clock time and in CPU time (CPU is what to read on a
shared machine: other processes stretch wall-clock time, not CPU time), each also against its floor with
Python's garbage collector off, since `status` pauses it while it decodes (status_cli.collector_paused):
- offline: `status_cli --objects dump.json` (interpreter start, decode, views with every pending pod
  explained, the table) against its floor, a fresh interpreter that only decodes the same file with
  `json.load`;
- live: reading every tenant over HTTP from its own fake API server (tests/fake_apiserver.py, served by a
  separate process so that its work is not counted) through its kubeconfig, 8 tenants at a time, paged as
  `status` pages, then the views and the table, against its floor: the same requests (same pages, same
  bytes) with urllib3 and `json.loads`, 8 tenants at a time, nothing else.
"""

from __future__ import annotations

import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_apiserver import fake_cluster, recorded  # noqa: E402

from gpu_tenancy.hami import protocol as hami  # noqa: E402

PLACED_SHARE = 0.9
ROUNDS = 3
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


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


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def best(run: Callable[[], None], cpu: Callable[[], float]) -> tuple[float, float]:
    """(best wall-clock seconds, best CPU seconds) over ROUNDS runs."""
    walls, cpus = [], []
    for _ in range(ROUNDS):
        wall, before = time.perf_counter(), cpu()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(cpu() - before)
    return min(walls), min(cpus)


def ratio_line(what: str, measured: tuple[float, float], floor: tuple[float, float], floor_name: str) -> str:
    return (f"{what}: {measured[0]:.2f} s wall / {measured[1]:.2f} s CPU; floor ({floor_name}) {floor[0]:.2f} s / "
            f"{floor[1]:.2f} s CPU; ratio {measured[0] / floor[0]:.2f}x wall, {measured[1] / floor[1]:.2f}x CPU")


def offline(dump: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in PROXIES}
    status = [sys.executable, "-m", "gpu_tenancy", "status", "--objects", str(dump), "--width", "160"]
    floor = [sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1], 'rb'))", str(dump)]
    # status decodes with the collector paused (status_cli.collector_paused): the fastest plain decode too
    floor_quiet = [sys.executable, "-c", "import gc, json, sys; gc.disable(); json.load(open(sys.argv[1], 'rb'))",
                   str(dump)]

    def run(command: list[str]) -> Callable[[], None]:
        def once() -> None:
            subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)

        return once

    measured = best(run(status), child_cpu)
    lines = subprocess.run(status, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.count("\n")
    print(f"table: {lines} lines")
    print(ratio_line("offline `status --objects`", measured, best(run(floor), child_cpu),
                     "interpreter start + json.load of the same file"))
    print(ratio_line("offline `status --objects`", measured, best(run(floor_quiet), child_cpu),
                     "the same, json.load with the garbage collector off"))


def serve(dump: Path) -> None:
    """Child process: every tenant of the dump on its own fake API server; kubeconfigs on stdout."""
    objects = json.loads(dump.read_bytes())
    with fake_cluster(objects) as servers:
        print(json.dumps({name: {"kubeconfig": s.kubeconfig(), "url": s.url, "token": s.token}
                          for name, s in servers.items()}), flush=True)
        sys.stdin.read()  # until the parent closes it


def fetch_and_decode(servers: dict[str, dict[str, str]]) -> None:
    """The floor: the pages `status` requests, fetched with urllib3 and decoded, nothing else."""
    import urllib3

    from gpu_tenancy.cli.status.kube import PAGE_SIZE

    def one(name: str) -> int:
        server = servers[name]
        pool = urllib3.PoolManager(maxsize=1)
        items = 0
        for path in ("/api/v1/nodes", "/api/v1/pods", "/api/v1/resourcequotas"):
            token = ""
            while True:
                fields = {"limit": str(PAGE_SIZE), **({"continue": token} if token else {})}
                response = pool.request("GET", server["url"] + path, fields=fields,
                                        headers={"Authorization": f"Bearer {server['token']}"})
                body = json.loads(response.data)
                items += len(body["items"])
                token = body["metadata"].get("continue", "")
                if not token:
                    break
        pool.clear()
        return items

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, sorted(servers)))


def live(dump: Path) -> None:
    from gpu_tenancy.cli.allocation_chart import render_table
    from gpu_tenancy.cli.status import command as status_cli

    env = {k: v for k, v in os.environ.items() if k not in PROXIES}
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(dump)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None and server.stdin is not None
        servers = json.loads(server.stdout.readline())
        names = sorted(servers)
        kubeconfigs = {name: servers[name]["kubeconfig"] for name in names}

        def status() -> None:
            view = status_cli.build(status_cli.read_tenants(names, kubeconfigs))
            assert not any(t.error for t in view.tenants), [t.error for t in view.tenants if t.error][:1]
            render_table(view, 160)

        fetch_and_decode(servers)  # warm the servers' page caches: both sides then get the same bytes
        measured = best(status, time.process_time)
        floor = best(lambda: fetch_and_decode(servers), time.process_time)
        print(ratio_line("live `status` (HTTP, 8 tenants at a time)", measured, floor,
                         "the same pages fetched and decoded"))

        def quiet_floor() -> None:
            with status_cli.collector_paused():
                fetch_and_decode(servers)

        print(ratio_line("live `status` (HTTP, 8 tenants at a time)", measured, best(quiet_floor, time.process_time),
                         "the same, the garbage collector off"))
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=60)


def main(argv: list[str]) -> None:
    for name in PROXIES:  # the fake API servers listen on loopback: no proxy must be asked for them
        os.environ.pop(name, None)
    if argv[:1] == ["--serve"]:
        serve(Path(argv[1]))
        return
    tenants, gpus, pods = (int(a) for a in (argv + ["100", "8", "1000"][len(argv):]))
    objects = {f"tenant-{t:03d}": tenant_objects(f"tenant-{t:03d}", gpus, pods) for t in range(tenants)}
    with tempfile.TemporaryDirectory() as directory:
        dump = Path(directory) / "objects.json"
        dump.write_text(json.dumps(objects))
        del objects
        slices = int(pods * PLACED_SHARE) * tenants
        print(f"{tenants} tenants x {gpus} GPUs x {pods} pods ({slices} slices, {tenants * pods - slices} pending), "
              f"dump {dump.stat().st_size / 1e6:.0f} MB; best of {ROUNDS}; target: both ratios <= 1.5x")
        offline(dump)
        live(dump)


if __name__ == "__main__":
    main(sys.argv[1:])
