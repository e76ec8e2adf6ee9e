# mypy: disable-error-code="union-attr"
"""Live fault checks: what a workstation does to a lab, and the documented recovery (docs/operations.md: Recover).

They run after the checks of test_lab.py and test_nvml.py and before the teardown (marker ``e2e_fault``,
ordered by conftest), against the same throwaway stack, and skip as the rest of the suite does. Each has a
time bound and ends with a preview (refreshing, as `make up` does) that shows no changes. The last one deletes
the kind cluster out of band and destroys the stack the way `make destroy` does then.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.integration.conftest import POLICY_PACK_DIR, REPO_ROOT, DeployedLab, host_leftovers
from tests.integration.faults import (
    changes,
    doctor_problems,
    documented_helm_fix,
    interrupt_up_at,
    lab_problems,
    pulumi_env,
    run_doctor,
)
from tests.integration.support import DEVICE_PLUGIN_SELECTOR, MOCK_GPU_AGENT_SELECTOR, wait_for, worker_nodes
from tests.integration.test_lab import create_pod, delete_pods, gpu_pod, pod_phase, tenant_core

pytestmark = [pytest.mark.e2e, pytest.mark.e2e_fault]

HAMI_SCHEDULER_SELECTOR = "app.kubernetes.io/component=hami-scheduler"
KAMAJI_NAMESPACE = "kamaji-system"
DATASTORE_POD = "kamaji-etcd-0"


@pytest.fixture(autouse=True)
def _diagnostics_first(lab: DeployedLab) -> None:
    """Every fault check breaks or destroys part of the lab: the diagnostics of a check that failed before it
    are collected first, while the lab is as that check left it."""
    lab.before_destroying()


def _env(lab: DeployedLab) -> dict[str, str]:
    return pulumi_env(lab.stack.workspace.env_vars)


def _state_dir(lab: DeployedLab) -> Path:
    return Path(_env(lab)["PULUMI_BACKEND_URL"].removeprefix("file://"))


def preview_shows_no_changes(lab: DeployedLab) -> None:
    """`pulumi preview --refresh` with the policy pack: the live lab and the program agree."""
    events: list[Any] = []
    lab.stack.preview(on_output=lab.pulumi_log, on_event=events.append, policy_packs=[str(POLICY_PACK_DIR)],
                      refresh=True, color="never")
    assert changes(events) == [], "after the recovery a preview still changes:\n" + "\n".join(changes(events))


def up_as_make_up_does(lab: DeployedLab, **env: str) -> None:
    """`make up`: refresh, then up with the policy pack (extra environment for this run only)."""
    for key, value in env.items():
        lab.stack.workspace.env_vars[key] = value
    try:
        lab.stack.up(on_output=lab.pulumi_log, policy_packs=[str(POLICY_PACK_DIR)], refresh=True, color="never")
    finally:
        for key in env:
            lab.stack.workspace.env_vars.pop(key, None)


def doctor_is_clean_within(lab: DeployedLab, seconds: float) -> None:
    state = _state_dir(lab)

    def clean() -> bool:
        result = run_doctor(lab.stack.name, REPO_ROOT, _env(lab), state_dir=state)
        lab.pulumi_log("== make doctor\n" + result.stdout + result.stderr)
        return result.returncode in (0, 1) and not lab_problems(result)

    wait_for(clean, timeout_s=seconds, interval_s=15, message="`make doctor` to find nothing wrong with the lab")


def _docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def _bounded(seconds: float, check: Callable[[], None]) -> None:
    started = time.monotonic()
    check()
    elapsed = time.monotonic() - started
    assert elapsed <= seconds, f"the check took {elapsed:.0f} s, its bound is {seconds:.0f} s"


# --------------------------------------------------------------------------- the host


def test_f1_docker_daemon_restart(lab: DeployedLab) -> None:
    """kind's nodes and the workers run with `--restart=on-failure:1`: a restarted daemon starts them again,
    and the lab comes back by itself."""
    if shutil.which("systemctl") is None or subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode:
        pytest.skip("restarting the Docker daemon needs systemctl and passwordless sudo on this host")

    def check() -> None:
        done = subprocess.run(["sudo", "-n", "systemctl", "restart", "docker"], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        doctor_is_clean_within(lab, 900)
        preview_shows_no_changes(lab)

    _bounded(1500, check)


def test_f2_worker_removed_by_hand_and_the_documented_recovery(lab: DeployedLab) -> None:
    (worker,) = worker_nodes(lab.outputs, "tenant-b")  # in sim modes the node name is the container's

    def check() -> None:
        assert _docker("rm", "-f", worker).returncode == 0
        found = doctor_problems(run_doctor(lab.stack.name, REPO_ROOT, _env(lab), state_dir=_state_dir(lab)))
        assert any(line.startswith(f"container {worker}: removed outside Pulumi") for line in found), found
        up_as_make_up_does(lab)  # docs/operations.md: Recover, `make up`
        doctor_is_clean_within(lab, 600)
        preview_shows_no_changes(lab)

    _bounded(1800, check)


def test_f3_a_second_lab_on_the_same_network_is_refused_before_anything_is_made(lab: DeployedLab, tmp_path: Path) -> None:
    config = {k: v for k, v in lab.config.items() if k != "gpu-tenancy:kind"}
    network = (lab.config.get("gpu-tenancy:kind") or {}).get("network")
    if network:
        config["gpu-tenancy:kind"] = {"network": network}
    stack_file = tmp_path / "Pulumi.e2e-second.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    before = _docker("ps", "-a", "--format", "{{.Names}}").stdout.split()

    def check() -> None:
        result = run_doctor("e2e-second", REPO_ROOT, _env(lab), "--before-up", stack_file=stack_file)
        assert result.returncode == 1
        cluster = lab.output("kindClusterName")
        assert any(line.startswith(f"another lab: kind cluster {cluster} already run(s)")
                   for line in doctor_problems(result)), result.stdout
        assert _docker("ps", "-a", "--format", "{{.Names}}").stdout.split() == before
        preview_shows_no_changes(lab)

    _bounded(600, check)


# --------------------------------------------------------------------------- inside the lab


def test_f4_the_datastore_pod_deleted_a_marker_survives(lab: DeployedLab) -> None:
    core = tenant_core(lab, "tenant-a")
    management = client.CoreV1Api(lab.management_client())
    marker = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="e2e-marker"), data={"written": str(time.time())})

    def check() -> None:
        core.create_namespaced_config_map("default", marker)
        try:
            management.delete_namespaced_pod(DATASTORE_POD, KAMAJI_NAMESPACE)
            apps = client.AppsV1Api(lab.management_client())
            wait_for(lambda: (apps.read_namespaced_stateful_set("kamaji-etcd", KAMAJI_NAMESPACE).status.ready_replicas
                              or 0) >= 1, timeout_s=300, message="kamaji-etcd Ready again")
            wait_for(lambda: core.read_namespaced_config_map("e2e-marker", "default").data == marker.data,
                     timeout_s=300, message="tenant-a's API to answer and keep the marker ConfigMap")
        finally:
            wait_for(lambda: core.delete_namespaced_config_map("e2e-marker", "default") is not None, timeout_s=120,
                     message="the marker deleted")
        preview_shows_no_changes(lab)

    _bounded(900, check)


def _disrupted_pods(lab: DeployedLab, which: str) -> tuple[client.CoreV1Api, str]:
    if which == "scheduler":
        return tenant_core(lab, "tenant-a"), HAMI_SCHEDULER_SELECTOR
    selector = MOCK_GPU_AGENT_SELECTOR if lab.mode == "sim" else DEVICE_PLUGIN_SELECTOR
    return tenant_core(lab, "tenant-a"), selector


@pytest.mark.parametrize("which", ["device-layer", "scheduler"])
def test_f5_a_pod_of_hami_or_the_device_layer_deleted_during_a_burst(lab: DeployedLab, which: str) -> None:
    """Ten pods of one A100 slot each; the agent (sim) or HAMi's device plugin (sim-nvml), or HAMi's scheduler,
    is deleted after the third: all ten end up bound and Running."""
    core, selector = _disrupted_pods(lab, which)
    names = [f"e2e-fault-{which}-{index}" for index in range(10)]

    def check() -> None:
        try:
            for index, name in enumerate(names):
                create_pod(core, gpu_pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000",
                                                "nvidia.com/gpucores": "5"}))
                if index == 2:
                    for pod in core.list_pod_for_all_namespaces(label_selector=selector).items:
                        core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
            wait_for(lambda: all(pod_phase(core, n) == "Running" for n in names), timeout_s=300, interval_s=2,
                     message=f"all ten pods Running after the {which} pod was deleted mid-burst")
        finally:
            delete_pods(core, names)
        preview_shows_no_changes(lab)

    _bounded(600, check)


# --------------------------------------------------------------------------- interrupted `up`


def _urn(lab: DeployedLab, name: str) -> str:
    resources = lab.stack.export_stack().deployment.get("resources") or []
    (urn,) = [r["urn"] for r in resources if r["urn"].rsplit("::", 1)[-1] == name]
    return str(urn)


def _recover_after_interrupt(lab: DeployedLab, cut_off: str) -> None:
    """docs/operations.md: Recover, `up` interrupted: what `make doctor` names, in its order."""
    env = _env(lab)
    found = doctor_problems(run_doctor(lab.stack.name, REPO_ROOT, env, state_dir=_state_dir(lab)))
    lab.pulumi_log(f"== make doctor after the interrupt at {cut_off}\n" + "\n".join(found))
    kubeconfigs = {"management": lab.output("managementKubeconfig"), **lab.output("tenantKubeconfigs")}
    for line in found:
        command = documented_helm_fix(line)
        if command:
            where = line.split(" Helm release", 1)[0].removeprefix("tenant ").strip()
            kubeconfig = kubeconfigs["management" if where == "management cluster" else where]
            path = _state_dir(lab) / f"recovery-{where.replace(' ', '-')}.kubeconfig"
            path.write_text(kubeconfig)
            path.chmod(0o600)
            done = subprocess.run([command[0], "--kubeconfig", str(path), *command[1:]], capture_output=True,
                                  text=True, timeout=120)
            path.unlink()
            assert done.returncode == 0, done.stderr
    lab.stack.refresh(on_output=lab.pulumi_log, clear_pending_creates=True, color="never")
    for line in found:
        if "`docker rm -f " in line:
            _docker("rm", "-f", line.split("`docker rm -f ", 1)[1].split("`", 1)[0])
    upsert = any("PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true" in line for line in found)
    up_as_make_up_does(lab, **({"PULUMI_K8S_UPSERT_EXISTING_OBJECTS": "true"} if upsert else {}))


@pytest.mark.parametrize(
    ("destroy_first", "cut_at"),
    [
        ("tenant-b", ["tenant-b-tcp", "tenant-b-worker-container", "tenant-b-worker-join"]),
        ("kamaji-chart", ["kamaji-chart"]),
    ],
    ids=["tenant-b: control plane, worker container, join", "the Kamaji release"],
)
def test_f6_an_up_interrupted_at_each_step_recovers_as_documented(
    lab: DeployedLab, destroy_first: str, cut_at: list[str]
) -> None:
    """The named resources (and what depends on them) are destroyed, then `up` is interrupted (Ctrl-C twice)
    as each of them is being created, and the documented recovery follows each interrupt."""
    def check() -> None:
        lab.stack.destroy(on_output=lab.pulumi_log, target=[_urn(lab, destroy_first)], target_dependents=True,
                          color="never")
        for name in cut_at:
            interrupted = interrupt_up_at(lab.stack.name, name, REPO_ROOT, _env(lab), lab.run_dir, POLICY_PACK_DIR)
            lab.pulumi_log(f"== up interrupted at {name}: {interrupted.urn} (exit {interrupted.returncode})\n"
                           + interrupted.log[-5000:])
            assert interrupted.urn, f"the up finished or failed before it created {name}; see {lab.run_dir}"
            assert interrupted.cut_off, f"{name} was created before the interrupt landed: nothing to recover"
            _recover_after_interrupt(lab, name)
        doctor_is_clean_within(lab, 900)
        preview_shows_no_changes(lab)

    _bounded(3600, check)


# --------------------------------------------------------------------------- the cluster, out of band


def test_f7_destroy_after_the_kind_cluster_was_deleted_out_of_band(lab: DeployedLab) -> None:
    """Runs last of the fault checks: the stack is gone afterwards (the teardown check then finds nothing)."""
    cluster = lab.output("kindClusterName")

    def check() -> None:
        done = subprocess.run(["kind", "delete", "cluster", "--name", cluster], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        gone = run_doctor(lab.stack.name, REPO_ROOT, _env(lab), "--lab-gone")
        assert gone.returncode == 0, "doctor --lab-gone must see the cluster gone"
        skipped: list[str] = []

        def said(line: str) -> None:
            lab.pulumi_log(line)
            if "skipped removing Node" in line or "Deleting the unreachable resource" in line:
                skipped.append(line.strip())

        env = lab.stack.workspace.env_vars
        env.update({"PULUMI_K8S_DELETE_UNREACHABLE": "true", "GPU_TENANCY_LAB_GONE": "1"})
        try:
            lab.stack.destroy(on_output=said, refresh=True, color="never")  # `make destroy`, lab gone
        finally:
            env.pop("PULUMI_K8S_DELETE_UNREACHABLE", None)
            env.pop("GPU_TENANCY_LAB_GONE", None)
        lab.destroyed = True
        assert skipped, "destroy said nothing about what it skipped"
        assert host_leftovers(cluster) == []
        resources = lab.stack.export_stack().deployment.get("resources") or []
        assert [r["urn"] for r in resources if not r["type"].startswith("pulumi:")] == [], json.dumps(resources)[:2000]

    _bounded(1200, check)
