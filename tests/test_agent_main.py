"""The agent's entry point: environment -> inventory -> one reconcile (no cluster needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.agent import __main__ as entry
from gpu_tenancy.hami.agent import kube

GPUS = [{"model": "NVIDIA L4", "memoryMiB": 23034, "count": 2}]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    monkeypatch.setattr(kube, "load_kube_config", lambda: "api")

    def reconcile_once(self: kube.KubeAgent) -> None:
        calls.append((self.api, self.node_name, self.devices, self.dry_run))

    monkeypatch.setattr(kube.KubeAgent, "reconcile_once", reconcile_once)
    return calls


def test_once_reads_inventory_file_like_the_daemonset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: list[Any]
) -> None:
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps(GPUS))
    monkeypatch.setenv("NODE_NAME", "w1")
    monkeypatch.setenv("TENANT", "tenant-b")
    monkeypatch.setenv("INVENTORY_JSON", str(inventory))
    monkeypatch.setenv("SPLIT_COUNT", "10")
    assert entry.main(["--once", "--dry-run"]) == 0
    assert recorded == [("api", "w1", hami.device_inventory("tenant-b", GPUS, 10), True)]


def test_inline_inventory_and_bad_inventory(monkeypatch: pytest.MonkeyPatch, recorded: list[Any]) -> None:
    monkeypatch.setenv("NODE_NAME", "w1")
    monkeypatch.setenv("TENANT", "tenant-b")
    monkeypatch.setenv("INVENTORY_JSON", json.dumps(GPUS))
    assert entry.main(["--once"]) == 0
    assert hami.total_slots(recorded[0][2]) == 20
    monkeypatch.setenv("INVENTORY_JSON", json.dumps([{"model": "NVIDIA L4", "memoryMiB": 0, "count": 1}]))
    with pytest.raises(ValueError, match="invalid GPU group"):
        entry.main(["--once"])
