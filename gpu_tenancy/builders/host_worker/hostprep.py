"""The scripts (scripts/) that prepare a real GPU host and join it to its tenant (mode real), run over SSH
(pulumi-command `remote.Command`), and the node commands run beside the program.

Debian/Ubuntu hosts with the NVIDIA driver installed are supported: the driver is the one thing the preparation
does not install, as it must match the host's kernel and GPU generation.
"""

from __future__ import annotations

import shlex

from gpu_tenancy.builders import shell
from gpu_tenancy.builders.gpu_access import gpu_access
from gpu_tenancy.contract import versions
from gpu_tenancy.contract.platform_config import KUBERNETES_VERSION

JOIN_FILE = "/run/gpu-tenancy-join.yaml"


def kubernetes_package_version(kubernetes_version: str) -> tuple[str, str]:
    """('v1.35', '1.35.5-*') for 'v1.35.5': the pkgs.k8s.io channel and the apt version pin."""
    match = KUBERNETES_VERSION.match(kubernetes_version)
    if not match:
        raise ValueError(f"{kubernetes_version!r} is not an exact version like 'v1.35.5'")
    minor, patch = match.groups()
    return f"v1.{minor}", f"1.{minor}.{patch}-*"


def prepare_script(kubernetes_version: str, toolkit_version: str = versions.NVIDIA_CONTAINER_TOOLKIT_VERSION) -> str:
    """Idempotent host preparation: kernel settings, containerd, kubeadm/kubelet, NVIDIA runtime.

    scripts/prepare.sh's comment names the GPU-access builder by a path that is gone; it stays, as its bytes are
    sent and a fixed comment would prepare every existing host again (tests/test_comment_paths.py SENT_AS_IS)."""
    channel, package = kubernetes_package_version(kubernetes_version)
    return shell.script(
        __name__,
        "prepare.sh",
        KUBERNETES_VERSION=kubernetes_version,
        K8S_CHANNEL=shlex.quote(channel),
        K8S_PACKAGE=shlex.quote(package),
        TOOLKIT_PACKAGE=shlex.quote(toolkit_version),
        RUNTIME_HANDLER=gpu_access.GPU_RUNTIME_CLASS,
        RUNTIME_CHECK=runtime_check_script(),
    )


def runtime_check_script() -> str:
    """Fails the preparation unless containerd, as it runs, has runc as default and the NVIDIA handler.

    Reads `containerd config dump` (the merged config, drop-ins included): any `default_runtime_name`
    naming the NVIDIA handler would hand every pod the GPUs, `NVIDIA_VISIBLE_DEVICES=all` is enough.
    """
    return shell.script(__name__, "_runtime_check.sh", RUNTIME_HANDLER=gpu_access.GPU_RUNTIME_CLASS)


def join_command() -> str:
    """Runs on the host with the JoinConfiguration on stdin; a joined host is left as it is."""
    script = (
        "test -f /etc/kubernetes/kubelet.conf && exit 0; "
        f"umask 077; cat > {JOIN_FILE}; "
        f"kubeadm join --config {JOIN_FILE}; status=$?; rm -f {JOIN_FILE}; exit $status"
    )
    return f"sudo -n sh -c {shlex.quote(script)}"


def prepare_command() -> str:
    """Runs the preparation script given on stdin as root."""
    return "sudo -n bash -s"


def reset_command() -> str:
    """On destroy: leave the tenant and clean the node's Kubernetes state."""
    return "sudo -n kubeadm reset --force && sudo -n rm -rf /etc/cni/net.d"


def _delete_node() -> str:
    return 'kubectl --kubeconfig "$kubeconfig" --request-timeout=60s delete node "$GPU_TENANCY_NODE" --ignore-not-found'


def remove_stale_node_script() -> str:
    """The node command's create, run here: deletes a Node of the host's name with the kubeconfig of now.

    Environment: GPU_TENANCY_NODE. Stdin: the tenant's admin kubeconfig. The host's join depends on this command
    and is deleted first when it is replaced, so this runs on a host that is not joined (reset, or never joined):
    a Node of its name is its own earlier registration. `kubeadm join` refuses a name whose Node is still Ready
    (kubernetes `cmd/kubeadm/app/cmd/phases/join/kubelet.go`), which a reset host's Node stays until its lease
    runs out, and after a moved endpoint or a new CA the old delete could not remove it: removed here.
    """
    return shell.script(__name__, "remove_stale_node.sh", STDIN_KUBECONFIG=shell.STDIN_KUBECONFIG,
                        DELETE_NODE=_delete_node() + "\n")


# The node command's update: a new kubeconfig (same endpoint and CA: rotated credentials) is only stored, for the
# delete; an update must not run the create, which would delete the Node of a joined host.
KEEP_NODE_COMMAND = "true"


def remove_node_script() -> str:
    """The node command's delete, run here after the host was reset: deletes its Node from the tenant.

    Environment: GPU_TENANCY_NODE. Stdin: the kubeconfig stored when the command was created or last updated
    (a delete gets only the state). A Node that is already gone is fine. When that kubeconfig no longer
    reaches the tenant (its endpoint moved, its CA changed: the command is being replaced for that, and its
    create removes the Node with the current kubeconfig), the delete is skipped with one line on stderr; any
    other failure fails it.
    """
    return shell.script(
        __name__, "remove_node.sh", STDIN_KUBECONFIG=shell.STDIN_KUBECONFIG,
        KUBECTL_UNREACHABLE=shell.KUBECTL_UNREACHABLE, DELETE_NODE=_delete_node(),
    )


MACHINE_ID_COMMAND = "cat /etc/machine-id"


def duplicate_machines(machine_ids: dict[str, str]) -> list[str]:
    """`tenant/worker` names that report one /etc/machine-id: the same machine listed twice (by two names,
    behind two addresses) or cloned without a new id. Either way it must not join twice."""
    by_id: dict[str, list[str]] = {}
    for worker, machine_id in sorted(machine_ids.items()):
        by_id.setdefault(machine_id.strip(), []).append(worker)
    return [" and ".join(workers) + f" (machine-id {machine_id})"
            for machine_id, workers in sorted(by_id.items()) if machine_id and len(workers) > 1]


def machine_check_command(machine_ids: dict[str, str]) -> str:
    """The gate every host's preparation waits for: succeeds only when no machine is listed twice."""
    duplicates = duplicate_machines(machine_ids)
    if not duplicates:
        return "true"
    message = (
        "gpu-tenancy: one machine is listed as several workers: " + "; ".join(duplicates)
        + ". Give each machine one entry (or, for distinct clones, a new id: systemd-machine-id-setup)."
    )
    return f"echo {shlex.quote(message)} >&2; exit 1"
