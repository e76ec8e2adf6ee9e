"""A non-admin identity for a tenant's users: a kubeconfig for a ServiceAccount that may work in the
tenant's `workloads` namespace only, for labs shared by people who must not be admins of the tenant.

What stops it from reaching the node, where each control lives:
* RBAC: a RoleBinding to the built-in ClusterRole `edit` in that namespace: pods, deployments, services,
  secrets... there; no RoleBindings, no namespaces (so no Pod Security labels), no ResourceQuotas (read
  only), no admission policies, nothing cluster-scoped (kubernetes plugin/pkg/auth/authorizer/rbac/
  bootstrappolicy/policy.go, `edit`: the multi-tenancy benchmark's MTB-PL1-CC-CPI-1 and -BC-CPI-2).
* Pod Security Admission, enforced on the namespace (gpu_tenancy/builders/workloads/workloads.py: `restricted`):
  privileged,
  host namespaces, hostPath, hostPort, added capabilities, unconfined seccomp/AppArmor, privilege
  escalation, running as root (MTB-PL1-BC-CPI-3, -HI-*).
* A ResourceQuota: no NodePort or LoadBalancer Services (MTB-PL1-BC-HI-1), so no port on the GPU host.
* The namespace's NetworkPolicy (gpu_tenancy/builders/workloads/network_policy.py), which the users may not
  change (their `edit` could): no private address, no other namespace.
* Admission policies for what the two above do not cover: GPUs around HAMi
  (gpu_tenancy/builders/gpu_access/gpu_access.py,
  every namespace) and Service `externalIPs` (CVE-2020-8554: intercepting other addresses' traffic).
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.tenant_control_plane import kubeadm

SERVICE_ACCOUNT = "tenant-user"
TOKEN_SECRET = "tenant-user-token"
QUOTA_NAME = "tenant-user-limits"
SERVICES_POLICY = "gpu-tenancy-user-services"
COMPONENT = "tenant-user"


def role_binding(tenant: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": kube_objects.labels(tenant, COMPONENT)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}],
    }


def token_secret_metadata(tenant: str, namespace: str) -> dict[str, Any]:
    """A long-lived token the token controller fills in (kubernetes pkg/controller/serviceaccount/
    tokens_controller.go); the program waits for `data.token` (pulumi-kubernetes `pulumi.com/waitFor`)."""
    return {
        "name": TOKEN_SECRET,
        "namespace": namespace,
        "labels": kube_objects.labels(tenant, COMPONENT),
        "annotations": {
            "kubernetes.io/service-account.name": SERVICE_ACCOUNT,
            **kube_objects.wait_for("jsonpath={.data.token}", timeout_seconds=300),
        },
    }


def quota_hard() -> dict[str, str]:
    return {"services.nodeports": "0", "services.loadbalancers": "0"}


def services_policy_spec(namespace: str) -> dict[str, Any]:
    """Services without externalIPs in the users' namespace; and the namespace's NetworkPolicies stay the program's:
    `edit` lets the users write NetworkPolicies, and one that allows everything would undo the namespace's
    isolation (gpu_tenancy/builders/workloads/network_policy.py)."""
    user = f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": kube_objects.match_constraints(
            [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["services"]},
                {"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"],
                 "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["networkpolicies"]},
            ],
            namespace_selector={
                "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}]
            },
        ),
        "validations": [
            {
                # `object` is null on a DELETE.
                "expression": "object == null || object.kind != 'Service' || !has(object.spec.externalIPs) || "
                "size(object.spec.externalIPs) == 0",
                "message": "Services of tenant users take no externalIPs (they could capture other addresses' traffic)",
                "reason": "Forbidden",
            },
            {
                "expression": f"request.userInfo.username != '{user}' || "
                "(object != null ? object : oldObject).kind != 'NetworkPolicy'",
                "message": "the namespace's NetworkPolicies are the platform's: tenant users write none",
                "reason": "Forbidden",
            },
        ],
    }


def kubeconfig(tenant: str, admin_kubeconfig: str, token_b64: str, namespace: str) -> str:
    """The user's kubeconfig: the tenant's API server and CA (from the admin kubeconfig), the SA's token."""
    admin = yaml.safe_load(admin_kubeconfig)
    cluster = dict(admin["clusters"][0]["cluster"])
    kubeadm.server_endpoint(admin_kubeconfig)  # the same checks the program applies to the admin's
    user = f"{tenant}-user"
    return kube_objects.to_yaml(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": tenant, "cluster": cluster}],
            "users": [{"name": user, "user": {"token": base64.b64decode(token_b64).decode()}}],
            "contexts": [{"name": user, "context": {"cluster": tenant, "user": user, "namespace": namespace}}],
            "current-context": user,
        }
    )
