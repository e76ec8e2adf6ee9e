"""`make doctor` on a deployed lab (gpu_tenancy/cli/doctor/command.py and lab.py) against stub tools
(tests/doctor_stubs.py): the kind cluster, the containers, each cluster's API, the Pulumi state, and what `make up`
(`--missing-images`, `--before-up`) and `make destroy` (`--lab-gone`, `--hosts-off`) ask of doctor."""

from __future__ import annotations

import datetime
import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from doctor_stubs import (
    ENGINE_DOWN,
    HELM_RECORDS,
    NOW,
    OUTPUTS,
    PODS,
    HostCase,
    df_output,
    free_output,
    kube_list,
    kube_node,
    lab_case,
    problems,
)


def test_a_healthy_lab_has_no_problems_and_no_kubeconfig_reaches_a_command_line(tmp_path: Path) -> None:
    import tempfile

    result, calls = lab_case().run(tmp_path, "--stack", "dev", "--state-dir", str(tmp_path / "state"))
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
        (found,) = problems(lab_case(clusters=()).run(tmp_path / args[-1].strip("-"), *args)[0])
        assert found == (
            "kind cluster: gpu-tenancy-dev is gone (deleted outside Pulumi; `pulumi refresh` cannot see it, the kind "
            "cluster is a command): every control plane and tenant went with it. Fix: `make destroy STACK=dev` (it "
            "completes without the cluster and says what it skipped), then `make up STACK=dev`")


def test_worker_containers_removed_or_stopped_by_hand(tmp_path: Path) -> None:
    case = lab_case()
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
    case = lab_case()
    case.answer("kubectl", ["tenant-a.kubeconfig", "get nodes"], kube_list(
        kube_node("gpu-tenancy-dev-tenant-a-worker", annotations={"hami.io/mutex.lock": f"{stale},workloads,p-1"})))
    bare = kube_node("gpu-tenancy-dev-tenant-b-worker", ready=False, annotations={"hami.io/mutex.lock": f"{fresh},w,p"})
    del bare["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    case.answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], kube_list(bare))
    case.answer("kubectl", ["tenant-a.kubeconfig", PODS], kube_list(
        # Before the stuck one: a pod bound, one whose bind time is not a number, one without a bind time yet.
        {"metadata": {"name": "a-infer-2", "namespace": "workloads",
                      "annotations": {"hami.io/bind-phase": "success", "hami.io/bind-time": str(stuck_since)}}},
        {"metadata": {"name": "a-infer-3", "namespace": "workloads",
                      "annotations": {"hami.io/bind-phase": "allocating", "hami.io/bind-time": "soon"}}},
        {"metadata": {"name": "a-infer-4", "namespace": "workloads", "annotations": {"hami.io/bind-phase": "allocating"}}},
        {"metadata": {"name": "a-infer-1", "namespace": "workloads",
                      "annotations": {"hami.io/bind-phase": "allocating", "hami.io/bind-time": str(stuck_since)}}}))
    case.answer("kubectl", ["tenant-b.kubeconfig", HELM_RECORDS], kube_list(
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

    node = {**kube_node("gpu-tenancy-dev-tenant-b-worker"), "status": {}}
    cluster = ClusterFacts("tenant-b", "make -s kubeconfig STACK=dev TENANT=tenant-b", nodes=[node])
    assert [(p.subject, p.what) for p in cluster_problems(cluster, NOW)] == [
        ("tenant tenant-b node gpu-tenancy-dev-tenant-b-worker", "not Ready (no Ready condition)")]


def test_an_unreachable_tenant(tmp_path: Path) -> None:
    case = lab_case().answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], "",
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
    found = problems(lab_case(export=export).run(tmp_path, "--stack", "dev", "--state-dir", str(state))[0])
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
    assert found == ("pulumi: cannot read the stack's outputs (pulumi stack output --stack dev: error: could not read backend: permission denied). Fix: "
                     "see the whole error with `pulumi stack output --stack dev` (outside make: export "
                     "PULUMI_BACKEND_URL=file://$PWD/state)")


def test_an_unknown_stack_is_refused_in_one_line(tmp_path: Path) -> None:
    result, _ = HostCase().run(tmp_path, "--stack", "stagin")
    assert result.returncode == 2 and result.stderr.strip() == "doctor: Pulumi.stagin.yaml not found: STACK=stagin names no stack file"


def test_a_deployed_lab_needs_only_headroom_not_a_second_footprint(tmp_path: Path) -> None:
    case = lab_case().answer("free", ["-b"], free_output(3 * 1024**3)).answer("df", ["-Pk"], df_output(5 * 1024 * 1024))
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []
    # Deployed by its outputs alone (kind cannot list the clusters), or by its kind cluster alone (an `up` cut off
    # before it wrote any output): headroom either way.
    case.answer("kind", ["get", "clusters"], "", "ERROR: failed to list clusters\n", 1)
    found = problems(case.run(tmp_path / "outputs-only", "--stack", "dev")[0])
    assert not [p for p in found if p.startswith(("memory", "disk"))], found
    case = HostCase().deployed({}, ["gpu-tenancy-dev"]).answer("free", ["-b"], free_output(3 * 1024**3))
    case.answer("df", ["-Pk"], df_output(5 * 1024 * 1024))
    assert problems(case.run(tmp_path / "cluster-only", "--stack", "dev")[0]) == []
    # Nothing deployed at all: the whole footprint.
    case = HostCase().deployed({}, []).answer("free", ["-b"], free_output(3 * 1024**3))
    assert [p.split(":")[0] for p in problems(case.run(tmp_path / "none", "--stack", "dev")[0])] == ["memory"]


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
    case = lab_case(export=export)
    case.answer("kubectl", ["tenant-a.kubeconfig", PODS], kube_list({
        "metadata": {"name": "tenant-a-mock-gpu-agent-x", "namespace": "kube-system"},
        "spec": {"nodeName": "gpu-tenancy-dev-tenant-a-worker"},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "agent", "image": "gpu-tenancy/mock-gpu-agent:0123",
                   "state": {"waiting": {"reason": "ErrImageNeverPull", "message": "Container image ... is not present"}}}]},
    }))
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == (
        "tenant tenant-a pod kube-system/tenant-a-mock-gpu-agent-x: image gpu-tenancy/mock-gpu-agent:0123 is gone from "
        f"node gpu-tenancy-dev-tenant-a-worker's containerd. Fix: `pulumi up --replace '{load}'` loads it again")


