"""The planner against HAMi's own scheduler: seeded random scenarios, each run by the real control plane with HAMi
(tests/realcp/hami.py) in several creation orders, each outcome checked against the planner's verdicts.

A scenario is nodes of catalogue cards (NUMA 0 or 1 each) and workloads of one or two containers (whole cards,
MiB, percentages, cores, type filters, HAMi's scheduling policies). Its pods are created one at a time in a seeded
order, each left to be bound or refused before the next. For every workload the planner says how many of its
pods are placed in every order (`fewest`) and in some order (`most`); HAMi's count in every order tried must lie
between the two.

    GPU_TENANCY_HAMI_SCHEDULER=<HAMi v2.10.0 cmd/scheduler binary> \\
        python -m tests.realcp.hami_differential --scenarios 500 --orders 2 --out tests/realcp/hami_observed.json

writes every scenario with what HAMi did in each order; tests/realcp/test_hami_observed.py checks the planner
against that record on every `make test`, with or without HAMi.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu_tenancy.hami import gpu_catalogue
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.planner.model import ContainerRequest, Node, Workload, node_from_register
from gpu_tenancy.hami.planner.orders import verdicts
from gpu_tenancy.hami.planner.schedule import plan

MODELS = ("NVIDIA A100-SXM4-80GB", "NVIDIA L4", "NVIDIA H100 80GB HBM3", "Tesla T4")
POLICIES = ("binpack", "spread")
REASONS: list[str] = []


def scenario(seed: int) -> dict[str, Any]:
    """A small random scenario, the same for the same seed."""
    rng = random.Random(seed)
    nodes = []
    for n in range(rng.choice((1, 1, 2))):
        cards = []
        for index in range(rng.choice((1, 2, 2, 3))):
            model = gpu_catalogue.lookup(rng.choice(MODELS))
            assert model is not None
            cards.append({"model": model.nvml_name, "memoryMiB": model.memory_mib, "numa": rng.choice((0, 1)),
                          "index": index})
        nodes.append({"name": f"n{n}", "cards": cards})
    most_cards = max(len(node["cards"]) for node in nodes)
    workloads = []
    for w in range(rng.choice((1, 2, 2, 3))):
        containers = []
        for _ in range(rng.choice((1, 1, 2))):
            shape = rng.choice(("mem", "mem", "percent", "whole", "cores-only"))
            container: dict[str, Any] = {"gpus": rng.choice((1, 1, min(2, most_cards)))}
            if shape == "mem":
                container["gpumem"] = rng.choice((2048, 8192, 10240, 20480, 40960))
            if shape == "percent":
                container["gpumemPercentage"] = rng.choice((25, 50, 75))
            if shape != "whole":
                container["gpucores"] = rng.choice((None, 10, 20, 50, 60, 100))
            containers.append(container)
        workload: dict[str, Any] = {"name": f"w{w}", "replicas": rng.choice((1, 2, 3)), "containers": containers,
                                    "gpuPolicy": rng.choice(POLICIES), "nodePolicy": rng.choice(POLICIES)}
        if rng.random() < 0.2:
            workload["useGpuType"] = rng.choice(("A100", "L4", "H100", "T4", "A100, L4"))
        workloads.append(workload)
    return {"seed": seed, "nodes": nodes, "workloads": workloads}


def pods_of(case: dict[str, Any]) -> list[tuple[str, int]]:
    return [(w["name"], r) for w in case["workloads"] for r in range(w["replicas"])]


def orders(case: dict[str, Any], count: int) -> list[list[tuple[str, int]]]:
    rng = random.Random(case["seed"] * 7919 + 1)
    pods = pods_of(case)
    out = [list(pods)]
    while len(out) < count:
        shuffled = list(pods)
        rng.shuffle(shuffled)
        out.append(shuffled)
    return out


def devices(case: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """What HAMi's device plugin registers for the node's cards, with their NUMA nodes."""
    out = hami.device_inventory(f"s{case['seed']}-{node['name']}",
                                [{"model": c["model"], "memoryMiB": c["memoryMiB"], "count": 1} for c in node["cards"]])
    for device, card in zip(out, node["cards"], strict=True):
        device["numa"] = card["numa"]
    return out


def example_cases(stack_files: Sequence[Path]) -> list[dict[str, Any]]:
    """Each tenant of each stack file as a scenario: its GPU nodes' cards as the planner reads them (NUMA 0 where
    the stack does not say) and its workloads, without its quota. `seed` names it: `<stack>-<tenant>`."""
    from gpu_tenancy.cli.plan.plan_input import load

    cases = []
    for path in stack_files:
        nodes, workloads, _quota = load(str(path))
        stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        for tenant in sorted({n.tenant for n in nodes if n.tenant}):
            cases.append({
                "seed": f"{stack}-{tenant}",
                "nodes": [{"name": f"n{i}", "cards": [{"model": d.type, "memoryMiB": d.devmem, "numa": d.numa or 0,
                                                        "index": j} for j, d in enumerate(n.devices)]}
                          for i, n in enumerate(n for n in nodes if n.tenant == tenant)],
                "workloads": [{
                    "name": w.name, "replicas": w.replicas,
                    "containers": [{"gpus": c.gpus, "gpumem": c.gpumem_mib, "gpumemPercentage": c.gpumem_percentage,
                                    "gpucores": c.gpucores} for c in w.containers],
                    "gpuPolicy": w.gpu_scheduler_policy, "nodePolicy": w.node_scheduler_policy,
                    **({"useGpuType": ",".join(w.use_gpu_type)} if w.use_gpu_type else {}),
                    **({"noUseGpuType": ",".join(w.nouse_gpu_type)} if w.nouse_gpu_type else {}),
                } for w in workloads if w.tenant == tenant],
            })
    return cases


def declared_and_reversed(case: dict[str, Any]) -> list[list[tuple[str, int]]]:
    return [pods_of(case), list(reversed(pods_of(case)))]


# ------------------------------------------------------------------ the planner's side


def planner_input(case: dict[str, Any]) -> tuple[list[Node], list[Workload]]:
    nodes = [node_from_register(node["name"], devices(case, node)) for node in case["nodes"]]
    workloads = [
        Workload(name=w["name"], replicas=w["replicas"],
                 containers=tuple(ContainerRequest(gpus=c["gpus"], gpumem_mib=c.get("gpumem"),
                                                   gpumem_percentage=c.get("gpumemPercentage"),
                                                   gpucores=c.get("gpucores")) for c in w["containers"]),
                 use_gpu_type=(w["useGpuType"],) if "useGpuType" in w else (),
                 nouse_gpu_type=(w["noUseGpuType"],) if "noUseGpuType" in w else (),
                 gpu_scheduler_policy=w["gpuPolicy"], node_scheduler_policy=w["nodePolicy"])
        for w in case["workloads"]
    ]
    return nodes, workloads


def planner_bounds(case: dict[str, Any]) -> dict[str, tuple[int, int]]:
    nodes, workloads = planner_input(case)
    found = verdicts(nodes, workloads, declared=plan(nodes, workloads))
    return {v.workload: (v.fewest, v.most) for v in found.workloads}


def disagreements(case: dict[str, Any], observed: Sequence[dict[str, int]]) -> list[str]:
    """What HAMi did outside the planner's bounds, one line each."""
    bounds = planner_bounds(case)
    out = []
    for index, placed in enumerate(observed):
        for workload, count in placed.items():
            fewest, most = bounds[workload]
            if not fewest <= count <= most:
                out.append(f"seed {case['seed']} order {index}: {workload} had {count} placed by HAMi, the planner "
                           f"says {fewest}..{most}")
    return out


