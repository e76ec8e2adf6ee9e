"""A stand-in for the `pulumi` CLI's `stack output` command, installed on PATH by tests.

Follows pulumi v3.272.0 as the Automation API relies on it (sdk/python/lib/pulumi/automation/
_local_workspace.py, `LocalWorkspace.stack_outputs`): `pulumi stack output --json --show-secrets
--stack <s>` prints every output of the stack as one JSON object, secrets in plaintext, and exits 0.
An unknown stack fails like pulumi's `requireStack` (pkg/cmd/pulumi: `no stack named '%s' found`),
printed as `error: ...` on stderr with exit code 255 (cmdutil's exit on error).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

SCRIPT = '''#!{python}
import json, os, sys
argv = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": argv, "backend": os.environ.get("PULUMI_BACKEND_URL")}}) + "\\n")
stacks = json.load(open({outputs!r}))
if argv[:2] != ["stack", "output"] or "--json" not in argv:
    print("error: this stub only answers `stack output --json`", file=sys.stderr)
    sys.exit(255)
stack = argv[argv.index("--stack") + 1] if "--stack" in argv else None
if stack not in stacks:
    print(f"error: no stack named '{{stack}}' found", file=sys.stderr)
    sys.exit(255)
outputs = stacks[stack]
if "--show-secrets" not in argv:
    outputs = {{k: "[secret]" if k in {secret_keys!r} else v for k, v in outputs.items()}}
print(json.dumps(outputs, indent=4))
'''

SECRET_OUTPUTS = ("managementKubeconfig", "tenantKubeconfigs")


def install(directory: Path, stacks: dict[str, dict[str, Any]]) -> Path:
    """Write `pulumi` into `directory` answering for `stacks` (name -> outputs); returns the call log."""
    directory.mkdir(parents=True, exist_ok=True)
    outputs_file = directory / "outputs.json"
    outputs_file.write_text(json.dumps(stacks))
    log = directory / "calls.jsonl"
    script = directory / "pulumi"
    script.write_text(
        SCRIPT.format(python=sys.executable, log=str(log), outputs=str(outputs_file), secret_keys=list(SECRET_OUTPUTS))
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return log


def _entries(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def calls(log: Path) -> list[list[str]]:
    """The argument lists the stub was called with, in order."""
    return [entry["argv"] for entry in _entries(log)]


def backends(log: Path) -> list[str | None]:
    """PULUMI_BACKEND_URL as each call saw it."""
    return [entry["backend"] for entry in _entries(log)]


def path_with(directory: Path) -> str:
    return str(directory) + os.pathsep + os.environ.get("PATH", "")
