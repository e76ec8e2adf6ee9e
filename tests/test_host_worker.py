"""A real GPU host's Node removal (gpu_tenancy/builders/host_worker/hostprep.py `remove_node_script`), run as pulumi-command runs
it, against tests/worker_fakes.py's `kubectl`, and its place in the HostWorker's delete order."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from harness import gpu_config, is_secret, registered_gpus
from policy_support import gpu_stack, record_engine_view, tenant_api_servers
from worker_fakes import FakeHost

from gpu_tenancy.builders.host_worker import hostprep

KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: tenant-secret}}]\n"


def _seed_node(host: FakeHost, name: str) -> None:
    folder = host.state / "api" / "nodes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"kind": "Node", "metadata": {"name": name}}))


def test_the_node_leaves_the_tenant(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    _seed_node(host, "gpu-a100-01")
    _seed_node(host, "gpu-l4-01")
    done = host.run(hostprep.remove_node_script(), KUBECONFIG, {"GPU_TENANCY_NODE": "gpu-a100-01"})
    assert done.returncode == 0, done.stderr
    assert set(host.objects("nodes")) == {"gpu-l4-01"}
    assert host.kubeconfigs() == [(KUBECONFIG, "0o600")]
    assert all("tenant-secret" not in " ".join(call) for call in host.calls())


def test_a_node_already_gone_is_fine(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    done = host.run(hostprep.remove_node_script(), KUBECONFIG, {"GPU_TENANCY_NODE": "gpu-a100-01"})
    assert done.returncode == 0, done.stderr


def test_the_program_wires_it_with_the_tenants_kubeconfig_as_a_secret_on_stdin() -> None:
    nodes = [r for r in gpu_stack() if r.type == "command:local:Command" and r.name.endswith("-node")]
    assert {r.inputs["environment"]["GPU_TENANCY_NODE"] for r in nodes} == {"gpu-a100-01", "gpu-l4-01"}
    for node in nodes:
        assert node.inputs["delete"] == hostprep.remove_node_script()
        assert is_secret(node.inputs["stdin"])
        assert "token: secret-token-" in node.inputs["stdin"]["value"]  # the tenant's admin kubeconfig


# Pulumi.gpu.yaml: (tenant, worker name, address, host key)
HOSTS = (
    ("tenant-a", "gpu-a100-01", "10.20.0.11",
     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAID5QdOD5FBDEgKabD2Xr9LIIHRak8R5aaiE17E2/41AA"),
    ("tenant-b", "gpu-l4-01", "10.20.0.12",
     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIImAiJ07k41NSloCF89Tr9UDm2QEHVtAR8LBvBcVh0GS"),
)


def test_the_policy_pack_sees_where_each_host_joins() -> None:
    """The HostWorker's inputs are what `worker-joins-own-tenant` reads: its tenant, its address, the node it
    becomes and the API server it joins (the tenant provider's server), under the tenant's component."""
    stack = gpu_stack()
    servers = tenant_api_servers(stack)
    hosts = {r.name: r for r in stack if r.type == "gpu-tenancy:host_worker:HostWorker"}
    assert set(hosts) == {"tenant-a-gpu-a100-01", "tenant-b-gpu-l4-01"}
    for tenant, node, address, _ in HOSTS:
        host = hosts[f"{tenant}-{node}"]
        expected = {"tenant": tenant, "address": address, "nodeName": node, "controlPlaneEndpoint": servers[tenant][0]}
        assert host.inputs == expected and host.registered_outputs == expected
        assert host.parent == f"urn:pulumi:gpu::gpu-tenancy::gpu-tenancy:tenant:Tenant::{tenant}"


def test_prepare_and_join_reach_the_declared_host_with_its_pinned_key() -> None:
    """Each host's SSH connection, secret as a whole (it holds the key): its address, port 22 and user from the
    stack file, the host key pinned (pulumi-command otherwise accepts any), and pulumi-command's dial defaults."""
    commands = {r.name: r for r in gpu_stack() if r.type == "command:remote:Command"
                and r.name.endswith(("-prepare", "-join"))}
    assert set(commands) == {f"{tenant}-{node}-{step}" for tenant, node, _, _ in HOSTS for step in ("prepare", "join")}
    for tenant, node, address, host_key in HOSTS:
        for step in ("prepare", "join"):
            command = commands[f"{tenant}-{node}-{step}"]
            assert is_secret(command.inputs["connection"])
            assert command.inputs["connection"]["value"] == {
                "host": address, "port": 22, "user": "ubuntu", "hostKey": host_key,
                "privateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\ntest-ssh-key\n-----END OPENSSH PRIVATE KEY-----\n",
                "perDialTimeout": 15, "dialErrorLimit": 10,
            }, command.name


def test_what_re_prepares_and_re_joins_a_host() -> None:
    """prepare: a new address or Kubernetes version; the Node and the join: a re-prepared host, another control
    plane (its CA) or a moved API endpoint."""
    stack = gpu_stack()
    servers = tenant_api_servers(stack)
    by_name = {r.name: r for r in stack if r.type.startswith("command:")}
    for tenant, node, address, _ in HOSTS:
        prefix = f"{tenant}-{node}"
        endpoint, ca_hash = servers[tenant]
        assert by_name[f"{prefix}-prepare"].inputs["triggers"] == [address, "v1.35.5"]
        assert by_name[f"{prefix}-node"].inputs["triggers"] == [f"{prefix}-prepare-id", ca_hash, endpoint]
        # its create removes a stale Node with the current kubeconfig; an update only stores it (test_host_rejoin.py)
        assert by_name[f"{prefix}-node"].inputs["create"] == hostprep.remove_stale_node_script()
        assert by_name[f"{prefix}-node"].inputs["update"] == "true"
        assert by_name[f"{prefix}-join"].inputs["triggers"] == [f"{prefix}-node-id"]


def test_a_host_on_another_ssh_port_is_reached_there() -> None:
    config = gpu_config()
    config["tenants"][0]["workers"][0]["port"] = 2222
    stack = record_engine_view(config, stack="gpu", node_register=registered_gpus(config))
    ports = {r.name: r.inputs["connection"]["value"]["port"] for r in stack if r.type == "command:remote:Command"
             and r.name.endswith(("-prepare", "-join"))}
    assert ports == {"tenant-a-gpu-a100-01-prepare": 2222, "tenant-a-gpu-a100-01-join": 2222,
                     "tenant-b-gpu-l4-01-prepare": 22, "tenant-b-gpu-l4-01-join": 22}


def test_each_host_is_prepared_by_the_script_on_stdin_and_joins_its_own_tenant() -> None:
    """prepare runs the preparation script from stdin as root; the join's configuration (secret: it holds the
    token) names the tenant's API server and CA, the host's own name and labels, and ignores no preflight check
    (a real host passes them all, unlike a kind node)."""
    stack = gpu_stack()
    servers = tenant_api_servers(stack)
    by_name = {r.name: r for r in stack if r.type == "command:remote:Command"}
    for tenant, node, _, _ in HOSTS:
        assert by_name[f"{tenant}-{node}-prepare"].inputs["create"] == "sudo -n bash -s"
        stdin = by_name[f"{tenant}-{node}-join"].inputs["stdin"]
        assert is_secret(stdin)
        join = yaml.safe_load(stdin["value"])
        endpoint, ca_hash = servers[tenant]
        assert join["discovery"]["bootstrapToken"]["apiServerEndpoint"] == endpoint
        assert join["discovery"]["bootstrapToken"]["caCertHashes"] == [ca_hash]
        assert join["nodeRegistration"]["name"] == node
        assert join["nodeRegistration"]["ignorePreflightErrors"] == []
        # the token its mint Command printed (kubeadm's format)
        assert re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", join["discovery"]["bootstrapToken"]["token"])
        assert {"name": "node-labels", "value": f"gpu=on,gpu-tenancy.io/gpu-node=true,gpu-tenancy.io/tenant={tenant}"} \
            in join["nodeRegistration"]["kubeletExtraArgs"]
