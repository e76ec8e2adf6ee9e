"""The pull request's plan and preview comments (gpu_tenancy/cli/pull_requests/report.py, gpu_tenancy/cli/pull_requests/github_comments.py).

FakeGitHub answers as the REST API does for issue comments (docs.github.com/en/rest/issues/comments,
2022-11-28): ascending ids, ``per_page`` default 30 and at most 100, the next page in the ``Link`` header
(absolute URL, ``rel="next"``), 201 on create, 200 on update, 401 without a token, 403 for a read-only
(fork) token on writes; comments made with GITHUB_TOKEN are authored by ``github-actions[bot]``.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from loopback import raised_within, silent_port, without_proxies

from gpu_tenancy.cli.plan import command as plan_cli
from gpu_tenancy.cli.pull_requests import github_comments
from gpu_tenancy.cli.pull_requests import report as pr_report
from gpu_tenancy.cli.pull_requests.github_comments import BOT_LOGIN, MAX_COMMENT, marker, publish

REPO_ROOT = Path(__file__).resolve().parents[1]
REPO = "acme/gpu-tenancy"


class FakeGitHub:
    def __init__(self, read_only: bool = False) -> None:
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.requests: list[tuple[str, str]] = []
        self.read_only = read_only
        self.missing: set[int] = set()  # issue numbers the repository has not: 404 "Not Found"
        self.next_id = 1000
        self.sent: list[tuple[str, dict[str, str], bool]] = []  # method, headers, whether a body came with it
        self.link_header = "Link"  # HTTP/2 answers name it `link`
        self.failure: bytes | None = None  # a 502 answer's raw body, for every request
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _reply(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                fake.sent.append((self.command, dict(self.headers), "Content-Length" in self.headers))
                if fake.failure is not None:
                    self.send_response(502)
                    self.send_header("Content-Length", str(len(fake.failure)))
                    self.end_headers()
                    self.wfile.write(fake.failure)
                    return False
                if self.headers.get("Authorization") != "Bearer t0ken":
                    self._reply(401, {"message": "Requires authentication"})
                    return False
                return True

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path))
                if not self._authorized():
                    return
                url = urllib.parse.urlsplit(self.path)
                number = int(url.path.split("/")[-2])
                if number in fake.missing:
                    self._reply(404, {"message": "Not Found"})
                    return
                query = urllib.parse.parse_qs(url.query)
                per_page = min(int(query.get("per_page", ["30"])[0]), 100)
                page = int(query.get("page", ["1"])[0])
                items = sorted(fake.comments.get(number, []), key=lambda c: c["id"])
                chunk = items[(page - 1) * per_page: page * per_page]
                # As GitHub's REST docs show it (using-pagination-in-the-rest-api): after the first page `prev` comes
                # before `next`.
                base = f"http://{self.headers['Host']}{url.path}?per_page={per_page}"
                links = [f'<{base}&page={page - 1}>; rel="prev"'] if page > 1 else []
                if page * per_page < len(items):
                    links.append(f'<{base}&page={page + 1}>; rel="next"')
                links.append(f'<{base}&page=99>; rel="last"')
                headers = {fake.link_header: ", ".join(links)}
                self._reply(200, chunk, headers)

            def _body(self) -> dict[str, Any]:
                return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

            def do_POST(self) -> None:
                fake.requests.append(("POST", self.path))
                if not self._authorized():
                    return
                if fake.read_only:
                    self._reply(403, {"message": "Resource not accessible by integration"})
                    return
                number = int(self.path.split("/")[-2])
                fake.next_id += 1
                comment = {"id": fake.next_id, "body": self._body()["body"], "user": {"login": BOT_LOGIN}}
                fake.comments.setdefault(number, []).append(comment)
                self._reply(201, comment)

            def do_PATCH(self) -> None:
                fake.requests.append(("PATCH", self.path))
                if not self._authorized():
                    return
                comment_id = int(self.path.split("/")[-1])
                for comments in fake.comments.values():
                    for comment in comments:
                        if comment["id"] == comment_id:
                            comment["body"] = self._body()["body"]
                            self._reply(200, comment)
                            return
                self._reply(404, {"message": "Not Found"})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, number: int, body: str, login: str = "someone") -> None:
        self.next_id += 1
        self.comments.setdefault(number, []).append({"id": self.next_id, "body": body, "user": {"login": login}})


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.server.shutdown()


def pr_env(github: FakeGitHub, tmp_path: Path, head: str = REPO, **extra: str) -> dict[str, str]:
    return {
        "GITHUB_API_URL": github.url, "GITHUB_TOKEN": "t0ken", "GITHUB_REPOSITORY": REPO, "PR_NUMBER": "7",
        "PR_HEAD_REPOSITORY": head, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), **extra,
    }


def test_the_comment_is_created_once_then_updated_in_place(github: FakeGitHub, tmp_path: Path) -> None:
    env = pr_env(github, tmp_path)
    assert publish("plan", "first", env) == "comment created"
    assert publish("plan", "second", env) == "comment updated"
    assert publish("preview:dev", "dev", env) == "comment created", "another subject, another comment"
    bodies = [comment["body"] for comment in github.comments[7]]
    assert bodies == [f"{marker('plan')}\nsecond", f"{marker('preview:dev')}\ndev"]
    assert (tmp_path / "summary.md").read_text() == "first\nsecond\ndev\n", "the job summary gets every version"


def test_our_comment_is_found_past_the_first_page(github: FakeGitHub, tmp_path: Path) -> None:
    for index in range(130):
        github.add(7, f"review {index}")
        if index == 110:
            github.add(7, f"{marker('plan')}\nold", login=BOT_LOGIN)
    assert publish("plan", "new", pr_env(github, tmp_path)) == "comment updated"
    assert [c["body"] for c in github.comments[7] if "plan" in c["body"]] == [f"{marker('plan')}\nnew"]
    assert [method for method, _ in github.requests] == ["GET", "GET", "PATCH"], github.requests


@pytest.mark.parametrize("link_header", ["Link", "link"])
def test_our_comment_is_found_on_the_third_page_whatever_the_links_header_is_called(
        github: FakeGitHub, tmp_path: Path, link_header: str) -> None:
    github.link_header = link_header
    for index in range(230):
        github.add(7, f"review {index}")
        if index == 210:
            github.add(7, f"{marker('plan')}\nold", login=BOT_LOGIN)
    assert publish("plan", "new", pr_env(github, tmp_path)) == "comment updated"
    assert [method for method, _ in github.requests] == ["GET", "GET", "GET", "PATCH"], github.requests


def test_each_request_says_what_githubs_rest_api_asks(github: FakeGitHub, tmp_path: Path) -> None:
    # docs.github.com/rest: `Accept: application/vnd.github+json`, `X-GitHub-Api-Version: 2022-11-28`, the token as a
    # Bearer; a JSON body says so, a GET sends none.
    github.add(7, f"{marker('plan')}\nold", login=BOT_LOGIN)
    assert publish("plan", "new", pr_env(github, tmp_path)) == "comment updated"
    assert publish("preview:dev", "new", pr_env(github, tmp_path)) == "comment created"
    assert [(method, body) for method, _, body in github.sent] == [("GET", False), ("PATCH", True), ("GET", False),
                                                                   ("POST", True)]
    for method, headers, _ in github.sent:
        assert headers["Accept"] == "application/vnd.github+json"
        assert headers["X-Github-Api-Version"] == "2022-11-28"
        assert headers["Authorization"] == "Bearer t0ken"
        assert headers.get("Content-Type") == (None if method == "GET" else "application/json")


def test_githubs_error_is_shown_in_its_first_300_characters_whatever_its_bytes(github: FakeGitHub) -> None:
    github.failure = b"\xff" + b"e" * 400  # not UTF-8
    with pytest.raises(github_comments.GitHubError) as error:
        list(github_comments.GitHub(github.url, "t0ken", REPO).comments(7))
    assert str(error.value) == "GitHub API answered 502: \ufffd" + "e" * 299


def test_a_comment_of_exactly_githubs_limit_is_sent(github: FakeGitHub) -> None:
    body = "x" * (MAX_COMMENT - len(marker("plan")) - 1)  # the marker's line, then the body
    assert github_comments.GitHub(github.url, "t0ken", REPO).upsert(7, "plan", body) == "created"


def test_the_job_summary_is_written_only_where_github_actions_names_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    assert github_comments.write_step_summary("a", {}) is False
    assert github_comments.write_step_summary("a", {"GITHUB_STEP_SUMMARY": str(summary)}) is True
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert github_comments.write_step_summary("b") is True  # the process's own environment
    assert summary.read_text() == "a\nb\n"


def test_a_comment_quoting_the_marker_is_not_ours(github: FakeGitHub, tmp_path: Path) -> None:
    github.add(7, f"look: {marker('plan')}", login="mallory")
    assert publish("plan", "new", pr_env(github, tmp_path)) == "comment created"
    assert github.comments[7][0]["body"] == f"look: {marker('plan')}"


def test_a_fork_gets_the_job_summary_only(github: FakeGitHub, tmp_path: Path) -> None:
    said = publish("plan", "body", pr_env(github, tmp_path, head="someone/gpu-tenancy"))
    assert said == "job summary only: someone/gpu-tenancy is a fork, whose token cannot comment"
    assert github.requests == [] and (tmp_path / "summary.md").read_text() == "body\n"


def test_a_read_only_token_leaves_the_job_summary(tmp_path: Path) -> None:
    github = FakeGitHub(read_only=True)
    try:
        said = publish("plan", "body", pr_env(github, tmp_path))
    finally:
        github.server.shutdown()
    assert said.startswith("job summary only: GitHub API answered 403") and (tmp_path / "summary.md").exists()


@pytest.mark.parametrize(("token", "missing", "answer"), [
    ("expired", set(), '401: {"message": "Requires authentication"}'),
    ("t0ken", {7}, '404: {"message": "Not Found"}'),
])
def test_a_token_github_refuses_leaves_the_job_summary(github: FakeGitHub, tmp_path: Path, token: str,
                                                       missing: set[int], answer: str) -> None:
    github.missing = missing
    said = publish("plan", "body", pr_env(github, tmp_path, GITHUB_TOKEN=token))
    assert said == f"job summary only: GitHub API answered {answer}"
    assert (tmp_path / "summary.md").read_text() == "body\n"


def test_too_long_a_comment_is_refused_before_sending(github: FakeGitHub) -> None:
    with pytest.raises(ValueError, match="GitHub takes 65536"):
        github_comments.GitHub(github.url, "t0ken", REPO).upsert(7, "plan", "x" * MAX_COMMENT)
    assert github.requests == []


# ----------------------------------------------------------------------------------------------- backend


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("file://~", "/home/ci"),
        ("file://~/.pulumi-state", "/home/ci/.pulumi-state"),
        ("file:///srv/state?no_tmp_dir=true", "/srv/state"),
        ("s3://bucket/prefix", None),
        ("https://api.pulumi.com", None),
    ],
)
def test_file_backend_directories_resolve_as_the_cli_does(url: str, expected: str | None) -> None:
    resolved = pr_report.file_backend_dir(url, home="/home/ci")
    assert (str(resolved) if resolved else None) == expected


def test_a_relative_file_backend_is_made_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert pr_report.file_backend_dir("file://state") == tmp_path / "state"
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path}/deep/state")
    assert pr_report.main(["backend-dir"]) == 0 and (tmp_path / "deep" / "state").is_dir()


# ------------------------------------------------------------------------------------------------ preview


def policy_event(level: str, name: str, urn: str | None = None) -> Any:
    """An engine event as the Automation API parses it (pulumi apitype.PolicyEvent JSON)."""
    from pulumi import automation as auto

    policy = {"message": f"{name} says no\nsecond line", "color": "never", "policyName": name,
              "policyPackName": "gpu-tenancy", "policyPackVersion": "0.1.0", "enforcementLevel": level,
              **({"resourceUrn": urn} if urn else {})}
    return auto.EngineEvent.from_json({"sequence": 1, "timestamp": 0, "policyEvent": policy})


def test_a_failed_preview_names_its_mandatory_violations_first() -> None:
    events = [
        policy_event("advisory", "charts-pinned"),
        policy_event("mandatory", "tenant-provider-isolation",
                     "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant::tenant-a"),
    ]
    findings = pr_report.policy_findings(events)
    run = pr_report.PreviewRun("dev", ["base/policies"], False, "Previewing update (dev):\n...", findings, "exit 255")
    body = pr_report.preview_comment(run)
    assert body.startswith("### ❌ `pulumi preview` of `dev` failed: 1 mandatory policy violation(s)\n"), body
    violations = [line for line in body.splitlines() if line.startswith("- ")]
    assert violations == [
        "- ❌ **mandatory** `gpu-tenancy/tenant-provider-isolation` on `tenant-a`: tenant-provider-isolation says no second line",
        "- ⚠️ **advisory** `gpu-tenancy/charts-pinned`: charts-pinned says no second line",
    ]
    assert "Policy pack: `base/policies` (from the base branch)." in body and "exit 255" in body


def test_a_preview_that_failed_without_a_violation_shows_the_error() -> None:
    run = pr_report.PreviewRun("gpu", ["base/policies"], False, "", [], "error: program failed: KeyError 'hosts'")
    body = pr_report.preview_comment(run)
    assert "failed (no policy violation: see the error below)" in body and "KeyError 'hosts'" in body


def test_a_fresh_stacks_preview_says_everything_shows_as_created() -> None:
    run = pr_report.PreviewRun("gpu", ["base/policies"], True, "+ 120 to create", [], fresh=True)
    body = pr_report.preview_comment(run)
    assert body.startswith("### ✅ `pulumi preview` of `gpu` passed the policy pack")
    assert "holds no state of `gpu`, so everything shows as created" in body


def test_a_long_preview_keeps_its_end_within_a_comment() -> None:
    output = "\n".join(f"    + resource {index}" for index in range(20_000)) + "\nResources:\n    + 20000 to create"
    body = pr_report.preview_comment(pr_report.PreviewRun("dev", ["p"], True, output))
    assert len(marker("preview:dev")) + 1 + len(body) <= MAX_COMMENT
    assert "+ 20000 to create" in body and "the beginning is cut" in body


class FakeWorkspace:
    """LocalWorkspace.list_stacks and create_or_select_stack, as pulumi 3.272.0 pulumi/automation defines them."""

    stacks: ClassVar[list[str]] = []
    previews: ClassVar[list[dict[str, Any]]] = []
    fail = False

    def __init__(self, work_dir: str) -> None:
        pass

    def list_stacks(self) -> list[Any]:
        from types import SimpleNamespace

        return [SimpleNamespace(name=name) for name in self.stacks]


class FakeStack:
    def preview(self, **kwargs: Any) -> None:
        from pulumi import automation as auto
        from pulumi.automation._cmd import CommandResult

        FakeWorkspace.previews.append(kwargs)
        kwargs["on_output"]("Previewing update (dev):")
        kwargs["on_event"](policy_event("mandatory", "gpu-plan-fits"))
        if FakeWorkspace.fail:
            raise auto.CommandError(CommandResult("", "error: preview failed", 255))


def test_run_preview_drives_the_automation_api(monkeypatch: pytest.MonkeyPatch) -> None:
    from pulumi import automation as auto

    monkeypatch.setattr(auto, "LocalWorkspace", FakeWorkspace)
    monkeypatch.setattr(auto, "create_or_select_stack", lambda name, work_dir: FakeStack())
    FakeWorkspace.stacks, FakeWorkspace.previews, FakeWorkspace.fail = ["organization/gpu-tenancy/dev"], [], True
    run = pr_report.run_preview("dev", ["base/policies"])
    assert (run.succeeded, run.fresh, [f.policy for f in run.findings]) == (False, False, ["gpu-plan-fits"])
    assert "error: preview failed" in run.error and run.output == "Previewing update (dev):"
    (call,) = FakeWorkspace.previews
    assert (call["diff"], call["policy_packs"], call["color"]) == (True, ["base/policies"], "never")
    FakeWorkspace.stacks, FakeWorkspace.fail = [], False
    run = pr_report.run_preview("gpu", ["base/policies"])
    assert run.succeeded and run.fresh


# --------------------------------------------------------------------------------------------------- plan


def test_the_plan_comment_holds_every_stacks_report(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """What `make plan STACK=<s> > <s>.txt; echo $? > <s>.exit` leaves, from the real planner CLI."""
    plans = tmp_path / "plan"
    plans.mkdir()
    for stack, source in (("dev", "Pulumi.dev.yaml"), ("overcommit", "examples/plan-overcommit.json")):
        code = plan_cli.main(["report", str(REPO_ROOT / source), "--width", "100"])
        (plans / f"{stack}.txt").write_text(capsys.readouterr().out)
        (plans / f"{stack}.exit").write_text(f"{code}\n")
    results = pr_report.read_plans(plans)
    assert [(r.stack, r.exit_code) for r in results] == [("dev", 0), ("overcommit", 1)]
    body = pr_report.plan_comment(results, "https://github.com/acme/gpu-tenancy/actions/runs/1/artifacts/2")
    assert "| `dev` | ✅ fits whatever the order |" in body
    assert "| `overcommit` | ❌ a replica fits in no order |" in body
    assert "does not fit in any order: a-infer replica 5: 1/1 CardInsufficientCore" in body
    assert "[plan PNGs](https://github.com/acme/gpu-tenancy/actions/runs/1/artifacts/2)" in body
    assert (plans / "dev.txt").read_text().rstrip() in body
    assert "<details open><summary><code>overcommit</code>" in body, "what does not fit is shown open"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.delenv("PR_NUMBER", raising=False)
    assert pr_report.main(["plan", str(plans)]) == 1, "a plan that does not fit fails the job, after publishing"
    assert (tmp_path / "summary.md").read_text().startswith("### Capacity plan")
    assert pr_report.main(["plan", str(tmp_path / "empty")]) == 2
    # A plan that depends on the order is shown open with its verdict and does not fail the job.
    (plans / "overcommit.exit").write_text("3\n")
    assert "| `overcommit` | ⚠️ a replica fits in some orders only |" in pr_report.plan_comment(
        pr_report.read_plans(plans), None)
    assert pr_report.main(["plan", str(plans)]) == 0


# ------------------------------------------------------------------------------------ the comments' markdown
# Typed out as a reviewer reads them on GitHub: each blank line separates a heading, a list or a fence from
# what follows, without which GitHub's markdown runs them together.

PREVIEW_FAILED = """\
### ❌ `pulumi preview` of `dev` failed: 1 mandatory policy violation(s)

