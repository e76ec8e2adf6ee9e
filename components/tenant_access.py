"""A tenant's non-admin identity (gpu_tenancy/builders/tenant_access/tenant_access.py): ServiceAccount, `edit` in the
workloads namespace, its token, the quota and the Service admission policy."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import options
from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.tenant_access import tenant_access


@dataclass
class TenantAccessArgs:
    """A tenant's non-admin identity. Its provider (the tenant's) comes in `opts`.

    Attributes:
        tenant (str): the tenant, for labels and the kubeconfig's names.
        namespace (k8s.core.v1.Namespace): the workloads namespace, the only one the identity may edit.
        admin_kubeconfig (pulumi.Input[str]): the tenant's admin kubeconfig (secret): the server and CA the
            user's kubeconfig is made from.
    """

    tenant: str
    namespace: k8s.core.v1.Namespace
    admin_kubeconfig: pulumi.Input[str]


class TenantAccess(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]

    def __init__(self, name: str, args: TenantAccessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:tenant_access:TenantAccess", name, None, opts)
        options.require_provider(self)
        tenant = args.tenant
        namespace = args.namespace.metadata.name.apply(str)
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[args.namespace])
        labels = kube_objects.labels(tenant, tenant_access.COMPONENT)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=namespace.apply(
                lambda ns: {"name": tenant_access.SERVICE_ACCOUNT, "namespace": ns, "labels": labels}
            ),
            opts=in_namespace,
        )
        binding = namespace.apply(lambda ns: tenant_access.role_binding(tenant, ns))
        role_binding = k8s.rbac.v1.RoleBinding(
            f"{name}-edit",
            metadata=binding.apply(lambda b: b["metadata"]),
            role_ref=binding.apply(lambda b: b["roleRef"]),
            subjects=binding.apply(lambda b: b["subjects"]),
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=[account])),
        )
        k8s.core.v1.ResourceQuota(
            f"{name}-quota",
            metadata=namespace.apply(
                lambda ns: {"name": tenant_access.QUOTA_NAME, "namespace": ns, "labels": labels}
            ),
            spec={"hard": tenant_access.quota_hard()},
            opts=in_namespace,
        )
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-services-policy",
            metadata={"name": tenant_access.SERVICES_POLICY, "labels": labels},
            spec=namespace.apply(tenant_access.services_policy_spec),
            opts=in_namespace,
        )
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-services-policy-binding",
            metadata={"name": tenant_access.SERVICES_POLICY, "labels": labels},
            spec={"policyName": tenant_access.SERVICES_POLICY, "validationActions": ["Deny"]},
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=[policy])),
        )
        token = k8s.core.v1.Secret(
            f"{name}-token",
            metadata=namespace.apply(lambda ns: tenant_access.token_secret_metadata(tenant, ns)),
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions.merge(
                in_namespace, pulumi.ResourceOptions(depends_on=[account, role_binding])
            ),
        )
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(args.admin_kubeconfig, token.data, namespace).apply(
                lambda v: tenant_access.kubeconfig(tenant, v[0], (v[1] or {})["token"], v[2])
            )
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})