# ------------------------------------------------------------------ HAMi's side


def _pod(case: dict[str, Any], workload: dict[str, Any], replica: int) -> dict[str, Any]:
    containers = []
    for index, c in enumerate(workload["containers"]):
        limits = {"nvidia.com/gpu": str(c["gpus"])}
        if c.get("gpumem") is not None:
            limits["nvidia.com/gpumem"] = str(c["gpumem"])
        if c.get("gpumemPercentage") is not None:
            limits["nvidia.com/gpumem-percentage"] = str(c["gpumemPercentage"])
        if c.get("gpucores") is not None:
            limits["nvidia.com/gpucores"] = str(c["gpucores"])
        containers.append({"name": f"c{index}", "image": "registry.k8s.io/pause:3.10.1", "resources": {"limits": limits}})
    annotations = {"hami.io/gpu-scheduler-policy": workload["gpuPolicy"],
                   "hami.io/node-scheduler-policy": workload["nodePolicy"]}
    if "useGpuType" in workload:
        annotations["nvidia.com/use-gputype"] = workload["useGpuType"]
    if "noUseGpuType" in workload:
        annotations["nvidia.com/nouse-gputype"] = workload["noUseGpuType"]
    return {"metadata": {"name": f"{workload['name']}-{replica}", "annotations": annotations,
                         "labels": {"workload": workload["name"]}},
            "spec": {"containers": containers, "nodeSelector": {"gpu-tenancy.io/scenario": str(case["seed"])},
                     "terminationGracePeriodSeconds": 0}}


