"""The day after: what breaks a deployed lab without any change to the stack, and the one command (or none) that
recovers it. Each case is checked against what the providers store and diff (tests/provider_state.py) on the
resources the program really registers (tests/policy_support.py), and against `make doctor`'s stubbed tools
(tests/doctor_stubs.py)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import harness
import pytest
import yaml
from doctor_stubs import HostCase
from harness import unwrap
from policy_support import Recorded, dev_stack, nvml_stack, record_engine_view, tenant_api_servers
from provider_state import COMMANDS, CONTAINER, IMAGE, changes_against_state, command_runs, provider_diff, stored_state
from replacement_model import replacements
from worker_fakes import FakeHost

NVML_BUILD = "gpu-tenancy:nvml_mock_image:NvmlMockImage$command:local:Command::"


def _export(resources: list[Recorded]) -> dict[str, Any]:
    """`pulumi stack export` of a deployed stack: each custom resource with its inputs and outputs."""
    return {"version": 3, "deployment": {"resources": [
        json.loads(json.dumps({"urn": r.urn, "type": r.type, "inputs": r.inputs, "outputs": r.state}, default=str))
        for r in resources if r.custom]}}


def _built(resources: list[Recorded]) -> dict[str, str]:
    """URN -> image of what the program builds locally, read from its own registrations."""
    images = {r.urn: str(r.inputs["imageName"]) for r in resources if r.type == IMAGE}
    images |= {r.urn: str(r.inputs["environment"]["IMAGE"]) for r in resources
               if r.type in COMMANDS and NVML_BUILD in r.urn}
    return images


@pytest.mark.parametrize("stack", [dev_stack, nvml_stack], ids=["sim", "sim-nvml"])
def test_after_an_image_prune_no_provider_rebuilds_what_the_stack_built(stack: Any) -> None:
    """pulumi-docker's Image diffs its stored checked inputs (unchanged by a prune) and a build command has no
    Read: the next `up` would change nothing, so the image stays gone until something loads it again."""
    resources = stack()
    built = [r for r in resources if r.urn in _built(resources)]
    assert built, "the stack builds an image"
    for resource in built:
        changes = provider_diff(resource, stored_state(resource), resource.inputs)
        assert (changes.replaces, changes.updates) == ([], []), resource.urn


@pytest.mark.parametrize("stack", [dev_stack, nvml_stack], ids=["sim", "sim-nvml"])
def test_make_up_replaces_exactly_the_built_images_docker_no_longer_has(tmp_path: Any, stack: Any) -> None:
    resources = stack()
    built = _built(resources)
    gone = sorted(built)[0]
    case = HostCase().deployed({"mode": "sim"}, ["gpu-tenancy-dev"], _export(resources))
    case.answer("docker", ["image", "inspect"], "sha256:0123\n")
    case.answer("docker", ["image", "inspect", built[gone]], "",
                f"Error response from daemon: No such image: {built[gone]}\n", 1)
    result, _ = case.run(tmp_path, "--stack", "dev", "--missing-images")
    assert result.returncode == 0, result.stderr
    # Every resource that built that image (each tenant's agent builds the same one), and nothing else.
    assert result.stdout.splitlines() == [f"--replace {u}" for u in sorted(built) if built[u] == built[gone]]
    assert f"image {built[gone]} is gone from Docker" in result.stderr


def test_with_docker_down_nothing_is_replaced(tmp_path: Any) -> None:
    case = HostCase().deployed({"mode": "sim"}, ["gpu-tenancy-dev"], _export(dev_stack()))
    case.answer("docker", ["image", "inspect"], "", "Cannot connect to the Docker daemon\n", 1)
    result, _ = case.run(tmp_path, "--stack", "dev", "--missing-images")
    assert result.returncode == 0 and result.stdout == ""


# --------------------------------------------------------------------------- a GPU host powered off


def _host_deletes(resources: list[Recorded], tenant: str, host: str) -> list[str]:
    """The program's remote commands for `host` that have a delete: pulumi-command v1.2.1 remote
    `Command.Delete` returns at once without one and connects to the host only to run one."""
    return sorted(r.urn for r in resources if r.type == "command:remote:Command" and r.inputs.get("delete")
                  and r.name.startswith(f"{tenant}-{host}-"))


def test_a_powered_off_host_blocks_only_its_reset(tmp_path: Any) -> None:
    from policy_support import gpu_stack

    from gpu_tenancy.contract.stack_file import load_stack_file

    resources = gpu_stack()
    config = load_stack_file("Pulumi.gpu.yaml")
    (tenant,) = [t for t in config.tenants if any(w.name == "gpu-l4-01" for w in t.workers)]
    expected = _host_deletes(resources, tenant.name, "gpu-l4-01")
    assert [urn.rsplit("::", 1)[-1] for urn in expected] == [f"{tenant.name}-gpu-l4-01-join"]
    case = HostCase().deployed({"mode": "real"}, [], _export(resources))
    result, _ = case.run(tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml", "--hosts-off", "gpu-l4-01")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected


def test_an_unknown_host_is_refused_in_one_line(tmp_path: Any) -> None:
    case = HostCase().deployed({"mode": "real"}, [], _export([]))
    result, _ = case.run(tmp_path, "--stack", "gpu", "--stack-file", "Pulumi.gpu.yaml", "--hosts-off", "gpu-l4-99")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == ("doctor: gpu-l4-99: no such worker in Pulumi.gpu.yaml (workers: gpu-a100-01, "
                                     "gpu-l4-01)")


# --------------------------------------------------------------------------- a proxy change on the host

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


def _recorded(monkeypatch: pytest.MonkeyPatch, proxy: str | None) -> list[Recorded]:
    """The dev stack as `pulumi up` registers it with `proxy` as the host's HTTP_PROXY (none: unset)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
    return record_engine_view()


