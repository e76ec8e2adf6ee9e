"""What a pull request's reviewers see: the capacity plan and each stack's policy preview, as comments.

    gpu-tenancy pull-requests backend-dir                       # create a file:// backend's directory
    gpu-tenancy pull-requests preview --stack dev --policy-pack base/policies
    gpu-tenancy pull-requests plan reports/plan --pictures-url <artifact url>

`preview` runs ``pulumi preview --diff`` through the Automation API (the pinned CLI on PATH) and publishes the verdict,
every policy violation from the engine's own events and the diff, whether the preview passed or failed: a failing
preview (a mandatory violation, a program error) still tells the reviewer why. `plan` reads what ``make plan STACK=<s> >
<dir>/<s>.txt; echo $? > <dir>/<s>.exit`` left for each stack. Both publish with
gpu_tenancy.cli.pull_requests.github_comments (a comment updated in place, and the job summary) and exit non-zero when
the preview failed or a plan does not fit, after publishing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_tenancy.cli.base_command import CommandParser, command_parser
from gpu_tenancy.cli.pull_requests.github_comments import MAX_COMMENT, publish
from gpu_tenancy.cli.pull_requests.stack_file import StackFileRefused, take_config_file
from gpu_tenancy.cli.status_codes import DEPENDS, FAILURE, SUCCESS, USAGE

MANDATORY = "mandatory"  # apitype.Mandatory (pulumi sdk/go/common/apitype/policy.go); advisory, remediate, disabled
OUTPUT_BUDGET = MAX_COMMENT - 8_000  # room for the heading and the violations


def file_backend_dir(url: str, home: str | None = None) -> Path | None:
    """The directory a ``file://`` backend URL names (None for any other backend), as the CLI resolves it:
    pulumi/pulumi pkg/backend/diy/backend.go ``massageBlobPath`` strips ``file://`` and the query, expands a
    leading ``~`` to the user's home and makes the path absolute. The directory must exist before `pulumi
    login` (go-cloud's fileblob refuses a missing one), and pulumi/actions only warns when login fails."""
    if not url.startswith("file://"):
        return None
    path = url.removeprefix("file://").split("?", 1)[0]
    if path.startswith("~"):
        home = home or str(Path.home())
        path = home if path == "~" else os.path.join(home, path[2:])
    return Path(os.path.abspath(path))


# ------------------------------------------------------------------------------------------ policy preview


@dataclass(frozen=True)
class PolicyFinding:
    level: str  # enforcementLevel
    pack: str
    policy: str
    message: str
    urn: str | None

    def markdown(self) -> str:
        icon = "❌" if self.level == MANDATORY else "⚠️"
        where = f" on `{self.urn.rsplit('::', 1)[-1]}`" if self.urn else ""
        message = " ".join(self.message.split())
        return f"- {icon} **{self.level}** `{self.pack}/{self.policy}`{where}: {message}"


def policy_findings(events: Iterable[Any]) -> list[PolicyFinding]:
    """Violations among Automation API engine events (``event.policy_event``: apitype.PolicyEvent), mandatory
    first, in the order the engine reported them."""
    found = []
    for event in events:
        policy = getattr(event, "policy_event", None)
        if policy is not None:
            found.append(PolicyFinding(policy.enforcement_level, policy.policy_pack_name, policy.policy_name,
                                       policy.message, policy.resource_urn or None))
    return sorted(found, key=lambda finding: finding.level != MANDATORY)


@dataclass
class PreviewRun:
    stack: str
    policy_packs: list[str]
    succeeded: bool
    output: str
    findings: list[PolicyFinding] = field(default_factory=list)
    error: str = ""
    fresh: bool = False  # the backend held no state of the stack: everything shows as created


def _tail(text: str, budget: int) -> tuple[str, bool]:
    """The end of ``text`` within ``budget`` characters: pulumi prints policies, diagnostics and the summary last."""
    if len(text) <= budget:
        return text, False
    return text[-budget:].split("\n", 1)[-1], True


def preview_comment(run: PreviewRun) -> str:
    mandatory = [f for f in run.findings if f.level == MANDATORY]
    if run.succeeded:
        verdict = f"✅ `pulumi preview` of `{run.stack}` passed the policy pack"
        if run.findings:
            verdict += f" ({len(run.findings)} advisory finding(s))"
    elif mandatory:
        verdict = f"❌ `pulumi preview` of `{run.stack}` failed: {len(mandatory)} mandatory policy violation(s)"
    else:
        verdict = f"❌ `pulumi preview` of `{run.stack}` failed (no policy violation: see the error below)"
    lines = [f"### {verdict}", "", f"Policy pack: `{', '.join(run.policy_packs)}` (from the base branch)."]
    if run.fresh:
        lines.append(
            f"\n⚠️ The backend holds no state of `{run.stack}`, so everything shows as created. A preview against "
            "the deployed stack needs the backend it is deployed from (docs/pull-request-previews.md)."
        )
    if run.findings:
        lines += ["", "**Policy violations**", "", *(finding.markdown() for finding in run.findings)]
    if run.error:
        error, _ = _tail(run.error.strip(), 6_000)
        lines += ["", "**Error**", "", "```text", error, "```"]
    output, trimmed = _tail(run.output.strip(), OUTPUT_BUDGET - sum(len(line) + 1 for line in lines))
    lines += [
        "",
        "<details><summary>pulumi preview --diff</summary>",
        "",
        *(["(the beginning is cut: the full output is in the job's log)", ""] if trimmed else []),
        "```diff",
        output,
        "```",
        "</details>",
    ]
    return "\n".join(lines) + "\n"


