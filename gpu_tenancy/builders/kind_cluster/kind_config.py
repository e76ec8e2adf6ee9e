"""The kind management cluster's configuration."""

from __future__ import annotations

from gpu_tenancy.builders.kube_objects import to_yaml


def kind_cluster_config(cluster_name: str) -> str:
    """kind config for the management cluster: one control-plane node, kind defaults otherwise."""
    config = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": cluster_name,
        "nodes": [{"role": "control-plane"}],
    }
    return to_yaml(config)