Policy pack: `base/policies` (from the base branch).

**Policy violations**

- ❌ **mandatory** `gpu-tenancy/tenant-provider-isolation` on `tenant-a`: tenant-provider-isolation says no second line

**Error**

```text
error: update failed
```

<details><summary>pulumi preview --diff</summary>

```diff
Previewing update (dev):
    + gpu-tenancy:tenant:Tenant tenant-a create
```
</details>
"""


def test_the_preview_comment_as_github_shows_it() -> None:
    findings = pr_report.policy_findings([policy_event(
        "mandatory", "tenant-provider-isolation", "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant::tenant-a")])
    run = pr_report.PreviewRun("dev", ["base/policies"], False,
                               "Previewing update (dev):\n    + gpu-tenancy:tenant:Tenant tenant-a create\n",
                               findings, "\nerror: update failed\n")
    assert pr_report.preview_comment(run) == PREVIEW_FAILED


def test_a_cut_preview_says_so_between_the_summary_and_the_diff() -> None:
    output = "\n".join(f"    + resource {index}" for index in range(20_000)) + "\nResources:\n    + 20000 to create"
    body = pr_report.preview_comment(pr_report.PreviewRun("dev", ["p"], True, output))
    assert body.startswith("### ✅ `pulumi preview` of `dev` passed the policy pack\n\nPolicy pack: `p` (from the "
                           "base branch).\n\n<details><summary>pulumi preview --diff</summary>\n\n(the beginning is "
                           "cut: the full output is in the job's log)\n\n```diff\n    + resource ")
    assert body.endswith("\nResources:\n    + 20000 to create\n```\n</details>\n")


PLAN = """\
### Capacity plan

