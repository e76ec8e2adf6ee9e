"""A ServiceAccount bound to a ClusterRole of its own: what the node DaemonSets in a tenant run as.

Not a component: the mock-GPU agent and the mock NVML each create these three objects as their children.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


@dataclass
class ClusterRoleAccount:
    service_account: k8s.core.v1.ServiceAccount
    cluster_role: k8s.rbac.v1.ClusterRole
    binding: k8s.rbac.v1.ClusterRoleBinding


def cluster_role_account(
    name: str, namespace: str, labels: dict[str, str], rules: pulumi.Input[Any], opts: pulumi.ResourceOptions
) -> ClusterRoleAccount:
    """`<name>-sa`, `<name>-role` and `<name>-binding`, every object named `name`."""
    service_account = k8s.core.v1.ServiceAccount(
        f"{name}-sa", metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace, labels=labels), opts=opts
    )
    cluster_metadata = k8s.meta.v1.ObjectMetaArgs(name=name, labels=labels)
    role = k8s.rbac.v1.ClusterRole(f"{name}-role", metadata=cluster_metadata, rules=rules, opts=opts)
    binding = k8s.rbac.v1.ClusterRoleBinding(
        f"{name}-binding",
        metadata=cluster_metadata,
        role_ref=k8s.rbac.v1.RoleRefArgs(
            api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role.metadata.name
        ),
        subjects=[
            k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=service_account.metadata.name, namespace=namespace)
        ],
        opts=opts,
    )
    return ClusterRoleAccount(service_account, role, binding)
