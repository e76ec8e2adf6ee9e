"""The proxy settings of a kind worker, applied to containerd inside the node without replacing the container.

kind passes HTTP(S)_PROXY/NO_PROXY to a node as `docker run -e` (kind_node.proxy_env), and the node's
entrypoint turns them into systemd's DefaultEnvironment for every unit (kind v0.32.0
`images/base/files/usr/local/bin/entrypoint` `configure_proxy`, written once, at container start). A
container's environment is fixed at creation: terraform-provider-docker v4.5.0 declares `env` ForceNew
(`internal/provider/resource_docker_container.go`), so a proxy change there would replace every worker and
its tenants' pods. Here the same variables go into a systemd drop-in of containerd, the unit that pulls
images (a unit's `Environment=` overrides DefaultEnvironment, systemd.exec(5)), written by a Command whose
stdin is the drop-in: a new proxy is an update of that Command, which rewrites the drop-in and restarts
containerd. Running containers survive the restart: kind's `containerd.service` has `KillMode=process`
(`images/base/files/etc/systemd/system/containerd.service`), so only containerd stops, not the shims that
hold the containers. The image has no `containerd.service.d` directory: the script makes it.

Run by the worker's local `Command` with `/bin/sh -c`; tests run them against tests/worker_fakes.py and
check them with shellcheck.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpu_tenancy.builders import shell
from gpu_tenancy.builders.worker import worker_join

DROPIN_DIR = "/etc/systemd/system/containerd.service.d"
DROPIN = f"{DROPIN_DIR}/gpu-tenancy-proxy.conf"


def _quoted(assignment: str) -> str:
    """One `Environment=` word, as systemd unquotes it (systemd.syntax(7): double quotes, C escapes `\\\\`
    and `\\"`; `%` starts a specifier in unit files, `%%` is a literal percent: systemd.unit(5))."""
    if any(c in assignment for c in "\n\r"):
        raise ValueError("a proxy variable must not contain a line break")
    return '"' + assignment.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


def dropin(assignments: Iterable[str]) -> str:
    """The drop-in for `NAME=value` assignments (kind_node.proxy_env's, both spellings)."""
    words = " ".join(_quoted(a) for a in sorted(assignments))
    return f"# gpu-tenancy: the proxy settings of the host that ran pulumi up\n[Service]\nEnvironment={words}\n"


def apply_script() -> str:
    """Create and update: write the drop-in from stdin and restart containerd, unless it is already in place.

    Environment: GPU_TENANCY_WORKER (the container). Stdin: the drop-in (it may hold proxy credentials, so it
    never reaches a command line).
    """
    return shell.script(
        __name__, "proxy_apply.sh", WAIT_FOR_CONTAINERD=worker_join.wait_for_containerd(), DROPIN=DROPIN,
        DROPIN_DIR=DROPIN_DIR,
    )


def remove_script() -> str:
    """Delete (no proxy on the host any more, or the worker goes): remove the drop-in and restart containerd.

    A container that is gone has nothing to remove; any other failure fails the delete, since containerd
    would go on using the old proxy.
    """
    return shell.script(__name__, "proxy_remove.sh", DROPIN=DROPIN)
