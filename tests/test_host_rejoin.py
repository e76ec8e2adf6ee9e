"""A real GPU host (mode real) whose tenant's endpoint moved or whose CA changed joins again in one `up`.

The host's bootstrap token and node command have the endpoint and CA among their triggers, so they are replaced,
and a replacement's delete runs with the kubeconfig stored before (tests/provider_state.py `command_runs`,
pulumi-command v1.2.1), which no longer reaches the tenant. Run here in the engine's order against
tests/worker_fakes.py's kubectl (the tenant answers at one address with one CA) and a GPU host reached over SSH
(pulumi-command `remote.Command` runs its command string in the host's shell with `stdin`), modelled as the fake
node: `sudo -n` runs its command with the host's /etc and /run under the node's root, and `kubeadm` is the fake's.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import harness
import pytest
import yaml
from harness import gpu_config, registered_gpus, unwrap
from policy_support import Recorded, record_engine_view, tenant_api_servers
from provider_state import Stored, changes_against_state, command_runs, stored_state
from replacement_model import replacements
from worker_fakes import FakeHost

from gpu_tenancy.builders.bootstrap_token import join_token
from gpu_tenancy.builders.host_worker import hostprep

HOST = "gpu-a100-01"
PREFIX = f"tenant-a-{HOST}"
MOVED_TO = "https://10.201.0.9:6443"

_SUDO = r'''
import json, os, sys
from pathlib import Path
state = Path(os.environ["FAKE_STATE"])
with open(state / "calls.jsonl", "a") as log:
    log.write(json.dumps(["sudo", *sys.argv[1:]]) + "\n")
args = sys.argv[1:]
assert args[0] == "-n", args  # never prompts for a password
root = str(state / "containers" / HOST)
def on_host(word):
    for folder in ("/etc/", "/run/"):
        word = word.replace(folder, root + folder)
    return word
os.execvp(args[1], [on_host(word) for word in args[1:]])
'''

_KUBEADM = r'''
import os, subprocess, sys
from pathlib import Path
root = str(Path(os.environ["FAKE_STATE"]) / "containers" / HOST)
args = [word.replace(root, "") for word in sys.argv[1:]]
sys.exit(subprocess.run(["docker", "exec", "-i", HOST, "kubeadm", *args]).returncode)
'''


def _gpu_host(tmp_path: Path) -> FakeHost:
    host = FakeHost(tmp_path, HOST)
    for name, body in (("sudo", _SUDO), ("kubeadm", _KUBEADM)):
        exe = host.bin / name
        exe.write_text(f"#!{sys.executable}\nHOST = {HOST!r}\n{body}")
        exe.chmod(0o755)
    return host


def _recorded(monkeypatch: pytest.MonkeyPatch, change: str | None) -> list[Recorded]:
    """The gpu stack as `pulumi up` registers it when Kamaji's admin kubeconfig for tenant-a names another
    address (its LoadBalancer IP moved), another CA (Kamaji made a new one) or another credential (rotated)."""
    original = harness.tenant_kubeconfig

    def kubeconfig(tenant: str) -> str:
        config = yaml.safe_load(original(tenant))
        if tenant == "tenant-a" and change == "endpoint":
            config["clusters"][0]["cluster"]["server"] = MOVED_TO
        if tenant == "tenant-a" and change == "ca":
            config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
                harness._test_ca_pem()).decode()
        if tenant == "tenant-a" and change == "credentials":
            config["users"] = [{"name": "admin", "user": {"token": "rotated-admin-token"}}]
        return str(yaml.safe_dump(config))

    monkeypatch.setattr(harness, "tenant_kubeconfig", kubeconfig)
    config = gpu_config()
    return record_engine_view(config, stack="gpu", node_register=registered_gpus(config))


def _by_name(resources: list[Recorded]) -> dict[str, Recorded]:
    return {r.name: r for r in resources if r.name.startswith(PREFIX) and r.type.startswith("command:")}


def _api(resource: Recorded) -> dict[str, str]:
    cluster = yaml.safe_load(unwrap(resource.inputs["stdin"]))["clusters"][0]["cluster"]
    return {"server": cluster["server"], "ca": cluster["certificate-authority-data"]}


def _run(host: FakeHost, step: str, runs: list, stdout: str = "") -> subprocess.CompletedProcess[str]:
    """Runs the one run of `step`; pulumi-command passes a delete or update the stored stdout
    (v1.2.1 local/commandOutputs.go `run`, addPreviousOutputInEnv)."""
    (run,) = [r for r in runs if r.step == step]
    previous = {"PULUMI_COMMAND_STDOUT": stdout} if step != "create" else {}
    return host.run(run.script, run.stdin, {**run.environment, **previous})


def _deployed(host: FakeHost, first: dict[str, Recorded]) -> Stored:
    """The first `up`: the token minted, the node command created, the host joined. Returns the mint's state."""
    host.behave(api=_api(first[f"{PREFIX}-node"]))
    minted = _run(host, "create", command_runs(None, first[f"{PREFIX}-bootstrap-token-mint"].inputs))
    assert minted.returncode == 0, minted.stderr
    for name in (f"{PREFIX}-node", f"{PREFIX}-join"):
        done = _run(host, "create", command_runs(None, first[name].inputs))
        assert done.returncode == 0, done.stderr
    assert set(host.objects("nodes")) == {HOST} and len(host.joins()) == 1
    mint = stored_state(first[f"{PREFIX}-bootstrap-token-mint"])
    # What the state keeps: its stdout, less the last newline (pulumi-command v1.2.1 local/commandOutputs.go `run`).
    return Stored(mint.inputs, {**mint.outputs, "stdout": minted.stdout.removesuffix("\n")})


