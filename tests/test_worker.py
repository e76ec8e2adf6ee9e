"""The kind worker: its join/leave scripts run against fake docker/kubectl, kind's host flags, and its wiring."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import (
    docker_info,
    gpu_config,
    record_mocks,
    record_stack,
    registered_gpus,
    unwrap,
    wrapped_monitor,
)
from policy_support import Recorded, record_engine_view, shared_recording, tenant_api_servers
from pulumi.runtime import rpc
from replacement_model import replacements

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.bootstrap_token import join_token
from gpu_tenancy.builders.worker import kind_node, kubeadm_join, worker_join
from tests.worker_fakes import FakeHost

KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: tenant-admin-secret}}]\n"
TEMPLATE = worker_join.join_configuration_template(
    "10.0.0.5:6443", "sha256:abc", "lab-tenant-a-worker", kube_objects.gpu_node_labels("tenant-a")
)
JOIN_ENV = {"GPU_TENANCY_JOIN_CONFIGURATION": TEMPLATE}


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def join(host: FakeHost) -> subprocess.CompletedProcess[str]:
    return host.run(worker_join.join_script("tenant-a"), KUBECONFIG, JOIN_ENV)


def leave(host: FakeHost) -> subprocess.CompletedProcess[str]:
    return host.run(worker_join.leave_script(), KUBECONFIG)


def assert_no_secret_on_a_command_line(host: FakeHost, *secrets: str) -> None:
    for argv in host.calls():
        for secret in secrets:
            assert secret not in " ".join(argv), argv


# --------------------------------------------------------------------------- shellcheck


@pytest.mark.parametrize(
    "script",
    [
        worker_join.join_script("tenant-a"),
        worker_join.leave_script(),
        worker_join.reset_script(),
        join_token.mint_script("tenant-a"),
        join_token.revoke_script(),
        join_token.keep_script(),
    ],
)
def test_scripts_pass_shellcheck(tmp_path: Path, script: str) -> None:
    path = tmp_path / "script.sh"
    path.write_text(script)
    result = subprocess.run(
        [str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "shellcheck"), "-s", "sh", str(path)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout


# --------------------------------------------------------------------------- join


def test_join_mints_an_expiring_token_joins_and_leaves_nothing_behind(host: FakeHost) -> None:
    result = join(host)
    assert result.returncode == 0, result.stderr
    (config,) = host.joins()
    parsed = yaml.safe_load(config)
    token = parsed["discovery"]["bootstrapToken"]["token"]
    token_id, token_secret = token.split(".")
    assert len(token_id) == 6 and len(token_secret) == 16 and token.replace(".", "").isalnum()
    assert parsed["nodeRegistration"]["name"] == "lab-tenant-a-worker"
    assert parsed == yaml.safe_load(TEMPLATE.replace(worker_join.TOKEN_PLACEHOLDER, token))
    # The token Secret existed for the join (kubectl create) and is gone afterwards.
    create = next(c for c in host.calls() if c[:1] == ["kubectl"] and "create" in c)
    assert "-f" in create and "-" in create
    assert host.objects("secrets") == {}
    assert any(c[-3:] == ["secret", f"bootstrap-token-{token_id}", "--ignore-not-found"] for c in host.calls())
    # Neither the join file nor the private kubeconfig copy stays anywhere.
    assert not host.file(worker_join.JOIN_FILE).exists()
    for kubeconfig, mode in host.kubeconfigs():
        assert kubeconfig == KUBECONFIG and mode == "0o600"
    assert_no_secret_on_a_command_line(host, token_secret, "tenant-admin-secret")
    assert host.objects("nodes") == {"lab-tenant-a-worker": {}}


def test_token_secret_is_a_kubeadm_bootstrap_token_that_expires(host: FakeHost) -> None:
    # Keep the Secret: a kubectl that refuses to delete Secrets (the trap tolerates it) leaves it for inspection.
    (host.bin / "kubectl").write_text(
        (host.bin / "kubectl").read_text().replace('if words[:1] == ["delete"]', 'if words[:2] == ["delete", "node"]')
    )
    now = datetime.datetime.now(datetime.UTC)
    assert join(host).returncode == 0
    ((name, secret),) = host.objects("secrets").items()
    data = secret["stringData"]
    assert name == f"bootstrap-token-{data['token-id']}" and secret["metadata"]["namespace"] == "kube-system"
    assert secret["type"] == "bootstrap.kubernetes.io/token"
    assert data["usage-bootstrap-authentication"] == data["usage-bootstrap-signing"] == "true"
    assert data["auth-extra-groups"] == "system:bootstrappers:kubeadm:default-node-token"
    assert data["description"] == "gpu-tenancy: joins one worker, deleted after the join"
    assert secret["metadata"]["labels"] == kube_objects.labels("tenant-a", "worker")
    expiration = datetime.datetime.strptime(data["expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    ttl = (expiration - now).total_seconds()
    # A join token lives 15 minutes (a join takes seconds; kubeadm's own default of 24 h is far too long).
    assert 900 - 60 <= ttl <= 900 + 60
    (config,) = host.joins()
    assert yaml.safe_load(config)["discovery"]["bootstrapToken"]["token"] == f"{data['token-id']}.{data['token-secret']}"


def test_every_join_attempt_gets_its_own_token(host: FakeHost) -> None:
    host.behave(join="tls-bootstrap-timeout")
    assert join(host).returncode != 0
    host.behave()
    assert join(host).returncode == 0
    first, second = (yaml.safe_load(c)["discovery"]["bootstrapToken"]["token"] for c in host.joins())
    assert first != second


def test_the_token_is_retried_while_the_tenant_still_refuses_its_admin(host: FakeHost) -> None:
    host.behave(forbidden_creates=3)
    result = join(host)
    assert result.returncode == 0, result.stderr
    assert len(host.joins()) == 1
    assert [c for c in host.calls() if c[0] == "sleep"]


def test_a_tenant_that_never_grants_the_token_fails_the_join_loudly(host: FakeHost) -> None:
    host.behave(forbidden_creates=1000)
    result = join(host)
    assert result.returncode == 1
    assert "could not create the bootstrap token in the tenant" in result.stderr and "Forbidden" in result.stderr
    assert host.joins() == []


def test_the_join_leaves_the_hosts_swap_alone(host: FakeHost) -> None:
    # /proc/swaps in a privileged node container is the host's: swapoff -a would turn the host's swap off.
    assert "swapoff" not in worker_join.join_script("tenant-a")


def test_a_joined_node_is_left_as_it_is(host: FakeHost) -> None:
    assert join(host).returncode == 0
    assert join(host).returncode == 0
    assert len(host.joins()) == 1 and host.resets() == 0
    assert not any(c[:1] == ["kubectl"] and "create" in c for c in host.calls()[-5:])


@pytest.mark.parametrize("failure", ["node-exists", "kubelet-unhealthy", "tls-bootstrap-timeout"])
def test_a_half_joined_node_is_reset_before_joining_again(host: FakeHost, failure: str) -> None:
    host.behave(join=failure)
    failed = join(host)
    assert failed.returncode != 0
    # What kubeadm's kubelet-start leaves behind on each failure: the CA only (it removes
    # bootstrap-kubelet.conf on every return), which its next preflight refuses to overwrite.
    assert host.file("/etc/kubernetes/pki/ca.crt").exists()
    assert not host.file("/etc/kubernetes/bootstrap-kubelet.conf").exists()
    assert not host.file(worker_join.KUBELET_CONF).exists()
    host.behave()
    retried = join(host)
    assert retried.returncode == 0, retried.stderr
    assert host.resets() == 1
    assert host.file(worker_join.KUBELET_CONF).exists()


def test_a_failed_join_removes_the_join_file_and_its_token(host: FakeHost) -> None:
    host.behave(join="tls-bootstrap-timeout")
    result = join(host)
    assert result.returncode == 1
    assert not host.file(worker_join.JOIN_FILE).exists()
    assert host.objects("secrets") == {}


def test_containerd_that_never_comes_up_fails_the_join_loudly(host: FakeHost) -> None:
    host.behave(containerd_after_polls=10_000)
    result = join(host)
    assert result.returncode != 0
    assert f"containerd in lab-tenant-a-worker is not active after {worker_join.CONTAINERD_WAIT_SECONDS}s" in (
        result.stderr
    )
    assert host.joins() == [] and host.objects("secrets") == {}


def test_containerd_that_comes_up_late_is_waited_for(host: FakeHost) -> None:
    host.behave(containerd_after_polls=5)
    assert join(host).returncode == 0
    assert [c for c in host.calls() if c[0] == "sleep"] == [["sleep", "1"]] * 5


def test_a_template_without_the_placeholder_is_refused(host: FakeHost) -> None:
    result = host.run(worker_join.join_script("tenant-a"), KUBECONFIG, {"GPU_TENANCY_JOIN_CONFIGURATION": "x: 1"})
    assert result.returncode == 1 and "no token placeholder" in result.stderr
    assert host.joins() == []


def test_join_configuration_template_holds_no_token() -> None:
    parsed = yaml.safe_load(worker_join.join_configuration_template(
        "10.0.0.5:6443", "sha256:abc", "lab-tenant-a-worker", kube_objects.gpu_node_labels("tenant-a")
    ))
    assert parsed["discovery"]["bootstrapToken"]["token"] == worker_join.TOKEN_PLACEHOLDER
    assert parsed["discovery"]["bootstrapToken"]["apiServerEndpoint"] == "10.0.0.5:6443"
    assert parsed["discovery"]["bootstrapToken"]["caCertHashes"] == ["sha256:abc"]
    assert parsed["nodeRegistration"]["name"] == "lab-tenant-a-worker"
    assert parsed["nodeRegistration"]["ignorePreflightErrors"] == list(kubeadm_join.KIND_NODE_PREFLIGHT_IGNORES)


def test_a_template_where_the_placeholder_is_not_only_the_token_is_refused() -> None:
    """The join script puts the token where the placeholder is: a second one (here in the node name) would
    put the token there too."""
    with pytest.raises(ValueError, match=r"^the join configuration must hold the token placeholder exactly once$"):
        worker_join.join_configuration_template("10.0.0.5:6443", "sha256:abc", worker_join.TOKEN_PLACEHOLDER, {})


def test_a_token_description_with_a_single_quote_is_refused() -> None:
    """The token Secret's JSON is one single-quoted `printf` argument: a quote in it would end the argument
    and run the rest as shell words."""
    with pytest.raises(ValueError, match=r"^labels and description must not contain a single quote$"):
        join_token.mint("tenant-a", 60, "the host's token")


# --------------------------------------------------------------------------- leave


def test_leave_removes_the_node_from_its_tenant(host: FakeHost) -> None:
    assert join(host).returncode == 0
    result = leave(host)
    assert result.returncode == 0, result.stderr
    assert host.objects("nodes") == {}
    assert host.file(".kubelet-stopped").exists()
    assert_no_secret_on_a_command_line(host, "tenant-admin-secret")
    assert all(mode == "0o600" for _, mode in host.kubeconfigs())


def test_leave_without_its_worker_stops_before_touching_anything(host: FakeHost) -> None:
    """`set -eu`: an unset GPU_TENANCY_WORKER is an error, not `docker exec ""` and `kubectl delete node ""`."""
    environment = {"PATH": f"{host.bin}:{os.environ['PATH']}", "FAKE_STATE": str(host.state)}
    result = subprocess.run(["/bin/sh", "-c", worker_join.leave_script()], input=KUBECONFIG, env=environment,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "GPU_TENANCY_WORKER" in result.stderr
    assert host.calls() == []


def test_leave_tolerates_a_node_and_a_container_that_are_gone(host: FakeHost) -> None:
    import shutil

    shutil.rmtree(host.root)
    result = leave(host)
    assert result.returncode == 0, result.stderr


def test_the_joins_delete_resets_the_node_without_reaching_the_tenant(host: FakeHost) -> None:
    assert join(host).returncode == 0
    before = len(host.calls())
    result = host.run(worker_join.reset_script(), KUBECONFIG)
    assert result.returncode == 0, result.stderr
    assert host.resets() == 1 and not host.file(worker_join.KUBELET_CONF).exists()
    assert [c[0] for c in host.calls()[before:]] == ["docker"]


def test_the_joins_delete_says_when_it_could_not_reset(host: FakeHost) -> None:
    import shutil

    shutil.rmtree(host.root)
    result = host.run(worker_join.reset_script(), KUBECONFIG)
    assert result.returncode == 0
    assert "kubeadm reset in lab-tenant-a-worker failed (its next join resets it): Error response from daemon: No such" in (
        result.stderr)


def test_leave_fails_when_the_tenant_refuses(host: FakeHost) -> None:
    (host.bin / "kubectl").write_text("#!/bin/sh\necho 'Unable to connect to the server' >&2\nexit 1\n")
    assert leave(host).returncode == 1


# --------------------------------------------------------------------------- kind's host flags


SECCOMP = "name=seccomp,profile=builtin"


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (docker_info(["name=apparmor", SECCOMP, "name=cgroupns"]), kind_node.KindHostFlags()),
        (docker_info([SECCOMP, "name=userns"]), kind_node.KindHostFlags(userns_host=True)),
        (docker_info([SECCOMP], driver="btrfs"), kind_node.KindHostFlags(mount_dev_mapper=True)),
        (docker_info([SECCOMP], driver="zfs"), kind_node.KindHostFlags(mount_dev_mapper=True)),
        (docker_info([SECCOMP], driver="devicemapper"), kind_node.KindHostFlags(mount_dev_mapper=True)),
        (docker_info([SECCOMP], backing="xfs"), kind_node.KindHostFlags(mount_dev_mapper=True)),
        (docker_info([SECCOMP], backing="btrfs"), kind_node.KindHostFlags(mount_dev_mapper=True)),
        # Rootless: no /dev/mapper (it cannot create device nodes), /dev/fuse instead.
        (docker_info([SECCOMP, "name=rootless"], driver="btrfs"), kind_node.KindHostFlags(mount_fuse=True)),
        (docker_info(["name=seccomp,profile=default,name=rootless"]), kind_node.KindHostFlags(mount_fuse=True)),
        # kind answers false whenever docker info fails or is not what it expects.
        ("", kind_node.KindHostFlags()),
        ("apiVersion: v1\nkind: Config\n", kind_node.KindHostFlags()),
        ('{"SecurityOptions":null,"Driver":"overlay2","DriverStatus":null}', kind_node.KindHostFlags()),
    ],
)
def test_host_flags_follow_kind(info: str, expected: kind_node.KindHostFlags) -> None:
    assert kind_node.host_flags(info) == expected


# --------------------------------------------------------------------------- wiring under mocks


def _closure(recorded: list[Recorded], urn: str) -> set[str]:
    """Everything `urn` depends on, transitively: what the engine deletes only after it."""
    edges = {
        r.urn: {*r.dependencies, *(d for deps in r.property_dependencies.values() for d in deps)} for r in recorded
    }
    seen: set[str] = set()
    todo = [urn]
    while todo:
        for dep in edges.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


@pytest.fixture
@shared_recording
def engine_view() -> list[Recorded]:
    return record_engine_view()


def _join_of(recorded: list[Recorded], tenant: str) -> Recorded:
    (join,) = [r for r in recorded if r.type == "command:local:Command" and r.name == f"{tenant}-worker-join"]
    return join


@pytest.mark.parametrize("tenant", ["tenant-a", "tenant-b"])
def test_everything_running_on_the_worker_is_deleted_before_it(engine_view: list[Recorded], tenant: str) -> None:
    """Destroy deletes a resource only after everything that depends on it (pulumi/pulumi
    pkg/resource/deploy: deletes run in reverse dependency order): every workload with pods on the
    worker - kindnet, kube-proxy, HAMi, the mock-GPU agent, the tenant's Deployments - must depend on the
    worker's join, so it is gone while the kubelet still runs, and the join (Node removal) before the container."""
    join = _join_of(engine_view, tenant)
    provider = f"{tenant}-kubernetes"
    on_node = [
        r for r in engine_view
        if r.type in ("kubernetes:apps/v1:DaemonSet", "kubernetes:apps/v1:Deployment", "kubernetes:helm.sh/v3:Release")
        and f"::{provider}::" in r.provider
    ]
    names = {r.name for r in on_node}
    assert {f"{tenant}-network-kindnet", f"{tenant}-network-kube-proxy", f"{tenant}-mock-gpu-agent-daemonset"} <= names
    assert any(r.type == "kubernetes:apps/v1:Deployment" for r in on_node)
    for resource in on_node:
        assert join.urn in _closure(engine_view, resource.urn), f"{resource.name} is not deleted before the worker"
    (container,) = [r for r in engine_view if r.type == "docker:index/container:Container" and r.name.startswith(tenant)]
    assert container.urn in _closure(engine_view, join.urn)


