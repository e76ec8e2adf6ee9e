"""What HAMi's device plugin registered on each node against what the plan counts on it (sim-nvml, real)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any


def _cards(devices: Sequence[Mapping[str, Any]]) -> Counter[tuple[str, int]]:
    return Counter((str(d.get("type", "?")), int(d.get("devmem", 0))) for d in devices)


def inventory_mismatches(
    expected: Mapping[str, Sequence[Mapping[str, Any]]], reported: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[str]:
    """Problems, one line each, between the register the plan counts on each node and what HAMi registered.

    Both map a node name to `hami.io/node-nvidia-register` entries. A card matches on its exact type and
    MiB: HAMi fits requests on exactly these numbers, so any difference changes what fits. Empty when every
    node registered exactly its planned cards, all healthy.
    """
    problems: list[str] = []
    for node in sorted(set(expected) | set(reported)):
        want = _cards(expected.get(node, ()))
        healthy = []
        for device in reported.get(node, ()):
            if device.get("health", False):
                healthy.append(device)
            else:
                problems.append(f"node {node}: GPU {device.get('id', '?')} ({device.get('type', '?')}) is unhealthy")
        got = _cards(healthy)
        for model, mib in sorted(want - got):
            others = sorted(m for (t, m) in got - want if t == model)
            if others:
                problems.append(
                    f"node {node}: {model} registers {', '.join(map(str, others))} MiB where the plan counts {mib} "
                    "MiB (the memory NVML reports for it in the GPU catalogue)"
                )
            else:
                problems.append(
                    f"node {node}: declares {want[(model, mib)]} x {model} ({mib} MiB), HAMi registered "
                    f"{got[(model, mib)]}"
                )
        for (model, mib), count in sorted((got - want).items()):
            if not any(t == model for (t, _m) in want - got):
                problems.append(f"node {node}: {count} x {model} ({mib} MiB) registered but not declared on this node")
    return problems
