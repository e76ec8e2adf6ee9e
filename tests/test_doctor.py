"""`make doctor` (gpu_tenancy/cli/doctor/command.py) run for real against stub tools (tests/doctor_stubs.py), one host case
each: every problem on its own line with its fix, exit 1 if any, all of them in one pass."""

from __future__ import annotations

import datetime
import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from doctor_stubs import DOCKER_INFO, KIND_BRIDGE, KIND_NETWORK, ROUTES, HostCase, df_output, free_output, problems

from gpu_tenancy.cli.doctor import host as doctor_host
from gpu_tenancy.contract import versions


def _info(**changes: Any) -> str:
    return json.dumps({**DOCKER_INFO, **changes})


def test_a_healthy_host_has_no_problems(tmp_path: Path) -> None:
    result, calls = HostCase().run(tmp_path, "--stack", "dev")
    assert result.returncode == 0, result.stdout + result.stderr
    assert problems(result) == []
    assert "doctor: no problems" in result.stdout
    asked = {" ".join(c[:2]) for c in calls}
    assert {"docker info", "kind version", "pulumi version", "sysctl -n", "df -Pk", "free -b"} <= asked


ENGINE_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
TOOLS_FIX = "Fix: `make tools` installs {} into .tools/bin, which make puts first on PATH"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (HostCase().answer("docker", ["info"], "", ENGINE_DOWN + "\n", 1),
         f"docker: the Docker engine does not answer `docker info` ({ENGINE_DOWN}). Fix: start the daemon (`sudo "
         "systemctl start docker`) and let this user use it (`sudo usermod -aG docker $USER`, then log in again)"),
        (HostCase().without("docker"),
         "docker: not found on PATH. Fix: install Docker Engine (https://docs.docker.com/engine/install/, or your "
         "distribution's docker.io package), start it and let this user use it (`sudo usermod -aG docker $USER`, then "
         "log in again)"),
        (HostCase().answer("docker", ["info"], _info(ServerVersion="23.0.6")),
         "docker: Docker Engine 23.0.6 is older than 24.0. Fix: upgrade Docker Engine (README: Prerequisites)"),
        (HostCase().answer("docker", ["info"], _info(CgroupVersion="1", CgroupDriver="cgroupfs")),
         "cgroup: this host runs cgroup v1: Kubernetes 1.35 kubelets refuse to start on cgroup v1 (failCgroupV1 "
         "defaults to true) and kind's 1.35 node images need v2. Fix: boot with cgroup v2 (kernel argument "
         "systemd.unified_cgroup_hierarchy=1, then reboot)"),
        (HostCase().answer("docker", ["info"], _info(SecurityOptions=["name=seccomp,profile=builtin", "name=rootless",
                                                                      "name=cgroupns"])),
         "docker: rootless Docker: the kind network lives in rootlesskit's network namespace, so neither this host "
         "nor the program's kubectl reaches the tenants' control planes on it (and the workers would need "
         "KubeletInUserNamespace). Fix: use the system Docker daemon (`docker context use default`, or unset "
         "DOCKER_HOST) for sim and sim-nvml stacks"),
        (HostCase().answer("docker", ["info"], _info(OperatingSystem="Docker Desktop")),
         "docker: Docker Desktop runs containers in a VM whose networks are not reachable from this host (kind known "
         "issues), so the tenants' MetalLB addresses cannot be reached. Fix: run the lab on a Linux host with Docker "
         "Engine"),
        (HostCase().answer("sysctl", ["max_user_instances"], "128\n"),
         "inotify: fs.inotify.max_user_instances is 128, below 512 for 3 kubelets (kind known issues: pods fail with "
         "'too many open files'). Fix: sudo sysctl fs.inotify.max_user_instances=512 (persist it in /etc/sysctl.d/)"),
        (HostCase().answer("sysctl", ["max_user_watches"], "8192\n"),
         "inotify: fs.inotify.max_user_watches is 8192, below 524288 (kind known issues). Fix: sudo sysctl "
         "fs.inotify.max_user_watches=524288 (persist it in /etc/sysctl.d/)"),
        # Pulumi.dev.yaml: two sim tenants; docs/live-suite.md "Footprint": 8 GB + 1 per tenant, 2.3 GB + 1.4 per tenant
        (HostCase().answer("df", ["-Pk"], df_output(4 * 1024 * 1024)),
         "disk: 4.0 GiB free under /var/lib/docker, the lab needs 10.0 GiB. Fix: free space (`docker system prune`, "
         "`docker image prune`) or move Docker's data-root"),
        (HostCase().answer("free", ["-b"], free_output(2 * 1024**3)),
         "memory: 2.0 GiB available, the lab needs about 5.1 GiB (2 tenants). Fix: close what uses memory, or declare "
         "fewer tenants"),
        (HostCase().answer("kind", ["version"], "kind v0.31.0 go1.24.2 linux/amd64\n"),
         f"kind: v0.31.0 is not the pinned {versions.KIND_BINARY}. {TOOLS_FIX.format(versions.KIND_BINARY)}"),
        (HostCase().without("kind"), f"kind: not found on PATH. Fix: `make tools` installs kind {versions.KIND_BINARY}"),
        (HostCase().answer("kubectl", ["version", "--client"], json.dumps({"clientVersion": {"gitVersion": "v1.35.4"}})),
         f"kubectl: v1.35.4 is not the pinned {versions.KUBECTL_BINARY}. {TOOLS_FIX.format(versions.KUBECTL_BINARY)}"),
        (HostCase().without("kubectl"),
         f"kubectl: not found on PATH. Fix: `make tools` installs kubectl {versions.KUBECTL_BINARY}"),
        (HostCase().answer("pulumi", ["version"], "v3.200.0\n"),
         f"pulumi: v3.200.0 is not the pinned v3.272.0. {TOOLS_FIX.format('v3.272.0')}"),
        # newer is not the pin either: `make tools` would install the pin over it, so the two must agree
        (HostCase().answer("pulumi", ["version"], "v3.273.0\n"),
         f"pulumi: v3.273.0 is not the pinned v3.272.0. {TOOLS_FIX.format('v3.272.0')}"),
        (HostCase().without("pulumi"), "pulumi: not found on PATH. Fix: `make tools` installs pulumi v3.272.0"),
    ],
    ids=["engine-down", "no-docker-cli", "old-docker", "cgroup-v1", "rootless", "docker-desktop", "inotify-instances",
         "inotify-watches", "disk", "memory", "kind-version", "no-kind", "kubectl-version", "no-kubectl", "old-pulumi",
         "newer-pulumi", "no-pulumi"],
)
def test_each_host_case_is_one_problem_with_its_fix(tmp_path: Path, case: HostCase, expected: str) -> None:
    result, _ = case.run(tmp_path, "--stack", "dev")
    assert result.returncode == 1
    assert problems(result) == [expected]


def test_every_tool_the_tools_installer_accepts_doctor_accepts_and_no_other() -> None:
    """One set of pins and parsers: what `make tools` leaves in place, doctor does not complain about."""
    from gpu_tenancy.cli import tools

    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ())
    outputs = {"kind": "kind {} go1.26.3 linux/amd64", "pulumi": "{}\n",
               "kubectl": json.dumps({"clientVersion": {"gitVersion": "{}"}}).replace("{}", "%s")}
    for tool in tools.TOOLS:
        for version, accepted in ((tool.version, True), (tool.version.replace(".", ".9", 1), False)):
            text = outputs[tool.name].format(version) if tool.name != "kubectl" else outputs["kubectl"] % version
            assert (tool.parse_version(text) == tool.version) is accepted
            found = doctor_host.tool_problems(doctor_host.HostFacts(tool_versions={tool.name: text}), shape)
            assert (found == []) is accepted, (tool.name, version, found)


def test_every_problem_is_found_in_one_pass(tmp_path: Path) -> None:
    case = (HostCase().answer("docker", ["info"], _info(CgroupVersion="1"))
            .answer("sysctl", ["max_user_instances"], "128\n").answer("pulumi", ["version"], "v3.100.0\n"))
    case.env = {"HTTPS_PROXY": "http://proxy.corp:3128"}
    result, _ = case.run(tmp_path, "--stack", "dev")
    subjects = [line.split(":", 1)[0] for line in problems(result)]
    assert sorted(subjects) == ["cgroup", "inotify", "proxy", "pulumi"]
    assert result.stdout.strip().splitlines()[-1] == "doctor: 4 problem(s) (host, Pulumi state and lab, stack dev)"


def test_more_tenants_need_more_inotify_instances() -> None:
    shape = doctor_host.LabShape("big", "sim", "gpu-tenancy-big", "kind", tuple(f"t{i}" for i in range(6)))
    facts = doctor_host.HostFacts(inotify_instances=512, inotify_watches=524288)
    (problem,) = doctor_host.inotify_problems(facts, shape)
    assert "below 896 for 7 kubelets" in problem.what


# --------------------------------------------------------------------------- proxy


@pytest.mark.parametrize(
    ("no_proxy", "network_exists", "missing"),
    [
        ("", True, "172.18.0.0/16"),
        ("localhost,127.0.0.1", True, "172.18.0.0/16"),
        ("localhost,172.18.0.0/16", True, None),
        ("172.16.0.0/12", True, None),  # a larger range covers it
        ("", False, "172.16.0.0/12, 192.168.0.0/16"),  # before kind made the network: Docker's default pools
        ("172.16.0.0/12,192.168.0.0/16", False, None),
    ],
)
def test_a_proxy_must_leave_the_kind_network_alone(
    tmp_path: Path, no_proxy: str, network_exists: bool, missing: str | None
) -> None:
    case = HostCase()
    if not network_exists:
        case.answer("docker", ["network", "inspect"], "[]\n", "Error response from daemon: network kind not found\n", 1)
    case.env = {"http_proxy": "http://proxy.corp:3128", **({"no_proxy": no_proxy} if no_proxy else {})}
    result, _ = case.run(tmp_path, "--stack", "dev")
    found = problems(result)
    if missing is None:
        assert found == []
    else:
        assert len(found) == 1 and f"NO_PROXY does not cover {missing}" in found[0], found


# --------------------------------------------------------------------------- another lab on the network


def _other_lab(case: HostCase, cluster: str, network: str) -> HostCase:
    case.answer("kind", ["get", "clusters"], f"{cluster}\n")
    return case.answer("docker", ["inspect", "{{json .NetworkSettings.Networks}}", f"{cluster}-control-plane"],
                       json.dumps({network: {"IPAddress": "172.18.0.2"}}))


