"""Shell fragments that mint and revoke kubeadm bootstrap tokens in a tenant, with kubectl.

A token is minted when it is needed, never by the program: a random `<id>.<secret>`
([a-z0-9]{6}.[a-z0-9]{16}) in a `bootstrap.kubernetes.io/token` Secret whose `expiration` lies a TTL
ahead, computed by the script at run time (no wall-clock time in program inputs, so a second
`pulumi up` stays a no-op). Kubernetes refuses an expired token (`plugin/pkg/auth/authenticator/token/
bootstrap/bootstrap.go`) and Kamaji's tenant controller-manager runs `tokencleaner`
(`--controllers=*,bootstrapsigner,tokencleaner`, clastix/kamaji 26.8.2-edge
`internal/builders/controlplane/deployment.go`), which deletes the expired Secret.

The fragments expect `$kubeconfig` (a private file holding the tenant's admin kubeconfig). The token
secret goes to kubectl on stdin through `printf`, a shell builtin: it is on no command line.
"""

from __future__ import annotations

import json

from gpu_tenancy.builders import kube_objects, shell

MINT_ATTEMPTS = 60
MINT_RETRY_SECONDS = 2
# kubeadm's own default for `kubeadm token create` (cmd/kubeadm/app/constants DefaultTokenDuration).
KUBEADM_DEFAULT_TTL_SECONDS = 24 * 3600
AUTH_EXTRA_GROUPS = "system:bootstrappers:kubeadm:default-node-token"


def _secret_printf(tenant: str, description: str) -> str:
    """A `printf` writing the token Secret (JSON) from $token_id, $token_secret and $expiration."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "bootstrap-token-@ID@",
            "namespace": "kube-system",
            "labels": kube_objects.labels(tenant, "worker"),
        },
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "description": description,
            "token-id": "@ID@",
            "token-secret": "@SECRET@",
            "expiration": "@EXPIRATION@",
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": AUTH_EXTRA_GROUPS,
        },
    }
    text = json.dumps(secret, sort_keys=True)
    if "'" in text:
        raise ValueError("labels and description must not contain a single quote")
    for marker, variable in (("@ID@", "token_id"), ("@SECRET@", "token_secret"), ("@EXPIRATION@", "expiration")):
        text = text.replace(marker, f"'\"${variable}\"'")
    return f"printf '%s\\n' '{text}'"


def mint(tenant: str, ttl_seconds: int, description: str) -> str:
    """Sets $token_id and $token_secret and creates their Secret in the tenant, valid for ttl_seconds."""
    return shell.script(
        __name__,
        "_mint.sh",
        TTL_SECONDS=str(int(ttl_seconds)),
        SECRET_PRINTF=_secret_printf(tenant, description),
        MINT_ATTEMPTS=str(MINT_ATTEMPTS),
        MINT_RETRY_SECONDS=str(MINT_RETRY_SECONDS),
    )


def _revoke_command() -> str:
    return (
        'kubectl --kubeconfig "$kubeconfig" --request-timeout=60s --namespace kube-system \\\n'
        '  delete secret "bootstrap-token-$token_id" --ignore-not-found'
    )


def revoke() -> str:
    """Deletes the Secret of the token $token_id; one that is gone already is fine."""
    return _revoke_command() + " >/dev/null\n"


def mint_script(tenant: str, ttl_seconds: int = KUBEADM_DEFAULT_TTL_SECONDS) -> str:
    """A Command's create: mints a token and prints `<id>.<secret>` (keep the output secret, unlogged)."""
    return shell.script(
        __name__, "mint.sh", STDIN_KUBECONFIG=shell.STDIN_KUBECONFIG,
        MINT=mint(tenant, ttl_seconds, "gpu-tenancy: joins a GPU host of this tenant"),
    )


def keep_script() -> str:
    """That Command's update: prints the token it already minted, so a changed kubeconfig on stdin (Kamaji
    rotating the admin credentials) mints no second token that nothing would revoke. pulumi-command runs
    `create` on an update unless `update` is set (v1.2.1 provider/pkg/provider/local/commandController.go
    `Update`) and passes the previous stdout in PULUMI_COMMAND_STDOUT (`run`, addPreviousOutputInEnv)."""
    return shell.script(__name__, "keep.sh")


def revoke_script() -> str:
    """That Command's delete: revokes the token it printed (pulumi-command passes the previous stdout in
    PULUMI_COMMAND_STDOUT: pulumi-command v1.2.1 provider/pkg/provider/local/commandOutputs.go `run`).

    Stdin: the kubeconfig stored when the command was created or last updated (a delete gets only the state).
    When that kubeconfig no longer reaches the tenant (its endpoint moved, its CA changed: the mint is being
    replaced for that), the revoke is skipped with one line on stderr: the token expires within its TTL and the
    tenant's tokencleaner deletes it. Any other failure fails the delete.
    """
    return shell.script(
        __name__, "revoke.sh", STDIN_KUBECONFIG=shell.STDIN_KUBECONFIG, KUBECTL_UNREACHABLE=shell.KUBECTL_UNREACHABLE,
        REVOKE=_revoke_command(), TTL_HOURS=str(KUBEADM_DEFAULT_TTL_SECONDS // 3600),
    )
