"""Static checks of the mock GPU agent image: pinned base and dependencies, non-root, minimal context."""

from __future__ import annotations

import ast
import re
from importlib.metadata import requires, version
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
AGENT = REPO / "gpu_tenancy" / "hami" / "agent"
PY311_LINUX = {
    "python_version": "3.11",
    "python_full_version": "3.11.11",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "platform_machine": "x86_64",
    "extra": "",
}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_requirements() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (AGENT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, pinned = line.partition("==")
            assert pinned and re.fullmatch(r"[\w.]+", pinned), f"not an exact pin: {line!r}"
            pins[_canonical(name)] = pinned
    return pins


def closure(root: str) -> dict[str, str]:
    """Installed versions of root and everything it needs on CPython 3.11/Linux (from this venv)."""
    found: dict[str, str] = {}
    pending = [root]
    while pending:
        name = pending.pop()
        if _canonical(name) in found:
            continue
        found[_canonical(name)] = version(name)
        for raw in requires(name) or []:
            requirement = Requirement(raw)
            if requirement.marker is None or requirement.marker.evaluate(PY311_LINUX):
                pending.append(requirement.name)
    return found


def test_base_image_pinned_by_exact_tag() -> None:
    dockerfile = (AGENT / "Dockerfile").read_text()
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    assert len(bases) == 1
    image = bases[0]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", image), image


def test_runs_as_numeric_non_root_user() -> None:
    users = re.findall(r"^USER\s+(\S+)", (AGENT / "Dockerfile").read_text(), re.MULTILINE)
    assert users and users[-1] == "10001:10001"


def test_dependencies_are_exact_pins_of_the_complete_closure() -> None:
    pins = pinned_requirements()
    expected = closure("kubernetes")
    assert pins == expected, (
        "gpu_tenancy/hami/agent/requirements.txt must pin exactly the closure of the kubernetes client tested here; "
        f"missing or different: {sorted(set(expected.items()) ^ set(pins.items()))}"
    )
    dockerfile = (AGENT / "Dockerfile").read_text()
    assert "pip install --no-deps -r /app/requirements.txt && pip check" in dockerfile


def test_build_context_allow_lists_only_agent_sources() -> None:
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    rules = [line for line in lines if line and not line.startswith("#")]
    assert rules[0] == "*"
    allowed = {rule[1:] for rule in rules if rule.startswith("!")}
    assert allowed == {
        "gpu_tenancy/__init__.py", "gpu_tenancy/hami/__init__.py", "gpu_tenancy/hami/protocol.py", "gpu_tenancy/hami/agent/"
    }
    copied = re.findall(r"^COPY\s+(\S+)", (AGENT / "Dockerfile").read_text(), re.MULTILINE)
    assert all(any(src.startswith(a.rstrip("/")) for a in allowed) for src in copied), copied


def test_agent_imports_nothing_outside_the_image() -> None:
    """The image carries gpu_tenancy/__init__.py, gpu_tenancy/hami/{__init__,protocol}.py and gpu_tenancy/hami/agent
    only: `from gpu_tenancy.hami.planner import schedule` would load gpu_tenancy/hami/planner/, which is not there."""
    in_image = {"gpu_tenancy", "gpu_tenancy.hami", "gpu_tenancy.hami.protocol"}
    for source in AGENT.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                loaded = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                loaded = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for module in (m for m in loaded if m.split(".")[0] == "gpu_tenancy"):
                names_a_module = module in in_image or module.startswith("gpu_tenancy.hami.agent")
                # `from gpu_tenancy.hami.protocol import RESOURCE_GPU` names an attribute, not a module
                is_attribute = module.rpartition(".")[0] in in_image - {"gpu_tenancy", "gpu_tenancy.hami"}
                assert names_a_module or is_attribute, f"{source.name} imports {module}, which is not in the image"
    for package in (REPO / "gpu_tenancy" / "__init__.py", REPO / "gpu_tenancy" / "hami" / "__init__.py"):
        imports = [n for n in ast.walk(ast.parse(package.read_text())) if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not imports, f"{package.relative_to(REPO)} is copied into the image and must import nothing"