def run_preview(stack_name: str, policy_packs: list[str], work_dir: str = ".") -> PreviewRun:
    """`pulumi preview --diff` with the policy packs, through the Automation API (pulumi 3.272.0
    pulumi/automation/_stack.py: engine events via ``--event-log``, CommandError when the CLI fails)."""
    from pulumi import automation as auto

    output: list[str] = []
    events: list[Any] = []
    fresh = False
    try:
        workspace = auto.LocalWorkspace(work_dir=work_dir)
        # `pulumi stack ls` names a stack of this project "dev" on a diy backend, or "<org>/<project>/dev" when
        # qualified (pulumi/pulumi pkg/backend/diy/backend.go diyBackendReference.String): compare the name.
        fresh = stack_name not in {summary.name.rsplit("/", 1)[-1] for summary in workspace.list_stacks()}
        stack = auto.create_or_select_stack(stack_name, work_dir=work_dir)
        stack.preview(diff=True, policy_packs=policy_packs, color="never", on_output=output.append,
                      on_event=events.append)
    except auto.CommandError as error:
        return PreviewRun(stack_name, policy_packs, False, "\n".join(output), policy_findings(events),
                          str(error), fresh=fresh)
    return PreviewRun(stack_name, policy_packs, True, "\n".join(output), policy_findings(events), fresh=fresh)


# ------------------------------------------------------------------------------------------------- plan

# The planner's exit codes (gpu_tenancy.cli.status_codes): DEPENDS is advisory, as policy gpu-plan-order.
EXIT_MEANING = {SUCCESS: "✅ fits whatever the order", FAILURE: "❌ a replica fits in no order",
                USAGE: "❌ the stack file or the command is wrong", DEPENDS: "⚠️ a replica fits in some orders only"}
ADVISORY_EXIT = DEPENDS


@dataclass(frozen=True)
class PlanResult:
    stack: str
    exit_code: int
    report: str


def read_plans(directory: Path) -> list[PlanResult]:
    results = []
    for exit_file in sorted(directory.glob("*.exit")):
        stack = exit_file.stem
        report = directory / f"{stack}.txt"
        results.append(PlanResult(stack, int(exit_file.read_text().strip() or 2),
                                  report.read_text(errors="replace") if report.exists() else ""))
    return results


def plan_comment(results: Sequence[PlanResult], pictures_url: str | None) -> str:
    lines = [
        "### Capacity plan",
        "",
        "What HAMi would place on each stack's declared GPUs (`make plan STACK=<s>`).",
        "",
        "| stack | verdict |",
        "|---|---|",
    ]
    lines += [f"| `{r.stack}` | {EXIT_MEANING.get(r.exit_code, f'❌ exit {r.exit_code}')} |" for r in results]
    if pictures_url:
        lines += ["", f"Pictures of the allocation: [plan PNGs]({pictures_url}) (a workflow artifact)."]
    budget = (MAX_COMMENT - 4_000) // max(len(results), 1)
    for result in results:
        report, trimmed = _tail(result.report.rstrip(), budget)
        lines += ["", f"<details{' open' if result.exit_code else ''}><summary><code>{result.stack}</code></summary>",
                  "", *(["(cut: the full report is in the job's log)", ""] if trimmed else []),
                  "```text", report, "```", "</details>"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("pull-requests", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    commands.add_parser("backend-dir", help="create the directory of a file:// PULUMI_BACKEND_URL (others: nothing)")
    preview = commands.add_parser("preview", help="preview a stack with policy packs and publish the result")
    preview.add_argument("--stack", required=True)
    preview.add_argument("--policy-pack", action="append", required=True)
    preview.add_argument("--subject", help="the comment this preview updates (default: preview:<stack>)")
    stack_config = commands.add_parser(
        "stack-config", help="take only the config: of a pull request's stack file into the default branch's one"
    )
    stack_config.add_argument("pull_request_file", type=Path)
    stack_config.add_argument("base_file", type=Path)
    plan = commands.add_parser("plan", help="publish the plans `make plan` wrote into a directory")
    plan.add_argument("directory", type=Path)
    plan.add_argument("--pictures-url")
    args = parser.parse_args(argv)
    if args.command == "backend-dir":
        directory = file_backend_dir(os.environ.get("PULUMI_BACKEND_URL", ""))
        if directory:
            directory.mkdir(parents=True, exist_ok=True)
            print(f"file backend directory: {directory}")
        return SUCCESS
    if args.command == "stack-config":
        try:
            take_config_file(args.pull_request_file, args.base_file)
        except StackFileRefused as error:
            print(f"::error::{error}", file=sys.stderr)
            return FAILURE
        print(f"{args.base_file}: config taken from {args.pull_request_file}")
        return SUCCESS
    if args.command == "preview":
        run = run_preview(args.stack, args.policy_pack)
        print(run.output)
        if run.error:
            print(run.error, file=sys.stderr)
        print(publish(args.subject or f"preview:{args.stack}", preview_comment(run)))
        return SUCCESS if run.succeeded else FAILURE
    results = read_plans(args.directory)
    if not results:
        print(f"{args.directory}: no <stack>.exit files (run `make plan` for each stack first)", file=sys.stderr)
        return USAGE
    print(publish("plan", plan_comment(results, args.pictures_url)))
    # A plan that depends on the order is reported, not failed (orderDependentPlan: refuse fails the preview).
    return max(SUCCESS if result.exit_code == ADVISORY_EXIT else result.exit_code for result in results)