@pytest.mark.parametrize(("before", "after"), [("http://proxy-a:3128", "http://proxy-b:3128"),
                                               (None, "http://proxy-b:3128"), ("http://proxy-a:3128", None)],
                         ids=["changed", "set", "unset"])
def test_a_proxy_change_replaces_no_worker_and_reaches_containerd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, before: str | None, after: str | None
) -> None:
    """terraform-provider-docker's `env` is ForceNew: as kind passes the proxy (`docker run -e`), a new proxy
    would replace every worker. The Docker provider sees no change here; pulumi-command updates, creates or
    deletes the proxy command, and what it runs leaves containerd in the node with the new proxy."""
    old, new = _recorded(monkeypatch, before), _recorded(monkeypatch, after)
    assert replacements(old, new) == {}
    assert [key for key in changes_against_state(old, new) if key.startswith(CONTAINER)] == []
    old_by_urn, new_by_urn = {r.urn: r for r in old}, {r.urn: r for r in new}
    proxies = sorted({r.urn for r in [*old, *new] if r.name.endswith("-worker-proxy")})
    assert len(proxies) == 2
    for urn in proxies:
        first, second = old_by_urn.get(urn), new_by_urn.get(urn)
        worker = (first or second).inputs["environment"]["GPU_TENANCY_WORKER"]  # type: ignore[union-attr]
        host = FakeHost(tmp_path / worker, worker).kind_entrypoint()
        if first is not None:
            (create,) = command_runs(None, first.inputs)
            assert host.run(create.script, create.stdin, create.environment).returncode == 0
        runs = command_runs(stored_state(first) if first else None, second.inputs if second else None)
        assert [run.step for run in runs] == (["update"] if first and second else ["create"] if second else ["delete"])
        for run in runs:
            result = host.run(run.script, run.stdin, run.environment)
            assert result.returncode == 0, result.stderr
        environment = host.containerd_environment()
        assert (environment.get("HTTP_PROXY"), environment.get("http_proxy", "")) == (after or "", after or "")
        assert host.root.is_dir(), "the container stays"


# --------------------------------------------------------------------------- a tenant's endpoint or CA changes

WORKER_JOIN = "tenant-a-worker-join"


