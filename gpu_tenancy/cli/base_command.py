"""What every `gpu-tenancy` command shares: its parser, its one usage error, and the one place where an error
becomes an exit code (gpu_tenancy/cli/status_codes.py) and one line on stderr.

Each command's `main(argv) -> int` maps the errors it expects to its documented codes; whatever escapes it
is mapped here. Standard library only: `make tools` runs this with the system Python.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from gpu_tenancy.cli.commands import COMMANDS
from gpu_tenancy.cli.status_codes import BROKEN_PIPE, FAILURE, INTERNAL_ERROR, INTERRUPTED, SUCCESS, USAGE

PROG = "gpu-tenancy"
DEBUG_ENV = "GPU_TENANCY_DEBUG"


class UsageError(Exception):
    """The command line or an input is wrong: one line naming it, exit USAGE."""


class CommandParser(argparse.ArgumentParser):
    """argparse with a usage error on one line (argparse's own prints the whole usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: {message} (see --help)\n")


def command_parser(name: str, description: str | None = None, **kwargs: Any) -> CommandParser:
    """The parser of command `name`, shown as `gpu-tenancy <name>`."""
    return CommandParser(prog=f"{PROG} {name}", description=description, **kwargs)


def one_line(text: str) -> str:
    return " ".join(text.split())


def say(name: str, message: str) -> None:
    print(f"{PROG} {name}: {one_line(message)}", file=sys.stderr)


def _silence_stdout() -> None:
    # Python flushes stdout again at exit; pointed at /dev/null, that flush cannot fail a second time.
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run(name: str, argv: Sequence[str]) -> int:
    """Run command `name` with `argv` (its arguments only) and return its exit code, whatever it raises."""
    debug = os.environ.get(DEBUG_ENV) == "1"
    try:
        module = importlib.import_module(COMMANDS[name].module)
        return int(module.main(list(argv)))
    except SystemExit as done:  # argparse: --help (0), a usage error (USAGE)
        if done.code is None or isinstance(done.code, int):
            return done.code or SUCCESS
        say(name, str(done.code))
        return FAILURE
    except UsageError as error:
        say(name, str(error))
        return USAGE
    except KeyboardInterrupt:
        say(name, "interrupted")
        return INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE
    except Exception as error:
        if debug:
            traceback.print_exc()
        if isinstance(error, ModuleNotFoundError):
            what = (f"{error.name or error} is not installed: run `make runtime` and use .venv/bin/{PROG} "
                    "(the pinned requirements.txt)")
        else:
            what = f"internal error: {type(error).__name__}: {error}"
        say(name, what + ("" if debug else f" ({DEBUG_ENV}=1 shows the traceback)"))
        return INTERNAL_ERROR