def test_a_second_lab_on_the_same_network_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    result, calls = _other_lab(HostCase(), "gpu-tenancy-dev-nvml", "kind").run(tmp_path, "--stack", "dev", "--before-up")
    (found,) = problems(result)
    assert result.returncode == 1
    assert found == (
        "another lab: kind cluster gpu-tenancy-dev-nvml already run(s) on Docker network 'kind': every lab takes its "
        "MetalLB pool from the top of that network's subnet, so both would hand out the same control-plane addresses. "
        "Fix: destroy the other lab first (`make destroy STACK=<its stack>`), or give this stack its own network "
        "(gpu-tenancy:kind: {network: <name>})")
    assert not [c for c in calls if c[:2] in (["docker", "run"], ["docker", "create"], ["kind", "create"])]


def test_a_lab_on_its_own_network_is_no_conflict(tmp_path: Path) -> None:
    result, _ = _other_lab(HostCase(), "gpu-tenancy-dev-nvml", "lab-b").run(tmp_path, "--stack", "dev")
    assert problems(result) == []


def test_a_worker_of_another_lab_on_the_network_is_found_whatever_its_cluster_is_called(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["ps", "-a", "network=kind"], "mylab-tenant-x-worker\n")
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert "worker mylab-tenant-x-worker" in found


def test_the_stacks_own_lab_is_not_another(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["ps", "-a"], "gpu-tenancy-dev-tenant-a-worker\ngpu-tenancy-dev-tenant-b-worker\n")
    case.answer("kind", ["get", "clusters"], "gpu-tenancy-dev\n")
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []


def test_a_real_stack_asks_nothing_of_docker(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["info"], "", "Cannot connect\n", 1)
    case.env = {"PULUMI_CONFIG_PASSPHRASE": "mine"}
    result, calls = case.run(tmp_path, "--stack", "gpu")
    assert problems(result) == []
    assert not [c for c in calls if c[0] in ("docker", "kind", "sysctl", "df", "free")]


# --------------------------------------------------------------------------- a deployed lab


def _kubeconfig(server: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": server}}],
                           "users": [{"name": "u", "user": {"token": "secret-token"}}]})


OUTPUTS = {
    "mode": "sim",
    "kindClusterName": "gpu-tenancy-dev",
    "managementKubeconfig": _kubeconfig("https://127.0.0.1:40000"),
    "tenants": {
        "tenant-a": {"endpoint": "172.18.255.250:6443", "nodes": ["gpu-tenancy-dev-tenant-a-worker"]},
        "tenant-b": {"endpoint": "172.18.255.251:6443", "nodes": ["gpu-tenancy-dev-tenant-b-worker"]},
    },
    "tenantKubeconfigs": {"tenant-a": _kubeconfig("https://172.18.255.250:6443"),
                          "tenant-b": _kubeconfig("https://172.18.255.251:6443")},
}
NOW = datetime.datetime.now(datetime.UTC)


def _node(name: str, ready: bool = True, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    register = json.dumps([{"id": "GPU-0", "count": 10, "devmem": 81920, "type": "NVIDIA-A100", "health": True}])
    return {"metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": register, **(annotations or {})}},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "Unknown",
                                       "reason": "KubeletReady" if ready else "NodeStatusUnknown"}]}}


def _items(*items: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})


# What kubectl is asked, whole: without --all-namespaces it answers for the default namespace alone, and the Helm
# records are the Secrets labelled owner=helm (helm v3 pkg/storage/driver/secrets.go).
PODS = "get pods --all-namespaces -o json"
HELM_RECORDS = "get secrets --all-namespaces -l owner=helm -o json"


def _lab(clusters: tuple[str, ...] = ("gpu-tenancy-dev",), export: dict[str, Any] | None = None) -> HostCase:
    case = HostCase().deployed(OUTPUTS, list(clusters), export)
    case.answer("docker", ["ps", "-a"], "gpu-tenancy-dev-tenant-a-worker\ngpu-tenancy-dev-tenant-b-worker\n")
    for cluster in ("management", "tenant-a", "tenant-b"):
        nodes = [] if cluster == "management" else [_node(f"gpu-tenancy-dev-{cluster}-worker")]
        case.answer("kubectl", [f"{cluster}.kubeconfig", "get nodes"], _items(*nodes))
        case.answer("kubectl", [f"{cluster}.kubeconfig", PODS], _items())
        case.answer("kubectl", [f"{cluster}.kubeconfig", HELM_RECORDS], _items())
    return case


def test_a_healthy_lab_has_no_problems_and_no_kubeconfig_reaches_a_command_line(tmp_path: Path) -> None:
    import tempfile

    result, calls = _lab().run(tmp_path, "--stack", "dev", "--state-dir", str(tmp_path / "state"))
    assert problems(result) == [], result.stdout + result.stderr
    kubectl = [c for c in calls if c[0] == "kubectl" and "get" in c]
    assert len(kubectl) == 9  # nodes, pods, Helm records in the management cluster and each tenant
    assert all("secret-token" not in " ".join(c) for c in calls)
    kubeconfig_args = [arg for c in kubectl for arg in c if arg.endswith(".kubeconfig")]
    assert kubeconfig_args and all(arg.startswith(tempfile.gettempdir()) for arg in kubeconfig_args)
    # This run's own files (other runs may be writing theirs meanwhile), and their directory, are removed.
    assert not [arg for arg in kubeconfig_args if Path(arg).exists() or Path(arg).parent.exists()]


def test_a_kind_cluster_deleted_out_of_band_is_named_with_its_recovery(tmp_path: Path) -> None:
    for args in (["--stack", "dev"], ["--stack", "dev", "--before-up"]):
        (found,) = problems(_lab(clusters=()).run(tmp_path / args[-1].strip("-"), *args)[0])
        assert found == (
            "kind cluster: gpu-tenancy-dev is gone (deleted outside Pulumi; `pulumi refresh` cannot see it, the kind "
            "cluster is a command): every control plane and tenant went with it. Fix: `make destroy STACK=dev` (it "
            "completes without the cluster and says what it skipped), then `make up STACK=dev`")


def test_worker_containers_removed_or_stopped_by_hand(tmp_path: Path) -> None:
    case = _lab()
    case.answer("docker", ["{{.State.Status}}", "gpu-tenancy-dev-tenant-a-worker"], "", "Error: No such object\n", 1)
    case.answer("docker", ["{{.State.Status}}", "gpu-tenancy-dev-tenant-b-worker"], "exited\n")
    found = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == [
        "container gpu-tenancy-dev-tenant-a-worker: removed outside Pulumi. Fix: `make up STACK=dev`: its refresh "
        "sees it gone, creates it again and rejoins it",
        "container gpu-tenancy-dev-tenant-b-worker: is exited, not running. Fix: `make up STACK=dev` starts it again "
        "(or `docker start gpu-tenancy-dev-tenant-b-worker`)",
    ]


