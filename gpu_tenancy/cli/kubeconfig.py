"""Write a tenant's (or the management cluster's) admin kubeconfig to a private file and print its path.

    gpu-tenancy kubeconfig --stack dev --tenant tenant-a
    export KUBECONFIG=$(make -s kubeconfig TENANT=tenant-a)

The kubeconfig comes from the stack outputs (`tenantKubeconfigs`, `managementKubeconfig`, both secret)
and never reaches the terminal: only the path is printed. The file is created with mode 0600 (a new
temporary file in the same directory, then renamed over the target), so it is never readable by others,
not even for a moment, and an existing file with looser permissions is replaced, not rewritten.
Exit codes (gpu_tenancy.cli.status_codes): 0 written, 1 pulumi failed, 2 usage or unknown tenant.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gpu_tenancy.cli import stack_outputs
from gpu_tenancy.cli.base_command import command_parser
from gpu_tenancy.cli.status_codes import FAILURE, SUCCESS, USAGE

DEFAULT_DIR = Path("state") / "kubeconfigs"


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` through a file created 0600 (mkstemp), renamed into place."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def kubeconfig_path(directory: Path, stack: str, name: str) -> Path:
    return directory / f"{stack}-{name}.kubeconfig"


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "kubeconfig",
        description="Write an admin kubeconfig from the stack outputs to a file with mode 0600; print its path.",
    )
    p.add_argument("--stack", default="dev", help="Pulumi stack (default: dev)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--tenant", help="tenant name, as in the stack's gpu-tenancy:tenants")
    which.add_argument("--management", action="store_true", help="the management cluster instead of a tenant")
    p.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help=f"directory for the file (default: {DEFAULT_DIR}; created 0700)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.tenant is not None and not args.tenant.strip():
        print("kubeconfig: --tenant is empty (make kubeconfig TENANT=<name>)", file=sys.stderr)
        return USAGE
    try:
        outputs = stack_outputs.read_outputs(args.stack)
    except stack_outputs.OutputsError as error:
        print(f"kubeconfig: {error}", file=sys.stderr)
        return FAILURE
    try:
        if args.management:
            name, text = "management", stack_outputs.management_kubeconfig(outputs, args.stack)
        else:
            name, text = args.tenant, stack_outputs.tenant_kubeconfig(outputs, args.stack, args.tenant)
    except stack_outputs.OutputsError as error:
        print(f"kubeconfig: {error}", file=sys.stderr)
        return USAGE
    path = kubeconfig_path(args.dir, args.stack, name)
    try:
        write_private(path, text)
    except OSError as error:
        print(f"kubeconfig: cannot write {path}: {error.strerror}", file=sys.stderr)
        return FAILURE
    print(path.resolve())
    return SUCCESS

