"""The front page and docs/: links that resolve, a front page that stays short, and shown output that is real.

- every relative link in README.md and docs/*.md names a file that exists and, with `#anchor`, a heading of
  that file under GitHub's anchor rules (lower-cased; punctuation other than `-` and `_` dropped; spaces to
  `-`; a repeated heading gets `-1`, `-2`, ...);
- README.md stays a front page: at most 200 lines, every docs page reachable from it, no test files cited;
- console output shown for commands that run offline (`make help`, the planner) is what they print, and
  the stack outputs shown for `make up` are the ones the program exports.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from doctor_stubs import HostCase
from harness import dev_config
from test_status_outputs import stack_outputs

from gpu_tenancy.cli.main import main as cli_main
from gpu_tenancy.contract import versions

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
FRONT_PAGE_MAX_LINES = 200

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`]*`")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def github_anchor(heading: str) -> str:
    """GitHub's slug of a heading's text (github-slugger): lower case, drop what is not a letter, digit,
    space, `-` or `_`, spaces to `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for line in prose_lines(page.read_text()):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = github_anchor(match.group(1))
        found.add(slug if seen[slug] == 0 else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return found


def links(page: Path) -> list[str]:
    """Link targets outside code (a link in a code span or block is not a link)."""
    return [target for line in prose_lines(page.read_text()) for target in LINK.findall(CODE_SPAN.sub("", line))]


def test_anchors_follow_githubs_rules() -> None:
    assert github_anchor("Checking the host and the lab: `make doctor`") == "checking-the-host-and-the-lab-make-doctor"
    assert github_anchor("A non-admin identity for a tenant's users") == "a-non-admin-identity-for-a-tenants-users"
    assert github_anchor("The mock NVML (mode `sim-nvml`)") == "the-mock-nvml-mode-sim-nvml"
    assert github_anchor("`make tenants` and `make status`") == "make-tenants-and-make-status"


def test_a_repeated_heading_gets_a_number(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Notes\n\n```\n## Not a heading\n```\n\n## Notes\n")
    assert anchors(page) == {"title", "notes", "notes-1"}


def test_links_in_code_are_not_links(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("[a](a.md) `[b](b.md)`\n```\n[c](c.md)\n```\n![image](d.png) [e](e.md#x \"title\")\n")
    assert links(page) == ["a.md", "e.md#x"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor} in {linked.relative_to(REPO)}")
    assert not broken, broken


def test_the_front_page_is_short() -> None:
    lines = README.read_text().count("\n")
    assert lines <= FRONT_PAGE_MAX_LINES, f"README.md has {lines} lines; move the detail to docs/"


def test_every_docs_page_is_linked_from_the_front_page() -> None:
    linked = {(REPO / target.partition("#")[0]).resolve() for target in links(README) if target.startswith("docs/")}
    assert set(DOCS.glob("*.md")) - linked == set()


def test_the_front_page_cites_no_test_file() -> None:
    text = README.read_text()
    assert not re.search(r"tests/\w+\.py|test_\w+\.py|tests/fixtures", text)


def test_the_front_page_names_the_pinned_tool_versions() -> None:
    text = README.read_text()
    for tool, version in (("kind", versions.KIND_BINARY), ("kubectl", versions.KUBECTL_BINARY),
                          ("Pulumi CLI", versions.PULUMI_CLI)):
        assert f"{tool} {version}" in text, tool


# A test function that takes conftest's `shared` fixture, which skips without ../shared; the signature may span lines.
TAKES_SHARED = re.compile(r"def test_\w+\([^)]*\bshared\s*:", re.S)
COUNT_SHARED_PLUGIN = """
def pytest_collection_modifyitems(session, config, items):
    using = [item.nodeid for item in items if "shared" in getattr(item, "fixturenames", ())]
    print("SHARED", sum("/realcp/" not in n for n in using), sum("/realcp/" in n for n in using))
"""


def test_the_front_page_counts_the_tests_that_skip_without_shared(tmp_path: Path) -> None:
    """The README's count of tests that skip without ../shared is what pytest collects as taking `shared`."""
    files = [str(p.relative_to(REPO)) for p in sorted((REPO / "tests").rglob("test_*.py"))
             if "integration" not in p.parts and TAKES_SHARED.search(p.read_text())]
    assert files, "no test takes the `shared` fixture"
    (tmp_path / "count_shared.py").write_text(COUNT_SHARED_PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "count_shared",
                           "-p", "no:cacheprovider", *files], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False)
    (line,) = [each for each in done.stdout.splitlines() if each.startswith("SHARED ")]
    offline, realcp = (int(n) for n in line.split()[1:])
    text = " ".join(README.read_text().split())
    assert f"without it {offline + realcp} tests skip, each saying so ({offline} that" in text
    assert f"and {realcp} of the real control-plane tier" in text


def test_the_live_suite_page_lists_every_check() -> None:
    """docs/live-suite.md numbers each check as its test does (test_09b/09c are parts of check 9), and each fault."""
    tests = "".join(p.read_text() for p in sorted((REPO / "tests" / "integration").glob("test_*.py")))
    page = (DOCS / "live-suite.md").read_text()
    checks = page.split("## The checks", 1)[1].split("\n## ", 1)[0]
    faults = page.split("## Fault checks", 1)[1].split("\n## ", 1)[0]
    assert {int(n) for n in re.findall(r"^(\d+)\. ", checks, re.M)} == {
        int(n) for n in re.findall(r"^def test_(\d+)[a-z]?_", tests, re.M)}
    assert {int(n) for n in re.findall(r"^- F(\d+) ", faults, re.M)} == {
        int(n) for n in re.findall(r"^def test_f(\d+)_", tests, re.M)}


# ---------------------------------------------------------------------------------------------- shown output


def console_sessions(page: Path) -> list[tuple[str, list[str]]]:
    """(command, output lines) for every `$ command` in the page's ```text blocks."""
    sessions: list[tuple[str, list[str]]] = []
    block: list[str] | None = None
    for line in page.read_text().splitlines():
        if block is None:
            if line.strip() == "```text":
                block = []
            continue
        if FENCE.match(line.strip()):
            block = None
            continue
        if line.startswith("$ "):
            sessions.append((line[2:], []))
        elif sessions and block is not None:
            sessions[-1][1].append(line)
        block.append(line)
    return sessions


def shown(page: Path, command: str) -> tuple[list[str], int | None]:
    """The output a page shows for `command`, and the exit code shown by an `echo $?` right after it."""
    sessions = console_sessions(page)
    (index,) = [i for i, (each, _) in enumerate(sessions) if each.split("  #")[0].strip() == command]
    code = None
    if index + 1 < len(sessions) and sessions[index + 1][0] == "echo $?":
        code = int(sessions[index + 1][1][0])
    return sessions[index][1], code


def run(argv: list[str]) -> tuple[list[str], int]:
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(REPO)}
    result = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    return result.stdout.splitlines(), result.returncode


# `.venv/bin/gpu-tenancy` as the pages show it, run from the checkout (tests/test_cli_main.py: the same command).
CLI = [sys.executable, "-m", "gpu_tenancy"]


@pytest.mark.parametrize(("page", "command", "argv"), [
    ("docs/commands.md", "make help", ["make", "--no-print-directory", "help"]),
    ("docs/commands.md", ".venv/bin/gpu-tenancy --help", [*CLI, "--help"]),
    ("docs/planner.md", ".venv/bin/gpu-tenancy plan report Pulumi.dev.yaml",
     [*CLI, "plan", "report", "Pulumi.dev.yaml"]),
    ("docs/planner.md", ".venv/bin/gpu-tenancy plan plan examples/plan-overcommit.json",
     [*CLI, "plan", "plan", "examples/plan-overcommit.json"]),
])
def test_shown_output_is_what_the_command_prints(page: str, command: str, argv: list[str]) -> None:
    expected, code = shown(REPO / page, command)
    output, returncode = run(argv)
    assert [line.rstrip() for line in expected] == [line.rstrip() for line in output]
    if code is not None:
        assert returncode == code


def test_every_command_and_subcommand_shows_the_help_it_prints(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """docs/commands.md shows `--help` for the command line, each command it lists and each subcommand a command's
    usage names (`{plan,report}`), and for nothing else; each is what that command prints (in this process, so a
    mutation run sees it), at the 100 columns the page is written for."""
    monkeypatch.setenv("COLUMNS", "100")

    def printed(*argv: str) -> str:
        assert cli_main([*argv, "--help"]) == 0
        return capsys.readouterr().out

    expected = {"--help"}
    listing = printed().split("\ncommands:\n", 1)[1].split("\n\n", 1)[0]
    for command in re.findall(r"^  ([a-z][a-z-]*) ", listing, re.M):
        expected.add(f"{command} --help")
        usage = printed(command).split("\n\n", 1)[0]
        for group in re.findall(r"\{([a-z,-]+)\}", usage):
            expected.update(f"{command} {sub} --help" for sub in group.split(","))
    prefix = ".venv/bin/gpu-tenancy "
    shown = {command.removeprefix(prefix): output for command, output in console_sessions(DOCS / "commands.md")
             if command.startswith(prefix) and command.endswith(" --help")}
    assert set(shown) == expected
    for command, output in shown.items():
        assert [line.rstrip() for line in output] == printed(*command.split()[:-1]).rstrip("\n").split("\n"), command


def test_the_status_shown_is_what_status_prints_for_the_recorded_objects() -> None:
    """docs/day-two.md shows `make status STACK=gpu` on the objects of tests/fixtures/status/real.json (what HAMi
    writes); read from the file, only the first line (where the view comes from, and when) differs."""
    expected, code = shown(DOCS / "day-two.md", "make status STACK=gpu")
    fixture = "tests/fixtures/status/real.json"
    output, returncode = run([*CLI, "status", "--stack", "gpu", "--objects", fixture])
    assert expected[0].startswith("stack gpu at ") and output[0].startswith(f"{fixture} at ")
    assert [line.rstrip() for line in expected[1:]] == [line.rstrip() for line in output[1:]]
    assert returncode == code


def test_the_doctor_output_shown_is_what_doctor_prints_on_that_host(tmp_path: Path) -> None:
    """docs/troubleshooting.md: `make doctor` on a host with the Docker engine stopped, no kind or Pulumi CLI, an
    older kubectl and Ubuntu's inotify defaults, each tool answering as tests/doctor_stubs.py models it."""
    command = ".venv/bin/gpu-tenancy doctor --stack dev"
    expected, _ = shown(DOCS / "troubleshooting.md", command)
    client = {"clientVersion": {"major": "1", "minor": "32", "gitVersion": "v1.32.4-dispatcher"}}
    case = (HostCase()
            .answer("docker", ["info"], "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                    "Is the docker daemon running?\n", 1)
            .answer("kubectl", ["version", "--client"], json.dumps(client))
            .answer("sysctl", ["max_user_instances"], "128\n").answer("sysctl", ["max_user_watches"], "192540\n")
            .without("kind").without("pulumi"))
    result, _ = case.run_process(tmp_path, *command.split()[2:])  # the command as its own process
    assert result.stdout.splitlines() == expected
    assert result.returncode == 1


def test_the_line_the_front_page_shows_for_a_fit_host_is_what_make_up_prints(tmp_path: Path) -> None:
    result, _ = HostCase().run(tmp_path, "--stack", "dev", "--before-up")  # make up's preflight, on a fit host
    assert result.returncode == 0
    (last,) = result.stdout.splitlines()[-1:]
    assert f"`{last}`" in README.read_text()


def outputs_block() -> str:
    text = README.read_text()
    start = text.index("```text\nOutputs:\n")
    return text[start: text.index("```\n", start + 8)]


def test_the_outputs_shown_for_make_up_are_the_programs() -> None:
    """The names at the top level of the block are the dev stack's exports; the plain values shown are theirs."""
    exported = stack_outputs(dev_config(), "dev")
    block = outputs_block()
    shown_names = re.findall(r"^    (\w+)\s*:", block, re.M)
    assert shown_names == sorted(exported), "pulumi prints the outputs in name order"
    assert f'kindClusterName     : "{exported["kindClusterName"]}"' in block
    assert f'mode                : "{exported["mode"]}"' in block
    for tenant, values in exported["tenants"].items():
        assert f"{tenant}: {{" in block
        if tenant == "tenant-a":
            (node,) = values["nodes"]
            assert f'[0]: "{node}"' in block
    assert "managementKubeconfig: [secret]" in block and "tenantKubeconfigs   : [secret]" in block