def test_what_is_wrong_inside_the_tenants(tmp_path: Path) -> None:
    now = datetime.datetime.now(datetime.UTC)
    stale = (now - datetime.timedelta(minutes=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fresh = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    stuck_since = int((now - datetime.timedelta(minutes=12, seconds=30)).timestamp())  # "12 min" for 30 s
    case = _lab()
    case.answer("kubectl", ["tenant-a.kubeconfig", "get nodes"], _items(
        _node("gpu-tenancy-dev-tenant-a-worker", annotations={"hami.io/mutex.lock": f"{stale},workloads,p-1"})))
    bare = _node("gpu-tenancy-dev-tenant-b-worker", ready=False, annotations={"hami.io/mutex.lock": f"{fresh},w,p"})
    del bare["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    case.answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], _items(bare))
    case.answer("kubectl", ["tenant-a.kubeconfig", PODS], _items(
        # Before the stuck one: a pod bound, one whose bind time is not a number, one without a bind time yet.
        {"metadata": {"name": "a-infer-2", "namespace": "workloads",
                      "annotations": {"hami.io/bind-phase": "success", "hami.io/bind-time": str(stuck_since)}}},
        {"metadata": {"name": "a-infer-3", "namespace": "workloads",
                      "annotations": {"hami.io/bind-phase": "allocating", "hami.io/bind-time": "soon"}}},
        {"metadata": {"name": "a-infer-4", "namespace": "workloads", "annotations": {"hami.io/bind-phase": "allocating"}}},
        {"metadata": {"name": "a-infer-1", "namespace": "workloads",
                      "annotations": {"hami.io/bind-phase": "allocating", "hami.io/bind-time": str(stuck_since)}}}))
    case.answer("kubectl", ["tenant-b.kubeconfig", HELM_RECORDS], _items(
        {"metadata": {"name": "sh.helm.release.v1.hami.v1", "namespace": "kube-system",
                      "labels": {"owner": "helm", "name": "hami", "status": "pending-install", "version": "1"}}}))
    found = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == [
        f"tenant tenant-a node gpu-tenancy-dev-tenant-a-worker: HAMi's node lock is stale ({stale},workloads,p-1). "
        "Fix: `kubectl annotate node gpu-tenancy-dev-tenant-a-worker hami.io/mutex.lock-`",
        "tenant tenant-a pod workloads/a-infer-1: stuck binding to a GPU for 12 min. Fix: `kubectl -n workloads "
        "delete pod a-infer-1` (its controller makes a new one), then check the device plugin or agent on its node",
        "tenant tenant-b node gpu-tenancy-dev-tenant-b-worker: not Ready (NodeStatusUnknown). Fix: `kubectl describe "
        "node gpu-tenancy-dev-tenant-b-worker` (`make -s kubeconfig STACK=dev TENANT=tenant-b`); a stopped worker "
        "comes back with `make up`",
        "tenant tenant-b node gpu-tenancy-dev-tenant-b-worker: HAMi has no GPU registration for it. Fix: check the "
        "mock-GPU agent (sim) or hami-device-plugin (sim-nvml, real) logs: `kubectl -n kube-system logs -l "
        "gpu-tenancy.io/component=mock-gpu-agent` or `-l app.kubernetes.io/component=hami-device-plugin`",
        "tenant tenant-b Helm release kube-system/hami: left pending-install by an interrupted `up`: Helm refuses to "
        "install or upgrade it again. Fix: `kubectl -n kube-system delete secret sh.helm.release.v1.hami.v1` "
        "(`make -s kubeconfig STACK=dev TENANT=tenant-b`; or `helm uninstall -n kube-system hami`), then `make up`",
    ]


def _release_secret(status: str) -> dict[str, Any]:
    # helm v3 pkg/storage/driver/secrets.go: a release's Secret, labelled with its status (pkg/release/status.go).
    return {"metadata": {"name": "sh.helm.release.v1.hami.v2", "namespace": "kube-system",
                         "labels": {"owner": "helm", "name": "hami", "status": status, "version": "2"}}}


@pytest.mark.parametrize("status", ["pending-install", "pending-upgrade", "pending-rollback", "uninstalling"])
def test_a_helm_release_left_mid_operation_is_named(status: str) -> None:
    from gpu_tenancy.cli.doctor.lab import ClusterFacts, cluster_problems

    cluster = ClusterFacts("tenant-b", "make -s kubeconfig STACK=dev TENANT=tenant-b",
                           helm_secrets=[_release_secret(status), _release_secret("superseded")])
    assert [(p.subject, p.what.split(" by ")[0]) for p in cluster_problems(cluster, NOW)] == [
        ("tenant tenant-b Helm release kube-system/hami", f"left {status}")]


@pytest.mark.parametrize("status", ["deployed", "superseded", "failed", "uninstalled", "unknown"])
def test_a_helm_release_at_rest_is_no_problem(status: str) -> None:
    from gpu_tenancy.cli.doctor.lab import ClusterFacts, cluster_problems

    cluster = ClusterFacts("tenant-b", "make -s kubeconfig STACK=dev TENANT=tenant-b",
                           helm_secrets=[_release_secret(status)])
    assert cluster_problems(cluster, NOW) == []


def test_a_node_without_a_ready_condition_yet_is_not_ready() -> None:
    """A Node just registered has no conditions until the kubelet's first status update."""
    from gpu_tenancy.cli.doctor.lab import ClusterFacts, cluster_problems

    node = {**_node("gpu-tenancy-dev-tenant-b-worker"), "status": {}}
    cluster = ClusterFacts("tenant-b", "make -s kubeconfig STACK=dev TENANT=tenant-b", nodes=[node])
    assert [(p.subject, p.what) for p in cluster_problems(cluster, NOW)] == [
        ("tenant tenant-b node gpu-tenancy-dev-tenant-b-worker", "not Ready (no Ready condition)")]


def test_an_unreachable_tenant(tmp_path: Path) -> None:
    case = _lab().answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], "",
                         "Unable to connect to the server: dial tcp 172.18.255.251:6443: i/o timeout\n", 1)
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("tenant tenant-b: its API server does not answer (Unable to connect to the server")
    assert "make -s kubeconfig STACK=dev TENANT=tenant-b" in found


def test_a_stale_state_lock_and_pending_operations_after_an_interrupted_up(tmp_path: Path) -> None:
    state = tmp_path / "state"
    lock = state / ".pulumi" / "locks" / "organization" / "gpu-tenancy" / "dev" / "5f7c.json"
    lock.parent.mkdir(parents=True)
    dead_pid = 2**22 + 12345  # above the kernel's pid_max default: never running
    lock.write_text(json.dumps({"pid": dead_pid, "username": "me", "hostname": socket.gethostname(),
                                "timestamp": NOW.isoformat()}))
    urn = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:kamaji:Kamaji$kubernetes:helm.sh/v3:Release::kamaji-chart"
    worker = ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:worker:Worker$"
              "docker:index/container:Container::tenant-b-worker-container")
    tcp = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane::tenant-b-tcp"
    join = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$command:local:Command::tenant-b-worker-join"
    export = {"version": 3, "deployment": {"pending_operations": [
        {"resource": {"urn": urn, "type": "kubernetes:helm.sh/v3:Release",
                      "inputs": {"name": "kamaji", "namespace": "kamaji-system"}}, "type": "creating"},
        {"resource": {"urn": worker, "type": "docker:index/container:Container",
                      "inputs": {"name": "gpu-tenancy-dev-tenant-b-worker"}}, "type": "creating"},
        {"resource": {"urn": tcp, "type": "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane",
                      "inputs": {"metadata": {"name": "tenant-b", "namespace": "tenant-b"}}}, "type": "creating"},
        {"resource": {"urn": join, "type": "command:local:Command", "inputs": {}}, "type": "creating"},
    ]}}
    found = problems(_lab(export=export).run(tmp_path, "--stack", "dev", "--state-dir", str(state))[0])
    refresh = "Fix: `pulumi refresh --stack dev --clear-pending-creates --yes`, then "
    assert found == [
        f"stack dev: locked by pid {dead_pid} on {socket.gethostname()}, which is no longer running ({lock}). Fix: "
        "`pulumi cancel --stack dev --yes`",
        f"stack dev: an interrupted `up` left kamaji-chart (kubernetes:helm.sh/v3:Release) creating. {refresh}free the "
        "release name (`kubectl -n kamaji-system delete secret -l owner=helm,name=kamaji,status=pending-install`, or "
        "`helm uninstall -n kamaji-system kamaji`), then `make up STACK=dev`",
        "stack dev: an interrupted `up` left tenant-b-worker-container (docker:index/container:Container) creating. "
        f"{refresh}`docker rm -f gpu-tenancy-dev-tenant-b-worker` (if it exists), then `make up STACK=dev`",
        "stack dev: an interrupted `up` left tenant-b-tcp (kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane) "
        f"creating. {refresh}`PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true make up STACK=dev` (the provider then adopts "
        "the object the cut-off create may have made)",
        "stack dev: an interrupted `up` left tenant-b-worker-join (command:local:Command) creating. "
        f"{refresh}`make up STACK=dev` (the command runs again and finds what it made)",
    ]


def test_outputs_that_cannot_be_read_are_a_problem_not_silence(tmp_path: Path) -> None:
    case = HostCase().answer("pulumi", ["stack", "output"], "",
                             "error: getting secrets manager: passphrase must be set with PULUMI_CONFIG_PASSPHRASE\n", 255)
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("pulumi: cannot read the stack's outputs") and "PULUMI_CONFIG_PASSPHRASE" in found


def test_a_missing_pulumi_is_one_problem_and_no_passphrase_advice(tmp_path: Path) -> None:
    (found,) = problems(HostCase().without("pulumi").run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("pulumi: not found on PATH. Fix: `make tools`") and "PASSPHRASE" not in found


def test_outputs_failing_for_another_reason_get_no_passphrase_advice(tmp_path: Path) -> None:
    case = HostCase().answer("pulumi", ["stack", "output"], "", "error: could not read backend: permission denied\n", 255)
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert "permission denied" in found and "PASSPHRASE" not in found and "pulumi stack output --stack dev" in found


def test_an_unknown_stack_is_refused_in_one_line(tmp_path: Path) -> None:
    result, _ = HostCase().run(tmp_path, "--stack", "stagin")
    assert result.returncode == 2 and result.stderr.strip() == "doctor: Pulumi.stagin.yaml not found: STACK=stagin names no stack file"


def test_a_deployed_lab_needs_only_headroom_not_a_second_footprint(tmp_path: Path) -> None:
    case = _lab().answer("free", ["-b"], free_output(3 * 1024**3)).answer("df", ["-Pk"], df_output(5 * 1024 * 1024))
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []


# --------------------------------------------------------------------------- `make destroy`: is the lab gone?


@pytest.mark.parametrize(
    ("case", "gone"),
    [
        (HostCase().deployed(OUTPUTS, []), True),
        (HostCase().deployed(OUTPUTS, ["gpu-tenancy-dev"]), False),
        (HostCase().deployed(OUTPUTS, ["some-other-cluster"]), True),
        (HostCase(), False),  # nothing deployed
        (HostCase().deployed(OUTPUTS, []).answer("kind", ["get", "clusters"], "", "ERROR: failed to list\n", 1), False),
        (HostCase().deployed(OUTPUTS, []).without("kind"), False),
        (HostCase().deployed({**OUTPUTS, "mode": "real"}, []), False),
        (HostCase().answer("pulumi", ["stack", "output"], "", "error: passphrase must be set\n", 255), False),
    ],
    ids=["gone", "there", "other-cluster-only", "not-deployed", "kind-fails", "no-kind", "real", "outputs-unreadable"],
)
def test_a_lab_counts_as_gone_only_when_its_cluster_is_seen_gone(tmp_path: Path, case: HostCase, gone: bool) -> None:
    result, _ = case.run(tmp_path, "--stack", "dev", "--lab-gone")
    assert result.returncode == (0 if gone else 1), result.stdout + result.stderr


def test_an_image_gone_from_a_worker_is_named_with_the_command_that_loads_it(tmp_path: Path) -> None:
    """The load is a command (no Read): `make up --refresh` cannot see the image gone; the kubelet can."""
    load = ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:mock_gpu_agent:MockGpuAgent$"
            "command:local:Command::tenant-a-mock-gpu-agent-image-load")
    export = {"version": 3, "deployment": {"resources": [{"urn": load, "type": "command:local:Command"}]}}
    case = _lab(export=export)
    case.answer("kubectl", ["tenant-a.kubeconfig", PODS], _items({
        "metadata": {"name": "tenant-a-mock-gpu-agent-x", "namespace": "kube-system"},
        "spec": {"nodeName": "gpu-tenancy-dev-tenant-a-worker"},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "agent", "image": "gpu-tenancy/mock-gpu-agent:0123",
                   "state": {"waiting": {"reason": "ErrImageNeverPull", "message": "Container image ... is not present"}}}]},
    }))
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == (
        "tenant tenant-a pod kube-system/tenant-a-mock-gpu-agent-x: image gpu-tenancy/mock-gpu-agent:0123 is gone from "
        f"node gpu-tenancy-dev-tenant-a-worker's containerd. Fix: `pulumi up --replace '{load}'` loads it again")


# --------------------------------------------------------------------------- one pass, no traceback, right advice


