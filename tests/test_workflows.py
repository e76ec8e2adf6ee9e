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


def _steps(workflow: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(job id, job, step) for every step of a workflow."""
    jobs = _load(WORKFLOW_DIR / workflow)["jobs"]
    return [(name, job, step) for name, job in jobs.items() for step in job["steps"]]


def _pulumi_command(step: dict[str, Any]) -> str | None:
    """The pulumi/actions command of a step (None: not a pulumi/actions step, or install only)."""
    if "pulumi/actions" not in step.get("uses", ""):
        return None
    command: str | None = step.get("with", {}).get("command")
    return command


def _runs_pulumi(step: dict[str, Any]) -> bool:
    return _pulumi_command(step) is not None or bool(re.search(r"(^|[|;&]\s*|\n\s*)pulumi\s", step.get("run", "")))


def _labels(workflow: str, job: str) -> set[str]:
    return set(_load(WORKFLOW_DIR / workflow)["jobs"][job]["runs-on"])


def test_preview_covers_both_stacks_with_policy_pack() -> None:
    previews = [step for _, _, step in _steps("preview.yml") if _pulumi_command(step) == "preview"]
    assert {step["with"]["stack-name"] for step in previews} == {"dev", "gpu"}, previews
    assert all(step["with"]["policyPacks"] == "policies" for step in previews), previews
    on_pr = {name for name, job, _ in _steps("preview.yml") if "pull_request" in str(job.get("if"))}
    commented = {name for name, _, step in _steps("preview.yml") if step.get("with", {}).get("comment-on-pr")}
    assert on_pr and on_pr == commented, "every PR preview must comment on the PR"


@pytest.mark.parametrize("workflow", [p.name for p in WORKFLOWS])
def test_secrets_reach_only_the_steps_that_run_pulumi(workflow: str) -> None:
    loaded = _load(WORKFLOW_DIR / workflow)
    assert "secrets." not in str(loaded.get("env", {})), f"{workflow}: secrets in the workflow-level env"
    for name, job in loaded["jobs"].items():
        assert "secrets." not in str(job.get("env", {})), f"{workflow}/{name}: secrets in the job-level env"
    for name, _, step in _steps(workflow):
        if "secrets.PULUMI_CONFIG_PASSPHRASE" in str(step.get("env", {})):
            assert _runs_pulumi(step), f"{workflow}/{name}: {step.get('name')} gets the passphrase but runs no pulumi"
        if _pulumi_command(step):
            assert step.get("env", {}).get("PULUMI_CONFIG_PASSPHRASE") == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}", (
                f"{workflow}/{name}: {step.get('name')} runs pulumi without the passphrase"
            )


def test_every_deploy_is_gated_by_a_policy_preview_first() -> None:
    """pulumi/actions' `up` is the Automation API's `pulumi up --yes --skip-preview` (pulumi/pulumi
    sdk/nodejs/automation/stack.ts `up`): without a preview step before it, stack policies run only
    after everything is deployed (pkg/resource/deploy/deployment_executor.go, AnalyzeResources)."""
    jobs: dict[str, list[dict[str, Any]]] = {}
    for name, _, step in _steps("preview.yml"):
        jobs.setdefault(name, []).append(step)
    ups = 0
    for name, steps in jobs.items():
        for index, step in enumerate(steps):
            if _pulumi_command(step) != "up":
                continue
            ups += 1
            stack = step["with"]["stack-name"]
            before = [s for s in steps[:index] if _pulumi_command(s) == "preview" and s["with"]["stack-name"] == stack]
            assert before, f"{name}: `up` of {stack} without a preview before it"
            assert before[-1]["with"]["policyPacks"] == step["with"]["policyPacks"] == "policies"
    assert ups, "no deploy found in preview.yml"


def test_e2e_never_runs_on_the_runner_that_keeps_the_dev_stack() -> None:
    """tests/integration refuses a host with another gpu-tenancy kind cluster (conflicting_clusters):
    on the runner where up-dev keeps gpu-tenancy-dev deployed, the nightly e2e would fail every night."""
    e2e, dev = _labels("e2e.yml", "e2e"), _labels("preview.yml", "up-dev")
    assert "gpu-tenancy-e2e" in e2e - dev and "gpu-tenancy-dev" in dev - e2e, (e2e, dev)
    # A file:// backend lives on the runner: the dev preview must read the state up-dev writes.
    assert _labels("preview.yml", "preview-dev") == dev


def test_gpu_preview_runs_only_where_its_credentials_exist() -> None:
    import yaml as pyyaml

    from gpu_tenancy.config import SECRET_KEYS

    jobs = _load(WORKFLOW_DIR / "preview.yml")["jobs"]
    gpu = [name for name, _, step in _steps("preview.yml") if step.get("with", {}).get("stack-name") == "gpu"]
    assert gpu and set(gpu) == {"preview-gpu"}, gpu
    condition = jobs["preview-gpu"]["if"]
    assert "vars.GPU_STACK_PREVIEW == 'true'" in condition, condition
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition, "forks get no secrets"
    assert "GPU_STACK_PREVIEW" not in str(jobs["preview-dev"].get("if")), "the dev preview must always run"
    assert "gpu-tenancy-gpu" in _labels("preview.yml", "preview-gpu")
    steps = jobs["preview-gpu"]["steps"]
    (preview_index,) = [i for i, step in enumerate(steps) if _pulumi_command(step) == "preview"]
    given = "\n".join(step.get("run", "") for step in steps[:preview_index])
    stack_config = pyyaml.safe_load((WORKFLOW_DIR.parents[1] / "Pulumi.gpu.yaml").read_text())["config"]
    for key in SECRET_KEYS:
        if f"gpu-tenancy:{key}" in stack_config:
            continue
        assert re.search(rf"\| pulumi config set --secret (--raw )?--stack gpu gpu-tenancy:{key}$", given, re.M), (
            f"the gpu preview needs gpu-tenancy:{key}, set from a secret on stdin before the preview"
        )