def _tenant_a_moved(
    monkeypatch: pytest.MonkeyPatch, change: str | None, stack: str = "dev", versions: dict[str, str] | None = None
) -> list[Recorded]:
    """The dev (or dev-nvml) stack registered when Kamaji's admin kubeconfig for tenant-a names another address (its
    LoadBalancer IP moved) or another CA (Kamaji made a new one), as tests/harness.py's Kamaji writes it."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    original = harness.tenant_kubeconfig
    other_ca = base64.b64encode(harness._test_ca_pem()).decode()

    def kubeconfig(tenant: str) -> str:
        config = yaml.safe_load(original(tenant))
        cluster = config["clusters"][0]["cluster"]
        if tenant == "tenant-a" and change == "endpoint":
            cluster["server"] = "https://10.201.0.9:6443"
        if tenant == "tenant-a" and change == "ca":
            cluster["certificate-authority-data"] = other_ca
        return str(yaml.safe_dump(config))

    monkeypatch.setattr(harness, "tenant_kubeconfig", kubeconfig)
    config = harness.nvml_config() if stack == "dev-nvml" else harness.dev_config()
    config["versions"] = {**(config.get("versions") or {}), **(versions or {})}
    return record_engine_view(config, stack=stack)


def _api(kubeconfig: str) -> dict[str, str]:
    cluster = yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]
    return {"server": cluster["server"], "ca": cluster["certificate-authority-data"]}


@pytest.mark.parametrize("change", ["endpoint", "ca"])
def test_a_moved_endpoint_or_a_new_ca_rejoins_the_worker_in_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: str
) -> None:
    old, new = _tenant_a_moved(monkeypatch, None), _tenant_a_moved(monkeypatch, change)
    assert tenant_api_servers(old)["tenant-a"] != tenant_api_servers(new)["tenant-a"], "the change is real"
    (first,) = [r for r in old if r.name == WORKER_JOIN]
    (second,) = [r for r in new if r.name == WORKER_JOIN]
    changes = changes_against_state(old, new)
    assert [key for key in changes if key.startswith(CONTAINER)] == []
    join = changes[f"command:local:Command {WORKER_JOIN}"]
    assert join.replaces == [] and {"stdin", "environment"} <= set(join.updates)
    assert not [r.name for r in replacements(old, new).values() if r.name.startswith("tenant-a-worker")]

    old_kubeconfig, environment = unwrap(first.inputs["stdin"]), first.inputs["environment"]
    worker = environment["GPU_TENANCY_WORKER"]
    host = FakeHost(tmp_path / "node", worker)
    host.behave(api=_api(old_kubeconfig))
    joined = host.run(first.inputs["create"], old_kubeconfig, environment)
    assert joined.returncode == 0, joined.stderr
    # The tenant's API server now answers only at its new address, with its new CA; its datastore keeps the Node.
    host.behave(api=_api(unwrap(second.inputs["stdin"])))
    (update,) = command_runs(stored_state(first), second.inputs)
    assert update.step == "update"
    result = host.run(update.script, update.stdin, update.environment)
    assert result.returncode == 0, result.stderr
    assert host.resets() == 1 and len(host.joins()) == 2
    discovery = yaml.safe_load(host.joins()[-1])["discovery"]["bootstrapToken"]
    endpoint, ca_hash = tenant_api_servers(new)["tenant-a"]
    assert (discovery["apiServerEndpoint"], discovery["caCertHashes"]) == (endpoint, [ca_hash])
    assert set(host.objects("nodes")) == {worker}
    # A later `up` with the same inputs runs nothing; one that runs the script again (a rotated admin
    # credential) leaves the node as it is.
    assert command_runs(stored_state(second), second.inputs) == []
    assert host.run(update.script, update.stdin, update.environment).returncode == 0
    assert len(host.joins()) == 2
    _destroy_removes_the_node(old, new, host)


def test_a_rejoin_that_fails_is_run_again_by_the_next_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """kubeadm times out in the rejoin: the update fails, the state keeps the old inputs, and the next `up` runs
    the same update, which finds the node half-joined, resets it and joins."""
    old, new = _tenant_a_moved(monkeypatch, None), _tenant_a_moved(monkeypatch, "endpoint")
    (first,) = [r for r in old if r.name == WORKER_JOIN]
    (second,) = [r for r in new if r.name == WORKER_JOIN]
    host = FakeHost(tmp_path, first.inputs["environment"]["GPU_TENANCY_WORKER"])
    host.behave(api=_api(unwrap(first.inputs["stdin"])))
    assert host.run(first.inputs["create"], unwrap(first.inputs["stdin"]), first.inputs["environment"]).returncode == 0
    for attempt, failure in enumerate(["tls-bootstrap-timeout", None]):
        host.behave(api=_api(unwrap(second.inputs["stdin"])), **({"join": failure} if failure else {}))
        (update,) = command_runs(stored_state(first), second.inputs)  # the state is still the old one
        result = host.run(update.script, update.stdin, update.environment)
        assert (result.returncode == 0) is (attempt == 1), result.stderr
    assert host.resets() == 2 and len(host.joins()) == 3
    assert set(host.objects("nodes")) == {first.inputs["environment"]["GPU_TENANCY_WORKER"]}


WORKER_NODE = "tenant-a-worker-node"


def _destroy_removes_the_node(old: list[Recorded], new: list[Recorded], host: FakeHost) -> None:
    """The node command is updated (nothing runs, the state keeps the new kubeconfig), so a destroy removes the
    Node through the API server that answers now."""
    (node_before,) = [r for r in old if r.name == WORKER_NODE]
    (node_after,) = [r for r in new if r.name == WORKER_NODE]
    changes = changes_against_state(old, new)[f"command:local:Command {WORKER_NODE}"]
    assert (changes.replaces, changes.updates) == ([], ["stdin"])
    assert command_runs(stored_state(node_before), node_after.inputs) == []
    (destroy,) = command_runs(stored_state(node_after), None)
    left = host.run(destroy.script, destroy.stdin, destroy.environment)
    assert left.returncode == 0, left.stderr
    assert host.objects("nodes") == {}


def test_a_worker_replaced_in_the_up_that_follows_a_move_joins_its_tenant_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The tenant's address moved (MetalLB gave its control plane another one) and the same `up` brings a new
    worker image: the container and its join are replaced, and the old join's delete runs with the kubeconfig
    stored before the move. It needs none, so the replacement goes through; the new join removes the old Node
    with the current kubeconfig before it joins under the same name."""
    old = _tenant_a_moved(monkeypatch, None)
    new = _tenant_a_moved(monkeypatch, "endpoint", versions={
        "kubernetes": "v1.35.6", "workerImage": "kindest/node:v1.35.6@sha256:" + "1" * 64})
    replaced = {r.name: r.delete_first for r in replacements(old, new).values() if r.name.startswith("tenant-a-worker")}
    assert replaced == {"tenant-a-worker-image": False, "tenant-a-worker-container": True, "tenant-a-worker-join": True}
    (first,) = [r for r in old if r.name == WORKER_JOIN]
    (second,) = [r for r in new if r.name == WORKER_JOIN]
    worker = first.inputs["environment"]["GPU_TENANCY_WORKER"]
    host = FakeHost(tmp_path / "node", worker)
    host.behave(api=_api(unwrap(first.inputs["stdin"])))
    assert host.run(first.inputs["create"], unwrap(first.inputs["stdin"]), first.inputs["environment"]).returncode == 0
    host.behave(api=_api(unwrap(second.inputs["stdin"])))
    delete, create = command_runs(stored_state(first), second.inputs, replaced=True)
    assert (delete.step, delete.stdin) == ("delete", unwrap(first.inputs["stdin"]))  # the stored, dead kubeconfig
    left = host.run(delete.script, delete.stdin, delete.environment)
    assert left.returncode == 0, left.stderr
    shutil.rmtree(host.root)  # the old container goes, the new one (same name) comes up fresh
    (host.root / "etc" / "kubernetes").mkdir(parents=True)
    joined = host.run(create.script, create.stdin, create.environment)
    assert joined.returncode == 0, joined.stderr
    assert set(host.objects("nodes")) == {worker} and len(host.joins()) == 2
    _destroy_removes_the_node(old, new, host)


