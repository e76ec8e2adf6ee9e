"""The shell scripts the builders send, kept as files in a `scripts/` folder beside the builder that sends them,
and the fragments several of them share (this folder's scripts/).

A script file is the text sent, byte for byte, but for its `@NAME@` placeholders (shellcheck reads `@NAME@` as a
plain word, where `${name}` would be a shell expansion): `@NAME@` takes its value as it is, and a line holding
only `@NAME@` takes a block of lines ending in a newline, each indented as the placeholder is. A file whose name
starts with `_` is such a block, included by others.
"""

from __future__ import annotations

import re
import textwrap
from importlib import resources

_PLACEHOLDER = re.compile(r"^([ \t]*)@([A-Z][A-Z0-9_]*)@\n|@([A-Z][A-Z0-9_]*)@", re.MULTILINE)


def placeholders(template: str) -> set[str]:
    return {block or inline for _, block, inline in _PLACEHOLDER.findall(template)}


def render(template: str, values: dict[str, str]) -> str:
    """`template` with every placeholder filled; a placeholder without a value, or a value without a placeholder,
    is refused (a misspelt name would otherwise send the placeholder itself)."""
    names = placeholders(template)
    if names != set(values):
        raise ValueError(f"placeholders {sorted(names)} but values for {sorted(values)}")

    def fill(match: re.Match[str]) -> str:
        indent, block, inline = match.groups()
        if inline:
            return values[inline]
        if not values[block].endswith("\n"):
            raise ValueError(f"@{block}@ stands on a line of its own: its value must end with a newline")
        return textwrap.indent(values[block], indent)

    return _PLACEHOLDER.sub(fill, template)


def script(module: str, name: str, **values: str) -> str:
    """The file scripts/`name` beside the builder `module` (its `__name__`), placeholders filled with `values`."""
    package = module.rpartition(".")[0]
    template = (resources.files(package) / "scripts" / name).read_text(encoding="utf-8")
    return render(template, values)


# The credentials arrive on stdin (never on a command line) and live in a private temporary file that is
# removed on any exit, signals included; scripts then call kubectl with `--kubeconfig "$kubeconfig"`.
STDIN_KUBECONFIG = script(__name__, "_stdin_kubeconfig.sh")

# `kubectl_unreachable "$output"` succeeds, printing kubectl's last line, when that line says kubectl never reached an
# API server that would answer this kubeconfig: kubectl's message for a *url.Error (kubectl `pkg/cmd/util/helpers.go`
# `StandardErrorMessage`): refused, no such host, a dial that timed out or found no route, or a server certificate
# the kubeconfig's CA does not verify. Anything the server answered (Forbidden, Unauthorized, ...) is not.
KUBECTL_UNREACHABLE = script(__name__, "_kubectl_unreachable.sh")
