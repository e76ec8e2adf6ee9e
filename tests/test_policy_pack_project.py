"""policies/PulumiPolicy.yaml as the Python language host reads it.

Follows pulumi/pulumi v3.259.0 (the newest tag in the mirror; v3.272.0's source is not available here):
``sdk/python/cmd/pulumi-language-python/main.go`` ``parseOptions`` (accepted ``toolchain`` values) and
``RunPlugin`` (analyzers are not plugins, so no ``venv`` default); ``pkg/resource/plugin/analyzer_plugin.go``
``NewPolicyAnalyzer`` (root directory = the policy pack directory); ``sdk/python/toolchain/pip.go``
``resolveVirtualEnvironmentPath`` (a relative virtualenv is joined to that root).
"""

from __future__ import annotations

from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
PACK_DIR = REPO_ROOT / "policies"
# parseOptions: any other string is "unsupported toolchain option"; unset means Auto (lock-file search).
TOOLCHAINS = {"pip", "poetry", "uv"}


def _options(project_file: Path) -> dict[str, str]:
    runtime = yaml.safe_load(project_file.read_text())["runtime"]
    assert runtime["name"] == "python", project_file
    return dict(runtime.get("options") or {})


def _virtualenv(root: Path, options: dict[str, str]) -> Path:
    virtualenv = Path(options["virtualenv"])
    return (virtualenv if virtualenv.is_absolute() else root / virtualenv).resolve()


def test_policy_pack_uses_pip_explicitly_like_the_program() -> None:
    pack = _options(PACK_DIR / "PulumiPolicy.yaml")
    program = _options(REPO_ROOT / "Pulumi.yaml")
    assert pack.get("toolchain") in TOOLCHAINS, "unset: Auto would pick uv/poetry from any lock file up the tree"
    assert pack["toolchain"] == program["toolchain"] == "pip"


def test_policy_pack_runs_in_the_programs_venv() -> None:
    pack = _options(PACK_DIR / "PulumiPolicy.yaml")
    program = _options(REPO_ROOT / "Pulumi.yaml")
    assert _virtualenv(PACK_DIR, pack) == _virtualenv(REPO_ROOT, program) == (REPO_ROOT / ".venv").resolve()
