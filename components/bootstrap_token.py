"""A kubeadm bootstrap token for joining one GPU host (mode real) to its tenant, valid for a day.

A local Command mints it when it is created (gpu_tenancy/builders/bootstrap_token/join_token.py: kubectl with the
tenant's admin kubeconfig on stdin, an `expiration` computed at run time, kubeadm's default TTL) and revokes it when it
is deleted (skipped, with a line on stderr, when the kubeconfig stored before the tenant's endpoint moved or its CA
changed no longer reaches it: the token expires on its own). Its `triggers` must be what replaces the host's join
(host address, Kubernetes version, tenant CA and endpoint), so every rejoin gets a fresh token while a second
`pulumi up` changes nothing. Kamaji's tenant controller-manager runs `tokencleaner`, so an expired token's Secret
disappears from the tenant on its own; the state holds only the (secret) printed token, never a Secret object to
drift.

A join retried more than a day after its token was minted needs a new one:
`pulumi up --replace '<urn of the *-bootstrap-token-mint command>'`. The kind workers of mode sim mint
a 15-minute token inside their join script instead (gpu_tenancy/builders/worker/worker_join.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_command as command

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.bootstrap_token import join_token
from gpu_tenancy.builders.worker import kubeadm_join


@dataclass
class BootstrapTokenArgs:
    """A join token for one host of one tenant.

    Attributes:
        tenant (str): the tenant the host joins; the token's Secret is labelled with it.
        kubeconfig (pulumi.Input[str]): the tenant's admin kubeconfig (secret), read on stdin by the mint and
            the revoke.
        triggers (list[Any]): what replaces the join this token is for: a replaced join gets a new token.
            Default: [].
    """

    tenant: str
    kubeconfig: pulumi.Input[str]
    triggers: list[Any] = field(default_factory=list)


class BootstrapToken(pulumi.ComponentResource):
    """`mint` is the Command that created the token (`<id>.<secret>`) in the tenant.

    The token itself is no attribute and no output: only `join_configuration` reads it, and the state keeps it
    once, as the mint's secret stdout.
    """

    mint: command.local.Command
    tenant: str

    def __init__(self, name: str, args: BootstrapTokenArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:bootstrap_token:BootstrapToken", name, None, opts)
        self.mint = command.local.Command(
            f"{name}-mint",
            create=join_token.mint_script(args.tenant),
            update=join_token.keep_script(),
            delete=join_token.revoke_script(),
            interpreter=["/bin/sh", "-c"],
            stdin=pulumi.Output.secret(args.kubeconfig),  # credentials on stdin, never on a command line
            triggers=args.triggers,
            # The printed token is secret in the state and never echoed to the console.
            logging=command.local.Logging.STDERR,
            opts=pulumi.ResourceOptions(
                parent=self, delete_before_replace=True, additional_secret_outputs=["stdout"]
            ),
        )
        self._token: pulumi.Output[str] = pulumi.Output.secret(self.mint.stdout.apply(str.strip))
        self.tenant = args.tenant
        self.register_outputs({"tenant": self.tenant})

    def join_configuration(
        self,
        endpoint: pulumi.Input[str],
        ca_cert_hash: pulumi.Input[str],
        node_name: str,
        ignore_preflight_errors: tuple[str, ...] = kubeadm_join.KIND_NODE_PREFLIGHT_IGNORES,
    ) -> pulumi.Output[str]:
        """The kubeadm JoinConfiguration for one worker of this tenant; secret, it holds the token."""
        return pulumi.Output.secret(
            pulumi.Output.all(endpoint, self._token, ca_cert_hash).apply(
                lambda v: kubeadm_join.join_configuration(
                    v[0], v[1], v[2], node_name, kube_objects.gpu_node_labels(self.tenant), ignore_preflight_errors
                )
            )
        )
