"""The configuration reference, docs/configuration.md, generated from the stack config's models.

    python -m gpu_tenancy.cli.config_reference           # print the page
    python -m gpu_tenancy.cli.config_reference --write   # rewrite docs/configuration.md
"""

from __future__ import annotations

import argparse
import sys

from gpu_tenancy.cli.config_reference.page import PAGE, render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_tenancy.cli.config_reference", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(PAGE.parents[1])}")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        PAGE.write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
