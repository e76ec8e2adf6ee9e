"""A kubeadm bootstrap token inside a tenant, for joining that tenant's GPU hosts (mode real).

It has no `expiration`: it lives in the state and must still work when a host is replaced or retried
later. The kind workers of mode sim do not use it: their join script mints a short-lived token per
attempt that never reaches the state (gpu_tenancy/worker_join.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from gpu_tenancy import manifests


@dataclass
class BootstrapTokenArgs:
    tenant: str
    provider: k8s.Provider


class BootstrapToken(pulumi.ComponentResource):
    """`token` is `<id>.<secret>` and secret; `secret` is the bootstrap-token Secret in the tenant."""

    token: pulumi.Output[str]
    secret: k8s.core.v1.Secret

    def __init__(self, name: str, args: BootstrapTokenArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:bootstrap_token:BootstrapToken", name, None, opts)
        # The format kubeadm requires: [a-z0-9]{6}.[a-z0-9]{16}.
        token_id = random.RandomString(
            f"{name}-id", length=6, special=False, upper=False, opts=pulumi.ResourceOptions(parent=self)
        )
        token_secret = random.RandomString(
            f"{name}-secret", length=16, special=False, upper=False, opts=pulumi.ResourceOptions(parent=self)
        )
        secret_part: pulumi.Output[str] = pulumi.Output.secret(token_secret.result)
        self.token = pulumi.Output.secret(pulumi.Output.concat(token_id.result, ".", token_secret.result))
        self.secret = k8s.core.v1.Secret(
            name,
            metadata={
                "name": token_id.result.apply(lambda i: f"bootstrap-token-{i}"),
                "namespace": "kube-system",
                "labels": manifests.labels(args.tenant, "worker"),
            },
            type="bootstrap.kubernetes.io/token",
            string_data={
                "token-id": token_id.result,
                "token-secret": secret_part,
                "usage-bootstrap-authentication": "true",
                "usage-bootstrap-signing": "true",
                "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
            },
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.tenant = args.tenant
        self.register_outputs({"secretName": self.secret.metadata.name})

    def join_configuration(
        self,
        endpoint: pulumi.Input[str],
        ca_cert_hash: pulumi.Input[str],
        node_name: str,
        ignore_preflight_errors: tuple[str, ...] = manifests.KIND_NODE_PREFLIGHT_IGNORES,
    ) -> pulumi.Output[str]:
        """The kubeadm JoinConfiguration for one worker of this tenant; secret, it holds the token."""
        return pulumi.Output.secret(
            pulumi.Output.all(endpoint, self.token, ca_cert_hash).apply(
                lambda v: manifests.join_configuration(
                    v[0], v[1], v[2], node_name, manifests.gpu_node_labels(self.tenant), ignore_preflight_errors
                )
            )
        )
