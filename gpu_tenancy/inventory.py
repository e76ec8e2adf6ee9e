"""Declared GPU inventory against what HAMi's device plugin reports (mode real)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from gpu_tenancy.config import GpuConfig

# Drivers reserve part of a card's memory: a "24 GB" L4 reports less than 24576 MiB. Within this
# fraction below the declared size a card still counts as the declared model.
MEMORY_TOLERANCE = 0.10


def _model_key(text: str) -> str:
    """'NVIDIA-NVIDIA A100-SXM4-80GB' and 'NVIDIA-A100-SXM4-80GB' both become 'a100sxm480gb'."""
    return re.sub(r"[^a-z0-9]", "", text.lower()).replace("nvidia", "")


def inventory_mismatches(
    declared: Sequence[GpuConfig], reported: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[str]:
    """Problems, one line each, between a tenant's declared `gpus` and its nodes' devices.

    `reported` maps node name to the devices of its `hami.io/node-nvidia-register` annotation.
    Empty when every declared card is there (by model, within MEMORY_TOLERANCE of its memory,
    healthy) and nothing else is.
    """
    problems: list[str] = []
    wanted = Counter({(_model_key(g.model), g.model, g.memory_mib): g.count for g in declared})
    found: Counter[tuple[str, str, int]] = Counter()
    for node, devices in sorted(reported.items()):
        for device in devices:
            device_type = str(device.get("type", "?"))
            if not device.get("health", False):
                problems.append(f"node {node}: GPU {device.get('id', '?')} ({device_type}) is unhealthy")
                continue
            match = next(
                (
                    key
                    for key in wanted
                    if key[0] in _model_key(device_type)
                    and key[2] * (1 - MEMORY_TOLERANCE) <= int(device.get("devmem", 0)) <= key[2]
                    and found[key] < wanted[key]
                ),
                None,
            )
            if match is None:
                problems.append(
                    f"node {node}: GPU {device.get('id', '?')} ({device_type}, {device.get('devmem', '?')} MiB) "
                    "is not in the tenant's declared gpus"
                )
            else:
                found[match] += 1
    for key, count in sorted(wanted.items()):
        if found[key] < count:
            problems.append(
                f"declared {count} x {key[1]} ({key[2]} MiB) but the nodes report {found[key]}"
            )
    return problems