def _schedulable(node: Any) -> bool:
    ready = any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
    return ready and not any(t.effect in ("NoSchedule", "NoExecute") for t in (node.spec.taints or []))


def run(case: dict[str, Any], order: list[tuple[str, int]], harness: Any, core: Any, tag: str,
        reasons: list[str] | None = None) -> dict[str, int]:
    """Create the scenario's nodes, then its pods in `order`, each settled before the next; HAMi's placements."""
    from kubernetes.client.exceptions import ApiException

    from tests.realcp.cluster import KWOK_NODE_ANNOTATION, wait_until

    namespace = f"hami-{case['seed']}-{tag}"
    core.create_namespace({"metadata": {"name": namespace}})
    names = []
    wait_until(f"the default service account of {namespace}",
               lambda: core.list_namespaced_service_account(namespace, field_selector="metadata.name=default").items)
    try:
        for node in case["nodes"]:
            name = f"hami-{case['seed']}-{tag}-{node['name']}"
            registered = devices(case, node)
            key, value = KWOK_NODE_ANNOTATION
            capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(hami.total_slots(registered))}
            core.create_node({"metadata": {"name": name, "annotations": {key: value, hami.NODE_REGISTER_ANNOTATION:
                                                                         hami.register_annotation(registered)},
                                           "labels": {"kubernetes.io/hostname": name,
                                                      "gpu-tenancy.io/scenario": str(case["seed"])}},
                              "status": {"capacity": capacity, "allocatable": capacity}})
            names.append(name)
            harness.add_node(name, registered)
        # A new node wakes HAMi's register loop at once (pkg/scheduler/scheduler.go, node informer AddFunc).
        wait_until(f"HAMi to register {names}", lambda: all(harness.knows(name) for name in names), interval=0.5)
        # A new node carries the not-ready taint until kwok reports it Ready (TaintNodesByCondition); a pod created
        # before then is refused by kube-scheduler's TaintToleration, not by HAMi.
        wait_until(f"{names} Ready and untainted", lambda: all(_schedulable(core.read_node(name)) for name in names))
        by_name = {w["name"]: w for w in case["workloads"]}
        placed = {w["name"]: 0 for w in case["workloads"]}
        for workload, replica in order:
            body = _pod(case, by_name[workload], replica)
            core.create_namespaced_pod(namespace, body)
            deadline = time.monotonic() + 60
            while True:
                pod = core.read_namespaced_pod(body["metadata"]["name"], namespace)
                annotations = pod.metadata.annotations or {}
                if pod.spec.node_name and annotations.get(hami.BIND_PHASE_ANNOTATION) == hami.BIND_PHASE_SUCCESS:
                    # The device plugin releases the node lock after marking success; HAMi binds the next pod only
                    # once it is gone (pkg/scheduler/scheduler.go lockAllDevices, no retry outside a pod group).
                    node = core.read_node(pod.spec.node_name)
                    if hami.NODE_LOCK_ANNOTATION in (node.metadata.annotations or {}):
                        harness.device_plugin_pass(pod.spec.node_name)
                        time.sleep(0.1)
                        continue
                    placed[workload] += 1
                    break
                if annotations.get(hami.BIND_PHASE_ANNOTATION) == hami.BIND_PHASE_ALLOCATING:
                    harness.device_plugin_pass(annotations.get(hami.ASSIGNED_NODE_ANNOTATION, ""))
                # Only a filter's refusal counts: a failed bind (SchedulerError) is retried by kube-scheduler.
                refused = [c.message or "" for c in (pod.status.conditions or [])
                           if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"]
                if refused:
                    # kube-scheduler's message, without its preemption tail: HAMi's reasons per card and node.
                    (reasons if reasons is not None else REASONS).append(f"{body['metadata']['name']}: "
                                                                         + refused[0].split(" no new claims")[0])
                    # A refused pod holds nothing (HAMi counts usage at a successful filter only), and in this
                    # scenario nothing is freed later; deleted, it stops being retried on every cluster event.
                    core.delete_namespaced_pod(body["metadata"]["name"], namespace, grace_period_seconds=0)
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{namespace}/{body['metadata']['name']} neither bound nor refused in 60 s")
                time.sleep(0.2)
        return placed
    finally:
        for name in names:
            harness.remove_node(name)
            with contextlib.suppress(ApiException):
                core.delete_node(name)
        core.delete_namespace(namespace, grace_period_seconds=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.realcp.hami_differential")
    parser.add_argument("--scenarios", type=int, default=500)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--orders", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=4, help="scenarios run at once (each on its own nodes)")
    parser.add_argument("--examples", type=Path, nargs="*", help="stack files: run each tenant's workloads instead")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from kubernetes import client, config

    from tests.realcp import build
    from tests.realcp import hami as hami_harness
    from tests.realcp.cluster import running

    scheduler = hami_harness.binary()
    if scheduler is None:
        print(f"set {hami_harness.HAMI_SCHEDULER_ENV} to HAMi v2.10.0's cmd/scheduler binary", file=sys.stderr)
        return 2
    records = json.loads(args.out.read_text()) if args.out.is_file() else []
    done = {record["seed"] for record in records}
    lock = threading.Lock()
    with running(build.build_all(), Path(tempfile.mkdtemp(prefix="hami-diff-"))) as plane:
        api = config.new_client_from_config(str(plane.admin_kubeconfig))
        harness = hami_harness.Hami(plane, scheduler, api).start()

        examples = {case["seed"]: case for case in example_cases(args.examples or [])}

        def one(seed: Any) -> None:
            core = client.CoreV1Api(config.new_client_from_config(str(plane.admin_kubeconfig)))
            case = examples[seed] if seed in examples else scenario(seed)
            tried = declared_and_reversed(case) if seed in examples else orders(case, args.orders)
            observed: list[dict[str, int]] = []
            refusals: list[list[str]] = []
            try:
                for i, order in enumerate(tried):
                    reasons: list[str] = []
                    observed.append(run(case, order, harness, core, f"o{i}", reasons))
                    refusals.append(reasons)
            except Exception as error:  # one scenario's failure is reported, the others go on
                print(f"seed {seed}: not run: {type(error).__name__}: {str(error)[:300]}", flush=True)
                return
            record = {**case, "orders": [[f"{w}-{r}" for w, r in order] for order in tried], "hami": observed,
                      "refusals": refusals}
            with lock:
                for line in disagreements(case, observed):
                    print(line, flush=True)
                records.append(record)
                records.sort(key=lambda r: str(r["seed"]).zfill(8))
                args.out.write_text(json.dumps(records, separators=(",", ":")) + "\n")
                print(f"seed {seed}: {observed}", flush=True)

        seeds: list[Any] = list(examples) if examples else list(range(args.first_seed, args.first_seed + args.scenarios))
        seeds = [s for s in seeds if s not in done]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for future in [pool.submit(one, seed) for seed in seeds]:
                future.result()
        harness.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
