"""Every path of this repository that a comment or docstring names exists: a file moved or renamed leaves no
reader looking for it. Paths into other repositories (upstream files a double follows) are not ours to check:
ours start with one of this repository's top-level folders and, under docs/, are one of its pages.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("components", "gpu_tenancy", "policies", "tests", "benchmarks", "examples")
PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(FOLDERS)})/[\w./*-]*[\w*]|docs/[\w-]+\.md)")
# Folders a command writes: `python -m tests.integration.report --record` (the live suite's reports).
RUNTIME = {"benchmarks/e2e"}
# This file names stale paths on purpose (the self-test below).
SOURCES = [*sorted(p for folder in FOLDERS[:5] for p in (REPO / folder).rglob("*.py")
                   if p.name != "test_comment_paths.py"), REPO / "__main__.py"]
SCRIPTS = sorted((REPO / "gpu_tenancy" / "builders").rglob("scripts/*.sh"))
# A script's comments are bytes sent: fixing one would prepare, fence or join every existing host again. A stale
# path stays only where it is named here, with the script that keeps it.
SENT_AS_IS = {("gpu_tenancy/builders/host_worker/scripts/prepare.sh", "gpu_tenancy/gpu_access.py")}


def _texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring."""
    found = [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
             if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.append((body[0].lineno, body[0].value.value))
    return found


def exists(named: str) -> bool:
    """A file or folder, a glob, a folder written by a command (RUNTIME), or `path.symbol` (a dotted name after
    a file's path without its .py)."""
    if named.rstrip("./") in RUNTIME:
        return True
    path = named.rstrip(".")
    if "*" in path:
        return any(REPO.glob(path))
    if (REPO / path).exists():
        return True
    head, _, _ = path.rpartition(".")  # tests/harness.LabMocks, gpu_tenancy/x/y.py`symbol`
    return bool(head) and ((REPO / f"{head}.py").exists() or (REPO / head).exists())


def stale_paths(source: str) -> list[str]:
    return [f"line {line}: {m.group(1)}" for line, text in _texts(source) for m in PATH.finditer(text)
            if not exists(m.group(1))]


def _script_comments(script: str) -> list[tuple[int, str]]:
    return [(number, line) for number, line in enumerate(script.splitlines(), 1)
            if line.lstrip().startswith("#") and not line.startswith("#!")]


def stale_script_paths(script: str) -> list[str]:
    return [m.group(1) for _, line in _script_comments(script) for m in PATH.finditer(line) if not exists(m.group(1))]


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(REPO)) for p in SOURCES])
def test_every_path_a_comment_names_exists(path: Path) -> None:
    if ".venv" in path.parts or "mutants" in path.parts:
        pytest.skip("not this repository's code")
    assert stale_paths(path.read_text()) == []


@pytest.mark.parametrize("path", SCRIPTS, ids=[str(p.relative_to(REPO)) for p in SCRIPTS])
def test_every_path_a_script_comment_names_exists(path: Path) -> None:
    kept = {named for script, named in SENT_AS_IS if REPO / script == path}
    assert sorted(set(stale_script_paths(path.read_text())) - kept) == []


@pytest.mark.parametrize(("script", "named"), sorted(SENT_AS_IS))
def test_a_stale_path_kept_in_a_script_is_still_there_and_still_stale(script: str, named: str) -> None:
    assert named in stale_script_paths((REPO / script).read_text()), f"{script} no longer names {named}: drop it"


def test_a_script_comment_is_read_and_its_code_is_not() -> None:
    script = "#!/usr/bin/env bash\n# see gpu_tenancy/no_such.py\n  # and docs/no-such-page.md\n" \
             "cat gpu_tenancy/not_a_comment.py # gpu_tenancy/trailing.py\n"
    assert stale_script_paths(script) == ["gpu_tenancy/no_such.py", "docs/no-such-page.md"]


def test_a_stale_path_is_found_and_an_upstream_one_is_not() -> None:
    source = '"""Follows kubernetes-sigs/kind pkg/cluster/internal/create/actions/action.go."""\n' \
             "# the builder in gpu_tenancy/gpu_access.py (moved), the page docs/no-such-page.md\n" \
             "# gpu_tenancy/builders/gpu_access/gpu_access.py and tests/harness.LabMocks and docs/policies.md\n" \
             "# HAMi docs/content/reference/versioning.md, examples/plan-*.json\n"
    assert stale_paths(source) == ["line 2: gpu_tenancy/gpu_access.py", "line 2: docs/no-such-page.md"]
