"""One machine never joins twice: config refuses the same address (tests/test_config.py); here the machine
ids the hosts report gate every host's preparation (components/host_identity.py)."""

from __future__ import annotations

import subprocess

from harness import gpu_config, record_mocks, registered_gpus, unwrap
from policy_support import gpu_stack

from gpu_tenancy.builders.host_worker import hostprep

A, B = "0" * 31 + "a", "0" * 31 + "b"


def test_duplicate_machines_are_named_by_tenant_and_worker() -> None:
    assert hostprep.duplicate_machines({"t1/w1": A + "\n", "t2/w2": B}) == []
    assert hostprep.duplicate_machines({"t1/w1": A + "\n", "t2/w2": A, "t2/w3": B}) == [
        f"t1/w1 and t2/w2 (machine-id {A})"
    ]


def test_the_gate_fails_naming_both_workers() -> None:
    ok = subprocess.run(["sh", "-c", hostprep.machine_check_command({"t1/w1": A, "t2/w2": B})], capture_output=True)
    assert ok.returncode == 0
    gate = hostprep.machine_check_command({"t1/w1": A, "t2/w2": A})
    failed = subprocess.run(["sh", "-c", gate], capture_output=True, text=True)
    assert failed.returncode == 1
    assert failed.stderr.startswith(f"gpu-tenancy: one machine is listed as several workers: t1/w1 and t2/w2 (machine-id {A})")


def _gpu(machine_ids: dict[str, str] | None = None) -> list:  # type: ignore[type-arg]
    config = gpu_config()
    mocks = record_mocks(config, stack="gpu", node_register=registered_gpus(config), machine_ids=machine_ids)
    return mocks.resources


def test_every_host_is_prepared_only_after_the_gate() -> None:
    resources = _gpu()
    reads = [r for r in resources if r.typ == "command:remote:Command" and r.inputs.get("create") == "cat /etc/machine-id"]
    assert {unwrap(r.inputs["connection"])["host"] for r in reads} == {"10.20.0.11", "10.20.0.12"}
    assert all(unwrap(r.inputs["connection"])["hostKey"].startswith("ssh-ed25519 ") for r in reads)
    (gate,) = [r for r in resources if r.name == "hosts-unique"]
    assert gate.inputs["create"] == "true"
    engine = gpu_stack()
    (gate_urn,) = [r.urn for r in engine if r.name == "hosts-unique"]
    prepares = [r for r in engine if r.type == "command:remote:Command" and r.name.endswith("-prepare")]
    assert len(prepares) == 2 and all(gate_urn in r.dependencies for r in prepares)


def test_two_workers_on_one_machine_fail_the_gate() -> None:
    resources = _gpu(machine_ids={"10.20.0.11": A, "10.20.0.12": A})
    (gate,) = [r for r in resources if r.name == "hosts-unique"]
    assert "tenant-a/gpu-a100-01 and tenant-b/gpu-l4-01" in gate.inputs["create"]
    assert gate.inputs["create"].endswith("exit 1")
