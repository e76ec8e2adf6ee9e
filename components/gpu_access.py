"""The admission policy that keeps a tenant's GPUs reachable only through HAMi
(gpu_tenancy/builders/gpu_access/gpu_access.py).

Installed in every tenant in every mode, so what sim refuses is what real refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import options
from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.gpu_access import gpu_access


@dataclass
class GpuAccessPolicyArgs:
    """The tenant's GPU-access admission policy. Its provider (the tenant's) and what it waits for (the control
    plane) come in `opts`.

    Attributes:
        tenant (str): the tenant, for the objects' labels.
        cuda_control_marker (str): sim-nvml: the CUDA_DISABLE_CONTROL value its admission mutation writes
            (gpu_tenancy.builders.mock_nvml.cuda_control.MARKER); empty in the other modes. Default: "".
    """

    tenant: str
    cuda_control_marker: str = ""


class GpuAccessPolicy(pulumi.ComponentResource):
    binding: k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding

    def __init__(self, name: str, args: GpuAccessPolicyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:gpu_access:GpuAccessPolicy", name, None, opts)
        metadata = {"name": gpu_access.POLICY_NAME, "labels": kube_objects.labels(args.tenant, "gpu-access")}
        options.require_provider(self)
        in_tenant = pulumi.ResourceOptions(parent=self, depends_on=options.dependencies(opts))
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-policy",
            metadata=metadata,
            spec=gpu_access.validating_admission_policy_spec(args.cuda_control_marker),
            opts=in_tenant,
        )
        self.binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-binding",
            metadata=metadata,
            spec=gpu_access.binding_spec(),
            opts=pulumi.ResourceOptions.merge(in_tenant, pulumi.ResourceOptions(depends_on=[policy])),
        )
        self.register_outputs({"policy": gpu_access.POLICY_NAME})
