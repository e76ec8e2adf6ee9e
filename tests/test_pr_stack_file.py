"""A pull request's stack file taken as data (gpu_tenancy/cli/pull_requests/stack_file.py): only `config:`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpu_tenancy.cli.pull_requests.report import main
from gpu_tenancy.cli.pull_requests.stack_file import StackFileRefused, take_config

REPO_ROOT = Path(__file__).resolve().parents[1]
BASE = "encryptionsalt: v1:abc\nconfig:\n  gpu-tenancy:mode: sim\n"


def test_only_the_config_is_taken() -> None:
    merged = yaml.safe_load(take_config("encryptionsalt: v1:abc\nconfig:\n  gpu-tenancy:mode: sim-nvml\n", BASE))
    assert merged == {"encryptionsalt": "v1:abc", "config": {"gpu-tenancy:mode": "sim-nvml"}}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("encryptionsalt: v1:other\nconfig: {}\n", "encryptionsalt"),  # secrets would decrypt differently
        ("config: {}\n", "encryptionsalt"),  # dropped: also a change
        ("encryptionsalt: v1:abc\nsecretsprovider: awskms://x\nconfig: {}\n", "secretsprovider"),
        ("encryptionsalt: v1:abc\nenvironment: [prod]\nconfig: {}\n", "environment"),
        ("encryptionsalt: v1:abc\nruntime: python\nconfig: {}\n", "runtime"),  # a project key, unknown here
        ("encryptionsalt: v1:abc\nconfig: [1]\n", "config"),
        ("- a\n", "mapping"),
        ("config: [\n", "not YAML"),
    ],
)
def test_anything_else_is_refused_naming_the_key(text: str, named: str) -> None:
    with pytest.raises(StackFileRefused, match=named):
        take_config(text, BASE)


def test_the_command_rewrites_the_base_file_or_leaves_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, theirs = tmp_path / "Pulumi.dev.yaml", tmp_path / "pr.yaml"
    base.write_text(BASE)
    theirs.write_text("encryptionsalt: v1:other\nconfig: {}\n")
    assert main(["stack-config", str(theirs), str(base)]) == 1 and base.read_text() == BASE
    assert "::error::" in capsys.readouterr().err
    assert main(["stack-config", str(tmp_path / "missing.yaml"), str(base)]) == 1
    theirs.write_text("encryptionsalt: v1:abc\nconfig:\n  gpu-tenancy:mode: real\n")
    assert main(["stack-config", str(theirs), str(base)]) == 0
    assert yaml.safe_load(base.read_text())["config"] == {"gpu-tenancy:mode": "real"}


def test_every_stack_file_of_this_repository_is_taken_unchanged() -> None:
    for path in REPO_ROOT.glob("Pulumi.*.yaml"):
        text = path.read_text()
        assert yaml.safe_load(take_config(text, text)) == yaml.safe_load(text), path.name


# A stack with a cloud secrets provider (pulumi/pulumi sdk/go/common/workspace/project.go ProjectStack:
# `secretsprovider`, `encryptedkey`) importing an ESC environment (`environment`): each key, as the default
# branch has it, is kept and taken as it is.
KMS_BASE = (
    "secretsprovider: awskms://alias/gpu-tenancy?region=eu-west-1\n"
    "encryptedkey: AQICAHhE0ciphertext==\n"
    "environment:\n  - gpu-tenancy/dev\n"
    "config:\n  gpu-tenancy:mode: sim\n"
)


def test_every_kept_key_as_the_default_branch_has_it_is_taken() -> None:
    theirs = KMS_BASE.replace("gpu-tenancy:mode: sim", "gpu-tenancy:mode: sim-nvml")
    assert yaml.safe_load(take_config(theirs, KMS_BASE)) == {
        "secretsprovider": "awskms://alias/gpu-tenancy?region=eu-west-1",
        "encryptedkey": "AQICAHhE0ciphertext==",
        "environment": ["gpu-tenancy/dev"],
        "config": {"gpu-tenancy:mode": "sim-nvml"},
    }


@pytest.mark.parametrize("key", ["secretsprovider", "encryptedkey", "environment"])
def test_a_changed_kept_key_is_named_as_changed(key: str) -> None:
    theirs = {"secretsprovider": KMS_BASE.replace("eu-west-1", "us-east-1"),
              "encryptedkey": KMS_BASE.replace("AQICAHhE0", "AQICAHhE1"),
              "environment": KMS_BASE.replace("gpu-tenancy/dev", "gpu-tenancy/prod")}[key]
    with pytest.raises(StackFileRefused) as refused:
        take_config(theirs, KMS_BASE, where="Pulumi.dev.yaml")
    assert str(refused.value) == (
        f"Pulumi.dev.yaml: ['{key}'] differ(s) from the default branch: the deployed-state preview takes only "
        "`config:`; change them in a pull request of their own")


def test_an_unknown_key_is_refused_listing_what_a_stack_file_holds() -> None:
    with pytest.raises(StackFileRefused) as refused:
        take_config("encryptionsalt: v1:abc\nruntime: python\nconfig: {}\n", BASE, where="Pulumi.dev.yaml")
    assert str(refused.value) == (
        "Pulumi.dev.yaml: unknown top-level key(s) ['runtime']: a stack file holds only "
        "['config', 'secretsprovider', 'encryptedkey', 'encryptionsalt', 'environment']; remove them")


def test_a_pull_request_stack_file_without_config_takes_an_empty_config() -> None:
    assert yaml.safe_load(take_config("encryptionsalt: v1:abc\n", BASE)) == {"encryptionsalt": "v1:abc", "config": {}}


@pytest.mark.parametrize(("theirs", "base", "message"), [
    ("- a\n", BASE, "the pull request's stack file: a stack file is a mapping, got list"),
    (BASE, "just text\n", "the default branch's stack file: a stack file is a mapping, got str"),
    ("encryptionsalt: v1:abc\nconfig: [1]\n", BASE, "the pull request's stack file: `config:` must be a mapping, "
                                                    "got list"),
])
def test_a_file_that_is_no_stack_file_is_named_with_what_it_holds(theirs: str, base: str, message: str) -> None:
    with pytest.raises(StackFileRefused) as refused:
        take_config(theirs, base)
    assert str(refused.value) == message


def test_the_base_files_key_order_and_the_configs_own_order_are_kept() -> None:
    # A stack file rewritten in another order would show as a change in the pull request's preview job's checkout.
    theirs = "encryptionsalt: v1:abc\nconfig:\n  gpu-tenancy:mode: sim\n  gpu-tenancy:clusterName: lab\n"
    assert take_config(theirs, BASE) == theirs


def test_the_command_names_the_pull_requests_file_in_each_refusal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, theirs = tmp_path / "Pulumi.dev.yaml", tmp_path / "pr.yaml"
    base.write_text(BASE)
    assert main(["stack-config", str(theirs), str(base)]) == 1
    assert f"{theirs}: the pull request has no such stack file; nothing to preview" in capsys.readouterr().err
    theirs.write_text("encryptionsalt: v1:other\nconfig: {}\n")
    assert main(["stack-config", str(theirs), str(base)]) == 1
    assert f"{theirs}: ['encryptionsalt'] differ(s) from the default branch" in capsys.readouterr().err


def test_the_files_are_read_and_written_as_utf8_whatever_the_runners_locale(tmp_path: Path) -> None:
    # A runner in the C locale without coercion (PEP 538) reads files as ASCII by default; a tenant's name or a
    # config comment may not be ASCII.
    import os
    import subprocess
    import sys

    base, theirs = tmp_path / "Pulumi.dev.yaml", tmp_path / "pr.yaml"
    base.write_text(BASE + "# équipe GPU\n", encoding="utf-8")
    theirs.write_text("encryptionsalt: v1:abc\nconfig:\n  gpu-tenancy:clusterName: équipe\n", encoding="utf-8")
    env = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                           "from gpu_tenancy.cli.pull_requests.stack_file import take_config_file; "
                           "take_config_file(Path(sys.argv[1]), Path(sys.argv[2]))", str(theirs), str(base)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(base.read_text(encoding="utf-8"))["config"] == {"gpu-tenancy:clusterName": "équipe"}
