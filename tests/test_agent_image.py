"""Static checks of the mock GPU agent image: pinned base and dependencies, non-root, minimal context."""

from __future__ import annotations

import re
from importlib.metadata import requires, version
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
AGENT = REPO / "gpu_tenancy" / "agent"
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
        "gpu_tenancy/agent/requirements.txt must pin exactly the closure of the kubernetes client tested here; "
        f"missing or different: {sorted(set(expected.items()) ^ set(pins.items()))}"
    )
    dockerfile = (AGENT / "Dockerfile").read_text()
    assert "pip install --no-deps -r /app/requirements.txt && pip check" in dockerfile


def test_build_context_allow_lists_only_agent_sources() -> None:
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    rules = [line for line in lines if line and not line.startswith("#")]
    assert rules[0] == "*"
    allowed = {rule[1:] for rule in rules if rule.startswith("!")}
    assert allowed == {"gpu_tenancy/__init__.py", "gpu_tenancy/hami.py", "gpu_tenancy/agent/"}
    copied = re.findall(r"^COPY\s+(\S+)", (AGENT / "Dockerfile").read_text(), re.MULTILINE)
    assert all(any(src.startswith(a.rstrip("/")) for a in allowed) for src in copied), copied


def test_agent_imports_nothing_outside_the_image() -> None:
    """The image carries gpu_tenancy/{__init__,hami}.py and gpu_tenancy/agent only."""
    for source in AGENT.glob("*.py"):
        for module in re.findall(r"^\s*(?:from|import)\s+(gpu_tenancy[\w.]*)", source.read_text(), re.MULTILINE):
            assert module in {"gpu_tenancy", "gpu_tenancy.hami"} or module.startswith("gpu_tenancy.agent"), (
                f"{source.name} imports {module}, which is not copied into the image"
            )
