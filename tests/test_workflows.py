"""Lint the GitHub workflows offline.

Uses the ``actionlint`` binary when it is on PATH; otherwise validates each workflow with
jsonschema against the ``github-workflow`` schema vendored by the PyPI package
``check-jsonschema`` (``pip install check-jsonschema``), plus project rules (pinned actions).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOW_DIR = Path(__file__).resolve().parents[1] / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
# A full commit SHA (tags can be moved) with the release it is, as `uses: owner/action@<sha>  # vX.Y.Z`.
PINNED_ACTION = re.compile(r"^\s*(?:-\s+)?uses:\s*[\w.-]+/[\w./-]+@[0-9a-f]{40}\s+#\s*v\d+\.\d+\.\d+\s*$")


def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True; the schema expects the string.
    if True in loaded:
        loaded["on"] = loaded.pop(True)
    return loaded


def _github_workflow_schema() -> dict[str, Any]:
    pytest.importorskip("check_jsonschema", reason="pip install check-jsonschema (vendors the github-workflow schema)")
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads(vendor.joinpath("github-workflows.json").read_text())


def test_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} >= {"e2e.yml", "preview.yml"}, f"workflows found: {WORKFLOWS}"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_github_schema(workflow: Path) -> None:
    import jsonschema

    actionlint = shutil.which("actionlint")
    if actionlint:
        result = subprocess.run([actionlint, str(workflow)], capture_output=True, text=True)
        assert result.returncode == 0, f"actionlint {workflow.name}:\n{result.stdout}{result.stderr}"
        return
    errors = sorted(jsonschema.Draft7Validator(_github_workflow_schema()).iter_errors(_load(workflow)), key=str)
    assert not errors, f"{workflow.name} violates the github-workflow schema:\n" + "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors
    )


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit(workflow: Path) -> None:
    uses = [line for line in workflow.read_text().splitlines() if re.match(r"^\s*(?:-\s+)?uses:", line)]
    unpinned = [line.strip() for line in uses if not PINNED_ACTION.match(line)]
    assert uses and not unpinned, f"{workflow.name}: pin actions to a commit SHA with a '# vX.Y.Z' comment: {unpinned}"


def test_workflows_pass_zizmor() -> None:
    """zizmor (PyPI, requirements-dev.txt) audits the workflows offline: pinning, permissions, injection."""
    zizmor = shutil.which("zizmor") or str(Path(sys.executable).parent / "zizmor")
    result = subprocess.run([zizmor, "--offline", "--no-progress", str(WORKFLOW_DIR)], capture_output=True, text=True)
    assert result.returncode == 0, f"zizmor findings:\n{result.stdout}{result.stderr}"


def test_preview_covers_both_stacks_with_policy_pack() -> None:
    jobs = _load(WORKFLOW_DIR / "preview.yml")["jobs"]
    assert jobs["preview"]["strategy"]["matrix"]["stack"] == ["dev", "gpu"]
    steps = [s for job in jobs.values() for s in job["steps"] if "pulumi/actions" in s.get("uses", "")]
    assert steps and all(s["with"]["policyPacks"] == "policies" for s in steps), steps
    assert any(s["with"].get("comment-on-pr") for s in steps), "PR preview must comment on the PR"