def test_with_docker_down_the_rest_of_the_host_is_still_checked(tmp_path: Path) -> None:
    case = (HostCase().answer("docker", ["info"], "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                              "Is the docker daemon running?\n", 1)
            .answer("sysctl", ["max_user_instances"], "128\n").without("kind").without("pulumi"))
    found = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert [line.split(":", 1)[0] for line in found] == ["docker", "pulumi", "kind", "inotify"], found
    assert all(". Fix: " in line for line in found)
    assert "`make tools`" in found[1] and "`make tools`" in found[2]


def test_docker_missing_gets_an_install_hint(tmp_path: Path) -> None:
    (found,) = problems(HostCase().without("docker").run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("docker: not found on PATH. Fix: install Docker Engine (https://docs.docker.com/engine/install/")


def test_a_yaml_error_in_the_stack_file_is_one_line_as_make_plan_says_it(tmp_path: Path) -> None:
    from gpu_tenancy.cli.plan.plan_input import InputError, load_document

    stack_file = tmp_path / "Pulumi.broken.yaml"
    stack_file.write_text("config:\n  gpu-tenancy:mode: sim\n  gpu-tenancy:tenants: [\n")
    result, _ = HostCase().run(tmp_path, "--stack", "broken", "--stack-file", str(stack_file))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    with pytest.raises(InputError) as planner:
        load_document(str(stack_file))
    assert result.stderr.strip().splitlines() == [f"doctor: {planner.value}"]


def test_a_stopped_kind_node_is_started_by_docker_not_by_up(tmp_path: Path) -> None:
    case = _lab().answer("docker", ["{{.State.Status}}", "gpu-tenancy-dev-control-plane"], "exited\n")
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == (
        "container gpu-tenancy-dev-control-plane: is exited, not running: the kind cluster's node, which `make up` "
        "cannot see or start. Fix: `docker start gpu-tenancy-dev-control-plane` (kind's nodes come back with their "
        "state), then `make doctor`")


# --------------------------------------------------------------------------- kind's known issues


def _route(interface: str, network: str) -> str:
    import ipaddress

    net = ipaddress.IPv4Network(network)
    little = [bytes(reversed(a.packed)).hex().upper() for a in (net.network_address, net.netmask)]
    return f"{interface}\t{little[0]}\t00000000\t0001\t0\t0\t0\t{little[1]}\t0\t0\t0\n"


def _snap(case: HostCase) -> HostCase:
    return case.answer("docker", ["info"], _info(DockerRootDir="/var/snap/docker/common/var-lib-docker"))


def _firewalld(case: HostCase, backend: str = "nftables") -> HostCase:
    case.host_files["etc/firewalld/firewalld.conf"] = f"DefaultZone=public\nFirewallBackend={backend}\n"
    return case.answer("firewall-cmd", ["--state"], "running\n")


def _vpn_route(case: HostCase) -> HostCase:
    case.host_files["proc/net/route"] = ROUTES + _route("tun0", "172.18.4.0/24")
    return case


SNAP_FIX = ("install Docker Engine from Docker's or your distribution's packages (https://docs.docker.com/engine/install/), "
            "or export TMPDIR=$HOME/tmp (mkdir it first) before make")
DISK_FIX = ("move Docker's data-root (/etc/docker/daemon.json \"data-root\") to an ext4 or xfs filesystem on a plain "
            "partition, then restart Docker")
ROOTFS = ": kubelets there fail with 'failed to get rootfs info' (kind known issues): neither kind's node nor the " \
    "workers mount that device"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (_snap(HostCase()), "docker: Docker is installed as a snap, whose `docker` cannot read $TMPDIR (kind known "
         f"issues, Docker Installed With Snap). Fix: {SNAP_FIX}"),
        (_firewalld(HostCase()), "firewalld: firewalld runs with FirewallBackend=nftables: kind's nodes cannot reach "
         "each other (kind known issues, Fedora: Firewalld). Fix: sudo sed -i 's/^FirewallBackend=.*/FirewallBackend="
         "iptables/' /etc/firewalld/firewalld.conf && sudo systemctl restart firewalld"),
        (_vpn_route(HostCase()), "kind network: the Docker network 'kind' (172.18.0.0/16) overlaps this host's route "
         "172.18.4.0/24 via tun0: addresses there reach either the lab or that network, not both. Fix: with no lab on "
         "it, `docker network rm kind` (Docker then picks a free subnet), or create one (`docker network create "
         "--subnet <free /16> <name>`) and set gpu-tenancy:kind: {network: <name>}"),
        (HostCase().answer("docker", ["info"], _info(Driver="btrfs")),
         f"disk: /var/lib/docker is on btrfs{ROOTFS}. Fix: {DISK_FIX}"),
        (HostCase().answer("docker", ["info"], _info(Driver="overlay2", DriverStatus=[
            ["Supports d_type", "true"], ["Backing Filesystem"], ["Backing Filesystem", "btrfs"]])),
         f"disk: /var/lib/docker is on btrfs{ROOTFS}. Fix: {DISK_FIX}"),
        (HostCase().answer("docker", ["info"], _info(Driver="btrfs", DockerRootDir=None)),
         f"disk: Docker's data root is on btrfs{ROOTFS}. Fix: {DISK_FIX}"),
        (HostCase().answer("findmnt", ["SOURCE"], "/dev/mapper/luks-903aad3d-0c6b\n"),
         "disk: /var/lib/docker is on a device-mapper device (/dev/mapper/luks-903aad3d-0c6b, e.g. LUKS or LVM)"
         f"{ROOTFS}. Fix: {DISK_FIX}"),
    ],
    ids=["snap", "firewalld-nftables", "route-clash", "btrfs-driver", "btrfs-backing", "btrfs-no-root-dir", "luks"],
)
def test_kinds_known_issues_are_named_with_their_fix(tmp_path: Path, case: HostCase, expected: str) -> None:
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [expected]


def test_the_kind_network_is_inspected_once_for_its_subnets_and_its_bridge(tmp_path: Path) -> None:
    """The route check needs both: the subnets to compare and the bridge whose own route is no clash."""
    result, calls = _vpn_route(HostCase()).run(tmp_path, "--stack", "dev")
    assert [p.split(":")[0] for p in problems(result)] == ["kind network"]
    assert [c for c in calls if c[:3] == ["docker", "network", "inspect"]] == [["docker", "network", "inspect", "kind"]]


def test_a_snap_docker_is_known_by_its_command_too() -> None:
    from gpu_tenancy.cli.doctor.known_issues import KnownIssueFacts, snap_problems

    (found,) = snap_problems(KnownIssueFacts(docker_info={"DockerRootDir": "/var/lib/docker"},
                                            docker_cli="/snap/bin/docker"))
    assert found.line().startswith("docker: Docker is installed as a snap")
    assert snap_problems(KnownIssueFacts(docker_info={}, docker_cli="/usr/bin/docker")) == []


def test_every_route_each_kind_subnet_overlaps_is_named() -> None:
    from gpu_tenancy.cli.doctor.known_issues import KnownIssueFacts, route_problems

    facts = KnownIssueFacts(docker_info={}, network_bridge="br-kind", network_subnets=[
        "fc00:f853:ccd:e793::/64", "172.18.0.0/16", "10.89.0.1/24"],  # a subnet written with host bits is read whole
        routes=[("tun0", "172.18.4.0/24"), ("wg0", "10.89.0.0/16"), ("br-kind", "172.18.0.0/16"), ("eth0", "0.0.0.0/0")])
    (found,) = route_problems(facts, "kind")
    assert found.what == ("the Docker network 'kind' (172.18.0.0/16, 10.89.0.0/24) overlaps this host's route "
                          "10.89.0.0/16 via wg0, 172.18.4.0/24 via tun0: addresses there reach either the lab or that "
                          "network, not both")


def test_route_lines_too_short_or_unreadable_are_skipped_not_the_rest() -> None:
    from gpu_tenancy.cli.doctor.known_issues import parse_proc_net_route

    text = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n"
            "eth0\t0000A8C0\n"  # cut short
            "eth1\tnot-hex\t00000000\t0001\t0\t0\t0\t00FFFFFF\n"
            "tun0\t000412AC\t00000000\t0001\t0\t0\t0\t00FFFFFF\n")  # the eight fields a route needs, no more
    assert parse_proc_net_route(text) == [("tun0", "172.18.4.0/24")]


def test_a_network_without_an_id_or_bridge_option_has_no_bridge_known() -> None:
    from gpu_tenancy.cli.doctor.known_issues import bridge_name

    assert bridge_name(json.dumps([{"Name": "kind", "Options": {}}])) is None
    assert bridge_name(json.dumps([{"Name": "kind", "Options": None, "Id": "0123456789abcdef"}])) == "br-0123456789ab"
    assert bridge_name("[]") is None
    # what no bridge network's inspect prints: nothing is guessed from it
    for text in ("", "not json", "{}", '["kind"]', "null"):
        assert bridge_name(text) is None, text


@pytest.mark.parametrize(
    "case",
    [_firewalld(HostCase(), "iptables"), HostCase().answer("firewall-cmd", ["--state"], "not running\n", "", 252)],
    ids=["firewalld-iptables", "firewalld-stopped"],
)
def test_firewalld_is_fine_unless_it_runs_nftables(tmp_path: Path, case: HostCase) -> None:
    case.host_files["etc/firewalld/firewalld.conf"] = case.host_files.get("etc/firewalld/firewalld.conf",
                                                                          "FirewallBackend=nftables\n")
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []


def test_routes_are_read_as_the_kernel_prints_them() -> None:
    from gpu_tenancy.cli.doctor.known_issues import parse_proc_net_route

    assert parse_proc_net_route(ROUTES) == [("eth0", "0.0.0.0/0"), ("eth0", "192.168.0.0/24"),
                                            ("docker0", "172.17.0.0/16"), (KIND_BRIDGE, "172.18.0.0/16")]


def test_a_network_created_with_a_bridge_name_option_is_found_on_that_bridge() -> None:
    """`docker network create -o com.docker.network.bridge.name=kind0 kind`: `docker network inspect` lists the
    option under Options (moby libnetwork/drivers/bridge/labels.go BridgeName) and the bridge is kind0, not br-<id>."""
    from gpu_tenancy.cli.doctor.known_issues import bridge_name

    network_id = "6b1f5c2a9e3d40c1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70819"
    named = {"Name": "kind", "Id": network_id, "Options": {"com.docker.network.bridge.name": "kind0"}}
    assert bridge_name(json.dumps([named])) == "kind0"
    mtu_only = {**named, "Options": {"com.docker.network.driver.mtu": "1500"}}
    assert bridge_name(json.dumps([mtu_only])) == "br-6b1f5c2a9e3d"
    assert bridge_name(json.dumps([{**named, "Options": ["kind0"]}])) == "br-6b1f5c2a9e3d"


def test_doctor_runs_on_the_runtime_dependencies_alone(tmp_path: Path) -> None:
    """`make doctor` and `make up`'s host checks use the runtime venv (`make runtime`): nothing the tests'
    requirements add may be imported."""
    repo = Path(__file__).resolve().parents[1]
    dev_only = [line.split("==")[0].strip().lower().replace("-", "_") for line in
                (repo / "requirements-dev.txt").read_text().splitlines() if "==" in line and not line.startswith("#")]
    guard = tmp_path / "sitecustomize.py"
    guard.write_text(
        "import importlib.abc, sys\n"
        f"BLOCKED = {sorted(dev_only)!r}\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0].lower() in BLOCKED:\n"
        "            raise ImportError('a test-only package: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n")
    case = HostCase()
    case.env = {"PYTHONPATH": f"{tmp_path}:{repo}"}
    result, _ = case.run_process(tmp_path, "--stack", "dev")  # the guard acts in a process of its own
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "pytest" in dev_only and "jsonschema" in dev_only


