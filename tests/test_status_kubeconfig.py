"""`make kubeconfig`: gpu_tenancy.cli.kubeconfig against a stub `pulumi` answering with the program's outputs."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pulumi_stub
import pytest
from harness import MAKE, REPO, dev_config, unwrap
from test_status_outputs import stack_outputs as program_outputs

from gpu_tenancy.cli import kubeconfig as kubeconfig_cli


@pytest.fixture(scope="module")
def dev_outputs() -> dict[str, Any]:
    """What `pulumi stack output --json --show-secrets` prints for the dev stack: the program's exports."""
    return unwrap(program_outputs(dev_config(), "dev"))


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dev_outputs: dict[str, Any]) -> Path:
    log = pulumi_stub.install(tmp_path / "bin", {"dev": dev_outputs})
    monkeypatch.setenv("PATH", pulumi_stub.path_with(tmp_path / "bin"))
    return log


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_writes_tenant_kubeconfig_0600_and_prints_only_its_path(
    stub: Path, tmp_path: Path, dev_outputs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    old_umask = os.umask(0)  # even with no umask, the file is never group/world readable
    try:
        code = kubeconfig_cli.main(["--stack", "dev", "--tenant", "tenant-a", "--dir", str(tmp_path / "kc")])
    finally:
        os.umask(old_umask)
    out, err = capsys.readouterr()
    assert code == 0, err
    path = Path(out.strip())
    assert path == (tmp_path / "kc" / "dev-tenant-a.kubeconfig").resolve()
    assert path.read_text() == dev_outputs["tenantKubeconfigs"]["tenant-a"]
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert "secret-token" not in out + err
    assert pulumi_stub.calls(stub) == [["stack", "output", "--json", "--show-secrets", "--stack", "dev"]]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_replaces_a_world_readable_file_instead_of_rewriting_it(stub: Path, tmp_path: Path) -> None:
    target = tmp_path / "dev-tenant-b.kubeconfig"
    target.write_text("old")
    target.chmod(0o644)
    assert kubeconfig_cli.main(["--tenant", "tenant-b", "--dir", str(tmp_path)]) == 0
    assert mode(target) == 0o600
    assert "secret-token-tenant-b" in target.read_text()


def test_management_kubeconfig(stub: Path, tmp_path: Path, dev_outputs: dict[str, Any]) -> None:
    assert kubeconfig_cli.main(["--management", "--dir", str(tmp_path)]) == 0
    path = tmp_path / "dev-management.kubeconfig"
    assert path.read_text() == dev_outputs["managementKubeconfig"]
    assert mode(path) == 0o600


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err
    return err.strip()


def test_unknown_tenant_names_the_known_ones(stub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kubeconfig_cli.main(["--tenant", "tenant-z", "--dir", str(tmp_path / "kc")]) == 2
    assert one_error_line(capsys) == "kubeconfig: stack dev has no tenant 'tenant-z' (tenants: tenant-a, tenant-b)"
    assert not (tmp_path / "kc").exists()


def test_unknown_stack_is_pulumis_one_line(stub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kubeconfig_cli.main(["--stack", "nope", "--tenant", "tenant-a", "--dir", str(tmp_path)]) == 1
    assert one_error_line(capsys) == "kubeconfig: pulumi stack output --stack nope: error: no stack named 'nope' found"


def test_pulumi_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert kubeconfig_cli.main(["--tenant", "tenant-a", "--dir", str(tmp_path)]) == 1
    assert one_error_line(capsys) == "kubeconfig: pulumi: not found on PATH (`make tools` installs it)"


def test_stack_deployed_before_the_split_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dev_outputs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    old = {k: v for k, v in dev_outputs.items() if k != "tenantKubeconfigs"}
    pulumi_stub.install(tmp_path / "bin", {"dev": old})
    monkeypatch.setenv("PATH", pulumi_stub.path_with(tmp_path / "bin"))
    assert kubeconfig_cli.main(["--tenant", "tenant-a", "--dir", str(tmp_path / "kc")]) == 2
    assert "has no output 'tenantKubeconfigs'" in one_error_line(capsys)


def test_tenant_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        kubeconfig_cli.main([])
    assert exit_info.value.code == 2
    assert "--tenant" in capsys.readouterr().err


def test_stub_masks_secrets_without_show_secrets(stub: Path) -> None:
    command = ["pulumi", "stack", "output", "--json", "--stack", "dev"]
    masked = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    assert masked["tenantKubeconfigs"] == "[secret]" and isinstance(masked["tenants"], dict)


def run_make(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`make -s` in the repository; the venv counts as built (-o), so no test ever runs pip."""
    return subprocess.run([*MAKE, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_kubeconfig_prints_only_the_path_and_uses_the_file_backend(stub: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PULUMI_BACKEND_URL": ""}
    env.pop("PULUMI_BACKEND_URL")  # a fresh shell: the Makefile sets it
    done = run_make("kubeconfig", "TENANT=tenant-b", f"STATE_DIR={tmp_path / 'state'}", env=env)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path == tmp_path / "state" / "kubeconfigs" / "dev-tenant-b.kubeconfig"
    assert mode(path) == 0o600 and "secret-token-tenant-b" in path.read_text()
    assert pulumi_stub.backends(stub) == [f"file://{tmp_path / 'state'}"]
    management = run_make("kubeconfig-management", f"STATE_DIR={tmp_path / 'state'}", env=env)
    assert Path(management.stdout.strip()).name == "dev-management.kubeconfig"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_kubeconfig_without_tenant_names_the_variable(tmp_path: Path) -> None:
    done = run_make("kubeconfig", f"STATE_DIR={tmp_path}", env=dict(os.environ))
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.splitlines()[0] == "kubeconfig: set TENANT=<name>, e.g. make kubeconfig TENANT=tenant-a"


def eval_kubeconfig_env(args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """What a user's shell does with `eval "$(make -s kubeconfig-env ...)"`: (eval's status, KUBECONFIG, stderr)."""
    script = (f'export KUBECONFIG=/home/user/.kube/other-cluster; eval "$(make -s kubeconfig-env {args})"; '
              'status=$?; printf "%s\\n%s\\n" "$status" "$KUBECONFIG"')
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    status, kubeconfig = done.stdout.splitlines()[-2:]
    return int(status), kubeconfig, done.stderr


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("bash") is None, reason="make or bash missing")
def test_kubeconfig_env_sets_kubeconfig_or_points_it_nowhere_and_fails(stub: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    status, kubeconfig, _ = eval_kubeconfig_env(f"TENANT=tenant-a STATE_DIR={tmp_path}", env)
    assert status == 0 and kubeconfig == str(tmp_path / "kubeconfigs" / "dev-tenant-a.kubeconfig")
    assert "secret-token-tenant-a" in Path(kubeconfig).read_text()
    # Every failure: the previous value (another cluster) is gone, the variable is not empty (kubectl would
    # then read ~/.kube/config), and eval's status is not 0.
    for args, said in ((f"TENANT=tenant-z STATE_DIR={tmp_path}", "has no tenant 'tenant-z'"),
                       (f"STATE_DIR={tmp_path}", "set TENANT=<name>"),
                       (f"TENANT=tenant-a STACK=nope STATE_DIR={tmp_path}", "no stack named 'nope'")):
        status, kubeconfig, err = eval_kubeconfig_env(args, env)
        assert (status, kubeconfig) == (1, "/dev/null"), args
        assert said in err and "KUBECONFIG=/dev/null" in err


def test_a_kubeconfig_of_dev_null_reaches_no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The official client, like client-go's loading rules, reads only the files KUBECONFIG names when it is
    set (not ~/.kube/config): /dev/null is no configuration at all."""
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(kubeconfig_for_home())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBECONFIG", "/dev/null")
    import importlib

    from kubernetes.config import kube_config

    importlib.reload(kube_config)  # the default location is read from the environment at import
    try:
        with pytest.raises(ConfigException):
            config.load_kube_config(config_file=kube_config.KUBE_CONFIG_DEFAULT_LOCATION)
    finally:
        monkeypatch.undo()
        importlib.reload(kube_config)


def kubeconfig_for_home() -> str:
    return ("apiVersion: v1\nkind: Config\ncurrent-context: other\nclusters: [{name: other, cluster: "
            "{server: 'https://other.example:6443'}}]\ncontexts: [{name: other, context: {cluster: other, "
            "user: u}}]\nusers: [{name: u, user: {token: t}}]\n")