def test_a_stopped_kind_node_is_started_by_docker_not_by_up(tmp_path: Path) -> None:
    case = lab_case().answer("docker", ["{{.State.Status}}", "gpu-tenancy-dev-control-plane"], "exited\n")
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == (
        "container gpu-tenancy-dev-control-plane: is exited, not running: the kind cluster's node, which `make up` "
        "cannot see or start. Fix: `docker start gpu-tenancy-dev-control-plane` (kind's nodes come back with their "
        "state), then `make doctor`")


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
    found = problems(lab_case().without("kubectl").run(tmp_path, "--stack", "dev")[0])
    assert "kubectl: not found on PATH. Fix: `make tools`" in found[0]
    assert [line for line in found if "kubectl not on PATH" in line][:1] and all(
        "Traceback" not in line for line in found)


def test_kubectls_last_error_line_or_no_answer_is_the_reason(tmp_path: Path) -> None:
    case = lab_case().answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], "", "", 1)
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("tenant tenant-b: its API server does not answer (no answer)")
    case = lab_case().answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], "not json")
    (found,) = problems(case.run(tmp_path / "json", "--stack", "dev")[0])
    assert found.startswith("tenant tenant-b: its API server does not answer (kubectl printed no JSON object)")
    for text in ("null", "[]", '"items"'):  # JSON, but not the List object `get ... -o json` prints: no answer either
        case = lab_case().answer("kubectl", ["tenant-b.kubeconfig", "get nodes"], text)
        (found,) = problems(case.run(tmp_path / "not-object", "--stack", "dev")[0])
        assert found.startswith("tenant tenant-b: its API server does not answer (kubectl printed no JSON object)"), text


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
    case = lab_case(clusters=("lab-before-rename",))
    case.deployed(outputs, ["lab-before-rename"])
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert problems(result) == [], result.stdout
    assert ["docker", "inspect", "--format", "{{.State.Status}}", "lab-before-rename-control-plane"] in calls
    assert problems(case.run(tmp_path / "before-up", "--stack", "dev", "--before-up")[0]) == []
    case.deployed(outputs, ["gpu-tenancy-dev"])  # the stack file's name exists, the deployed one does not
    (found,) = problems(case.run(tmp_path / "gone", "--stack", "dev")[0])
    assert found.startswith("kind cluster: lab-before-rename is gone")