@pytest.mark.parametrize(("tool", "args", "modelled"), [
    ("docker", ["info", "--format", "{{json .}}"], True),
    ("docker", ["info"], False),  # prints text, not JSON
    ("sysctl", ["-n", "fs.inotify.max_user_watches"], True),
    ("sysctl", ["fs.inotify.max_user_watches"], False),  # prints "key = value"
    ("df", ["-Pk", "/var/lib/docker"], True),
    ("df", ["-k", "/var/lib/docker"], False),  # without -P a long device name wraps the line
    ("kubectl", ["--kubeconfig", "/k", "--request-timeout=10s", "get", "nodes", "-o", "json"], True),
    ("kubectl", ["--kubeconfig", "/k", "--request-timeout=10s", "get", "nodes"], False),  # a table
    ("kind", ["get", "clusters"], True),
    ("kind", ["get"], False),
])
def test_a_stub_answers_only_a_command_line_the_real_tool_answers_that_way(
        tmp_path: Path, tool: str, args: list[str], modelled: bool) -> None:
    done = HostCase().answer("kubectl", ["get", "nodes"], _items()).call(tmp_path, tool, *args)
    if modelled:
        assert done.returncode == 0 and "unmodelled" not in done.stderr, done.stderr
    else:
        assert done.returncode == 127 and f"stub {tool}: unmodelled" in done.stderr


def test_every_call_a_lab_check_makes_fits_a_modelled_shape(tmp_path: Path) -> None:
    # The healthy and the deployed cases together make every kind of call doctor has; none is refused as unmodelled.
    for number, case in enumerate([HostCase(), _lab()]):
        _, calls = case.run(tmp_path / str(number), "--stack", "dev", "--state-dir", str(tmp_path / "state"))
        assert calls
        refused = [call for call in calls if case.call(tmp_path / str(number), call[0], *call[1:]).returncode == 127]
        assert refused == []


def test_stubs_answered_in_process_answer_as_their_own_processes_do(tmp_path: Path) -> None:
    """`HostCase.run` computes each stub's answer in the test's process: the same doctor run with every stub as
    its own process prints the same and makes the same calls, problems and fixes included."""
    case = _lab()
    case.answer("docker", ["{{.State.Status}}", "gpu-tenancy-dev-tenant-b-worker"], "exited\n")
    case.answer("kubectl", ["tenant-a.kubeconfig", "get nodes"], "", "Unable to connect to the server: EOF\n", 1)
    case.without("firewall-cmd")
    args = ("--stack", "dev", "--state-dir", str(tmp_path / "state"))
    in_process, in_process_calls = case.run(tmp_path / "in", *args)
    own, own_calls = case.run_process(tmp_path / "own", *args)
    assert problems(in_process) == problems(own) and len(problems(own)) == 2, own.stdout
    assert (in_process.returncode, in_process.stdout) == (own.returncode, own.stdout)
    assert [c for c in in_process_calls if c[0] != "kubectl"] == [c for c in own_calls if c[0] != "kubectl"]
    # kubectl's --kubeconfig names a temporary file of each run: the rest of its calls are the same
    assert [c[:1] + c[3:] for c in in_process_calls if c[0] == "kubectl"] == \
        [c[:1] + c[3:] for c in own_calls if c[0] == "kubectl"]


def test_a_tool_printing_no_version_is_an_unknown_version(tmp_path: Path) -> None:
    (found,) = problems(HostCase().answer("kind", ["version"], "").run(tmp_path, "--stack", "dev")[0])
    assert found.startswith(f"kind: an unknown version is not the pinned {versions.KIND_BINARY}. Fix: `make tools`")


def test_docker_roots_filesystem_is_read_and_the_root_filesystem_while_it_is_not_there_yet(tmp_path: Path) -> None:
    # Docker creates its data root on first start; before that `df` of it fails, and "/" is where it will be.
    case = (HostCase().answer("df", ["-Pk /"], df_output(1024 * 1024))
            .answer("df", ["/var/lib/docker"], "", "df: /var/lib/docker: No such file or directory\n", 1))
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert [c for c in calls if c[0] == "df"] == [["df", "-Pk", "/var/lib/docker"], ["df", "-Pk", "/"]]
    (found,) = problems(result)
    assert found.startswith("disk: 1.0 GiB free under /var/lib/docker, the lab needs")
    # The data root there: only it is asked.
    _, calls = HostCase().run(tmp_path / "there", "--stack", "dev")
    assert [c for c in calls if c[0] == "df"] == [["df", "-Pk", "/var/lib/docker"]]


def test_images_the_stack_built_and_docker_lost_are_named_for_up_to_replace(tmp_path: Path) -> None:
    image_urn = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:mock_gpu_agent:MockGpuAgent$docker:index/image:Image::agent"
    build_urn = ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:nvml_mock_image:NvmlMockImage$command:local:Command::"
                 "nvml-build")
    export = {"version": 3, "deployment": {"resources": [
        {"urn": image_urn, "type": "docker:index/image:Image", "inputs": {"imageName": "gpu-tenancy/agent:1"}},
        {"urn": build_urn, "type": "command:local:Command", "inputs": {"environment": {"IMAGE": "gpu-tenancy/nvml:2"}}},
        # A command of the build component that names no image builds none.
        {"urn": build_urn + "-tag", "type": "command:local:Command", "inputs": {"environment": {"TAG": "x"}}},
        {"urn": "urn:pulumi:dev::gpu-tenancy::pulumi:pulumi:Stack::s", "type": "pulumi:pulumi:Stack"},
    ]}}
    case = HostCase().deployed(OUTPUTS, ["gpu-tenancy-dev"], export)
    # docker/cli `image inspect` of an image it does not have: "Error: No such image: NAME", exit 1.
    case.answer("docker", ["image inspect", "gpu-tenancy/agent:1"], "", "Error: No such image: gpu-tenancy/agent:1\n", 1)
    case.answer("docker", ["image inspect", "gpu-tenancy/nvml:2"], "sha256:0123\n")
    result, _ = case.run(tmp_path, "--stack", "dev", "--missing-images")
    assert result.returncode == 0 and result.stdout == f"--replace {image_urn}\n"
    assert "image gpu-tenancy/agent:1 is gone from Docker (pruned?)" in result.stderr
    case.answer("docker", ["image inspect", "gpu-tenancy/nvml:2"], "", "Error: No such image: gpu-tenancy/nvml:2\n", 1)
    result, _ = case.run(tmp_path / "both", "--stack", "dev", "--missing-images")
    assert result.stdout == f"--replace {image_urn}\n--replace {build_urn}\n"
    assert result.stderr.splitlines() == [
        f"make up: image {name} is gone from Docker (pruned?): building it again"
        for name in ("gpu-tenancy/agent:1", "gpu-tenancy/nvml:2")]


def test_a_lab_read_without_kubectl_says_so_for_each_cluster(tmp_path: Path) -> None:
    found = problems(_lab().without("kubectl").run(tmp_path, "--stack", "dev")[0])
    assert "kubectl: not found on PATH. Fix: `make tools`" in found[0]
    assert [line for line in found if "kubectl not on PATH" in line][:1] and all(
        "Traceback" not in line for line in found)


def test_kubectls_last_error_line_or_no_answer_is_the_reason(tmp_path: Path) -> None:
    case = _lab().answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], "", "", 1)
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("tenant tenant-b: its API server does not answer (no answer)")
    case = _lab().answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], "not json")
    (found,) = problems(case.run(tmp_path / "json", "--stack", "dev")[0])
    assert found.startswith("tenant tenant-b: its API server does not answer (kubectl printed no JSON)")


def test_hosts_off_names_the_deletes_that_need_the_host_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    join = ("urn:pulumi:gpu::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:host_worker:HostWorker$"
            "command:remote:Command::tenant-b-gpu-l4-01-join")
    prepare = join.replace("-join", "-prepare")  # no delete: the provider never connects for it
    other = join.replace("tenant-b-gpu-l4-01", "tenant-a-gpu-a100-01")
    export = {"version": 3, "deployment": {"resources": [
        {"urn": join, "type": "command:remote:Command", "inputs": {"delete": "kubeadm reset -f"}},
        {"urn": prepare, "type": "command:remote:Command", "inputs": {"create": "true"}},
        {"urn": other, "type": "command:remote:Command", "inputs": {"delete": "kubeadm reset -f"}},
    ]}}
    args = ("--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml", "--hosts-off", "gpu-l4-01")
    result, _ = HostCase().deployed({"mode": "real"}, [], export).run(tmp_path, *args)
    assert (result.returncode, result.stdout) == (0, f"{join}\n")
    # An export that is not the deployment JSON (or no object): nothing to drop, not a traceback.
    for number, text in enumerate(["not json", "[]"]):
        case = HostCase().answer("pulumi", ["stack", "export"], text)
        result, _ = case.run(tmp_path / str(number), *args)
        assert (result.returncode, result.stdout) == (0, "") and "Traceback" not in result.stderr
    # A worker the stack file does not declare: one line, usage.
    result, _ = HostCase().run(tmp_path / "unknown", *args[:-1], "gpu-l4-99")
    assert result.returncode == 2 and result.stderr.startswith("doctor: gpu-l4-99: no such worker in Pulumi.gpu.yaml")
    # A stack file that does not validate: one line, usage.
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  gpu-tenancy:mode: quantum\n")
    result, _ = HostCase().run(tmp_path / "bad", "--stack", "bad", "--stack-file", str(bad), "--hosts-off", "x")
    assert result.returncode == 2 and result.stderr.startswith("doctor: ") and "Traceback" not in result.stderr


# --------------------------------------------------------------------------- each clause of the lab checks


def test_the_lab_is_read_on_the_kind_cluster_its_outputs_name(tmp_path: Path) -> None:
    """The stack file's name for the cluster may change after `up`; the deployed lab is on the one the outputs say."""
    outputs = {**OUTPUTS, "kindClusterName": "lab-before-rename"}
    case = _lab(clusters=("lab-before-rename",))
    case.deployed(outputs, ["lab-before-rename"])
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert problems(result) == [], result.stdout
    assert ["docker", "inspect", "--format", "{{.State.Status}}", "lab-before-rename-control-plane"] in calls
    assert problems(case.run(tmp_path / "before-up", "--stack", "dev", "--before-up")[0]) == []
    case.deployed(outputs, ["gpu-tenancy-dev"])  # the stack file's name exists, the deployed one does not
    (found,) = problems(case.run(tmp_path / "gone", "--stack", "dev")[0])
    assert found.startswith("kind cluster: lab-before-rename is gone")


def test_a_gone_kind_cluster_is_not_asked_anything_further(tmp_path: Path) -> None:
    result, calls = _lab(clusters=()).run(tmp_path, "--stack", "dev")
    assert len(problems(result)) == 1
    assert not [c for c in calls if c[0] == "kubectl" and "get" in c]
    assert not [c for c in calls if c[:2] == ["docker", "inspect"]]


CUT_OFF_JOIN = {"version": 3, "deployment": {"pending_operations": [{"type": "creating", "resource": {
    "urn": "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$command:local:Command::tenant-a-worker-join",
    "type": "command:local:Command", "inputs": {}}}]}}


