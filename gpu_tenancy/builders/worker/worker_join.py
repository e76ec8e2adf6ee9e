"""Shell scripts that join a kind worker container to its tenant and remove it again (mode sim).

Pure builders, run by the worker's local `Command`s with `/bin/sh -c`; tests run them against a fake
`docker`/`kubectl` and check them with shellcheck. The join and the leave read the tenant's admin kubeconfig
on stdin (pulumi-command v1.2.1 `local/commandOutputs.go` `run` feeds the same `stdin` to create, update and
delete) and keep it in a private temporary file for kubectl; it never reaches a command line or the container.

A delete runs with the inputs stored when its command was last created or updated (`Delete` gets only the
state), so the join's delete (`reset_script`) needs no kubeconfig at all: when the container is replaced in the
same `up` in which the tenant's endpoint or CA changed, the stored kubeconfig no longer reaches the tenant. The
Node object is removed by the next join (with the current kubeconfig) or, on destroy, by the node command
(`leave_script`), which is replaced only with its control plane and updated, storing the current kubeconfig,
whenever that changes.

The bootstrap token is minted by the join script itself, just in time
(gpu_tenancy/builders/bootstrap_token/join_token.py), with an `expiration` TOKEN_TTL_SECONDS ahead, and deleted again
when the script ends. So no token is ever in the Pulumi state or program inputs (the second `pulumi up` stays a no-op),
and every join attempt (a retry, a replaced container) gets a fresh one. A token created a moment before the join is
fine: kubeadm's discovery retries until the bootstrapsigner has signed cluster-info for the new token id (kubernetes
`cmd/kubeadm/app/discovery/token/token.go`, "the JWS signature is patched-in a bit later").
"""

from __future__ import annotations

import shlex
import textwrap

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
    return f"""waited=0
until docker exec "$worker" systemctl is-active --quiet containerd; do
  waited=$((waited + 1))
  if [ "$waited" -ge {CONTAINERD_WAIT_SECONDS} ]; then
    echo "gpu-tenancy: containerd in $worker is not active after {CONTAINERD_WAIT_SECONDS}s" >&2
    exit 1
  fi
  sleep 1
done
"""


def join_script(tenant: str) -> str:
    """Create and update: wait for containerd, reset a half-joined node (or one joined with another
    configuration), mint a token, join; a node joined with this configuration is left as it is.

    Environment: GPU_TENANCY_WORKER (container = node name), GPU_TENANCY_JOIN_CONFIGURATION (from
    join_configuration_template). Stdin: the tenant's admin kubeconfig.
    """
    mint = join_token.mint(tenant, TOKEN_TTL_SECONDS, "gpu-tenancy: joins one worker, deleted after the join")
    revoke = textwrap.indent(join_token.revoke().replace(">/dev/null\n", ">/dev/null 2>&1 || true\n"), "    ")
    half_joined = " || ".join(f"test -e {shlex.quote(path)}" for path in HALF_JOINED)
    return f"""set -eu
umask 077
worker="$GPU_TENANCY_WORKER"
template="$GPU_TENANCY_JOIN_CONFIGURATION"
kubeconfig="$(mktemp)"
token_id=""
cleanup() {{
  docker exec "$worker" rm -f {JOIN_FILE} >/dev/null 2>&1 || true
  if [ -n "$token_id" ]; then
{revoke}  fi
  rm -f "$kubeconfig"
}}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cat > "$kubeconfig"

# Wait for systemd and containerd inside the node container, as kind does before kubeadm.
{wait_for_containerd()}# pulumi-command runs this script on create and on every update, with the new inputs (v1.2.1
# local/commandController.go `Update`: `create` when no `update` is set). A node joined with this
# configuration stays as it is; one joined to another endpoint or CA (the control plane moved, its CA
# changed) leaves and joins again here, with the kubeconfig that reaches the tenant now.
if docker exec "$worker" test -f {KUBELET_CONF}; then
  joined_with="$(docker exec "$worker" cat {JOINED_WITH} 2>/dev/null || true)"
  if [ "$joined_with" = "$(printf '%s\\n' "$template")" ]; then
    exit 0
  fi
  echo "gpu-tenancy: $worker was joined with another endpoint, CA or node registration: resetting it to join again" >&2
  docker exec "$worker" kubeadm reset --force
fi
# A join that failed half-way left files kubeadm's preflight refuses to overwrite: start clean.
if docker exec "$worker" sh -c {shlex.quote(half_joined)}; then
  echo "gpu-tenancy: $worker holds a half-finished join; kubeadm reset first" >&2
  docker exec "$worker" kubeadm reset --force
fi
# Swap stays on: /proc/swaps is the host's, so turning it off here would turn off the host's swap; the kubelet runs with
# failSwapOn false and kubeadm's Swap preflight is ignored, as kind does.
docker exec "$worker" sh -c 'modprobe br_netfilter 2>/dev/null || true'

case "$template" in
  *{TOKEN_PLACEHOLDER}*) ;;
  *) echo "gpu-tenancy: GPU_TENANCY_JOIN_CONFIGURATION has no token placeholder" >&2; exit 1 ;;
esac
{mint}before="${{template%%{TOKEN_PLACEHOLDER}*}}"
after="${{template#*{TOKEN_PLACEHOLDER}}}"
printf '%s%s%s\\n' "$before" "$token_id.$token_secret" "$after" \\
  | docker exec -i "$worker" sh -c 'umask 077; cat > {JOIN_FILE}'
# This node is not joined now: a Node of its name is its own earlier registration (an old container's, or
# this one's before a reset), Ready until its lease runs out, and kubeadm refuses the name while it is ("a
# Node with name ... and status Ready already exists"). Removed here, through the tenant's current API
# server, so that no delete has to reach the tenant with a kubeconfig stored before it moved.
kubectl --kubeconfig "$kubeconfig" --request-timeout=60s delete node "$worker" --ignore-not-found
docker exec "$worker" kubeadm join --config {JOIN_FILE}
printf '%s\\n' "$template" | docker exec -i "$worker" sh -c 'cat > {JOINED_WITH}'
"""