@pytest.mark.parametrize("change", ["endpoint", "ca"])
def test_a_host_whose_tenant_moved_joins_again_in_one_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: str
) -> None:
    old, new = _recorded(monkeypatch, None), _recorded(monkeypatch, change)
    assert tenant_api_servers(old)["tenant-a"] != tenant_api_servers(new)["tenant-a"], "the change is real"
    first, second = _by_name(old), _by_name(new)
    replaced = {r.name: r.delete_first for r in replacements(old, new).values() if r.name.startswith(PREFIX)}
    assert replaced == {f"{PREFIX}-bootstrap-token-mint": True, f"{PREFIX}-node": True, f"{PREFIX}-join": True}
    host = _gpu_host(tmp_path)
    mint = _deployed(host, first)
    token_id = mint.outputs["stdout"].split(".")[0]
    old_server = _api(first[f"{PREFIX}-node"])["server"].removeprefix("https://")
    reason = {
        "endpoint": f"The connection to the server {old_server} was refused - did you specify the right host or port?",
        "ca": 'Unable to connect to the server: tls: failed to verify certificate: x509: certificate signed by '
              'unknown authority (possibly because of "crypto/rsa: verification error" while trying to verify '
              'candidate authority certificate "kubernetes")',
    }[change]
    # The tenant's API server answers only at its new address, with its new CA; its datastore keeps the Node.
    host.behave(api=_api(second[f"{PREFIX}-node"]))

    # The mint (registered first): revoked with the stored kubeconfig, skipped; minted with the current one.
    runs = command_runs(mint, second[f"{PREFIX}-bootstrap-token-mint"].inputs)
    assert [run.step for run in runs] == ["delete", "create"]
    revoked = _run(host, "delete", runs, mint.outputs["stdout"])
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stderr == (
        f"gpu-tenancy: skipped revoking bootstrap token {token_id}: the kubeconfig stored for it no longer reaches "
        f"the tenant's API server ({reason}); the token expires within 24 h of its minting and the tenant's "
        "tokencleaner then deletes it\n")
    minted = _run(host, "create", runs)
    assert minted.returncode == 0, minted.stderr
    assert set(host.objects("secrets")) == {f"bootstrap-token-{token_id}", f"bootstrap-token-{minted.stdout[:6]}"}

    # The node command is replaced delete-first, so its dependent join is deleted first: the host is reset.
    join_runs = command_runs(stored_state(first[f"{PREFIX}-join"]), second[f"{PREFIX}-join"].inputs, replaced=True)
    assert _run(host, "delete", join_runs).returncode == 0
    assert host.resets() == 1 and not host.file("/etc/kubernetes/kubelet.conf").exists()
    node_runs = command_runs(stored_state(first[f"{PREFIX}-node"]), second[f"{PREFIX}-node"].inputs)
    assert [run.step for run in node_runs] == ["delete", "create"]
    left = _run(host, "delete", node_runs)
    assert left.returncode == 0, left.stderr
    assert left.stderr == (
        f"gpu-tenancy: skipped removing Node {HOST}: the kubeconfig stored for it no longer reaches the tenant's API "
        f"server ({reason}); 'make up' removes it before the host joins again, or remove it by hand: kubectl delete "
        f"node {HOST}\n")
    assert set(host.objects("nodes")) == {HOST}, "the stale Node is still there"
    cleared = _run(host, "create", node_runs)
    assert cleared.returncode == 0, cleared.stderr
    assert host.objects("nodes") == {}
    joined = _run(host, "create", join_runs)
    assert joined.returncode == 0, joined.stderr
    assert set(host.objects("nodes")) == {HOST} and len(host.joins()) == 2
    discovery = yaml.safe_load(host.joins()[-1])["discovery"]["bootstrapToken"]
    assert (discovery["apiServerEndpoint"], discovery["caCertHashes"]) == (
        tenant_api_servers(new)["tenant-a"][0], [tenant_api_servers(new)["tenant-a"][1]])

    # The state now holds the current kubeconfig: a destroy resets the host and removes its Node.
    assert _run(host, "delete", command_runs(stored_state(second[f"{PREFIX}-join"]), None)).returncode == 0
    gone = _run(host, "delete", command_runs(stored_state(second[f"{PREFIX}-node"]), None))
    assert (gone.returncode, gone.stderr) == (0, "")
    assert host.objects("nodes") == {}