def test_node_daemonsets_are_deleted_in_the_background(engine_view: list[Recorded]) -> None:
    """pulumi-kubernetes await.go Deletion: foreground (the default) waits for pods a dead kubelet never
    finalises; `pulumi.com/deletionPropagationPolicy: background` returns once the DaemonSet is gone."""
    # Every DaemonSet the program puts on a worker: kindnet, kube-proxy and the mock-GPU agent.
    daemon_sets = [r for r in engine_view if r.type == "kubernetes:apps/v1:DaemonSet"]
    assert len(daemon_sets) == 6
    for daemon_set in daemon_sets:
        annotations = daemon_set.inputs["metadata"]["annotations"]
        assert annotations["pulumi.com/deletionPropagationPolicy"] == "background", daemon_set.name


def test_real_hosts_come_before_the_tenant_network() -> None:
    recorded = record_engine_view(gpu_config(), stack="gpu", node_register=registered_gpus(gpu_config()))
    joins = [r for r in recorded if r.type == "command:remote:Command" and r.name.endswith("-join")]
    assert joins
    for daemon_set in [r for r in recorded if r.type == "kubernetes:apps/v1:DaemonSet"]:
        tenant = daemon_set.inputs["metadata"]["labels"][kube_objects.TENANT_LABEL]
        own = [j for j in joins if j.name.startswith(f"{tenant}-")]
        assert own and all(j.urn in _closure(recorded, daemon_set.urn) for j in own), daemon_set.name


