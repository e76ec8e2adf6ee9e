"""A deployed stack's outputs, read with the Pulumi CLI (`pulumi stack output --json --show-secrets`).

The same command pulumi's Automation API runs for `Stack.outputs()` (pulumi 3.272
`LocalWorkspace.stack_outputs`), without the second, masked call: callers here know which outputs are
secret (`tenantKubeconfigs`, `managementKubeconfig`) and never print them. The backend comes from the
environment (`PULUMI_BACKEND_URL`, which the Makefile exports) exactly as for any other `pulumi` call.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PULUMI = "pulumi"
TIMEOUT_SECONDS = 120


class OutputsError(Exception):
    """One line, for the user: what failed and what to do."""


@dataclass(frozen=True)
class TenantOutputs:
    endpoint: str
    nodes: tuple[str, ...]


def _last_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error:")]
    return (errors or lines or ["no message"])[-1]


def read_outputs(stack: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every output of `stack`, secrets in plaintext; OutputsError (one line) when pulumi fails."""
    if shutil.which(PULUMI, path=None if env is None else env.get("PATH")) is None:
        raise OutputsError("pulumi: not found on PATH (`make tools` installs it)")
    command = [PULUMI, "stack", "output", "--json", "--show-secrets", "--stack", stack]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, env=None if env is None else dict(env)
        )
    except subprocess.TimeoutExpired:
        raise OutputsError(f"pulumi stack output --stack {stack}: no answer in {TIMEOUT_SECONDS} s") from None
    if done.returncode != 0:
        raise OutputsError(f"pulumi stack output --stack {stack}: {_last_error_line(done.stderr)}")
    try:
        outputs = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise OutputsError(f"pulumi stack output --stack {stack}: not JSON (is this pulumi v3?)") from None
    if not isinstance(outputs, dict):
        raise OutputsError(f"pulumi stack output --stack {stack}: expected an object of outputs")
    return outputs


def _output(outputs: Mapping[str, Any], key: str, stack: str) -> Any:
    if key not in outputs:
        raise OutputsError(f"stack {stack} has no output {key!r} (deployed with an older program? run `make up`)")
    return outputs[key]


def tenants(outputs: Mapping[str, Any], stack: str) -> dict[str, TenantOutputs]:
    """The `tenants` output: name -> endpoint and node names (not secret)."""
    raw = _output(outputs, "tenants", stack)
    if not isinstance(raw, dict):
        raise OutputsError(f"stack {stack}: output 'tenants' is not an object")
    return {
        name: TenantOutputs(str(entry.get("endpoint", "")), tuple(str(n) for n in entry.get("nodes") or ()))
        for name, entry in raw.items()
        if isinstance(entry, dict)
    }


def tenant_kubeconfig(outputs: Mapping[str, Any], stack: str, tenant: str) -> str:
    """One tenant's admin kubeconfig (secret: never print it)."""
    kubeconfigs = _output(outputs, "tenantKubeconfigs", stack)
    if isinstance(kubeconfigs, dict) and tenant in kubeconfigs:
        return str(kubeconfigs[tenant])
    listed = outputs.get("tenants")
    if isinstance(listed, dict) and tenant in listed:
        raise OutputsError(f"stack {stack}: output 'tenantKubeconfigs' has no kubeconfig for tenant {tenant!r}, "
                           "which output 'tenants' lists (outputs of a partial deployment? run `make up`)")
    known = ", ".join(sorted(kubeconfigs)) if isinstance(kubeconfigs, dict) else ""
    raise OutputsError(f"stack {stack} has no tenant {tenant!r} (tenants: {known or 'none'})")


def management_kubeconfig(outputs: Mapping[str, Any], stack: str) -> str:
    """The management cluster's kubeconfig (secret: never print it)."""
    return str(_output(outputs, "managementKubeconfig", stack))