@pytest.mark.parametrize(("change", "error"), [("endpoint", "connection refused"), ("ca", "x509: certificate signed")])
def test_the_stored_kubeconfig_no_longer_reaches_a_moved_tenant(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: str, error: str
) -> None:
    """Why the join's delete needs no kubeconfig and the endpoint and CA are no triggers: a delete runs with the
    stored inputs (tests/provider_state.py command_runs), and a kubeconfig stored before the move fails against
    the moved tenant every time. The node command, whose delete needs one, is updated by the next `up`."""
    old, new = _tenant_a_moved(monkeypatch, None), _tenant_a_moved(monkeypatch, change)
    (join,) = [r for r in old if r.name == WORKER_JOIN]
    (node,) = [r for r in old if r.name == WORKER_NODE]
    (moved,) = [r for r in new if r.name == WORKER_JOIN]
    host = FakeHost(tmp_path, join.inputs["environment"]["GPU_TENANCY_WORKER"])
    host.behave(api=_api(unwrap(join.inputs["stdin"])))
    assert host.run(join.inputs["create"], unwrap(join.inputs["stdin"]), join.inputs["environment"]).returncode == 0
    host.behave(api=_api(unwrap(moved.inputs["stdin"])))
    (stale,) = command_runs(stored_state(node), None)
    assert stale.stdin == unwrap(join.inputs["stdin"])
    result = host.run(stale.script, stale.stdin, stale.environment)
    assert result.returncode == 1 and error in result.stderr


def test_a_moved_tenant_waits_again_for_its_rejoined_nodes_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    """sim-nvml: the rejoined Node is a new object that HAMi's device plugin registers again. The inventory
    wait gets the new kubeconfig on stdin, so pulumi-command runs it again (an update runs `create`), after
    the join's update (its triggers name the join)."""
    old, new = _tenant_a_moved(monkeypatch, None, "dev-nvml"), _tenant_a_moved(monkeypatch, "endpoint", "dev-nvml")
    (join_before,) = [r for r in old if r.name == WORKER_JOIN]
    (join_after,) = [r for r in new if r.name == WORKER_JOIN]
    assert [run.step for run in command_runs(stored_state(join_before), join_after.inputs)] == ["update"]
    (wait_before,) = [r for r in old if r.name.startswith("tenant-a-inventory-") and r.name.endswith("-registered")]
    (wait_after,) = [r for r in new if r.urn == wait_before.urn]
    (rerun,) = command_runs(stored_state(wait_before), wait_after.inputs)
    assert rerun.step == "update" and rerun.script == wait_after.inputs["create"]
    assert join_after.urn in wait_after.property_dependencies["triggers"]