@pytest.mark.parametrize(("outputs", "args"), [
    (OUTPUTS, ()),
    (OUTPUTS, ("--before-up",)),
    ({**OUTPUTS, "tenants": ["tenant-a"]}, ()),  # outputs that do not describe the lab
    ({}, ()),  # the first `up`, cut off before it wrote any output
], ids=["lab", "before-up", "outputs-unreadable", "nothing-deployed"])
def test_the_state_is_exported_once_per_run_and_its_pending_operations_named(
        tmp_path: Path, outputs: dict[str, Any], args: tuple[str, ...]) -> None:
    case = _lab().deployed(outputs, ["gpu-tenancy-dev"], CUT_OFF_JOIN)
    result, calls = case.run(tmp_path, "--stack", "dev", *args)
    assert [c for c in calls if c[:3] == ["pulumi", "stack", "export"]] == [["pulumi", "stack", "export", "--stack", "dev"]]
    assert [p for p in problems(result) if p.startswith("stack dev:")] == [
        "stack dev: an interrupted `up` left tenant-a-worker-join (command:local:Command) creating. Fix: `pulumi "
        "refresh --stack dev --clear-pending-creates --yes`, then `make up STACK=dev` (the command runs again and "
        "finds what it made)"]


def test_kubeconfigs_are_files_only_their_owner_reads_in_a_directory_named_for_doctor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_tenancy.cli.doctor import command

    seen: dict[str, tuple[int, int, str, str]] = {}
    real_run = command.run

    def run(argv: Any, *args: Any, **kwargs: Any) -> Any:
        if "--kubeconfig" in argv:
            path = Path(argv[argv.index("--kubeconfig") + 1])
            seen[path.name] = (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777, path.parent.name,
                               path.read_text())
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(command, "run", run)
    assert problems(_lab().run(tmp_path, "--stack", "dev")[0]) == []
    assert sorted(seen) == ["management.kubeconfig", "tenant-a.kubeconfig", "tenant-b.kubeconfig"]
    for name, (mode, directory_mode, directory, _) in seen.items():
        assert (mode, directory_mode) == (0o600, 0o700), name
        assert directory.startswith("gpu-tenancy-doctor-")
    assert seen["tenant-b.kubeconfig"][3] == OUTPUTS["tenantKubeconfigs"]["tenant-b"]
    assert seen["management.kubeconfig"][3] == OUTPUTS["managementKubeconfig"]


def test_only_tenant_nodes_need_a_gpu_registration(tmp_path: Path) -> None:
    case = _lab()
    bare = _node("gpu-tenancy-dev-control-plane", ready=False)
    del bare["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    bare["status"]["conditions"][0].pop("reason")
    bare["status"]["conditions"][0]["message"] = "Kubelet stopped posting node status."
    case.answer("kubectl", ["management.kubeconfig", "get nodes"], _items(bare))
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [
        "management cluster node gpu-tenancy-dev-control-plane: not Ready (Kubelet stopped posting node status.). "
        "Fix: `kubectl describe node gpu-tenancy-dev-control-plane` (`make -s kubeconfig-management STACK=dev`); a "
        "stopped worker comes back with `make up`"]


def test_a_node_not_ready_without_a_reason_says_so() -> None:
    from gpu_tenancy.cli.doctor.lab import ClusterFacts, cluster_problems

    node = _node("w", ready=False)
    node["status"]["conditions"][0].pop("reason")
    (found,) = cluster_problems(ClusterFacts("tenant-a", "hint", nodes=[node]), NOW)
    assert found.what == "not Ready (no reason given)"


def test_a_stack_deployed_without_tenants_reads_its_management_cluster(tmp_path: Path) -> None:
    outputs = {key: value for key, value in OUTPUTS.items() if key not in ("tenants", "tenantKubeconfigs")}
    case = _lab()
    case.deployed(outputs, ["gpu-tenancy-dev"])
    case.answer("kubectl", ["management.kubeconfig", "get nodes"], "", "Unable to connect to the server: EOF\n", 1)
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert problems(result) == [
        "management cluster: its API server does not answer (Unable to connect to the server: EOF). Fix: check its "
        "control plane and the kind network; `make -s kubeconfig-management STACK=dev`"]
    assert [c[2].rsplit("/", 1)[-1] for c in calls if c[0] == "kubectl" and "get" in c] == ["management.kubeconfig"]


@pytest.mark.parametrize(("change", "said"), [
    ({"tenantKubeconfigs": {"tenant-a": OUTPUTS["tenantKubeconfigs"]["tenant-a"]}},
     "stack dev: output 'tenantKubeconfigs' has no kubeconfig for tenant 'tenant-b', which output 'tenants' lists "
     "(outputs of a partial deployment? run `make up`)"),
    ({"tenants": ["tenant-a"]}, "stack dev: output 'tenants' is not an object"),
])
def test_outputs_that_do_not_describe_the_lab_are_a_problem_not_a_crash(
        tmp_path: Path, change: dict[str, Any], said: str) -> None:
    case = _lab().answer("sysctl", ["max_user_watches"], "8192\n")  # and a problem of the host, named too
    state = tmp_path / "state"
    lock = state / ".pulumi" / "locks" / "dev" / "1.json"  # and one of the state, which needs no outputs
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps({"pid": 2**22 + 12345, "hostname": socket.gethostname()}))
    case.deployed({**OUTPUTS, **change}, ["gpu-tenancy-dev"])
    result, _ = case.run(tmp_path, "--stack", "dev", "--state-dir", str(state))
    assert result.returncode == 1 and result.stderr == ""
    assert problems(result) == [
        "inotify: fs.inotify.max_user_watches is 8192, below 524288 (kind known issues). Fix: sudo sysctl "
        "fs.inotify.max_user_watches=524288 (persist it in /etc/sysctl.d/)",
        f"stack dev: locked by pid {2**22 + 12345} on {socket.gethostname()}, which is no longer running ({lock}). "
        "Fix: `pulumi cancel --stack dev --yes`",
        f"pulumi: the stack's outputs do not describe its lab ({said}). Fix: `make up STACK=dev` writes them again"]


def test_an_image_gone_on_the_second_tenant_names_that_tenants_load(tmp_path: Path) -> None:
    def load(tenant: str) -> str:
        return ("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:mock_gpu_agent:MockGpuAgent$"
                f"command:local:Command::{tenant}-mock-gpu-agent-image-load")

    export = {"version": 3, "deployment": {"resources": [
        {"urn": load(tenant), "type": "command:local:Command"} for tenant in ("tenant-a", "tenant-b")]}}
    case = _lab(export=export)
    ready = {"name": "sidecar", "image": "x", "state": {"running": {}}}
    gone = {"name": "agent", "image": "gpu-tenancy/mock-gpu-agent:0123",
            "state": {"waiting": {"reason": "ErrImageNeverPull"}}}
    case.answer("kubectl", ["tenant-b.kubeconfig", PODS], _items(
        {"metadata": {"name": "agent-b", "namespace": "kube-system"}, "status": {"containerStatuses": [ready, gone]}}))
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [
        "tenant tenant-b pod kube-system/agent-b: image gpu-tenancy/mock-gpu-agent:0123 is gone from node ?'s "
        f"containerd. Fix: `pulumi up --replace '{load('tenant-b')}'` loads it again"]
    case = _lab()  # no load command in the state (another program made the pod)
    case.answer("kubectl", ["tenant-b.kubeconfig", PODS], _items(
        {"metadata": {"name": "agent-b", "namespace": "kube-system"}, "status": {"containerStatuses": [gone]}}))
    assert problems(case.run(tmp_path / "none", "--stack", "dev")[0]) == [
        "tenant tenant-b pod kube-system/agent-b: image gpu-tenancy/mock-gpu-agent:0123 is gone from node ?'s "
        "containerd. Fix: replace the tenant's `*-image-load` command (`pulumi up --replace <its urn>`) to load it again"]


def _cluster_with(node_annotations: dict[str, str] | None = None, pod_annotations: dict[str, str] | None = None) -> Any:
    from gpu_tenancy.cli.doctor.lab import ClusterFacts

    cluster = ClusterFacts("tenant-a", "hint", nodes=[_node("w", annotations=node_annotations)])
    if pod_annotations is not None:
        cluster.pods = [{"metadata": {"name": "p", "namespace": "n", "annotations": pod_annotations}}]
    return cluster


def test_a_node_lock_is_stale_only_after_five_minutes() -> None:
    from gpu_tenancy.cli.doctor.lab import cluster_problems

    taken = datetime.datetime(2026, 12, 6, 12, 0, 0, tzinfo=datetime.UTC)
    cluster = _cluster_with({"hami.io/mutex.lock": "2026-12-06T12:00:00Z,workloads,p"})
    assert cluster_problems(cluster, taken + datetime.timedelta(minutes=5)) == []
    (stale,) = cluster_problems(cluster, taken + datetime.timedelta(minutes=5, seconds=1))
    assert stale.what == "HAMi's node lock is stale (2026-12-06T12:00:00Z,workloads,p)"
    (unreadable,) = cluster_problems(_cluster_with({"hami.io/mutex.lock": "yesterday,workloads,p"}), taken)
    assert unreadable.what.startswith("HAMi's node lock is stale")
    (naive,) = cluster_problems(_cluster_with({"hami.io/mutex.lock": "2026-12-06T12:00:00,workloads,p"}), taken)
    assert naive.what.startswith("HAMi's node lock is stale")  # a time without an offset is no time to compare


def test_a_pod_is_stuck_binding_only_after_five_minutes_and_counted_in_whole_minutes() -> None:
    from gpu_tenancy.cli.doctor.lab import cluster_problems

    since = datetime.datetime(2026, 12, 6, 12, 0, 0, tzinfo=datetime.UTC)
    cluster = _cluster_with(pod_annotations={"hami.io/bind-phase": "allocating",
                                             "hami.io/bind-time": str(int(since.timestamp()))})
    assert cluster_problems(cluster, since + datetime.timedelta(minutes=5)) == []
    for after, said in ((datetime.timedelta(minutes=5, seconds=1), "5 min"), (datetime.timedelta(hours=1), "60 min"),
                        (datetime.timedelta(minutes=61, seconds=59), "61 min")):
        (stuck,) = cluster_problems(cluster, since + after)
        assert stuck.what == f"stuck binding to a GPU for {said}"


def test_outputs_that_need_the_passphrase_say_where_it_comes_from(tmp_path: Path) -> None:
    case = HostCase().answer("pulumi", ["stack", "output"], "", "error: incorrect passphrase\n", 255)
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == (
        "pulumi: cannot read the stack's outputs (pulumi stack output --stack dev: error: incorrect passphrase). Fix: "
        "set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) to the passphrase this stack was created "
        "with; a sim stack made by `make up` without one uses state/passphrase, which make passes on")


