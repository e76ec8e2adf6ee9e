"""The kubeadm JoinConfiguration a worker joins its tenant with."""

from __future__ import annotations

from gpu_tenancy.builders.kube_objects import to_yaml

# Node containers share the host kernel: these kubeadm preflight checks cannot pass there.
KIND_NODE_PREFLIGHT_IGNORES = ("SystemVerification", "FileExisting", "Swap")


def join_configuration(
    endpoint: str,
    token: str,
    ca_cert_hash: str,
    node_name: str,
    node_labels: dict[str, str],
    ignore_preflight_errors: tuple[str, ...] = KIND_NODE_PREFLIGHT_IGNORES,
) -> str:
    """kubeadm JoinConfiguration (v1beta4, served by kubeadm 1.31+) for a worker of a tenant."""
    label_arg = ",".join(f"{k}={v}" for k, v in sorted(node_labels.items()))
    config = {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": endpoint,
                "token": token,
                "caCertHashes": [ca_cert_hash],
            }
        },
        "nodeRegistration": {
            "name": node_name,
            "criSocket": "unix:///run/containerd/containerd.sock",
            "kubeletExtraArgs": [{"name": "node-labels", "value": label_arg}],
            "ignorePreflightErrors": list(ignore_preflight_errors),
        },
    }
    return to_yaml(config)