What HAMi would place on each stack's declared GPUs (`make plan STACK=<s>`).

| stack | verdict |
|---|---|
| `dev` | ✅ fits whatever the order |
| `overcommit` | ❌ a replica fits in no order |

Pictures of the allocation: [plan PNGs](https://example.test/artifacts/2) (a workflow artifact).

<details><summary><code>dev</code></summary>

```text
tenant-a: fits
```
</details>

<details open><summary><code>overcommit</code></summary>

```text
a-infer replica 5: 1/1 CardInsufficientCore
```
</details>
"""


def test_the_plan_comment_as_github_shows_it() -> None:
    results = [pr_report.PlanResult("dev", 0, "tenant-a: fits\n"),
               pr_report.PlanResult("overcommit", 1, "a-infer replica 5: 1/1 CardInsufficientCore\n")]
    assert pr_report.plan_comment(results, "https://example.test/artifacts/2") == PLAN


def test_a_cut_plan_report_says_so_before_its_fence() -> None:
    report = "\n".join(f"row {index}" for index in range(20_000)) + "\nverdict: fits"
    body = pr_report.plan_comment([pr_report.PlanResult("dev", 0, report)], None)
    assert "|---|---|\n| `dev` | ✅ fits whatever the order |\n\n<details><summary><code>dev</code></summary>\n\n" \
           "(cut: the full report is in the job's log)\n\n```text\nrow " in body
    assert body.endswith("\nverdict: fits\n```\n</details>\n")


@pytest.mark.parametrize(("drop", "said"), [
    ("PR_NUMBER", "job summary only: not a pull request"),
    ("GITHUB_TOKEN", "job summary only: no GITHUB_TOKEN"),
    ("PR_HEAD_REPOSITORY", "job summary only: PR_HEAD_REPOSITORY is empty: the pull request's head repository is "
                           "unknown (a deleted fork?)"),
])
def test_a_run_that_may_not_comment_says_why(github: FakeGitHub, tmp_path: Path, drop: str, said: str) -> None:
    env = pr_env(github, tmp_path)
    del env[drop]
    assert publish("plan", "body", env) == said and github.requests == []


def test_the_api_is_githubs_own_unless_the_runner_names_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GITHUB_API_URL is set on every GitHub-hosted runner; without it, api.github.com (GitHub's REST docs).
    seen: list[str] = []

    class Recording(github_comments.GitHub):
        def upsert(self, number: int, subject: str, body: str) -> str:
            seen.append(self.api_url)
            assert (self.token, self.repository, number) == ("t0ken", REPO, 7)
            return "created"

    monkeypatch.setattr(github_comments, "GitHub", Recording)
    env = {"GITHUB_TOKEN": "t0ken", "GITHUB_REPOSITORY": REPO, "PR_NUMBER": "7", "PR_HEAD_REPOSITORY": REPO}
    assert publish("plan", "body", env) == "comment created"
    assert publish("plan", "body", {**env, "GITHUB_API_URL": "https://ghe.example.com/api/v3"}) == "comment created"
    assert seen == ["https://api.github.com", "https://ghe.example.com/api/v3"]


def test_the_job_summary_is_written_as_utf8_whatever_the_runners_locale(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    summary = tmp_path / "summary.md"
    env = {**os.environ, "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0", "GITHUB_STEP_SUMMARY": str(summary)}
    done = subprocess.run([sys.executable, "-c", "from gpu_tenancy.cli.pull_requests.github_comments import "
                           "write_step_summary; write_step_summary('plan \\u2713 \\u00e9quipe')"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert summary.read_text(encoding="utf-8") == "plan ✓ équipe\n"


# --------------------------------------------------------------------------- cuts, budgets and what a run keeps


def test_a_file_backend_with_a_question_mark_in_its_query_and_the_users_own_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    assert str(pr_report.file_backend_dir("file:///srv/state?a=1?b=2", home="/h")) == "/srv/state"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert pr_report.file_backend_dir("file://~/state") == tmp_path / "state"


def test_a_tail_within_its_budget_is_whole_and_a_cut_starts_at_a_whole_line() -> None:
    assert pr_report._tail("ab\ncd", 5) == ("ab\ncd", False)  # exactly the budget: not cut
    assert pr_report._tail("0123\nab\ncd\nef", 9) == ("ab\ncd\nef", True)  # 9 kept: "\nab\ncd\nef"
    assert pr_report._tail("abcdef", 3) == ("def", True)  # no line break in what is kept: kept as it is


def test_an_error_keeps_its_last_6000_characters_from_a_whole_line() -> None:
    # 6051 characters; the one 6001 from the end is a line break, so the last 6000 begin at line "X…"'s start,
    # which is then not whole as far as the cut can tell: it is dropped with what comes before it.
    error = "A" * 50 + "\n" + "X" * 10 + "\n" + "B" * 5989
    body = pr_report.preview_comment(pr_report.PreviewRun("dev", ["p"], False, "", [], error))
    block = body.split("**Error**\n\n```text\n", 1)[1].split("\n```", 1)[0]
    assert block == "B" * 5989


def test_a_passing_preview_counts_its_advisory_findings_and_names_every_pack() -> None:
    findings = [pr_report.PolicyFinding("advisory", "gpu-tenancy", name, "m", None) for name in ("a", "b")]
    body = pr_report.preview_comment(pr_report.PreviewRun("dev", ["base/policies", "extra"], True, "", findings))
    assert body.splitlines()[0] == "### ✅ `pulumi preview` of `dev` passed the policy pack (2 advisory finding(s))"
    assert body.splitlines()[2] == "Policy pack: `base/policies, extra` (from the base branch)."


def test_a_fresh_stacks_note_in_full() -> None:
    body = pr_report.preview_comment(pr_report.PreviewRun("gpu", ["p"], True, "", fresh=True))
    assert ("\n⚠️ The backend holds no state of `gpu`, so everything shows as created. A preview against the deployed "
            "stack needs the backend it is deployed from (docs/pull-request-previews.md).\n") in body


def test_the_preview_output_gets_what_the_lines_above_it_leave_of_its_budget() -> None:
    """OUTPUT_BUDGET covers everything above the output block (each line and its break) and the output kept."""
    findings = [pr_report.PolicyFinding("mandatory", "gpu-tenancy", f"p{i}", "why " * 60, None) for i in range(120)]
    output = "\n".join(f"line{i:05d}" for i in range(8_000))  # 10 characters a line with its break
    body = pr_report.preview_comment(pr_report.PreviewRun("dev", ["p"], False, output, findings))
    above, rest = body.split("\n\n<details>", 1)
    kept = rest.split("```diff\n", 1)[1].split("\n```", 1)[0]
    room = pr_report.OUTPUT_BUDGET - (len(above) + 1)
    assert room - 10 < len(kept) <= room
    assert len(marker("preview:dev")) + 1 + len(body) <= MAX_COMMENT


def test_a_plan_report_is_cut_to_its_share_of_the_comment_from_a_whole_line(tmp_path: Path) -> None:
    share = MAX_COMMENT - 4_000  # one stack: all of it
    # The character `share + 1` from the end is a line break: the kept part starts with the whole line "X…".
    report = "A" * 50 + "\n" + "X" * 10 + "\n" + "B" * (share - 12)
    body = pr_report.plan_comment([pr_report.PlanResult("dev", 0, report)], None)
    kept = body.split("```text\n", 1)[1].split("\n```", 1)[0]
    assert kept == "X" * 10 + "\n" + "B" * (share - 12)


def test_plans_without_a_report_an_empty_exit_file_and_an_unknown_exit_code(tmp_path: Path) -> None:
    (tmp_path / "a.exit").write_text("")  # make plan died before writing its code: the usage verdict
    (tmp_path / "b.exit").write_text("7\n")
    (tmp_path / "b.txt").write_bytes(b"fits \xff\n")
    results = pr_report.read_plans(tmp_path)
    assert [(r.stack, r.exit_code, r.report) for r in results] == [("a", 2, ""), ("b", 7, "fits \ufffd\n")]
    body = pr_report.plan_comment(results, None)
    assert "| `a` | ❌ the stack file or the command is wrong |" in body and "| `b` | ❌ exit 7 |" in body
    assert "<summary><code>a</code></summary>\n\n```text\n\n```" in body


def test_run_preview_keeps_what_it_was_given_and_what_it_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    from pulumi import automation as auto

    places: list[tuple[str, str]] = []

    class Workspace(FakeWorkspace):
        def __init__(self, work_dir: str) -> None:
            places.append(("workspace", work_dir))

    class TwoLines(FakeStack):
        def preview(self, **kwargs: Any) -> None:
            kwargs["on_output"]("first")
            super().preview(**kwargs)

    def select(name: str, work_dir: str) -> FakeStack:
        places.append((name, work_dir))
        return TwoLines()

    monkeypatch.setattr(auto, "LocalWorkspace", Workspace)
    monkeypatch.setattr(auto, "create_or_select_stack", select)
    monkeypatch.setattr(FakeWorkspace, "stacks", ["dev"])  # a diy backend's name
    for fail in (True, False):
        monkeypatch.setattr(FakeWorkspace, "previews", [])
        monkeypatch.setattr(FakeWorkspace, "fail", fail)
        run = pr_report.run_preview("dev", ["base/policies"])
        assert (run.stack, run.policy_packs, run.succeeded, run.fresh) == ("dev", ["base/policies"], not fail, False)
        assert run.output == "first\nPreviewing update (dev):" and [f.policy for f in run.findings] == ["gpu-plan-fits"]
    assert places == [("workspace", "."), ("dev", ".")] * 2
    pr_report.run_preview("dev", ["p"], work_dir="/src")
    assert places[-2:] == [("workspace", "/src"), ("dev", "/src")]


def test_a_backend_that_cannot_list_its_stacks_is_a_failed_run_not_a_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from pulumi import automation as auto
    from pulumi.automation._cmd import CommandResult

    class Unreachable(FakeWorkspace):
        def list_stacks(self) -> list[Any]:
            raise auto.CommandError(CommandResult("", "error: could not reach the backend", 255))

    monkeypatch.setattr(auto, "LocalWorkspace", Unreachable)
    run = pr_report.run_preview("dev", ["p"])
    assert run.succeeded is False and run.fresh is False and "could not reach the backend" in run.error


def test_a_github_that_never_answers_is_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    without_proxies(monkeypatch)  # straight to the silent port
    monkeypatch.setattr(github_comments, "TIMEOUT", 0.5)
    with silent_port() as port:
        client = github_comments.GitHub(f"http://127.0.0.1:{port}", "t0ken", REPO)
        error = raised_within(lambda: list(client.comments(7)), 20)
    assert isinstance(error, OSError) and "timed out" in str(error)  # urllib's TimeoutError or URLError


# --------------------------------------------------------------------------- the command line, end to end


def test_the_preview_command_prints_the_run_publishes_its_comment_and_exits_by_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    published: list[tuple[str, str]] = []
    runs: list[tuple[str, list[str]]] = []

    def publish_stub(subject: str, body: str) -> str:
        published.append((subject, body))
        return "comment created"

    def run_stub(stack: str, packs: list[str]) -> pr_report.PreviewRun:
        runs.append((stack, packs))
        return pr_report.PreviewRun(stack, packs, stack == "dev", f"output of {stack}", [],
                                    "" if stack == "dev" else "error: it failed")

    monkeypatch.setattr(pr_report, "publish", publish_stub)
    monkeypatch.setattr(pr_report, "run_preview", run_stub)
    assert pr_report.main(["preview", "--stack", "dev", "--policy-pack", "a", "--policy-pack", "b"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("output of dev\ncomment created\n", "")
    assert runs == [("dev", ["a", "b"])]
    assert published == [("preview:dev", pr_report.preview_comment(run_stub("dev", ["a", "b"])))]
    assert pr_report.main(["preview", "--stack", "gpu", "--policy-pack", "a", "--subject", "gpu-preview"]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("output of gpu\ncomment created\n", "error: it failed\n")
    assert published[-1][0] == "gpu-preview"


@pytest.mark.parametrize("argv", [["preview", "--policy-pack", "a"], ["preview", "--stack", "dev"]],
                         ids=["no-stack", "no-pack"])
def test_a_preview_needs_its_stack_and_a_pack(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_tenancy.cli.main import main

    assert main(["pull-requests", *argv]) == 2
    (line,) = capsys.readouterr().err.splitlines()  # one line, not argparse's usage first
    assert line.startswith("gpu-tenancy pull-requests preview: the following arguments are required: ")


def test_backend_dir_names_what_it_made_and_leaves_other_backends(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    assert pr_report.main(["backend-dir"]) == 0 and capsys.readouterr().out == ""
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path}/state")
    for _ in range(2):  # a second time: already there
        assert pr_report.main(["backend-dir"]) == 0
        assert capsys.readouterr().out == f"file backend directory: {tmp_path / 'state'}\n"


def test_plan_publishes_under_its_subject_with_the_pictures(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    published: list[tuple[str, str]] = []

    def publish_stub(subject: str, body: str) -> str:
        published.append((subject, body))
        return "job summary only: not a pull request"

    monkeypatch.setattr(pr_report, "publish", publish_stub)
    (tmp_path / "dev.exit").write_text("0\n")
    assert pr_report.main(["plan", str(tmp_path), "--pictures-url", "https://example.test/a/1"]) == 0
    assert capsys.readouterr().out == "job summary only: not a pull request\n"
    ((subject, body),) = published
    assert subject == "plan" and "[plan PNGs](https://example.test/a/1)" in body
    assert pr_report.main(["plan", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == (
        f"{tmp_path / 'none'}: no <stack>.exit files (run `make plan` for each stack first)\n")


def test_stack_config_says_what_it_took(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    theirs, base = tmp_path / "theirs.yaml", tmp_path / "base.yaml"
    theirs.write_text("config:\n  gpu-tenancy:mode: sim\n")
    base.write_text("config:\n  gpu-tenancy:mode: sim\n")
    assert pr_report.main(["stack-config", str(theirs), str(base)]) == 0
    assert capsys.readouterr().out == f"{base}: config taken from {theirs}\n"


def test_a_fresh_stacks_failed_preview_still_says_it_is_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    from pulumi import automation as auto

    monkeypatch.setattr(auto, "LocalWorkspace", FakeWorkspace)
    monkeypatch.setattr(auto, "create_or_select_stack", lambda name, work_dir: FakeStack())
    monkeypatch.setattr(FakeWorkspace, "stacks", [])
    monkeypatch.setattr(FakeWorkspace, "previews", [])
    monkeypatch.setattr(FakeWorkspace, "fail", True)
    run = pr_report.run_preview("gpu", ["p"])
    assert run.succeeded is False and run.fresh is True


def test_pull_requests_without_a_subcommand_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_tenancy.cli.main import main

    assert main(["pull-requests"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gpu-tenancy pull-requests: the following arguments are required: ")
