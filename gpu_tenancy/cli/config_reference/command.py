"""The configuration reference, docs/configuration.md, generated from the stack config's models.

    gpu-tenancy config-reference           # print the page
    gpu-tenancy config-reference --write   # rewrite docs/configuration.md
"""

from __future__ import annotations

import sys

from gpu_tenancy.cli.base_command import command_parser
from gpu_tenancy.cli.config_reference.page import PAGE, render
from gpu_tenancy.cli.status_codes import SUCCESS


def main(argv: list[str] | None = None) -> int:
    parser = command_parser("config-reference", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(PAGE.parents[1])}")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        PAGE.write_text(page)
    else:
        sys.stdout.write(page)
    return SUCCESS