def _registrations(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """name -> the RegisterResource request of a program run (record_mocks' arguments), for the options
    (deleteBeforeReplace, additionalSecretOutputs, importId) the mocks' new_resource does not see."""
    seen: dict[str, Any] = {}

    def register(original: Any, monitor: Any, request: Any) -> Any:
        seen[request.name] = request
        return original(monitor, request)

    with wrapped_monitor(RegisterResource=register):
        record_mocks(*args, **kwargs)
    return seen


@pytest.fixture
@shared_recording
def registrations() -> dict[str, Any]:
    return _registrations()


@pytest.mark.parametrize("tenant", ["tenant-a", "tenant-b"])
def test_join_removes_its_node_first_when_replaced(registrations: dict[str, Any], tenant: str) -> None:
    join = registrations[f"{tenant}-worker-join"]
    container = registrations[f"{tenant}-worker-container"]
    # A replaced container takes the same name, its new join the same node name: old ones go first.
    assert join.deleteBeforeReplace and container.deleteBeforeReplace
    inputs = unwrap(rpc.deserialize_properties(join.object))
    assert inputs["delete"] == worker_join.reset_script()
    assert inputs["create"] == worker_join.join_script(tenant)
    env = inputs["environment"]
    template = yaml.safe_load(env["GPU_TENANCY_JOIN_CONFIGURATION"])
    assert template["discovery"]["bootstrapToken"]["token"] == worker_join.TOKEN_PLACEHOLDER
    assert template["nodeRegistration"]["name"] == env["GPU_TENANCY_WORKER"]
    assert yaml.safe_load(inputs["stdin"])["users"][0]["user"]["token"] == f"secret-token-{tenant}"
    # A new container or a replaced control plane replaces the join; a moved API endpoint (MetalLB gave the
    # control plane another address) or a new CA is an update, which runs `create` with the new kubeconfig and
    # rejoins (tests/test_day_after.py): as a trigger, the delete would run with the stored, dead kubeconfig.
    assert inputs["triggers"] == [f"{tenant}-worker-container-id", f"{tenant}-control-plane-tcp-id"]
    assert env["CONTROL_PLANE_ENDPOINT"] not in inputs["triggers"]
    # The Node goes with the node command (destroy, a replaced control plane), through the kubeconfig it keeps
    # up to date (an update runs nothing: no create); the join's own delete needs no kubeconfig.
    node = registrations[f"{tenant}-worker-node"]
    assert node.deleteBeforeReplace
    node_inputs = unwrap(rpc.deserialize_properties(node.object))
    assert node_inputs["delete"] == worker_join.leave_script() and "create" not in node_inputs
    assert node_inputs["triggers"] == [f"{tenant}-control-plane-tcp-id"]
    assert node_inputs["stdin"] == inputs["stdin"] and node_inputs["environment"]["GPU_TENANCY_WORKER"] == (
        env["GPU_TENANCY_WORKER"])


@pytest.mark.parametrize("tenant", ["tenant-a", "tenant-b"])
def test_a_kind_node_joins_its_own_tenants_api_server(engine_view: list[Recorded], tenant: str) -> None:
    """The join configuration names the API endpoint and CA hash of the tenant's own control plane, read from
    the kubeconfig its Kubernetes provider was given."""
    endpoint, ca_hash = tenant_api_servers(engine_view)[tenant]
    environment = _join_of(engine_view, tenant).inputs["environment"]
    discovery = yaml.safe_load(environment["GPU_TENANCY_JOIN_CONFIGURATION"])["discovery"]["bootstrapToken"]
    assert (discovery["apiServerEndpoint"], discovery["caCertHashes"]) == (endpoint, [ca_hash])
    assert environment["CONTROL_PLANE_ENDPOINT"] == endpoint


def test_a_real_hosts_join_follows_its_endpoint(gpu_registrations: dict[str, Any]) -> None:
    for name, request in gpu_registrations.items():
        if request.type == "command:local:Command" and name.endswith("-node"):
            inputs = unwrap(rpc.deserialize_properties(request.object))
            assert any(str(t).endswith(":6443") for t in inputs["triggers"]), name


WORKER = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:worker:Worker"
CONTROL_PLANE = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$gpu-tenancy:tenant_control_plane:TenantControlPlane"


def test_the_worker_registers_a_kind_node_and_its_join(engine_view: list[Recorded]) -> None:
    """What the Worker component sends for tenant-a on a host where `docker info` shows no userns, no btrfs: the
    node container as kind runs one (kind pkg/cluster/internal/providers/docker/provision.go runArgsForNode), the
    join after it, both replaced delete-first (the container name and the Node name are fixed)."""
    mine = {r.name: r for r in engine_view if r.parent == WORKER + "::tenant-a-worker"}
    assert sorted(mine) == [
        "tenant-a-worker-container", "tenant-a-worker-docker-info", "tenant-a-worker-image", "tenant-a-worker-join",
        "tenant-a-worker-node"]
    image, docker_info_command = mine["tenant-a-worker-image"], mine["tenant-a-worker-docker-info"]
    assert image.inputs == {
        "name": "kindest/node:v1.35.5@sha256:ce977ae6d65918d0b58a5f8b5e940429c2ce42fa3a5619ec2bbc60b949c0ac95",
        "keepLocally": True,
    }
    assert docker_info_command.inputs == {"create": kind_node.DOCKER_INFO_COMMAND}
    container = mine["tenant-a-worker-container"]
    assert container.inputs == {
        "name": "gpu-tenancy-dev-tenant-a-worker",
        "hostname": "gpu-tenancy-dev-tenant-a-worker",
        "image": image.state["imageId"],
        "privileged": True,
        "tty": True,
        "securityOpts": ["seccomp=unconfined", "apparmor=unconfined", "label=disable"],
        "tmpfs": {"/tmp": "", "/run": ""},
        "volumes": [
            {"containerPath": "/var"},
            {"hostPath": "/lib/modules", "containerPath": "/lib/modules", "readOnly": True},
        ],
        "networksAdvanced": [{"name": "kind"}],
        "restart": "on-failure",
        "maxRetryCount": 1,
        "init": False,
        "cgroupnsMode": "private",
        "labels": [
            {"label": "gpu-tenancy.io/tenant", "value": "tenant-a"},
            {"label": "gpu-tenancy.io/component", "value": "worker"},
        ],
    }
    assert container.delete_before_replace is True
    assert CONTROL_PLANE + "$kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane::tenant-a-control-plane-tcp" in (
        container.dependencies)
    join = mine["tenant-a-worker-join"]
    assert join.delete_before_replace is True
    assert WORKER + "$docker:index/container:Container::tenant-a-worker-container" in join.dependencies
    assert (join.inputs["create"], join.inputs["delete"]) == (worker_join.join_script("tenant-a"), worker_join.reset_script())
    assert WORKER + "$command:local:Command::tenant-a-worker-node" in join.dependencies
    assert join.inputs["interpreter"] == ["/bin/sh", "-c"]
    endpoint = join.inputs["environment"]["CONTROL_PLANE_ENDPOINT"]
    assert endpoint.endswith(":6443")
    assert {k: v for k, v in join.inputs["environment"].items() if k != "GPU_TENANCY_JOIN_CONFIGURATION"} == {
        "GPU_TENANCY_TENANT": "tenant-a",
        "GPU_TENANCY_WORKER": "gpu-tenancy-dev-tenant-a-worker",
        "CONTROL_PLANE_TENANT": "tenant-a",
        "CONTROL_PLANE_ENDPOINT": endpoint,
    }
    assert "name: gpu-tenancy-dev-tenant-a-worker" in join.inputs["environment"]["GPU_TENANCY_JOIN_CONFIGURATION"]
    assert join.inputs["triggers"] == ["tenant-a-worker-container-id", "tenant-a-control-plane-tcp-id"]
    worker = next(r for r in engine_view if r.urn == WORKER + "::tenant-a-worker")
    assert worker.registered_outputs == {
        "containerName": "gpu-tenancy-dev-tenant-a-worker", "nodeName": "gpu-tenancy-dev-tenant-a-worker"}


def test_worker_container_has_kinds_tty() -> None:
    (container, *_) = [r for r in record_stack() if r.typ == "docker:index/container:Container"]
    assert container.inputs["tty"] is True


# --------------------------------------------------------------------------- real hosts: a token per join


TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")


def test_mint_prints_a_day_long_token_and_revoke_deletes_it(host: FakeHost) -> None:
    now = datetime.datetime.now(datetime.UTC)
    minted = host.run(join_token.mint_script("tenant-a"), KUBECONFIG)
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    assert TOKEN.match(token), minted.stdout
    token_id, token_secret = token.split(".")
    ((name, secret),) = host.objects("secrets").items()
    data = secret["stringData"]
    assert name == f"bootstrap-token-{token_id}" and (data["token-id"], data["token-secret"]) == (token_id, token_secret)
    assert data["auth-extra-groups"] == join_token.AUTH_EXTRA_GROUPS and secret["type"] == "bootstrap.kubernetes.io/token"
    assert data["description"] == "gpu-tenancy: joins a GPU host of this tenant"
    assert secret["metadata"]["labels"] == {"gpu-tenancy.io/tenant": "tenant-a", "gpu-tenancy.io/component": "worker"}
    expiration = datetime.datetime.strptime(data["expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    assert abs((expiration - now).total_seconds() - 24 * 3600) < 60
    assert_no_secret_on_a_command_line(host, token_secret, "tenant-admin-secret")
    # pulumi-command hands the delete the create's stdout (without its trailing newline).
    revoked = host.run(join_token.revoke_script(), KUBECONFIG, {"PULUMI_COMMAND_STDOUT": token})
    assert revoked.returncode == 0, revoked.stderr
    assert host.objects("secrets") == {}
    assert_no_secret_on_a_command_line(host, token_secret, "tenant-admin-secret")
    assert host.run(join_token.revoke_script(), KUBECONFIG, {"PULUMI_COMMAND_STDOUT": token}).returncode == 0
    assert host.run(join_token.revoke_script(), KUBECONFIG).returncode == 0


def test_a_mint_whose_expiry_cannot_be_computed_creates_no_token(host: FakeHost) -> None:
    # A token Secret whose `expiration` is empty never expires (k8s.io/cluster-bootstrap secret/util.go
    # `GetExpiration`: no timestamp, not expired), so the script must stop rather than create it.
    date = host.bin / "date"
    date.write_text("#!/bin/sh\nexit 1\n")
    date.chmod(0o755)
    minted = host.run(join_token.mint_script("tenant-a"), KUBECONFIG)
    assert minted.returncode != 0 and minted.stdout == ""
    assert host.objects("secrets") == {}


def test_a_revoke_that_cannot_hold_the_kubeconfig_privately_stops_before_kubectl(host: FakeHost) -> None:
    # Without a private file kubectl would fall back to the user's default kubeconfig: another cluster.
    mktemp = host.bin / "mktemp"
    mktemp.write_text("#!/bin/sh\nexit 1\n")
    mktemp.chmod(0o755)
    revoked = host.run(join_token.revoke_script(), KUBECONFIG, {"PULUMI_COMMAND_STDOUT": "abcdef.0123456789abcdef"})
    assert revoked.returncode != 0
    assert not [call for call in host.calls() if call[0] == "kubectl"]


def test_an_update_keeps_the_minted_token_and_mints_none(host: FakeHost) -> None:
    token = host.run(join_token.mint_script("tenant-a"), KUBECONFIG).stdout.strip()
    kept = host.run(join_token.keep_script(), "rotated-kubeconfig", {"PULUMI_COMMAND_STDOUT": token})
    assert kept.returncode == 0 and kept.stdout.strip() == token
    assert len(host.objects("secrets")) == 1
    assert host.run(join_token.keep_script(), KUBECONFIG).returncode == 1


@pytest.fixture
@shared_recording
def gpu_registrations() -> dict[str, Any]:
    return _registrations(gpu_config(), stack="gpu", node_register=registered_gpus(gpu_config()))


@pytest.mark.parametrize(("tenant", "host_name"), [("tenant-a", "gpu-a100-01"), ("tenant-b", "gpu-l4-01")])
def test_each_real_host_joins_with_its_own_minted_token(
    gpu_registrations: dict[str, Any], tenant: str, host_name: str
) -> None:
    mint = gpu_registrations[f"{tenant}-{host_name}-bootstrap-token-mint"]
    inputs = unwrap(rpc.deserialize_properties(mint.object))
    assert inputs["create"] == join_token.mint_script(tenant) and inputs["delete"] == join_token.revoke_script()
    assert inputs["update"] == join_token.keep_script()
    assert inputs["logging"] == "stderr" and list(mint.additionalSecretOutputs) == ["stdout"]
    assert inputs["interpreter"] == ["/bin/sh", "-c"]  # the scripts are POSIX sh (`set -eu`, `$(( ))`)
    assert mint.deleteBeforeReplace
    # Under the host's tenant: the token component is the tenant's child, the mint the token's.
    token = gpu_registrations[f"{tenant}-{host_name}-bootstrap-token"]
    assert token.parent.endswith(f"gpu-tenancy:tenant:Tenant::{tenant}")
    assert mint.parent.endswith(f"bootstrap_token:BootstrapToken::{tenant}-{host_name}-bootstrap-token")
    assert yaml.safe_load(inputs["stdin"])["users"][0]["user"]["token"] == f"secret-token-{tenant}"
    join = gpu_registrations[f"{tenant}-{host_name}-join"]
    stdin_from = join.propertyDependencies["stdin"].urns
    assert any(urn.endswith(f"::{tenant}-{host_name}-bootstrap-token-mint") for urn in stdin_from)
    # No long-lived token anywhere in the program: no Secret objects, no random token parts.
    assert not [n for n, r in gpu_registrations.items() if r.type in (
        "kubernetes:core/v1:Secret", "random:index/randomString:RandomString") and not r.importId]


def test_a_replaced_real_host_join_gets_a_fresh_token() -> None:
    config = gpu_config()
    before = record_engine_view(config, stack="gpu", node_register=registered_gpus(config))
    config["versions"] = {**(config.get("versions") or {}), "kubernetes": "v1.35.6",
                          "workerImage": "kindest/node:v1.35.6@sha256:" + "1" * 64}
    after = record_engine_view(config, stack="gpu", node_register=registered_gpus(config))
    replaced = {r.name: r.delete_first for r in replacements(before, after).values()}
    joins = sorted(n for n in replaced if n.endswith("-join"))
    mints = sorted(n for n in replaced if n.endswith("-bootstrap-token-mint"))
    assert joins == ["tenant-a-gpu-a100-01-join", "tenant-b-gpu-l4-01-join"]
    assert mints == [j.removesuffix("-join") + "-bootstrap-token-mint" for j in joins]
    assert all(replaced[m] for m in mints), "the old token is revoked before the new one is minted"


def _containers_on(info: str) -> list[dict[str, Any]]:
    """The worker containers registered when `docker info` (the docker-info command's stdout) says `info`."""
    containers = [r.inputs for r in record_mocks(docker_info=info).resources if r.typ == "docker:index/container:Container"]
    assert len(containers) == 2
    return containers


def test_worker_container_gets_kinds_host_dependent_flags() -> None:
    for inputs in _containers_on(docker_info([SECCOMP, "name=userns"], driver="btrfs")):
        assert inputs["usernsMode"] == "host"
        assert {"hostPath": "/dev/mapper", "containerPath": "/dev/mapper"} in inputs["volumes"]
        assert "devices" not in inputs
    for inputs in _containers_on(docker_info([SECCOMP, "name=rootless"])):
        assert inputs["devices"] == [{"hostPath": "/dev/fuse"}]
        assert "usernsMode" not in inputs and all(v.get("hostPath") != "/dev/mapper" for v in inputs["volumes"])
    for inputs in _containers_on(docker_info([SECCOMP])):
        assert "usernsMode" not in inputs and "devices" not in inputs
        assert inputs["volumes"] == [
            {"containerPath": "/var"},
            {"hostPath": "/lib/modules", "containerPath": "/lib/modules", "readOnly": True},
        ]


def test_proxy_env_follows_kind() -> None:
    # kind common/proxy.go getProxyEnvs + docker/provision.go getProxyEnv.
    env = kind_node.proxy_env(
        {"https_proxy": "http://proxy:3128", "NO_PROXY": "corp.example"},
        "10.96.0.0/16", "10.244.0.0/16", ["172.18.0.0/16", "fc00:f853:ccd:e793::/64"], ["lab-worker"],
    )
    expected_no_proxy = (
        "172.18.0.0/16,fc00:f853:ccd:e793::/64,corp.example,10.96.0.0/16,10.244.0.0/16,lab-worker,"
        ".svc,.svc.cluster,.svc.cluster.local"
    )
    assert env == {
        "HTTPS_PROXY": "http://proxy:3128", "https_proxy": "http://proxy:3128",
        "NO_PROXY": expected_no_proxy, "no_proxy": expected_no_proxy,
    }
    assert kind_node.proxy_env({"PATH": "/bin"}, "a", "b", ["c"], ["d"]) == {}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({"HTTP_PROXY": "http://u:p@proxy:3128"}, True), ({"https_proxy": "user@proxy:3128"}, True),
     ({"HTTP_PROXY": "http://proxy:3128"}, False), ({"NO_PROXY": "a@b"}, False), ({}, False)],
)
def test_which_proxy_urls_carry_credentials(environ: dict[str, str], expected: bool) -> None:
    assert kind_node.proxy_has_credentials(environ) is expected
