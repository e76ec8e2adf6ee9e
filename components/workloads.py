"""A tenant's GPU workloads: namespace, ResourceQuota and Deployments, inside the tenant cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import options
from gpu_tenancy.builders.workloads import network_policy
from gpu_tenancy.builders.workloads import workloads as builders
from gpu_tenancy.contract.tenant_config import WorkloadConfig


@dataclass
class WorkloadsArgs:
    """A tenant's workloads. Its provider (the tenant's) and what they wait for (HAMi and, in sim, the mock-GPU
    agent that registers the devices) come in `opts`.

    Attributes:
        tenant (str): the tenant, for labels and names.
        workloads (list[WorkloadConfig]): the tenant's workloads (tenants[].workloads), one Deployment each.
        quota (dict[str, int]): the namespace's ResourceQuota (tenants[].quota); none when empty.
        ordered (bool): stack setting orderedWorkloads: each Deployment waits for the previous one
            (pulumi-kubernetes awaits a Deployment's rollout before it counts as created), so pods reach HAMi in
            the planned order. Default: False.
    """

    tenant: str
    workloads: list[WorkloadConfig]
    quota: dict[str, int]
    ordered: bool = False


class Workloads(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace
    network_policy: k8s.networking.v1.NetworkPolicy
    quota: k8s.core.v1.ResourceQuota | None
    deployments: dict[str, k8s.apps.v1.Deployment]

    def __init__(self, name: str, args: WorkloadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:workloads:Workloads", name, None, opts)
        options.require_provider(self)
        tenant = args.tenant
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=builders.namespace_metadata(tenant),
            opts=pulumi.ResourceOptions(parent=self, depends_on=options.dependencies(opts)),
        )
        # Everything else waits for the namespace and, through it, for HAMi.
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])
        self.quota = None
        if args.quota:
            self.quota = k8s.core.v1.ResourceQuota(
                f"{name}-quota",
                metadata=builders.resource_quota_metadata(tenant),
                spec={"hard": builders.resource_quota_hard(args.quota)},
                opts=in_namespace,
            )
        # Before any pod: the namespace's pods reach no private address and no other namespace.
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-isolation",
            metadata=network_policy.metadata(tenant),
            spec=network_policy.spec(),
            opts=in_namespace,
        )
        # The quota first, so HAMi's quota manager has it before the first pod is admitted.
        before_pods = [self.namespace, self.network_policy, *([self.quota] if self.quota else [])]
        self.deployments = {}
        previous: list[pulumi.Resource] = []
        for workload in args.workloads:
            deployment = k8s.apps.v1.Deployment(
                f"{name}-{workload.name}",
                metadata=builders.deployment_metadata(tenant, workload),
                spec=builders.deployment_spec(tenant, workload),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*before_pods, *previous]),
            )
            self.deployments[workload.name] = deployment
            if args.ordered:
                previous = [deployment]
        self.register_outputs({
            "namespace": self.namespace.metadata.name,
            "deployments": sorted(self.deployments),
            "quota": builders.resource_quota_hard(args.quota),
        })
