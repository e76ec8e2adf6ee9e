"""The rich Console the command lines print their tables through."""

from __future__ import annotations

from typing import IO

from rich.console import Console


def text_console(out: IO[str], width: int, color: bool) -> Console:
    """A Console writing to `out`, `width` columns wide, in colour only when `color` (stdout is a terminal) and
    the user has not set NO_COLOR (rich reads it: https://no-color.org); no highlighting of numbers in plain text."""
    return Console(file=out, width=width, force_terminal=color, highlight=False)
