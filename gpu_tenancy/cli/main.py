"""`gpu-tenancy <command> [options]`: the project's one command line (also `python -m gpu_tenancy <command>`).

The commands are in gpu_tenancy/cli/commands.py, their exit codes in gpu_tenancy/cli/status_codes.py.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Sequence

from gpu_tenancy.cli.base_command import PROG, run
from gpu_tenancy.cli.commands import COMMANDS
from gpu_tenancy.cli.status_codes import MEANING, SUCCESS, USAGE


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version(PROG)
    except metadata.PackageNotFoundError:
        return "not installed (run from the checkout)"


def help_text() -> str:
    width = max(len(name) for name in COMMANDS) + 2
    lines = [
        f"usage: {PROG} <command> [options]",
        "",
        "The day-two command lines of gpu-tenancy. `" + PROG + " <command> --help` shows a command's options.",
        "",
        "commands:",
        *(f"  {name:<{width}}{info.summary}" for name, info in COMMANDS.items()),
        "",
        "exit codes:",
        *(f"  {code:<5}{meaning}" for code, meaning in MEANING.items()),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write(help_text())
        return USAGE
    name, rest = args[0], args[1:]
    if name in ("-h", "--help"):
        sys.stdout.write(help_text())
        return SUCCESS
    if name == "--version":
        print(f"{PROG} {version()}")
        return SUCCESS
    if name == "help" and rest and rest[0] in COMMANDS:
        return run(rest[0], ["--help"])
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        print(f"{PROG}: unknown command {name!r}{hint} (commands: {', '.join(COMMANDS)}; see {PROG} --help)",
              file=sys.stderr)
        return USAGE
    return run(name, rest)