def reset_script() -> str:
    """The join's delete: reset the node, if its container is still there; needs no kubeconfig.

    The reset stops the kubelet (so it cannot register the Node again) and lets a join replaced in the same
    container, for a new control plane, join again instead of finding kubelet.conf. Best effort: a container
    that is gone or stopped has no kubelet to stop, and a join that finds one joined elsewhere resets it first.
    The Node object is removed by the join that follows, or by the worker's node command on destroy.

    Environment: GPU_TENANCY_WORKER (container = node name). Stdin: ignored.
    """
    return """set -eu
worker="$GPU_TENANCY_WORKER"
cat >/dev/null
if ! output=$(docker exec "$worker" kubeadm reset --force 2>&1); then
  echo "gpu-tenancy: kubeadm reset in $worker failed (its next join resets it): $output" >&2
fi
"""


def leave_script() -> str:
    """The node command's delete (destroy, or a replaced control plane): reset the node (if the container is
    still there: its kubelet stopped cannot register the Node again) and remove the Node from the tenant.

    Environment: GPU_TENANCY_WORKER (container = node name). Stdin: the tenant's admin kubeconfig.
    A Node that is already gone is fine; any other failure fails the delete, unless GPU_TENANCY_LAB_GONE=1
    (set by `make destroy` only when the kind cluster, and with it every tenant's control plane, is gone):
    then a tenant that does not answer is skipped, and the skip is said on stderr.
    """
    return (
        "set -eu\n"
        + shell.STDIN_KUBECONFIG
        + """worker="$GPU_TENANCY_WORKER"
# A reset node's kubelet is stopped and cannot register the Node again.
docker exec "$worker" kubeadm reset --force >/dev/null 2>&1 || true
if [ "${GPU_TENANCY_LAB_GONE:-}" = 1 ]; then
  if ! kubectl --kubeconfig "$kubeconfig" --request-timeout=10s delete node "$worker" --ignore-not-found; then
    echo "gpu-tenancy: the tenant's control plane is gone with its kind cluster: skipped removing Node $worker" >&2
  fi
  exit 0
fi
kubectl --kubeconfig "$kubeconfig" --request-timeout=60s delete node "$worker" --ignore-not-found
"""
    )
