"""The host's proxy settings reach a kind worker's containerd through a drop-in written by a Command
(gpu_tenancy/builders/worker/node_proxy.py), not through the container's ForceNew `env`: what the program
registers, and the scripts run against tests/worker_fakes.py (systemd's reading of units modelled there)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness import is_secret, record_stack, unwrap
from policy_support import Recorded, record_engine_view
from pulumi.output import Unknown

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.worker import node_proxy
from tests.worker_fakes import FakeHost

CONTAINER = "docker:index/container:Container"
COMMAND = "command:local:Command"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*PROXY_VARIABLES, "KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _proxy_commands(stack: list[Recorded]) -> list[Recorded]:
    return [r for r in stack if r.type == COMMAND and r.name.endswith("-worker-proxy")]


def booted_node(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path).kind_entrypoint()


def apply(host: FakeHost, stdin: str) -> subprocess.CompletedProcess[str]:
    return host.run(node_proxy.apply_script(), stdin)


# --------------------------------------------------------------------------- what the program registers


def test_the_worker_container_carries_no_proxy_and_a_command_carries_kinds_variables(no_proxy: pytest.MonkeyPatch) -> None:
    no_proxy.setenv("HTTP_PROXY", "http://proxy:3128")
    stack = record_engine_view()
    containers = [r for r in stack if r.type == CONTAINER]
    networks = {r.name.removesuffix("-control-plane-tcp"): r.inputs["spec"]["networkProfile"]
                for r in stack if r.type == "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"}
    assert len(containers) == 2 and all("envs" not in c.inputs for c in containers)
    commands = {r.inputs["environment"]["GPU_TENANCY_WORKER"]: r for r in _proxy_commands(stack)}
    assert sorted(commands) == sorted(c.inputs["name"] for c in containers)
    for container in containers:
        proxy = commands[container.inputs["name"]]
        assert proxy.inputs["create"] == node_proxy.apply_script()
        assert proxy.inputs["delete"] == node_proxy.remove_script()
        host_env = unwrap(proxy.inputs["stdin"])
        labels = {label["label"]: label["value"] for label in container.inputs["labels"]}
        network = networks[labels[kube_objects.TENANT_LABEL]]
        # kind's NO_PROXY: the kind network's subnets, the tenant's service and pod subnets, the node, DNS suffixes.
        no_proxy_value = ",".join(["fc00:f853:ccd:e793::/64", "172.18.0.0/16", *network["serviceCidrs"],
                                   *network["podCidrs"], container.inputs["name"], ".svc", ".svc.cluster",
                                   ".svc.cluster.local"])
        assert host_env == node_proxy.dropin([
            "HTTP_PROXY=http://proxy:3128", "http_proxy=http://proxy:3128",
            f"NO_PROXY={no_proxy_value}", f"no_proxy={no_proxy_value}"])
        join = next(r for r in stack if r.type == COMMAND and r.name == proxy.name.removesuffix("-proxy") + "-join")
        assert proxy.urn in join.dependencies, "containerd has the proxy before the node pulls anything"


def test_without_a_proxy_there_is_no_proxy_command(no_proxy: pytest.MonkeyPatch) -> None:
    stack = record_engine_view()
    assert _proxy_commands(stack) == []
    assert all("envs" not in r.inputs for r in stack if r.type == CONTAINER)


def test_the_containerd_snapshotter_stays_in_the_container_as_kind_passes_it(no_proxy: pytest.MonkeyPatch) -> None:
    """kind's entrypoint reads KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER once, at start (provision.go
    runArgsForNode `-e`): a new value needs a new container, so it stays in `env`."""
    no_proxy.setenv("KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER", "native")
    no_proxy.setenv("HTTP_PROXY", "http://proxy:3128")
    containers = [r for r in record_engine_view() if r.type == CONTAINER]
    assert containers and all(c.inputs["envs"] == ["KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=native"] for c in containers)


def test_a_first_preview_reads_the_kind_network_for_the_proxy_only_once_it_exists(no_proxy: pytest.MonkeyPatch) -> None:
    """The kind network is made by `kind create cluster`: on a fresh stack the lookup of its subnets must wait
    for the worker's dependencies (the engine answers such an invoke `unknown`, pulumi `source_eval.go`
    `resmon.Invoke`); asked earlier, Docker has no network `kind` yet and the first preview fails."""
    no_proxy.setenv("HTTP_PROXY", "http://proxy:3128")
    commands = [r for r in record_stack(unknowns=True) if r.typ == COMMAND and r.name.endswith("-worker-proxy")]
    assert len(commands) == 2 and all(isinstance(c.inputs["stdin"], Unknown) for c in commands)


def test_proxy_credentials_stay_secret_in_the_state(no_proxy: pytest.MonkeyPatch) -> None:
    no_proxy.setenv("HTTPS_PROXY", "http://alice:s3cret@proxy:3128")
    commands = _proxy_commands(record_engine_view())
    assert commands and all(is_secret(c.inputs["stdin"]) for c in commands)
    assert '"HTTPS_PROXY=http://alice:s3cret@proxy:3128"' in unwrap(commands[0].inputs["stdin"])
    # Without credentials the variables stay readable in previews.
    no_proxy.setenv("HTTPS_PROXY", "http://proxy:3128")
    assert not any(is_secret(c.inputs["stdin"]) for c in _proxy_commands(record_engine_view()))


# --------------------------------------------------------------------------- the scripts in a node


@pytest.mark.parametrize("script", [node_proxy.apply_script(), node_proxy.remove_script()])
def test_scripts_pass_shellcheck(tmp_path: Path, script: str) -> None:
    path = tmp_path / "script.sh"
    path.write_text(script)
    result = subprocess.run(
        [str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "shellcheck"), "-s", "sh", str(path)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout


def test_containerd_runs_with_the_proxy_exactly_as_given(tmp_path: Path) -> None:
    """systemd unquotes the drop-in (tests/worker_fakes.py): a percent-encoded password, a quote and a
    backslash reach containerd unchanged, and the unit's values win over kind's empty DefaultEnvironment."""
    host = booted_node(tmp_path)
    url = 'http://alice:p%40ss"w\\rd@proxy:3128'
    result = apply(host, node_proxy.dropin([f"HTTPS_PROXY={url}", "NO_PROXY=.svc,10.0.0.0/8"]))
    assert result.returncode == 0, result.stderr
    environment = host.containerd_environment()
    assert environment["HTTPS_PROXY"] == url and environment["NO_PROXY"] == ".svc,10.0.0.0/8"
    assert environment["HTTP_PROXY"] == ""  # kind's DefaultEnvironment, not overridden
    assert host.containerd_restarts() == 1
    assert not any(url in " ".join(argv) for argv in host.calls()), "credentials on a command line"
    assert oct(host.file(node_proxy.DROPIN).stat().st_mode & 0o777) == "0o600"


def test_the_same_proxy_again_restarts_nothing(tmp_path: Path) -> None:
    host = booted_node(tmp_path)
    dropin = node_proxy.dropin(["HTTP_PROXY=http://proxy:3128"])
    assert apply(host, dropin).returncode == 0
    assert apply(host, dropin).returncode == 0
    assert host.containerd_restarts() == 1


def test_a_drop_in_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^a proxy variable must not contain a line break$"):
        node_proxy.dropin(["HTTP_PROXY=http://proxy:3128\n[Service]\nExecStartPre=/bin/evil"])


def test_removing_the_proxy_restarts_containerd_without_it(tmp_path: Path) -> None:
    host = booted_node(tmp_path)
    assert apply(host, node_proxy.dropin(["HTTP_PROXY=http://proxy:3128"])).returncode == 0
    removed = host.run(node_proxy.remove_script(), "")
    assert removed.returncode == 0, removed.stderr
    assert not host.file(node_proxy.DROPIN).exists()
    assert host.containerd_environment()["HTTP_PROXY"] == "" and host.containerd_restarts() == 2


def test_removing_the_proxy_of_a_container_that_is_gone_is_nothing_to_do(tmp_path: Path) -> None:
    import shutil

    host = booted_node(tmp_path)
    shutil.rmtree(host.root)
    removed = host.run(node_proxy.remove_script(), "")
    assert removed.returncode == 0 and "is gone: no proxy settings to remove" in removed.stderr


def test_containerd_that_never_comes_up_fails_the_apply_loudly(tmp_path: Path) -> None:
    host = booted_node(tmp_path)
    host.behave(containerd_after_polls=10_000)
    result = apply(host, node_proxy.dropin(["HTTP_PROXY=http://proxy:3128"]))
    assert result.returncode == 1 and "is not active after 120s" in result.stderr
    assert not host.file(node_proxy.DROPIN).exists()