def test_kubectl_missing_is_the_reason_each_cluster_gives(tmp_path: Path) -> None:
    found = problems(_lab().without("kubectl").run(tmp_path, "--stack", "dev")[0])
    assert [line.split(". Fix: ")[0] for line in found[1:]] == [
        f"{where}: its API server does not answer (kubectl not on PATH)"
        for where in ("management cluster", "tenant tenant-a", "tenant tenant-b")]


def test_hosts_off_names_every_unknown_worker(tmp_path: Path) -> None:
    result, _ = HostCase().run(tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml",
                               "--hosts-off", "gpu-l4-98 gpu-l4-01 gpu-l4-99")
    assert result.returncode == 2
    assert result.stderr.startswith("doctor: gpu-l4-98, gpu-l4-99: no such worker in Pulumi.gpu.yaml (workers: ")


def test_a_lab_of_a_mode_doctor_does_not_know_is_never_gone(tmp_path: Path) -> None:
    result, _ = HostCase().deployed({**OUTPUTS, "mode": "quantum"}, []).run(tmp_path, "--stack", "dev", "--lab-gone")
    assert (result.returncode, result.stderr) == (1, "")


def test_only_images_the_stack_built_are_looked_for() -> None:
    from gpu_tenancy.cli.doctor.command import built_images

    image = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:mock_gpu_agent:MockGpuAgent$docker:index/image:Image::agent"
    deployment = {"resources": [
        {"urn": image, "type": "docker:index/image:Image", "inputs": {}},  # no name recorded: nothing to look for
        {"urn": "urn:pulumi:dev::gpu-tenancy::docker:index/remoteImage:RemoteImage::r",
         "type": "docker:index/remoteImage:RemoteImage", "inputs": {"imageName": "pulled:1"}},
    ]}
    assert built_images(deployment) == {}


# --------------------------------------------------------------------------- each clause of the host checks


def test_what_a_failing_tool_prints_is_not_taken_for_an_answer(tmp_path: Path) -> None:
    """A tool that exits non-zero is not read, whatever it printed on stdout."""
    kubectl = json.dumps({"clientVersion": {"gitVersion": versions.KUBECTL_BINARY}})
    case = (HostCase().answer("kind", ["version"], f"kind {versions.KIND_BINARY} go1.24.6 linux/amd64\n", "", 1)
            .answer("kubectl", ["version", "--client"], kubectl, "", 1)
            .answer("sysctl", ["max_user_instances"], "128\n", "", 1)
            .answer("free", ["-b"], free_output(1024), "", 1)
            .answer("findmnt", ["SOURCE"], "/dev/mapper/luks-0\n", "", 1))
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [
        f"kubectl: an unknown version is not the pinned {versions.KUBECTL_BINARY}. "
        f"{TOOLS_FIX.format(versions.KUBECTL_BINARY)}",
        f"kind: an unknown version is not the pinned {versions.KIND_BINARY}. "
        f"{TOOLS_FIX.format(versions.KIND_BINARY)}",
    ]


def test_docker_info_that_is_not_json_is_an_engine_that_does_not_answer(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["info"], "Client: Docker Engine - Community\n")
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [
        "docker: the Docker engine does not answer `docker info` (`docker info` printed no JSON). Fix: start the "
        "daemon (`sudo systemctl start docker`) and let this user use it (`sudo usermod -aG docker $USER`, then log "
        "in again)"]


def test_without_a_data_root_in_docker_info_the_root_filesystem_is_the_one_checked(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["info"], _info(DockerRootDir=None))
    case.answer("findmnt", ["--target", "/"], "/dev/mapper/vg-root\n")
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert ["findmnt", "-n", "-o", "SOURCE", "--target", "/"] in calls
    assert [c for c in calls if c[0] == "df"] == [["df", "-Pk", "/"]]
    assert problems(result) == [
        f"disk: Docker's data root is on a device-mapper device (/dev/mapper/vg-root, e.g. LUKS or LVM){ROOTFS}. "
        f"Fix: {DISK_FIX}"]


def test_a_df_that_fails_on_the_root_filesystem_is_not_asked_again(tmp_path: Path) -> None:
    # GNU df exits 1 when it cannot read a filesystem; what it printed then is not read either.
    case = (HostCase().answer("docker", ["info"], _info(DockerRootDir=None))
            .answer("df", ["-Pk"], df_output(1024), "df: /: EIO\n", 1))
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert problems(result) == []  # free space unknown: nothing to say about it
    assert [c for c in calls if c[0] == "df"] == [["df", "-Pk", "/"]]


def test_host_files_are_read_from_the_root_unless_re_rooted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpu_tenancy.cli.doctor import command

    monkeypatch.delenv(command.HOST_ROOT_ENV, raising=False)
    assert command._host_file("/proc/version") == Path("/proc/version").read_text() != ""
    assert command._host_file(f"{tmp_path}/absent") == ""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hostname").write_text("lab\n")
    monkeypatch.setenv(command.HOST_ROOT_ENV, str(tmp_path))
    assert command._host_file("/etc/hostname") == "lab\n"


def test_the_docker_command_is_known_by_where_it_really_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """/usr/bin/docker may be a link into /snap: the snap check reads the resolved path."""
    from gpu_tenancy.cli.doctor import command

    target = tmp_path / "snap" / "bin" / "docker"
    target.parent.mkdir(parents=True)
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "docker").symlink_to(target)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(command, "run", lambda *args, **kwargs: None)
    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ("a",))
    facts = command.gather_known_issues(shape, doctor_host.HostFacts())
    assert facts.docker_cli == str(target.resolve())
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert command.gather_known_issues(shape, doctor_host.HostFacts()).docker_cli is None


def test_a_mode_no_layer_registers_is_sized_as_the_bare_lab() -> None:
    shape = doctor_host.LabShape("lab", "quantum", "gpu-tenancy-lab", "kind", ("a", "b", "c"))
    # docs/live-suite.md "Footprint": kind, Kamaji, cert-manager, MetalLB and etcd 2.3 GB; 8 GB of disk + 1 per tenant
    assert doctor_host.footprint_bytes(shape) == (int(2.3 * 2**30), 11 * 2**30)


@pytest.mark.parametrize(("no_proxy", "covered"), [
    ("*", True),  # Go's httpproxy: "*" disables the proxy for every host
    (",, localhost,,172.18.0.0/16", True),  # empty entries are skipped, not the end of the list
    ("example.com,172.18.0.1/16", True),  # a CIDR written with host bits covers its whole network, as Go reads it
    ("not-a-network,10.0.0.0/8", False),
    ("fc00:f853:ccd:e793::/64", False),  # the IPv6 subnet alone does not cover the IPv4 one
    ("*.example.com", False),
])
def test_no_proxy_entries_are_read_as_go_reads_them(no_proxy: str, covered: bool) -> None:
    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ("a",))
    facts = doctor_host.HostFacts(environ={"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": no_proxy},
                                  network_subnets=["172.18.0.0/16"])
    assert (doctor_host.proxy_problems(facts, shape) == []) is covered


def test_only_locks_whose_process_is_gone_are_problems() -> None:
    from gpu_tenancy.cli.doctor.lab import LabFacts, state_problems

    locks = [{"path": "state/.pulumi/locks/dev/1.json", "pid": 41, "hostname": "here", "alive": True},
             {"path": "state/.pulumi/locks/dev/2.json", "pid": 42, "hostname": "here", "alive": False}]
    facts = LabFacts("dev", None, [], {}, [], locks, [], NOW)
    assert [p.line() for p in state_problems(facts)] == [
        "stack dev: locked by pid 42 on here, which is no longer running (state/.pulumi/locks/dev/2.json). Fix: "
        "`pulumi cancel --stack dev --yes`"]


@pytest.mark.parametrize(("cluster_name", "kind_clusters", "dead_lock", "subjects"), [
    # the kind cluster gone: nothing inside it can answer, so only the state and the cluster are named
    ("gpu-tenancy-dev", [], True, ["stack dev", "kind cluster"]),
    # there: its containers and tenants are read even when the state has a problem too
    ("gpu-tenancy-dev", ["gpu-tenancy-dev"], True, ["stack dev", "container gpu-tenancy-dev-tenant-a-worker",
                                                   "tenant tenant-a"]),
    # a real stack has no kind cluster: its tenants are read, with or without a state problem
    (None, [], True, ["stack dev", "container gpu-tenancy-dev-tenant-a-worker", "tenant tenant-a"]),
    (None, [], False, ["container gpu-tenancy-dev-tenant-a-worker", "tenant tenant-a"]),
])
def test_the_lab_is_read_inside_only_while_its_kind_cluster_is_there(
        cluster_name: str | None, kind_clusters: list[str], dead_lock: bool, subjects: list[str]) -> None:
    from gpu_tenancy.cli.doctor.lab import ClusterFacts, LabFacts, lab_problems

    locks = [{"path": "l.json", "pid": 42, "hostname": "here", "alive": False}] if dead_lock else []
    facts = LabFacts("dev", cluster_name, kind_clusters, {"gpu-tenancy-dev-tenant-a-worker": None},
                     [ClusterFacts("tenant-a", "hint", error="Unable to connect")], locks, [], NOW)
    assert [p.subject for p in lab_problems(facts)] == subjects


def test_a_failing_docker_inspect_or_network_inspect_is_not_read(tmp_path: Path) -> None:
    case = _other_lab(HostCase(), "gpu-tenancy-other", "kind")
    case.answer("docker", ["inspect", "{{json .NetworkSettings.Networks}}", "gpu-tenancy-other-control-plane"],
                json.dumps({"kind": {}}), "Error: No such object: gpu-tenancy-other-control-plane\n", 1)
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []
    case = HostCase().answer("docker", ["network", "inspect"], json.dumps(KIND_NETWORK), "Error response\n", 1)
    case.env = {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "172.18.0.0/16"}
    (found,) = problems(case.run(tmp_path / "network", "--stack", "dev")[0])
    assert "NO_PROXY does not cover 172.16.0.0/12, 192.168.0.0/16: the kind network 'kind' does not exist yet" in found


def test_every_other_lab_on_the_host_is_looked_at_not_only_the_first(tmp_path: Path) -> None:
    case = _other_lab(HostCase(), "gpu-tenancy-other", "lab-b")
    case.answer("kind", ["get", "clusters"], "gpu-tenancy-dev\ngpu-tenancy-other\n")
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert problems(result) == []  # the other lab is on its own network
    assert [c[-1] for c in calls if c[:2] == ["docker", "inspect"] and "{{json .NetworkSettings.Networks}}" in c] == [
        "gpu-tenancy-other-control-plane"]


