"""Time one reconcile pass of the mock GPU agent over 100 nodes and 1,000 pods."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent import decisions

NODE_COUNT = 100
POD_COUNT = 1_000
PHASES = ["allocating", "success", "failed", None]


def build_fixture() -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    nodes: list[dict[str, Any]] = [
        {
            "metadata": {
                "name": f"node-{i}",
                "annotations": {hami.NODE_LOCK_ANNOTATION: f"2026-12-02T20:00:00Z,ns,pod-{i}"},
            },
            "status": {"capacity": {}},
        }
        for i in range(NODE_COUNT)
    ]
    pods_by_node: dict[str, list[dict[str, Any]]] = {node["metadata"]["name"]: [] for node in nodes}
    for i in range(POD_COUNT):
        node_name = f"node-{i % NODE_COUNT}"
        annotations: dict[str, str] = {
            hami.ASSIGNED_NODE_ANNOTATION: node_name,
            hami.DEVICES_ALLOCATED_ANNOTATION: "GPU-x,NVIDIA,1000,10:;",
        }
        if (phase := PHASES[i % len(PHASES)]) is not None:
            annotations[hami.BIND_PHASE_ANNOTATION] = phase
        pods_by_node[node_name].append(
            {
                "metadata": {"name": f"pod-{i}", "namespace": "ns", "annotations": annotations},
                "spec": {"nodeName": node_name},
            }
        )
    return nodes, pods_by_node


def main() -> None:
    devices = hami.device_inventory("bench", [{"model": "NVIDIA L4", "memoryMiB": 23034, "count": 8}])
    nodes, pods_by_node = build_fixture()
    started = time.perf_counter()
    plans = [decisions.plan_reconcile(node, pods_by_node[node["metadata"]["name"]], devices) for node in nodes]
    elapsed = time.perf_counter() - started
    actions = sum(len(plan.pod_actions) for plan in plans)
    print(f"reconciled {NODE_COUNT} nodes / {POD_COUNT} pods in {elapsed * 1000:.2f} ms ({actions} pod actions)")


if __name__ == "__main__":
    main()
