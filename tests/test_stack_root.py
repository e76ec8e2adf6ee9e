"""What sits at the stack's root: the architecture's components and the management cluster's provider.

Everything else is a child of one of them, so its URN names its component's type
(`...::gpu-tenancy:kind_cluster:KindCluster$command:local:Command::management-create`). A resource moved out
of its component changes URN, which a deployed stack's next `up` treats as a new resource and an old one to
delete (pulumi/pulumi `pkg/resource/deploy/step_generator.go`: steps are keyed by URN), and a policy that
reads ownership from the parent chain (`policies/tenancy_lib.py`) would no longer see it.
"""

from __future__ import annotations

import pytest
from policy_support import EXAMPLE_STACKS, stack_root

_SHARED = {
    ("gpu-tenancy:kamaji:Kamaji", "kamaji"),
    ("gpu-tenancy:metallb:MetalLB", "metallb"),
    ("gpu-tenancy:tenant:Tenant", "tenant-a"),
    ("gpu-tenancy:tenant:Tenant", "tenant-b"),
    ("pulumi:providers:kubernetes", "management"),
}
AT_THE_ROOT = {
    "dev": _SHARED | {("gpu-tenancy:kind_cluster:KindCluster", "management")},
    "dev-nvml": _SHARED | {
        ("gpu-tenancy:kind_cluster:KindCluster", "management"),
        ("gpu-tenancy:nvml_mock_image:NvmlMockImage", "nvml-mock-image"),
    },
    "gpu": _SHARED | {("gpu-tenancy:host_identity:HostIdentities", "hosts"),
                      ("gpu-tenancy:host_fence:HostFences", "host-fences")},
}


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_only_the_architecture_sits_at_the_stack_root(stack: str) -> None:
    resources = EXAMPLE_STACKS[stack]()
    root = stack_root(resources).urn
    assert {(r.type, r.name) for r in resources if r.parent == root} == AT_THE_ROOT[stack]
