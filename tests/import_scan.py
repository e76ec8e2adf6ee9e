"""The dotted names a Python file's absolute imports name, read from its syntax tree (nothing is imported)."""

from __future__ import annotations

import ast


def imported_names(source: str) -> set[str]:
    """`import a.b` names a.b; `from a.b import c` names a.b and a.b.c (c may be a module or an attribute: the
    caller tells which by looking for the file). Relative imports are left out: the repository has none."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names
