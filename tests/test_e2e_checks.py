"""Four live checks that could not fail, each shown failing against a lab broken on purpose (a double of what the
check reads), and passing against the lab as it should be (tests/integration/checks.py, faults.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration import checks
from tests.integration.faults import interrupt_up_at, step_finished

A100 = "GPU-7f2c4a51-0000-4000-8000-00000000a100"
OTHER = "GPU-7f2c4a51-0000-4000-8000-00000000a101"
NODE = "gpu-tenancy-e2e-1-tenant-a-worker"


def registered(*uuids: str) -> list[dict[str, Any]]:
    # hami.io/node-nvidia-register as HAMi >= 2.8 writes it (DeviceInfo JSON), one entry per card.
    return [{"id": uuid, "count": 10, "devmem": 81920, "devcore": 100, "type": "NVIDIA A100-SXM4-80GB",
             "health": True} for uuid in uuids]


def shared(uuids: dict[str, str], phases: dict[str, str] | None = None, memory: int = 20000,
           cards: tuple[str, ...] = (A100,), nodes: dict[str, str] | None = None) -> list[str]:
    devices = {pod: [[{"uuid": uuid, "type": "NVIDIA", "usedmem": memory, "usedcores": 30}]] for pod, uuid in uuids.items()}
    return checks.shared_card_problems(
        devices, nodes or dict.fromkeys(uuids, NODE), phases or dict.fromkeys(uuids, "Running"),
        registered(*cards), NODE, memory=20000, cores=30,
    )


PODS = ("e2e-share-1", "e2e-share-2", "e2e-share-3")


def test_07_passes_when_three_pods_share_the_registered_card_at_once() -> None:
    assert shared(dict.fromkeys(PODS, A100)) == []


def test_07_fails_when_hami_recorded_a_card_the_node_does_not_register() -> None:
    # The old check (one UUID among the pods) passed this lab: all three on the same, unregistered, UUID.
    uuids = dict.fromkeys(PODS, OTHER)
    assert len(set(uuids.values())) == 1
    assert shared(uuids) == [f"{pod}: on {OTHER}, not a card {NODE} registers (['{A100}'])" for pod in PODS]


def test_07_fails_when_the_pods_are_not_on_one_card_or_not_running_at_once() -> None:
    spread = shared({"e2e-share-1": A100, "e2e-share-2": OTHER, "e2e-share-3": A100}, cards=(A100, OTHER))
    assert any("not one card shared" in p for p in spread) and any("registers" in p for p in spread)
    waiting = shared(dict.fromkeys(PODS, A100), phases={"e2e-share-1": "Running", "e2e-share-2": "Running",
                                                        "e2e-share-3": "Pending"})
    assert waiting == ["not all Running at once on the shared card: {'e2e-share-3': 'Pending'}"]
    assert any("HAMi recorded 81920 MiB" in p for p in shared(dict.fromkeys(PODS, A100), memory=81920))
    elsewhere = shared(dict.fromkeys(PODS, A100), nodes={**dict.fromkeys(PODS, NODE), "e2e-share-2": "other"})
    assert elsewhere == [f"pods not on {NODE}: {{'e2e-share-2': 'other'}}"]


def isolation(**change: Any) -> list[str]:
    seen: dict[str, Any] = {
        "nodes": ["tenant-a-worker"],
        "namespaces": ["default", "kube-system"],
        "pods": [("kube-system", "hami-scheduler-0", "tenant-a-worker"), ("default", "pending", None)],
        "statuses": {"management cluster": 401, "tenant-b": 401},
    }
    seen.update(change)
    return checks.isolation_problems("tenant-a", "tenant-b", seen["nodes"], "tenant-a-worker", "tenant-b-worker",
                                     seen["namespaces"], "e2e-only-in-tenant-b", seen["pods"], seen["statuses"])


def test_10_passes_when_each_api_shows_its_own_and_the_others_refuse_the_credentials() -> None:
    assert isolation() == []


def test_10_fails_on_a_403_an_authenticated_identity_on_the_other_api() -> None:
    (problem,) = isolation(statuses={"management cluster": 401, "tenant-b": 403})
    assert "HTTP 403 from the tenant-b API: it authenticated them" in problem
    assert isolation(statuses={"management cluster": 200, "tenant-b": 401}) != []


def test_10_fails_when_the_listing_shows_the_other_tenant_or_nothing() -> None:
    # The old pod check (pods on the other tenant's worker, in the viewer's own API) passed an empty listing.
    (empty,) = isolation(pods=[])
    assert "sees no pod on its own worker" in empty
    (foreign,) = isolation(pods=[("kube-system", "hami-scheduler-0", "tenant-a-worker"),
                                 ("kube-system", "hami-device-plugin-x", "tenant-b-worker")])
    assert "pods on nodes it does not have: ['kube-system/hami-device-plugin-x on tenant-b-worker']" in foreign
    assert any("sees tenant-b's node" in p for p in isolation(nodes=["tenant-a-worker", "tenant-b-worker"]))
    assert isolation(namespaces=["default", "e2e-only-in-tenant-b"]) == [
        "tenant-a sees tenant-b's namespaces ['e2e-only-in-tenant-b']"]


def real_log() -> str:
    """The test pod's own command, run here: no HAMi-core, as in sim-nvml with CUDA_DISABLE_CONTROL set."""
    done = subprocess.run(checks.DYNAMIC_COMMAND, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_09b_cannot_run_where_it_cannot_fail_and_checks_the_preload_where_it_can() -> None:
    log = real_log()
    assert log == "libvgpu mapped: False\ndynamically linked ok\n"
    (problem,) = checks.dynamic_run_problems("sim", "Succeeded", log, {})
    assert "cannot fail here" in problem
    assert checks.dynamic_run_problems("sim-nvml", "Succeeded", log, {"CUDA_DISABLE_CONTROL": "T"}) == []


def test_09b_fails_against_each_broken_lab() -> None:
    log = real_log()
    preloaded = log.replace("False", "True")
    assert checks.dynamic_run_problems("sim-nvml", "Succeeded", preloaded, {"CUDA_DISABLE_CONTROL": "T"}) == [
        "libvgpu.so mapped: ['True'], expected False in mode sim-nvml"]
    (no_env,) = checks.dynamic_run_problems("sim-nvml", "Succeeded", log, {})
    assert "did not set CUDA_DISABLE_CONTROL=T" in no_env
    assert checks.dynamic_run_problems("real", "Succeeded", log, {}) == [
        "libvgpu.so mapped: ['False'], expected True in mode real"]
    assert checks.dynamic_run_problems("real", "Succeeded", preloaded, {}) == []
    (exit127,) = checks.dynamic_run_problems("real", "Failed", "", {})[:1]
    assert exit127.startswith("ended Failed with log ''")


# ------------------------------------------------------------------------------------------------- F6

URN = "urn:pulumi:e2e-1::gpu-tenancy::gpu-tenancy:tenant:Tenant$kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane::tenant-b-tcp"


def event(kind: str, urn: str = URN) -> str:
    # pulumi v3.272 apitype.EngineEvent as `--event-log` writes it: resourcePreEvent when a step starts,
    # resOutputsEvent when it completed (both with StepEventMetadata).
    metadata = {"op": "create", "urn": urn, "type": "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"}
    return json.dumps({"sequence": 9, "timestamp": 1767225600, kind: {"metadata": metadata}})


def test_a_step_is_finished_only_by_its_outputs() -> None:
    assert step_finished([event("resourcePreEvent"), event("resOutputsEvent")], URN)
    assert not step_finished([event("resourcePreEvent"), event("resOpFailedEvent")], URN)
    assert not step_finished([event("resOutputsEvent", URN + "-other"), '{"resOutputsEv'], URN)


def fake_pulumi(tmp_path: Path, finish_first: bool) -> dict[str, str]:
    """A `pulumi up` stand-in writing engine events as the CLI does; with `finish_first`, the step completes the
    moment it starts (a step faster than the interrupt), else it runs until the second Ctrl-C."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pulumi"
    outputs = repr(event("resOutputsEvent")) if finish_first else "''"
    fake.write_text(f"""#!{sys.executable}
import signal, sys, time
log = sys.argv[sys.argv.index("--event-log") + 1]
got = []
def on_int(*_):
    got.append(1)
    if len(got) == 2:
        sys.exit(255)
signal.signal(signal.SIGINT, on_int)
with open(log, "a") as out:
    out.write({event("resourcePreEvent")!r} + "\\n")
    if {outputs}:
        out.write({outputs} + "\\n")
for _ in range(600):
    time.sleep(0.1)
""")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_f6_an_interrupt_inside_the_step_cuts_it_off(tmp_path: Path) -> None:
    result = interrupt_up_at("e2e-1", "tenant-b-tcp", tmp_path, fake_pulumi(tmp_path, False), tmp_path,
                             tmp_path / "policies", timeout_s=30)
    assert result.urn == URN and result.cut_off and result.returncode == 255


def test_f6_fails_when_the_step_finished_before_the_interrupt(tmp_path: Path) -> None:
    # The old check passed this run: the step had started (a URN), the interrupt came after it completed.
    result = interrupt_up_at("e2e-1", "tenant-b-tcp", tmp_path, fake_pulumi(tmp_path, True), tmp_path,
                             tmp_path / "policies", timeout_s=30)
    assert result.urn == URN and result.finished and not result.cut_off


# --------------------------------------------------------------------------- test_23/24: network reach


@pytest.mark.parametrize(("output", "verdict"), [
    ('{\n  "major": "1",\n  "minor": "35",\n  "gitVersion": "v1.35.5"', "open"),
    ("wget: server returned error: HTTP/1.1 401 Unauthorized", "open"),
    ("wget: can't connect to remote host (172.18.255.201): Connection refused", "closed"),
    ("wget: download timed out", "closed"),
    ("wget: can't connect to remote host (10.0.0.1): No route to host", "closed"),
])
def test_a_probe_is_open_when_anything_answered_and_closed_when_nothing_did(output: str, verdict: str) -> None:
    assert checks.reach_verdict(output) == verdict


def test_a_probe_that_says_neither_is_not_guessed() -> None:
    with pytest.raises(AssertionError, match="cannot tell"):
        checks.reach_verdict("wget: bad address 'tenant-b'")
