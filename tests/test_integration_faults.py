"""The live fault checks' helpers (tests/integration/faults.py), offline: reading `pulumi --event-log`,
interrupting a run at a step, reading previews, following `make doctor`'s documented Helm fix."""

from __future__ import annotations

import datetime
import json
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

from gpu_tenancy.cli.doctor.lab import ClusterFacts, cluster_problems
from tests.integration.faults import changes, documented_helm_fix, interrupt_up_at, step_started

URN = "urn:pulumi:e2e-1::gpu-tenancy::gpu-tenancy:tenant:Tenant$kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane::tenant-b-tcp"


def _event(op: str, urn: str = URN) -> str:
    # pulumi v3.272 apitype.EngineEvent as `--event-log` writes it (one JSON object per line).
    return json.dumps({"sequence": 7, "timestamp": 1767225600,
                       "resourcePreEvent": {"metadata": {"op": op, "urn": urn, "type": urn.split("::")[2].rsplit("$", 1)[-1],
                                                         "provider": ""}}})


def test_a_step_is_found_by_the_resource_name_and_a_creating_op() -> None:
    lines = [json.dumps({"sequence": 0, "preludeEvent": {"config": {}}}), _event("same", URN + "-other"),
             _event("refresh"), _event("create")]
    assert step_started(lines, "tenant-b-tcp") == URN
    assert step_started(lines[:3], "tenant-b-tcp") is None  # a refresh step is not a create
    assert step_started([_event("create", URN + "x")], "tenant-b-tcp") is None
    assert step_started(['{"sequence": 8, "resourcePre'], "tenant-b-tcp") is None  # a line still being written


def test_changes_keep_only_steps_that_change_something() -> None:
    def event(op: str) -> SimpleNamespace:
        return SimpleNamespace(resource_pre_event=SimpleNamespace(metadata=SimpleNamespace(op=SimpleNamespace(value=op), urn=f"urn::{op}")))

    events = [event("same"), event("refresh"), event("read"), event("update"), SimpleNamespace(resource_pre_event=None)]
    assert changes(events) == ["update urn::update"]


def test_the_helm_fix_is_read_from_what_doctor_prints() -> None:
    secret = {"metadata": {"name": "sh.helm.release.v1.hami.v1", "namespace": "kube-system",
                           "labels": {"owner": "helm", "name": "hami", "status": "pending-install"}}}
    cluster = ClusterFacts("tenant-b", "`make -s kubeconfig STACK=e2e TENANT=tenant-b`", helm_secrets=[secret])
    (problem,) = cluster_problems(cluster, datetime.datetime.now(datetime.UTC))
    assert documented_helm_fix(problem.line()) == ["kubectl", "-n", "kube-system", "delete", "secret",
                                                   "sh.helm.release.v1.hami.v1"]
    assert documented_helm_fix("container x: removed outside Pulumi. Fix: `make up`") is None


def test_an_up_is_interrupted_twice_once_the_step_has_started(tmp_path: Path) -> None:
    """A `pulumi` stand-in that writes engine events as the CLI does and records the signals it gets."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    signals = tmp_path / "signals"
    fake = bin_dir / "pulumi"
    fake.write_text(f"""#!{sys.executable}
import signal, sys, time
log = sys.argv[sys.argv.index("--event-log") + 1]
got = []
def on_int(*_):
    got.append("INT")
    open({str(signals)!r}, "w").write(" ".join(got))
    if len(got) == 2:
        sys.exit(255)
signal.signal(signal.SIGINT, on_int)
with open(log, "a") as out:
    out.write({_event("same", URN + "-before")!r} + "\\n"); out.flush()
    time.sleep(0.5)
    out.write({_event("create")!r} + "\\n"); out.flush()
for _ in range(600):
    time.sleep(0.1)
sys.exit(0)
""")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = interrupt_up_at("e2e-1", "tenant-b-tcp", tmp_path, env, tmp_path, tmp_path / "policies", timeout_s=30)
    assert result.urn == URN
    assert signals.read_text() == "INT INT"
    assert result.returncode == 255


def test_an_up_that_never_reaches_the_step_is_not_interrupted(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pulumi"
    fake.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(0)\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = interrupt_up_at("e2e-1", "tenant-b-tcp", tmp_path, env, tmp_path, tmp_path / "policies", timeout_s=10)
    assert result.urn is None and result.returncode == 0


def test_lab_subjects_cover_every_lab_problem_and_no_host_problem() -> None:
    """The fault checks wait for the lab's problems to clear; the runner's own (inotify, proxy) are not theirs."""
    from gpu_tenancy.cli.doctor import host as doctor_host
    from gpu_tenancy.cli.doctor import lab as doctor_lab
    from tests.integration.faults import LAB_SUBJECTS

    now = datetime.datetime.now(datetime.UTC)
    lab = doctor_lab.LabFacts(
        "e2e", "gpu-tenancy-e2e", [], {"c-worker": None, "d-worker": "exited"},
        [doctor_lab.ClusterFacts("tenant-a", "hint", error="Unable to connect"),
         doctor_lab.ClusterFacts("management", "hint", error="Unable to connect")],
        [{"path": "p", "pid": 1, "hostname": "h", "alive": False}],
        [{"name": "x", "type": "command:local:Command", "op": "creating", "object": "", "namespace": ""}], now)
    found = [*doctor_lab.state_problems(lab), *doctor_lab.kind_cluster_problems(lab), *doctor_lab.container_problems(lab),
             *(p for c in lab.clusters for p in doctor_lab.cluster_problems(c, now))]
    assert len(found) == 7 and all(p.line().startswith(LAB_SUBJECTS) for p in found), [p.line() for p in found]
    shape = doctor_host.LabShape("e2e", "sim", "gpu-tenancy-e2e", "kind", ("a", "b"))
    facts = doctor_host.HostFacts(docker_info={"ServerVersion": "20.10", "CgroupVersion": "1"}, inotify_instances=1,
                                  environ={"HTTP_PROXY": "http://p"}, network_subnets=["172.18.0.0/16"],
                                  kind_clusters=["gpu-tenancy-other"], tool_versions={"kind": "kind v0.1.0"})
    host = doctor_host.host_problems(facts, shape, deployed=True)
    assert len(host) >= 5 and not any(p.line().startswith(LAB_SUBJECTS) for p in host), [p.line() for p in host]
