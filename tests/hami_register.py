"""A double of HAMi v2.10.0's device plugin registering a node's cards, from what NVML answers.

Follows pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go `getAPIDevices` (read at v2.10.0) for
a node outside MIG mode with the chart's defaults (deviceSplitCount 10, deviceMemoryScaling 1,
deviceCoreScaling 1):
- `Devmem` = int32(MemoryInfo.Total / 1024 / 1024) (integer MiB, rounded down);
- `Type` = NVML's GetName(), prefixed "NVIDIA-" unless it starts with "NVIDIA";
- `Count` = deviceSplitCount, `Devcore` = deviceCoreScaling * 100, `Mode` = "hami-core", `Health` from the
  device plugin's health (healthy here), `Numa` from sysfs (0: kind nodes and the mock have none);
- the devices are walked by ranging over a Go map (`for UUID := range devs`), so the register's order is
  not the NVML index order and changes from one registration to the next: `order` lets a test pick one.
The JSON field names and their order are DeviceInfo's (pkg/device/devices.go), as the annotation carries
them. Written from the upstream source, not from gpu_tenancy.hami.protocol.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SPLIT_COUNT = 10
CORE_SCALING = 1.0
MEMORY_SCALING = 1.0
CARDS_FIXTURE = Path(__file__).parent / "fixtures" / "nvidia_smi" / "cards.json"


def register(nvml_devices: Sequence[Mapping[str, Any]], order: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Register entries for NVML devices given as {uuid, index, name, memory_total_bytes}."""
    devices = list(nvml_devices)
    walk = [devices[i] for i in order] if order is not None else devices
    entries = []
    for device in walk:
        name = str(device["name"])
        registered_mib = int(device["memory_total_bytes"]) // 1024 // 1024
        if MEMORY_SCALING != 1:
            registered_mib = int(registered_mib * MEMORY_SCALING)
        entries.append(
            {
                "id": device["uuid"],
                "index": int(device["index"]),
                "count": SPLIT_COUNT,
                "devmem": registered_mib,
                "devcore": int(CORE_SCALING * 100),
                "type": name if name.startswith("NVIDIA") else f"NVIDIA-{name}",
                "numa": 0,
                "mode": "hami-core",
                "health": True,
            }
        )
    return entries


def annotation(entries: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(entries), separators=(",", ":"))


def recorded_cards() -> dict[str, int]:
    """NVML name -> total MiB of the real cards recorded from published nvidia-smi output."""
    data = json.loads(CARDS_FIXTURE.read_text())
    return {card["name"]: int(card["memory_total_mib"]) for card in data["cards"]}


def real_host_nvml(host: str, groups: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """What NVML answers on a real host with these card groups ({model, count}): each card's recorded name
    and total; a model nobody recorded is a KeyError (record it before a test relies on it)."""
    totals = recorded_cards()
    devices: list[dict[str, Any]] = []
    for group in groups:
        for _ in range(int(group["count"])):
            index = len(devices)
            devices.append(
                {
                    "uuid": f"GPU-{host}-{index:04d}-0000-0000-000000000000",
                    "index": index,
                    "name": group["model"],
                    "memory_total_bytes": totals[group["model"]] * 1024 * 1024,
                }
            )
    return devices


def mock_nvml_devices(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What NVIDIA's mock NVML answers for its YAMLConfig (k8s-test-infra engine/config.go): each device's
    `uuid`, `index`, `name` and `memory.total_bytes`."""
    return [
        {
            "uuid": device["uuid"],
            "index": device["index"],
            "name": device["name"],
            "memory_total_bytes": int(device["memory"]["total_bytes"]),
        }
        for device in config["devices"]
    ]