def test_a_failing_docker_ps_or_an_unreadable_inspect_names_no_other_lab(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["ps", "-a", "network=kind"], "mylab-tenant-x-worker\n", "error\n", 1)
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []
    case = _other_lab(HostCase(), "gpu-tenancy-other", "kind")
    case.answer("docker", ["inspect", "{{json .NetworkSettings.Networks}}", "gpu-tenancy-other-control-plane"], "<nil>")
    result, _ = case.run(tmp_path / "inspect", "--stack", "dev")
    assert (problems(result), result.stderr) == ([], "")


@pytest.mark.parametrize(("info", "expected"), [
    (_info(ServerVersion="24.0.0"), []),  # the minimum itself is enough
    (_info(ServerVersion=None), ["docker: Docker Engine ? is older than 24.0. Fix: upgrade Docker Engine (README: "
                                 "Prerequisites)"]),
])
def test_the_docker_engine_minimum_is_inclusive_and_a_missing_version_is_too_old(
        tmp_path: Path, info: str, expected: list[str]) -> None:
    assert problems(HostCase().answer("docker", ["info"], info).run(tmp_path, "--stack", "dev")[0]) == expected


def test_a_docker_info_failing_without_a_word_is_no_answer(tmp_path: Path) -> None:
    (found,) = problems(HostCase().answer("docker", ["info"], "", "", 1).run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("docker: the Docker engine does not answer `docker info` (no answer). Fix: ")


def test_a_lock_is_held_while_its_process_runs_or_when_it_is_another_hosts(tmp_path: Path) -> None:
    from gpu_tenancy.cli.doctor.command import stack_locks

    root = tmp_path / "state" / ".pulumi" / "locks" / "organization" / "gpu-tenancy" / "dev"
    root.mkdir(parents=True)
    holder = subprocess.Popen(["sleep", "60"])
    try:
        (root / "1.json").write_text(json.dumps({"pid": holder.pid, "hostname": socket.gethostname()}))
        (root / "2.json").write_text(json.dumps({"pid": 2**22 + 12345, "hostname": "another-host"}))
        (root / "3.json").write_text(json.dumps({"pid": "41", "hostname": socket.gethostname()}))  # not a pid
        locks = stack_locks(tmp_path / "state", "dev")
        assert [(Path(lock["path"]).name, lock["alive"]) for lock in locks] == [
            ("1.json", True), ("2.json", True), ("3.json", True)]
    finally:
        holder.kill()
        holder.wait()


def test_the_state_export_is_given_two_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pulumi stack export` of a whole lab's state takes longer than a tool's version answer."""
    from gpu_tenancy.cli.doctor import command

    asked: list[tuple[list[str], float]] = []
    monkeypatch.setattr(command, "run", lambda argv, timeout=command.TIMEOUT_SECONDS: asked.append((argv, timeout)))
    assert command.stack_deployment("dev") == {}
    assert asked == [(["pulumi", "stack", "export", "--stack", "dev"], 120)]


def test_docker_naming_no_cgroup_version_is_taken_for_v1(tmp_path: Path) -> None:
    (found,) = problems(HostCase().answer("docker", ["info"], _info(CgroupVersion=None)).run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("cgroup: this host runs cgroup v1: Kubernetes 1.35 kubelets refuse to start")


def test_a_proxy_problem_names_what_is_missing_where_and_the_export_that_fixes_it() -> None:
    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ("a",))
    environ = {"https_proxy": "http://proxy:3128", "no_proxy": "localhost"}
    (existing,) = doctor_host.proxy_problems(doctor_host.HostFacts(
        environ=environ, network_subnets=["fc00:f853:ccd:e793::/64", "172.18.0.1/16"]), shape)
    assert existing.line() == (
        "proxy: a proxy is set (http://proxy:3128) and NO_PROXY does not cover 172.18.0.0/16: the kind network 'kind' "
        "is 172.18.0.0/16, and the program's kubectl and providers would send the tenants' API traffic to the proxy. "
        "Fix: export NO_PROXY=\"$NO_PROXY,172.18.0.0/16\" (and no_proxy alike)")
    (before,) = doctor_host.proxy_problems(doctor_host.HostFacts(environ=environ), shape)
    assert before.what == (
        "a proxy is set (http://proxy:3128) and NO_PROXY does not cover 172.16.0.0/12, 192.168.0.0/16: the kind "
        "network 'kind' does not exist yet, so its subnet is one Docker picks from 172.16.0.0/12, 192.168.0.0/16, and "
        "the program's kubectl and providers would send the tenants' API traffic to the proxy")
    assert before.fix == "export NO_PROXY=\"$NO_PROXY,172.16.0.0/12,192.168.0.0/16\" (and no_proxy alike)"


def test_limits_met_exactly_are_enough() -> None:
    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ("a", "b"))
    # kind known issues: 512 instances and 524288 watches; docs/live-suite.md "Footprint": 10 GiB, 5.1 GiB for two
    memory, disk = int((2.3 + 2 * 1.4) * 2**30), 10 * 2**30
    facts = doctor_host.HostFacts(docker_info=dict(DOCKER_INFO), inotify_instances=512, inotify_watches=524288,
                                  disk_free_bytes=disk, memory_available_bytes=memory)
    assert doctor_host.host_problems(facts, shape, deployed=False) == []
    facts = doctor_host.HostFacts(docker_info=dict(DOCKER_INFO), inotify_instances=511, inotify_watches=524287,
                                  disk_free_bytes=disk - 1, memory_available_bytes=memory - 1)
    assert [p.subject for p in doctor_host.host_problems(facts, shape, deployed=False)] == [
        "inotify", "inotify", "disk", "memory"]


def test_low_disk_with_the_engine_down_is_measured_on_the_root_filesystem(tmp_path: Path) -> None:
    case = (HostCase().answer("docker", ["info"], "", ENGINE_DOWN + "\n", 1)
            .answer("df", ["-Pk", "/"], df_output(1024 * 1024)))
    found = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found[1] == ("disk: 1.0 GiB free under Docker's data root, the lab needs 10.0 GiB. Fix: free space (`docker "
                        "system prune`, `docker image prune`) or move Docker's data-root")


def test_a_version_answer_that_is_no_version_is_quoted(tmp_path: Path) -> None:
    case = HostCase().answer("kind", ["version"], "kind version: development build\n")
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == (f"kind: 'kind version: development build' is not the pinned {versions.KIND_BINARY}. "
                     f"{TOOLS_FIX.format(versions.KIND_BINARY)}")
    from gpu_tenancy.cli.tools import TOOLS_BY_NAME

    assert TOOLS_BY_NAME["kind"].parse_version("kind v0.32.0-alpha+1f2e go1.26.3 linux/amd64\n") == "v0.32.0-alpha+1f2e"


def test_asking_whether_a_locks_process_runs_sends_it_no_signal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_tenancy.cli.doctor import command

    root = tmp_path / "state" / ".pulumi" / "locks" / "dev"
    root.mkdir(parents=True)
    (root / "1.json").write_text(json.dumps({"pid": 4242, "hostname": socket.gethostname()}))
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(command.os, "kill", lambda pid, signal: sent.append((pid, signal)))
    assert [lock["alive"] for lock in command.stack_locks(tmp_path / "state", "dev")] == [True]
    assert sent == [(4242, 0)]  # kill(2) with signal 0: only whether the process exists


def test_a_lock_of_another_users_process_is_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_tenancy.cli.doctor import command

    root = tmp_path / "state" / ".pulumi" / "locks" / "dev"
    root.mkdir(parents=True)
    (root / "1.json").write_text(json.dumps({"pid": 4242, "hostname": socket.gethostname()}))

    def kill(pid: int, signal: int) -> None:
        raise PermissionError(1, "Operation not permitted")  # kill(2): EPERM, the process exists

    monkeypatch.setattr(command.os, "kill", kill)
    assert [lock["alive"] for lock in command.stack_locks(tmp_path / "state", "dev")] == [True]


@pytest.mark.parametrize("export", ['{"deployment": ["x"]}', '{"deployment": null}', "[]", "not json"])
def test_a_state_export_that_is_no_deployment_reads_as_none(monkeypatch: pytest.MonkeyPatch, export: str) -> None:
    from gpu_tenancy.cli.doctor import command

    monkeypatch.setattr(command, "run", lambda argv, timeout=0: (0, export, ""))
    assert command.stack_deployment("dev") == {}


def test_without_a_stack_doctor_checks_dev(tmp_path: Path) -> None:
    result, calls = HostCase().run(tmp_path)
    assert result.stdout.splitlines()[-1] == "doctor: no problems (host, Pulumi state and lab, stack dev)"
    assert ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", "dev"] in calls


def test_a_deployed_real_stack_has_no_kind_cluster_to_lose_and_its_clusters_are_read(tmp_path: Path) -> None:
    outputs = {key: value for key, value in OUTPUTS.items() if key != "kindClusterName"} | {"mode": "real"}
    case = _lab(clusters=())
    case.deployed(outputs, [])
    case.env = {"PULUMI_CONFIG_PASSPHRASE": "mine"}
    result, calls = case.run(tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml")
    assert problems(result) == [], result.stdout
    assert sorted(Path(c[2]).name for c in calls if c[0] == "kubectl" and "nodes" in c) == [
        "management.kubeconfig", "tenant-a.kubeconfig", "tenant-b.kubeconfig"]
    assert not [c for c in calls if c[0] in ("docker", "kind")]


def test_a_real_stack_without_a_passphrase_is_told_to_choose_one(tmp_path: Path) -> None:
    result, _ = HostCase().run(tmp_path, "--stack", "gpu")
    assert problems(result) == [
        "passphrase: neither PULUMI_CONFIG_PASSPHRASE nor PULUMI_CONFIG_PASSPHRASE_FILE is set: a real stack's secrets "
        "are encrypted with a passphrase you choose. Fix: export PULUMI_CONFIG_PASSPHRASE=<yours> (the same every time "
        "for this stack)"]
    case = HostCase()
    case.env = {"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "passphrase")}
    assert problems(case.run(tmp_path / "file", "--stack", "gpu")[0]) == []


@pytest.mark.parametrize("unasked", ["engine-down", "no-kind", "kind-fails"])
def test_a_kind_cluster_is_never_called_gone_when_kind_could_not_be_asked(tmp_path: Path, unasked: str) -> None:
    """Only a cluster seen missing from `kind get clusters` is gone (its fix is `make destroy`): a host where Docker
    or kind does not answer says that, and nothing about the cluster."""
    case = _lab()
    if unasked == "engine-down":
        case.answer("docker", ["info"], "", ENGINE_DOWN + "\n", 1)
    elif unasked == "no-kind":
        case.without("kind")
    else:
        case.answer("kind", ["get", "clusters"], "", "ERROR: failed to list clusters\n", 1)
    for args in (("--stack", "dev"), ("--stack", "dev", "--before-up")):
        found = problems(case.run(tmp_path / str(len(args)), *args)[0])
        assert not [line for line in found if line.startswith("kind cluster:")], found
