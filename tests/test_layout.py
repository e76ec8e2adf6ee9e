"""The code's layout: imports run one way, each builder folder belongs to a component, no module grows too long.

    components/ ──> gpu_tenancy/builders/<component>/ ──> gpu_tenancy/contract/ ──> gpu_tenancy/hami/
    gpu_tenancy/cli/ (the day-two commands) may read all of gpu_tenancy, never components/;
    policies/ (the policy pack) reads builders, contract and hami, never the program or the commands.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from import_scan import imported_names

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "gpu_tenancy"
MAX_LINES = 500

# What each layer may import from this repository, besides itself.
MAY_IMPORT = {
    "gpu_tenancy.hami": set(),
    "gpu_tenancy.contract": {"gpu_tenancy.hami"},
    "gpu_tenancy.builders": {"gpu_tenancy.contract", "gpu_tenancy.hami"},
    "gpu_tenancy.cli": {"gpu_tenancy.builders", "gpu_tenancy.contract", "gpu_tenancy.hami"},
    "gpu_tenancy.gc_settings": set(),
    "gpu_tenancy.__main__": {"gpu_tenancy.cli"},  # `python -m gpu_tenancy`: the command line
    "components": {"gpu_tenancy.builders", "gpu_tenancy.contract", "gpu_tenancy.hami"},
    "policies": {"gpu_tenancy.builders", "gpu_tenancy.contract", "gpu_tenancy.hami"},
    "__main__": {"components", "gpu_tenancy.contract", "gpu_tenancy.gc_settings"},
}
# The pack imports its own modules as top-level names (the engine runs it from policies/).
POLICY_MODULES = {path.stem for path in (REPO / "policies").glob("*.py")} - {"__main__"}


def _dotted(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def _is_module(dotted: str) -> bool:
    path = REPO.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(path: Path) -> set[str]:
    """This repository's modules a file imports: `from a.b import c` imports a.b.c when c is a module."""
    # A name under one of this repository's modules that is no module itself is an imported attribute.
    found = {name for name in imported_names(path.read_text())
             if _is_module(name) or not _is_module(name.rpartition(".")[0])}
    return {module for module in found if module.split(".")[0] in {"gpu_tenancy", "components", "policies"}
            or module in POLICY_MODULES}


def layer_of(module: str) -> str | None:
    if module in POLICY_MODULES or module.startswith("policies."):
        return "policies"
    for layer in sorted(MAY_IMPORT, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None  # the bare package `gpu_tenancy` (its __init__ is empty)


def _sources() -> list[Path]:
    return [REPO / "__main__.py", *sorted(PACKAGE.rglob("*.py")), *sorted((REPO / "components").glob("*.py")),
            *sorted((REPO / "policies").glob("*.py"))]


def test_the_layer_map_covers_every_module() -> None:
    unplaced = [_dotted(path) for path in _sources()
                if layer_of(_dotted(path)) is None and path != PACKAGE / "__init__.py"]
    assert not unplaced, f"modules in no layer (add the folder to MAY_IMPORT): {unplaced}"


def test_imports_run_one_way() -> None:
    wrong = []
    for path in _sources():
        here = layer_of(_dotted(path))
        if here is None:
            continue
        for module in sorted(imported_modules(path)):
            there = layer_of(module)
            if there is not None and there != here and there not in MAY_IMPORT[here]:
                wrong.append(f"{path.relative_to(REPO)} ({here}) imports {module} ({there})")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_an_import_against_the_direction(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from gpu_tenancy.builders.kind_cluster import kind\nfrom gpu_tenancy.contract import config\n")
    modules = imported_modules(planted)
    assert modules >= {"gpu_tenancy.builders.kind_cluster.kind", "gpu_tenancy.contract.config"}
    assert "gpu_tenancy.builders" not in MAY_IMPORT["gpu_tenancy.contract"]
    assert layer_of("gpu_tenancy.builders.kind_cluster.kind") == "gpu_tenancy.builders"


def test_each_builder_folder_is_named_after_its_component() -> None:
    components = {path.stem for path in (REPO / "components").glob("*.py")}
    folders = {path.name for path in (PACKAGE / "builders").iterdir() if (path / "__init__.py").is_file()}
    assert folders <= components, f"builder folders without a component of that name: {sorted(folders - components)}"


@pytest.mark.parametrize("path", _sources(), ids=lambda path: str(path.relative_to(REPO)))
def test_no_module_is_longer_than_500_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(REPO)} has {lines} lines; split it along the concerns it mixes"