def test_without_the_create_the_stale_node_stops_the_join(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Why the node command's create removes the Node: after a skipped delete, kubeadm refuses the name."""
    old, new = _recorded(monkeypatch, None), _recorded(monkeypatch, "endpoint")
    first, second = _by_name(old), _by_name(new)
    host = _gpu_host(tmp_path)
    _deployed(host, first)
    host.behave(api=_api(second[f"{PREFIX}-node"]))
    join_runs = command_runs(stored_state(first[f"{PREFIX}-join"]), second[f"{PREFIX}-join"].inputs, replaced=True)
    assert _run(host, "delete", join_runs).returncode == 0
    assert _run(host, "delete", command_runs(stored_state(first[f"{PREFIX}-node"]), None)).returncode == 0
    refused = _run(host, "create", join_runs)
    assert refused.returncode == 1 and f'a Node with name "{HOST}" and status "Ready" already exists' in refused.stderr


@pytest.mark.parametrize("script", ["node", "token"])
def test_an_api_server_that_refuses_still_fails_the_delete(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, script: str
) -> None:
    """Forbidden comes from an API server the kubeconfig reaches: nothing says the object will go by itself."""
    resources = _recorded(monkeypatch, None)
    first = _by_name(resources)
    host = _gpu_host(tmp_path)
    mint = _deployed(host, first)
    host.behave(api=_api(first[f"{PREFIX}-node"]), forbidden_deletes=True)
    name = f"{PREFIX}-node" if script == "node" else f"{PREFIX}-bootstrap-token-mint"
    stored = mint if script == "token" else stored_state(first[name])
    failed = _run(host, "delete", command_runs(stored, None), mint.outputs["stdout"])
    assert failed.returncode == 1
    assert failed.stderr.startswith("Error from server (Forbidden): ") and "skipped" not in failed.stderr
    assert set(host.objects("nodes")) == {HOST} and len(host.objects("secrets")) == 1


UNREACHABLE = [
    "The connection to the server 10.20.0.2:6443 was refused - did you specify the right host or port?",
    "Unable to connect to the server: dial tcp: lookup tenant-a.lab.example on 127.0.0.53:53: no such host",
    "Unable to connect to the server: dial tcp 10.20.0.2:6443: i/o timeout",
    "Unable to connect to the server: dial tcp 10.20.0.2:6443: connect: no route to host",
    "Unable to connect to the server: x509: certificate is valid for 10.20.0.3, not 10.20.0.2",
]
ANSWERED = [
    "error: You must be logged in to the server (Unauthorized)",
    'Error from server (InternalError): an error on the server ("") has prevented the request from succeeding',
    "Unable to connect to the server: net/http: TLS handshake timeout",
    # discovery logged a refused connection, but the request kubectl reports was answered
    'E1206 memcache.go:265] "Unhandled Error" err="dial tcp 10.20.0.2:6443: connect: connection refused"\n'
    'Error from server (Forbidden): nodes "gpu-a100-01" is forbidden',
]


@pytest.mark.parametrize("script", [hostprep.remove_node_script(), join_token.revoke_script()], ids=["node", "token"])
@pytest.mark.parametrize("message", UNREACHABLE + ANSWERED)
def test_only_an_api_server_never_reached_is_skipped(tmp_path: Path, script: str, message: str) -> None:
    host = FakeHost(tmp_path, HOST)
    (host.bin / "kubectl").write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{message}\nEOF\nexit 1\n")
    result = host.run(script, "apiVersion: v1\n", {"GPU_TENANCY_NODE": HOST,
                                                   "PULUMI_COMMAND_STDOUT": "abcdef.0123456789abcdef"})
    last = message.splitlines()[-1]
    if message in UNREACHABLE:
        assert result.returncode == 0 and result.stderr.startswith("gpu-tenancy: skipped ")
        assert f"({last})" in result.stderr and len(result.stderr.splitlines()) == 1
    else:
        assert result.returncode == 1 and result.stderr == message + "\n"


def test_new_credentials_update_the_node_command_and_remove_no_node(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Kamaji rotated the admin credentials (same endpoint, same CA): an update, which runs `update` with the new
    kubeconfig and keeps it for the delete; neither the node command nor the token touches the joined host."""
    old, new = _recorded(monkeypatch, None), _recorded(monkeypatch, "credentials")
    first, second = _by_name(old), _by_name(new)
    assert not [r for r in replacements(old, new).values() if r.name.startswith(PREFIX)]
    changes = changes_against_state(old, new)
    assert (changes[f"command:local:Command {PREFIX}-node"].replaces,
            changes[f"command:local:Command {PREFIX}-node"].updates) == ([], ["stdin"])
    host = _gpu_host(tmp_path)
    mint = _deployed(host, first)
    deployed = len(host.calls())
    updates = [
        *command_runs(stored_state(first[f"{PREFIX}-node"]), second[f"{PREFIX}-node"].inputs),
        *command_runs(mint, second[f"{PREFIX}-bootstrap-token-mint"].inputs),
    ]
    assert [run.step for run in updates] == ["update", "update"]
    for run in updates:
        done = host.run(run.script, run.stdin, {**run.environment, "PULUMI_COMMAND_STDOUT": mint.outputs["stdout"]})
        assert done.returncode == 0, done.stderr
    assert set(host.objects("nodes")) == {HOST} and len(host.objects("secrets")) == 1
    assert not [call for call in host.calls()[deployed:] if call[:1] == ["kubectl"]]
    # A stack deployed when the node command's create was `true` and it had no update: the update that brings
    # the new create runs `update`, not the create.
    before = stored_state(first[f"{PREFIX}-node"])
    legacy = {k: v for k, v in before.inputs.items() if k != "update"} | {"create": "true"}
    (upgrade,) = command_runs(Stored(legacy, legacy), second[f"{PREFIX}-node"].inputs)
    assert (upgrade.step, upgrade.script) == ("update", "true")


@pytest.mark.parametrize("script", [hostprep.remove_node_script(), hostprep.remove_stale_node_script(),
                                    join_token.revoke_script()], ids=["delete", "create", "revoke"])
def test_scripts_pass_shellcheck(tmp_path: Path, script: str) -> None:
    path = tmp_path / "script.sh"
    path.write_text(script)
    shellcheck = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "shellcheck"
    result = subprocess.run([str(shellcheck), "-s", "sh", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
