"""The shell scripts the builders send, kept as files under gpu_tenancy/builders/**/scripts/: each parses, passes
shellcheck, is used by the builder beside it, and fills its placeholders strictly; and the bytes the builders send
are the ones every existing stack was created with.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpu_tenancy.builders import image_load, shell
from gpu_tenancy.builders.bootstrap_token import join_token
from gpu_tenancy.builders.host_worker import fence, hostprep
from gpu_tenancy.builders.kind_cluster import kind
from gpu_tenancy.builders.metallb import admission_gate
from gpu_tenancy.builders.mock_nvml import nvml_mock
from gpu_tenancy.builders.worker import node_proxy, worker_join

REPO = Path(__file__).resolve().parents[1]
BUILDERS = REPO / "gpu_tenancy" / "builders"
FILES = sorted(path for path in BUILDERS.rglob("scripts/*") if path.is_file() and "__pycache__" not in path.parts)
SHELL_FILES = [path for path in FILES if path.suffix == ".sh"]


def _id(path: Path) -> str:
    return str(path.relative_to(BUILDERS))


def _shellcheck() -> str:
    found = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    if not found:
        pytest.skip("shellcheck not installed (pip install -r requirements-dev.txt, or apt-get install shellcheck)")
    return found


def _shell_of(text: str) -> str:
    """bash for a file with a bash shebang (the host scripts, run with `bash`), else sh (pulumi-command's /bin/sh)."""
    return "bash" if text.startswith("#!/usr/bin/env bash\n") else "sh"


def test_there_are_script_files_and_only_shell_and_awk() -> None:
    assert len(SHELL_FILES) >= 20
    assert {path.suffix for path in FILES} == {".sh", ".awk"}


@pytest.mark.parametrize("path", SHELL_FILES, ids=_id)
def test_each_script_file_parses(path: Path) -> None:
    text = path.read_text()
    result = subprocess.run([_shell_of(text), "-n", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", SHELL_FILES, ids=_id)
def test_each_script_file_passes_shellcheck(path: Path, tmp_path: Path) -> None:
    """As a maintainer edits it: placeholders stand in as `0` (a block as `:`), so the line numbers are the file's.
    Allowed here only, as blocks and the scripts that include them share variables: SC2154 (used, never assigned:
    an included block or the environment assigns it) and, in a block (`_*.sh`), SC2034 (assigned, never used: its
    includer uses it). The scripts as sent, blocks in place, are checked without exceptions below."""
    text = path.read_text()
    stand_in = re.sub(r"(?m)^([ \t]*)@[A-Z][A-Z0-9_]*@$", r"\1:", text)
    stand_in = re.sub(r"@[A-Z][A-Z0-9_]*@", "0", stand_in)
    checked = tmp_path / path.name
    checked.write_text(stand_in)
    allowed = "SC2154,SC2034" if path.name.startswith("_") else "SC2154"
    result = subprocess.run([_shellcheck(), "-s", _shell_of(text), "-e", allowed, str(checked)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def orphans(files: list[Path]) -> list[str]:
    """Script files no module of the folder that holds their scripts/ folder reads (`script(__name__, "<name>"`)."""
    found = []
    for path in files:
        sources = "".join(module.read_text() for module in sorted(path.parent.parent.glob("*.py")))
        if not re.search(rf'\bscript\(\s*__name__,\s*"{re.escape(path.name)}"', sources):
            found.append(path.name)
    return found


def test_each_script_file_is_read_by_a_builder_beside_it() -> None:
    assert orphans(FILES) == []


def test_an_orphan_is_found(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    for name in ("used.sh", "orphan.sh", "_block.sh"):
        (tmp_path / "scripts" / name).write_text("true\n")
    (tmp_path / "builder.py").write_text('x = shell.script(__name__, "used.sh")\ny = script(__name__, "_block.sh")\n'
                                         '# script(__name__, "orphan.sh.old")\n')
    assert orphans(sorted((tmp_path / "scripts").iterdir())) == ["orphan.sh"]


# --------------------------------------------------------------------------- placeholders


def test_an_inline_placeholder_takes_its_value_as_it_is() -> None:
    assert shell.render("a @X@ b @X@\n", {"X": "'q' \\n"}) == "a 'q' \\n b 'q' \\n\n"


def test_a_placeholder_on_its_own_line_takes_a_block_indented_as_it_is() -> None:
    template = "if x; then\n    @BLOCK@\nfi\n"
    assert shell.render(template, {"BLOCK": "one \\\n  two\n\nthree\n"}) == \
        "if x; then\n    one \\\n      two\n\n    three\nfi\n"


def test_a_block_must_end_with_a_newline() -> None:
    with pytest.raises(ValueError, match="@BLOCK@ stands on a line of its own"):
        shell.render("@BLOCK@\n", {"BLOCK": "no newline"})


@pytest.mark.parametrize("values", [{}, {"X": "1", "Y": "2"}, {"x": "1"}])
def test_a_missing_or_unused_value_is_refused(values: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="placeholders"):
        shell.render("sleep @X@\n", values)


def test_shell_words_with_an_at_sign_are_no_placeholders() -> None:
    text = 'date -u -d "@$expires"; echo "$@" user@host @lower@ @9X@\n'
    assert shell.placeholders(text) == set()
    assert shell.render(text, {}) == text


def test_a_value_is_not_filled_again() -> None:
    assert shell.render("x=@A@\n", {"A": "@B@"}) == "x=@B@\n"


# --------------------------------------------------------------------------- the bytes sent

# sha256 of what each builder sent before its script became a file. A script's bytes are inputs of the resources
# that run it: a change replaces those resources on the next `up` (a host prepared, fenced or joined again). Change
# a pin only with a change meant to do that.
SENT: list[tuple[str, Callable[[], str], str]] = [
    ("join", lambda: worker_join.join_script("tenant-a"),
     "ed35a69ddd00dffa7d13c07c867b8b0ca10c20df6ed42c158be81a353f207df5"),
    ("leave", worker_join.leave_script, "bc9d9c9f6d9c2ccbcdc09605058bed0cb22952f0be39e8f3d5595034aca5faad"),
    ("reset", worker_join.reset_script, "2f0a44ae189528e1e9aa23a10e5e556afb289df6d2ad53bbb6c13c3a813c554c"),
    ("proxy apply", node_proxy.apply_script, "0c46e153cc4ef781c05e480ba88b78058520a779ee300832a9f453256b7cf0eb"),
    ("proxy remove", node_proxy.remove_script, "9c25d51357429c541fa58969634c062fd4e99b7614545c83a91d3c4218a3165b"),
    ("prepare", lambda: hostprep.prepare_script("v1.35.5"),
     "af72eb33bb7669ff3d8bb8e237bbc93944ca6420aeabef208b978a6232ed1e4f"),
    ("remove node", hostprep.remove_node_script, "e7aeb6efce9128b7d5e23eb499289bec6bd23a6bcede13523fa2538fa3cf4072"),
    ("remove stale node", hostprep.remove_stale_node_script,
     "f2fbde87f38f88e95a92c62ce35cc48eab72878c2a7a00a65e22c37346aa2538"),
    ("fence", fence.fence_command, "1c45adb7b2587bde4787f219d146ae814743a5597a3ef22ff9a135024a7f2e48"),
    ("unfence", fence.unfence_command, "36eaf7252cb509883819265b468a1ecf5cb7096fb6ca10f5c0de47b3ba6f80af"),
    ("admission gate", lambda: admission_gate.wait_until_admitted_script("controller", "metallb-system"),
     "46b3e4c06d3c57f8b7c931418513427399ddcb9212da9f3da162fb1e99683aaa"),
    ("image load", image_load.load_script, "9487562475ed3e7e48655035cbe1690b8f2b38ad903d13d4f11c9a6dd0e1c780"),
    ("kind create", lambda: kind.create_command("gpu-tenancy-dev", "kindest/node:v1.35.0@sha256:abc"),
     "5767b91dace161272fdfd3e1d7b8288b3f337d81e778fdbb7b4cef4d3d493d1a"),
    ("kind delete", lambda: kind.delete_command("gpu-tenancy-dev"),
     "47f51ffdc34ba2c4c33c621745ae28d632b36574e5071e0c8034ddd2c01c5cef"),
    ("nvml-mock build", nvml_mock.build_script, "93902946e0fc927f19fc628c4051528c3b65444c4cebad141931738f7e39991f"),
    ("no host GPUs", nvml_mock.no_host_gpus_script,
     "a4968adb1fe12b4605a1e74fadf470816905d8c62f2cda696f6de2f9d84f3c7c"),
    ("token mint", lambda: join_token.mint_script("tenant-a"),
     "48699907e4583d98eb81db229429c59a199e2833c4e2f507cc5cbcb68f254e73"),
    ("token keep", join_token.keep_script, "3afda6a75888e894a6df6a4e00e405746bca002c22e77b67949ea04a2587eb05"),
    ("token revoke", join_token.revoke_script, "0305d5bdebfb6ad78da25fa05fcbdeb880134d6c88b44472a4af8b8ec307d22a"),
]


@pytest.mark.parametrize(("build", "pinned"), [(build, pinned) for _, build, pinned in SENT],
                         ids=[name for name, _, _ in SENT])
def test_the_bytes_sent_are_the_ones_existing_stacks_hold(build: Callable[[], str], pinned: str) -> None:
    assert hashlib.sha256(build().encode()).hexdigest() == pinned


@pytest.mark.parametrize("build", [build for _, build, _ in SENT], ids=[name for name, _, _ in SENT])
def test_the_scripts_as_sent_pass_shellcheck(build: Callable[[], str], tmp_path: Path) -> None:
    text = build()
    if text.startswith("sudo -n bash -c "):  # fence_command: the script is its one quoted argument
        _, _, _, _, text = shlex.split(text)
    checked = tmp_path / "sent.sh"
    checked.write_text(text)
    result = subprocess.run([_shellcheck(), "-s", _shell_of(text), str(checked)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout

