"""`gpu-tenancy <command>`: the registry, the exit codes, one line per error, and `python -m gpu_tenancy`.

The console script is the one `make runtime` installs into the venv (`pip install -e .`, pyproject.toml
`[project.scripts]`); `python -m gpu_tenancy` is the same command from the checkout.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpu_tenancy.cli import base_command, commands, status_codes
from gpu_tenancy.cli.main import main

REPO = Path(__file__).resolve().parents[1]
CLI_DIR = REPO / "gpu_tenancy" / "cli"
SCRIPT = Path(sys.executable).parent / "gpu-tenancy"
# What the command line must not import to print its help or run `tools` (make tools runs before the venv).
HEAVY = ("pulumi", "pulumi_kubernetes", "kubernetes", "pydantic", "rich", "matplotlib", "yaml")


def run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "100", **env})


def modules_with_main() -> set[str]:
    """Every module under gpu_tenancy/cli that defines a top-level `main`, by reading the source."""
    found = set()
    for path in CLI_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body):
            found.add(".".join(path.relative_to(REPO).with_suffix("").parts))
    return found


def test_every_module_with_a_main_is_a_registered_command() -> None:
    registered = {info.module for info in commands.COMMANDS.values()}
    # gpu_tenancy.cli.main is the dispatcher itself.
    assert modules_with_main() - {"gpu_tenancy.cli.main"} == registered
    assert len(registered) == len(commands.COMMANDS), "two names for one module"


def test_the_registry_holds_the_documented_commands() -> None:
    """The names the Makefile, the docs and the workflows call."""
    assert sorted(commands.COMMANDS) == sorted([
        "plan", "status", "tenants", "doctor", "kubeconfig", "charts", "tools", "promotion", "pull-requests",
        "config-reference",
    ])
    assert all(info.summary and "\n" not in info.summary for info in commands.COMMANDS.values())


def test_help_lists_every_command_and_imports_no_heavy_library() -> None:
    probe = textwrap.dedent(f"""
        import sys
        from gpu_tenancy.cli.main import main
        code = main(["--help"])
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})
        print("heavy:", heavy, "code:", code)
    """)
    done = run([sys.executable, "-c", probe])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "heavy: [] code: 0"
    assert lines[0] == "usage: gpu-tenancy <command> [options]"
    listed = [line.split()[0] for line in lines if line.startswith("  ") and not line.strip()[0].isdigit()]
    assert listed == list(commands.COMMANDS)


def test_tools_runs_on_the_standard_library_alone() -> None:
    probe = textwrap.dedent(f"""
        import sys
        from gpu_tenancy.cli.main import main
        code = main(["tools", "install", "--only", "nosuchtool", "--dir", "/nonexistent"])
        print("heavy:", sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r}), "code:", code)
    """)
    done = run([sys.executable, "-c", probe])
    assert done.stdout.splitlines()[-1] == "heavy: [] code: 1", done.stdout + done.stderr
    assert done.stderr.splitlines() == ["make tools: unknown tool(s) nosuchtool; pinned: kind, kubectl, pulumi"]


def test_the_exit_code_table_is_the_documented_one() -> None:
    """docs/planner.md (0 fits, 1 fits in no order, 2 bad input, 3 depends on the order), docs/commands.md
    (70: an error no command expected; 130 Ctrl-C; 141 a closed pipe, as a shell reports the signals)."""
    table = (status_codes.SUCCESS, status_codes.FAILURE, status_codes.USAGE, status_codes.DEPENDS,
             status_codes.INTERNAL_ERROR, status_codes.INTERRUPTED, status_codes.BROKEN_PIPE)
    assert table == (0, 1, 2, 3, 70, 130, 141)
    assert sorted(status_codes.MEANING) == sorted(table)


# --------------------------------------------------------------------------- the base: errors -> exit codes


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A registered command whose main does what its first argument says."""
    (tmp_path / "toy_command.py").write_text(textwrap.dedent("""
        from gpu_tenancy.cli.base_command import UsageError, command_parser

        def main(argv):
            parser = command_parser("toy")
            parser.add_argument("what")
            what = parser.parse_args(argv).what
            if what == "usage":
                raise UsageError("--tenant x: no such tenant")
            if what == "boom":
                raise RuntimeError("the collector\\nwent away")
            if what == "missing":
                import gpu_tenancy_no_such_module
            if what == "interrupt":
                raise KeyboardInterrupt
            return int(what)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(commands.COMMANDS, "toy", commands.CommandInfo("toy_command", "a toy"))
    monkeypatch.delenv(base_command.DEBUG_ENV, raising=False)
    return "toy"


def stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_a_usage_error_is_one_line_and_exit_2(toy: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([toy, "usage"]) == 2
    assert stderr_lines(capsys) == ["gpu-tenancy toy: --tenant x: no such tenant"]


def test_a_bad_command_line_is_one_line_and_exit_2(toy: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([toy, "1", "--bogus"]) == 2
    assert stderr_lines(capsys) == ["gpu-tenancy toy: unrecognized arguments: --bogus (see --help)"]


def test_an_unexpected_error_is_one_line_and_exit_70_without_a_traceback(
    toy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([toy, "boom"]) == 70
    assert stderr_lines(capsys) == [
        "gpu-tenancy toy: internal error: RuntimeError: the collector went away (GPU_TENANCY_DEBUG=1 shows the "
        "traceback)"]


def test_debug_shows_the_traceback(toy: str, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TENANCY_DEBUG", "1")
    assert main([toy, "boom"]) == 70
    err = stderr_lines(capsys)
    assert err[0] == "Traceback (most recent call last):" and 'raise RuntimeError("the collector' in "\n".join(err)
    assert err[-1] == "gpu-tenancy toy: internal error: RuntimeError: the collector went away"


def test_a_missing_dependency_names_the_fix(toy: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([toy, "missing"]) == 70
    (line,) = stderr_lines(capsys)
    assert line.startswith("gpu-tenancy toy: gpu_tenancy_no_such_module is not installed: run `make runtime`")


def test_ctrl_c_is_one_line_and_exit_130(toy: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([toy, "interrupt"]) == 130
    assert stderr_lines(capsys) == ["gpu-tenancy toy: interrupted"]


@pytest.mark.parametrize("code", [0, 1, 3])
def test_a_commands_own_code_passes_unchanged(toy: str, code: int) -> None:
    assert main([toy, str(code)]) == code


@pytest.mark.parametrize("name", sorted(commands.COMMANDS))
def test_every_commands_usage_error_is_one_line_and_exit_2(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([name, "--no-such-option"]) == 2
    (line,) = stderr_lines(capsys)
    assert line.startswith(f"gpu-tenancy {name}: ") and line.endswith("(see --help)")


def test_an_unknown_command_is_one_line_with_the_nearest_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plann"]) == 2
    (line,) = stderr_lines(capsys)
    assert line.startswith("gpu-tenancy: unknown command 'plann'; did you mean 'plan'?")
    assert main([]) == 2
    assert stderr_lines(capsys)[0] == "usage: gpu-tenancy <command> [options]"


def test_help_of_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["help", "promotion"]) == 0
    assert capsys.readouterr().out.startswith("usage: gpu-tenancy promotion [-h] source target")


# --------------------------------------------------------------------------- one command, three ways to call it


def test_the_installed_script_and_python_m_are_the_same_command() -> None:
    assert SCRIPT.exists(), f"{SCRIPT} missing: `make runtime` installs it (pip install -e .)"
    plan = ["plan", "plan", "examples/plan-overcommit.json"]
    ways = [[str(SCRIPT), *plan], [sys.executable, "-m", "gpu_tenancy", *plan]]
    results = [run(argv) for argv in ways]
    assert {(r.returncode, r.stdout, r.stderr) for r in results} == {(results[0].returncode, results[0].stdout, "")}
    assert results[0].returncode == 1 and "Verdict: 6 replica(s) fit in no order" in results[0].stdout
    bad = [run([*argv, "--bogus"]) for argv in ways]
    assert {(r.returncode, r.stderr) for r in bad} == {(2, "gpu-tenancy plan: unrecognized arguments: --bogus (see --help)\n")}


def test_the_script_runs_this_checkout_as_pyproject_declares_it() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"gpu-tenancy": "gpu_tenancy.cli.main:main"}
    done = run([str(SCRIPT), "--version"])
    assert done.returncode == 0 and done.stdout == f"gpu-tenancy {project['version']}\n"


def test_a_reader_that_goes_away_ends_the_command_quietly_with_141(tmp_path: Path) -> None:
    """`gpu-tenancy ... | head`: exit 128 + SIGPIPE as a shell reports it, and nothing on stderr."""
    (tmp_path / "toy_talker.py").write_text("def main(argv):\n    for i in range(200_000):\n        print('line', i)\n"
                                            "    return 0\n")
    probe = textwrap.dedent("""
        import sys
        from gpu_tenancy.cli import commands
        commands.COMMANDS["talker"] = commands.CommandInfo("toy_talker", "prints a lot")
        from gpu_tenancy.cli.main import main
        sys.exit(main(["talker"]))
    """)
    talker = subprocess.Popen([sys.executable, "-c", probe], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}"})
    assert talker.stdout is not None and talker.stderr is not None
    assert talker.stdout.read(7) == b"line 0\n"
    talker.stdout.close()
    assert talker.wait(timeout=60) == 141
    assert talker.stderr.read() == b""
