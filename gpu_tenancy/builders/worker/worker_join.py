"""The scripts (scripts/join.sh, leave.sh, reset.sh) that join a kind worker container to its tenant and remove it
again (mode sim), run by the worker's local `Command`s with `/bin/sh -c`.

The join and the leave read the tenant's admin kubeconfig on stdin (pulumi-command v1.2.1 `local/commandOutputs.go`
`run` feeds the same `stdin` to create, update and delete), so it reaches no command line and not the container.
A delete gets only the inputs stored at the last create or update, which no longer reach a tenant whose endpoint or
CA changed in the same `up`: the join's delete (`reset_script`) needs no kubeconfig, and the Node is removed by the
next join or, on destroy, by the node command (`leave_script`), updated whenever the kubeconfig changes.

The join mints its bootstrap token itself (gpu_tenancy/builders/bootstrap_token/join_token.py) and deletes it when
it ends, so no token is in the Pulumi state and every attempt gets a fresh one; kubeadm's discovery waits until
the bootstrapsigner has signed the new token id (kubernetes `cmd/kubeadm/app/discovery/token/token.go`).
"""

from __future__ import annotations

import shlex

from gpu_tenancy.builders import shell
from gpu_tenancy.builders.bootstrap_token import join_token
from gpu_tenancy.builders.worker import kubeadm_join

TOKEN_PLACEHOLDER = "@BOOTSTRAP_TOKEN@"
TOKEN_TTL_SECONDS = 900
CONTAINERD_WAIT_SECONDS = 120
# Inside the node container: /run is a tmpfs there (kind's `--tmpfs /run`), never on disk.
JOIN_FILE = "/run/gpu-tenancy-join.yaml"
# What kubeadm's join preflight refuses to overwrite (FileAvailable-kubelet.conf,
# FileAvailable-bootstrap-kubelet.conf, FileAvailable-ca.crt; kubernetes cmd/kubeadm/app/preflight/checks.go
# RunJoinNodeChecks). kubelet.conf means joined; the other two without it mean a join that failed half-way.
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
HALF_JOINED = ("/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/bootstrap-kubelet.conf")
# The join configuration (without its token) the node last joined with: its endpoint, CA hash, name and labels.
# On disk with kubelet.conf (not in /run), so a restarted container still knows whom it joined.
JOINED_WITH = "/etc/kubernetes/gpu-tenancy-joined-with.yaml"


def join_configuration_template(
    endpoint: str, ca_cert_hash: str, node_name: str, node_labels: dict[str, str]
) -> str:
    """The JoinConfiguration with TOKEN_PLACEHOLDER where the just-in-time token goes; nothing secret."""
    template = kubeadm_join.join_configuration(endpoint, TOKEN_PLACEHOLDER, ca_cert_hash, node_name, node_labels)
    if template.count(TOKEN_PLACEHOLDER) != 1:
        raise ValueError("the join configuration must hold the token placeholder exactly once")
    return template


def wait_for_containerd() -> str:
    """Shell lines that wait, bounded, until containerd is active in the node container `$worker`."""
    return shell.script(__name__, "_wait_for_containerd.sh", CONTAINERD_WAIT_SECONDS=str(CONTAINERD_WAIT_SECONDS))


def join_script(tenant: str) -> str:
    """Create and update: wait for containerd, reset a half-joined node (or one joined with another
    configuration), mint a token, join; a node joined with this configuration is left as it is.

    Environment: GPU_TENANCY_WORKER (container = node name), GPU_TENANCY_JOIN_CONFIGURATION (from
    join_configuration_template). Stdin: the tenant's admin kubeconfig.
    """
    return shell.script(
        __name__,
        "join.sh",
        REVOKE=join_token.revoke().replace(">/dev/null\n", ">/dev/null 2>&1 || true\n"),
        WAIT_FOR_CONTAINERD=wait_for_containerd(),
        MINT=join_token.mint(tenant, TOKEN_TTL_SECONDS, "gpu-tenancy: joins one worker, deleted after the join"),
        HALF_JOINED=shlex.quote(" || ".join(f"test -e {shlex.quote(path)}" for path in HALF_JOINED)),
        TOKEN_PLACEHOLDER=TOKEN_PLACEHOLDER,
        JOIN_FILE=JOIN_FILE,
        KUBELET_CONF=KUBELET_CONF,
        JOINED_WITH=JOINED_WITH,
    )


def reset_script() -> str:
    """The join's delete: reset the node, if its container is still there; needs no kubeconfig.

    The reset stops the kubelet (so it cannot register the Node again) and lets a join replaced in the same
    container, for a new control plane, join again instead of finding kubelet.conf. Best effort: a container
    that is gone or stopped has no kubelet to stop, and a join that finds one joined elsewhere resets it first.
    The Node object is removed by the join that follows, or by the worker's node command on destroy.

    Environment: GPU_TENANCY_WORKER (container = node name). Stdin: ignored.
    """
    return shell.script(__name__, "reset.sh")


def leave_script() -> str:
    """The node command's delete (destroy, or a replaced control plane): reset the node (if the container is
    still there: its kubelet stopped cannot register the Node again) and remove the Node from the tenant.

    Environment: GPU_TENANCY_WORKER (container = node name). Stdin: the tenant's admin kubeconfig.
    A Node that is already gone is fine; any other failure fails the delete, unless GPU_TENANCY_LAB_GONE=1
    (set by `make destroy` only when the kind cluster, and with it every tenant's control plane, is gone):
    then a tenant that does not answer is skipped, and the skip is said on stderr.
    """
    return shell.script(__name__, "leave.sh", STDIN_KUBECONFIG=shell.STDIN_KUBECONFIG)