def test_a_gone_kind_cluster_is_not_asked_anything_further(tmp_path: Path) -> None:
    result, calls = lab_case(clusters=()).run(tmp_path, "--stack", "dev")
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
    case = lab_case().deployed(outputs, ["gpu-tenancy-dev"], CUT_OFF_JOIN)
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
    assert problems(lab_case().run(tmp_path, "--stack", "dev")[0]) == []
    assert sorted(seen) == ["management.kubeconfig", "tenant-a.kubeconfig", "tenant-b.kubeconfig"]
    for name, (mode, directory_mode, directory, _) in seen.items():
        assert (mode, directory_mode) == (0o600, 0o700), name
        assert directory.startswith("gpu-tenancy-doctor-")
    assert seen["tenant-b.kubeconfig"][3] == OUTPUTS["tenantKubeconfigs"]["tenant-b"]
    assert seen["management.kubeconfig"][3] == OUTPUTS["managementKubeconfig"]


def test_only_tenant_nodes_need_a_gpu_registration(tmp_path: Path) -> None:
    case = lab_case()
    bare = kube_node("gpu-tenancy-dev-control-plane", ready=False)
    del bare["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    bare["status"]["conditions"][0].pop("reason")
    bare["status"]["conditions"][0]["message"] = "Kubelet stopped posting node status."
    case.answer("kubectl", ["management.kubeconfig", "get nodes"], kube_list(bare))
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [
        "management cluster node gpu-tenancy-dev-control-plane: not Ready (Kubelet stopped posting node status.). "
        "Fix: `kubectl describe node gpu-tenancy-dev-control-plane` (`make -s kubeconfig-management STACK=dev`); a "
        "stopped worker comes back with `make up`"]


def test_a_node_not_ready_without_a_reason_says_so() -> None:
    from gpu_tenancy.cli.doctor.lab import ClusterFacts, cluster_problems

    node = kube_node("w", ready=False)
    node["status"]["conditions"][0].pop("reason")
    (found,) = cluster_problems(ClusterFacts("tenant-a", "hint", nodes=[node]), NOW)
    assert found.what == "not Ready (no reason given)"


def test_a_stack_deployed_without_tenants_reads_its_management_cluster(tmp_path: Path) -> None:
    outputs = {key: value for key, value in OUTPUTS.items() if key not in ("tenants", "tenantKubeconfigs")}
    case = lab_case()
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
    case = lab_case().answer("sysctl", ["max_user_watches"], "8192\n")  # and a problem of the host, named too
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
    case = lab_case(export=export)
    ready = {"name": "sidecar", "image": "x", "state": {"running": {}}}
    gone = {"name": "agent", "image": "gpu-tenancy/mock-gpu-agent:0123",
            "state": {"waiting": {"reason": "ErrImageNeverPull"}}}
    case.answer("kubectl", ["tenant-b.kubeconfig", PODS], kube_list(
        {"metadata": {"name": "agent-b", "namespace": "kube-system"}, "status": {"containerStatuses": [ready, gone]}}))
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [
        "tenant tenant-b pod kube-system/agent-b: image gpu-tenancy/mock-gpu-agent:0123 is gone from node ?'s "
        f"containerd. Fix: `pulumi up --replace '{load('tenant-b')}'` loads it again"]
    case = lab_case()  # no load command in the state (another program made the pod)
    case.answer("kubectl", ["tenant-b.kubeconfig", PODS], kube_list(
        {"metadata": {"name": "agent-b", "namespace": "kube-system"}, "status": {"containerStatuses": [gone]}}))
    assert problems(case.run(tmp_path / "none", "--stack", "dev")[0]) == [
        "tenant tenant-b pod kube-system/agent-b: image gpu-tenancy/mock-gpu-agent:0123 is gone from node ?'s "
        "containerd. Fix: replace the tenant's `*-image-load` command (`pulumi up --replace <its urn>`) to load it again"]


def _cluster_with(node_annotations: dict[str, str] | None = None, pod_annotations: dict[str, str] | None = None) -> Any:
    from gpu_tenancy.cli.doctor.lab import ClusterFacts

    cluster = ClusterFacts("tenant-a", "hint", nodes=[kube_node("w", annotations=node_annotations)])
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
    found = problems(lab_case().without("kubectl").run(tmp_path, "--stack", "dev")[0])
    assert [line.split(". Fix: ")[0] for line in found[1:]] == [
        f"{where}: its API server does not answer (kubectl not on PATH)"
        for where in ("management cluster", "tenant tenant-a", "tenant tenant-b")]


def test_hosts_off_names_every_unknown_worker(tmp_path: Path) -> None:
    result, _ = HostCase().run(tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml",
                               "--hosts-off", "gpu-l4-98 gpu-l4-01 gpu-l4-99")
    assert result.returncode == 2
    assert result.stderr.startswith("doctor: gpu-l4-98, gpu-l4-99: no such worker in Pulumi.gpu.yaml (workers: ")


def test_hosts_off_and_missing_images_read_the_named_stack_and_its_own_stack_file(tmp_path: Path) -> None:
    """Without --stack-file, Pulumi.<stack>.yaml (in the working directory, as make runs it)."""
    join = ("urn:pulumi:gpu::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:host_worker:HostWorker$"
            "command:remote:Command::tenant-b-gpu-l4-01-join")
    export = {"version": 3, "deployment": {"resources": [
        {"urn": join, "type": "command:remote:Command", "inputs": {"delete": "kubeadm reset -f"}}]}}
    case = HostCase().deployed({"mode": "real"}, [], export)
    result, calls = case.run(tmp_path, "--stack", "gpu", "--hosts-off", "gpu-l4-01")
    assert (result.returncode, result.stdout) == (0, f"{join}\n")
    assert calls == [["pulumi", "stack", "export", "--stack", "gpu"]]
    result, calls = HostCase().deployed(OUTPUTS, [], {}).run(tmp_path / "images", "--stack", "dev-nvml",
                                                            "--missing-images")
    assert (result.returncode, result.stdout) == (0, "")
    assert calls == [["pulumi", "stack", "export", "--stack", "dev-nvml"]]


def test_the_command_line_defaults_are_the_dev_stack_and_the_state_folder() -> None:
    from gpu_tenancy.cli.doctor import command

    args = command.parser().parse_args([])
    assert (args.stack, args.stack_file, args.state_dir, args.before_up) == ("dev", None, Path("state"), False)


def test_the_environment_main_is_given_is_the_one_diagnosed(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from gpu_tenancy.cli.doctor import command

    seen: list[Any] = []
    monkeypatch.setattr(command, "diagnose", lambda args, environ: (seen.append(environ), ([], []))[1])
    given = {"PULUMI_CONFIG_PASSPHRASE": "given"}
    assert command.main(["--stack", "dev"], given) == 0
    assert command.main(["--stack", "dev"]) == 0
    assert seen[0] is given and seen[1] is os.environ


def test_a_lab_of_a_mode_doctor_does_not_know_is_never_gone(tmp_path: Path) -> None:
    result, _ = HostCase().deployed({**OUTPUTS, "mode": "quantum"}, []).run(tmp_path, "--stack", "dev", "--lab-gone")
    assert (result.returncode, result.stderr) == (1, "")


def test_only_images_the_stack_built_are_looked_for() -> None:
    from gpu_tenancy.cli.doctor.deployment import built_images

    image = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:mock_gpu_agent:MockGpuAgent$docker:index/image:Image::agent"
    deployment = {"resources": [
        {"urn": image, "type": "docker:index/image:Image", "inputs": {}},  # no name recorded: nothing to look for
        {"urn": "urn:pulumi:dev::gpu-tenancy::docker:index/remoteImage:RemoteImage::r",
         "type": "docker:index/remoteImage:RemoteImage", "inputs": {"imageName": "pulled:1"}},
    ]}
    assert built_images(deployment) == {}


def test_a_resource_name_is_all_that_follows_the_third_double_colon() -> None:
    """pulumi sdk/go/common/resource/urn.go `URN.Name`: the name may hold `::` itself."""
    from gpu_tenancy.cli.doctor.deployment import urn_name

    assert urn_name("urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$command:local:Command::a-join") == "a-join"
    assert urn_name("urn:pulumi:dev::gpu-tenancy::command:local:Command::a::b-image-load") == "a::b-image-load"


# What a state entry without a URN is: nothing that could be replaced or dropped, whatever else it holds; the entries
# after it are still read.
NO_URN = ["not an object", {"type": "docker:index/image:Image", "inputs": {"imageName": "gpu-tenancy/x:1"}},
          {"urn": "", "type": "command:remote:Command", "inputs": {"delete": "kubeadm reset -f"}},
          {"urn": 7, "type": "command:local:Command"}]


def test_state_entries_without_a_urn_are_left_out_and_the_rest_read() -> None:
    from gpu_tenancy.cli.doctor.deployment import built_images, image_loads, state_resources

    image = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:mock_gpu_agent:MockGpuAgent$docker:index/image:Image::agent"
    load = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$command:local:Command::tenant-a-agent-image-load"
    deployment = {"resources": [*NO_URN, {"urn": load, "type": "command:local:Command", "inputs": None},
                                {"urn": image, "type": "docker:index/image:Image", "inputs": {"imageName": "a:1"}}]}
    assert state_resources(deployment) == [(load, "command:local:Command", {}),
                                           (image, "docker:index/image:Image", {"imageName": "a:1"})]
    assert built_images(deployment) == {image: "a:1"}
    assert image_loads(deployment) == {"tenant-a-agent-image-load": load}


def test_hosts_off_reads_past_state_entries_without_a_urn(tmp_path: Path) -> None:
    join = ("urn:pulumi:gpu::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:host_worker:HostWorker$"
            "command:remote:Command::tenant-b-gpu-l4-01-join")
    export = {"version": 3, "deployment": {"resources": [
        *NO_URN, {"urn": join, "type": "command:remote:Command", "inputs": {"delete": "kubeadm reset -f"}}]}}
    result, _ = HostCase().deployed({"mode": "real"}, [], export).run(
        tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml", "--hosts-off", "gpu-l4-01")
    assert (result.returncode, result.stdout) == (0, f"{join}\n")


def test_a_pending_operation_the_state_says_little_about_is_named_with_what_is_known(tmp_path: Path) -> None:
    """A cut-off create of a container or Helm release whose name the state does not hold: the fix says where to
    find it instead of a command with an empty name; an operation without a URN or type reads `?`."""
    export = {"version": 3, "deployment": {"pending_operations": [
        {"resource": {}},
        {"type": "creating", "resource": {"urn": "urn:pulumi:dev::gpu-tenancy::docker:index/container:Container::w",
                                          "type": "docker:index/container:Container", "inputs": {}}},
        {"type": "creating", "resource": {"urn": "urn:pulumi:dev::gpu-tenancy::kubernetes:helm.sh/v3:Release::r",
                                          "type": "kubernetes:helm.sh/v3:Release", "inputs": {"name": "kamaji"}}},
    ]}}
    found = [p for p in problems(lab_case(export=export).run(tmp_path, "--stack", "dev")[0]) if p.startswith("stack")]
    refresh = "Fix: `pulumi refresh --stack dev --clear-pending-creates --yes`, then "
    assert found == [
        f"stack dev: an interrupted `up` left ? (?) ?. {refresh}`make up STACK=dev` (if it finds what the cut-off "
        "create made in the way, remove that and run it again)",
        f"stack dev: an interrupted `up` left w (docker:index/container:Container) creating. {refresh}remove the "
        "container it left (`docker ps -a` names it; `docker rm -f` it), then `make up STACK=dev`",
        f"stack dev: an interrupted `up` left r (kubernetes:helm.sh/v3:Release) creating. {refresh}delete the release "
        "record the cut-off install left in the cluster it went to (`kubectl get secrets -A -l owner=helm,"
        "status=pending-install` lists it), then `make up STACK=dev`",
    ]


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


def test_a_deployed_real_stack_has_no_kind_cluster_to_lose_and_its_clusters_are_read(tmp_path: Path) -> None:
    outputs = {key: value for key, value in OUTPUTS.items() if key != "kindClusterName"} | {"mode": "real"}
    case = lab_case(clusters=())
    case.deployed(outputs, [])
    case.env = {"PULUMI_CONFIG_PASSPHRASE": "mine"}
    result, calls = case.run(tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml")
    assert problems(result) == [], result.stdout
    assert sorted(Path(c[2]).name for c in calls if c[0] == "kubectl" and "nodes" in c) == [
        "management.kubeconfig", "tenant-a.kubeconfig", "tenant-b.kubeconfig"]
    assert not [c for c in calls if c[0] in ("docker", "kind")]


@pytest.mark.parametrize("unasked", ["engine-down", "no-kind", "kind-fails"])
def test_a_kind_cluster_is_never_called_gone_when_kind_could_not_be_asked(tmp_path: Path, unasked: str) -> None:
    """Only a cluster seen missing from `kind get clusters` is gone (its fix is `make destroy`): a host where Docker
    or kind does not answer says that, and nothing about the cluster."""
    case = lab_case()
    if unasked == "engine-down":
        case.answer("docker", ["info"], "", ENGINE_DOWN + "\n", 1)
    elif unasked == "no-kind":
        case.without("kind")
    else:
        case.answer("kind", ["get", "clusters"], "", "ERROR: failed to list clusters\n", 1)
    for args in (("--stack", "dev"), ("--stack", "dev", "--before-up")):
        found = problems(case.run(tmp_path / str(len(args)), *args)[0])
        assert not [line for line in found if line.startswith("kind cluster:")], found
