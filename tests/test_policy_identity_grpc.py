"""Attribution by identity over the analyzer gRPC protocol: a tenant's provider is that tenant's only when its
kubeconfig is an output of that tenant's own control-plane component (the dependency graph the engine hands the
pack, tests/policy_support.py), and nothing is made outside the program's components.
"""

from __future__ import annotations

from typing import Any

from policy_support import Recorded, craft, find
from test_policy_bypasses_grpc import expect, mandatory, tenant_component
from test_policy_pack_grpc import (  # noqa: F401  (fixtures: the pack's analyzer process, its configuration)
    analyze_stack,
    analyzer,
    default_configuration,
)

PROVIDER = "pulumi:providers:kubernetes"
SECRET = "kubernetes:core/v1:Secret"
TCP_COMPONENT = "gpu-tenancy:tenant_control_plane:TenantControlPlane"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
POLICY = "attributed-by-identity"


def kubeconfig_from(stack: list[Recorded], tenant: str, *urns: str) -> Recorded:
    provider = find(stack, PROVIDER, f"{tenant}-kubernetes")
    provider.property_dependencies["kubeconfig"] = list(urns)
    provider.dependencies = sorted({*provider.dependencies, *urns})
    return provider


def test_the_dev_stack_is_attributed(pack: Any, stack: list[Recorded]) -> None:
    assert mandatory(analyze_stack(pack, stack), POLICY) == []


def test_a_kubeconfig_through_a_stack_reference(pack: Any, stack: list[Recorded]) -> None:
    """Another stack's output (tenant b's admin kubeconfig, exported there) arrives with no tenant of this stack."""
    reference = craft(stack, "pulumi:pulumi:StackReference", "lab/gpu-tenancy/other", {"name": "lab/gpu-tenancy/other"})
    kubeconfig_from(stack, "tenant-a", reference.urn)
    messages = mandatory(analyze_stack(pack, stack), POLICY)
    expect(messages, "provider 'tenant-a-kubernetes'", "from pulumi:pulumi:StackReference")
    expect(messages, "'lab/gpu-tenancy/other' is made outside every gpu-tenancy component")


def test_a_kubeconfig_from_an_invoke_or_a_literal(pack: Any, stack: list[Recorded]) -> None:
    """An invoke's result carries no dependency at all: nothing proves which cluster it reaches."""
    kubeconfig_from(stack, "tenant-a")
    expect(mandatory(analyze_stack(pack, stack), POLICY), "provider 'tenant-a-kubernetes'", "no output of the stack")


def test_a_kubeconfig_from_another_tenants_admin_secret(pack: Any, stack: list[Recorded]) -> None:
    kubeconfig_from(stack, "tenant-a", find(stack, SECRET, "tenant-b-control-plane-admin-kubeconfig").urn)
    expect(mandatory(analyze_stack(pack, stack), POLICY), "provider 'tenant-a-kubernetes'",
           "'tenant-b-control-plane-admin-kubeconfig'")


def test_a_second_read_in_the_tenants_component_of_another_control_planes_secret(
    pack: Any, stack: list[Recorded]
) -> None:
    """A read placed under tenant a's component but made after tenant b's control plane (its Secret's id)."""
    component = tenant_component(stack, "tenant-a", TCP_COMPONENT)
    other = find(stack, TCP, "tenant-b-control-plane-tcp")
    stolen = craft(stack, SECRET, "tenant-a-control-plane-extra", {}, parent=component,
                   provider=find(stack, PROVIDER, "management"))
    stolen.read, stolen.dependencies = True, [other.urn]
    kubeconfig_from(stack, "tenant-a", stolen.urn)
    expect(mandatory(analyze_stack(pack, stack), POLICY), "provider 'tenant-a-kubernetes'",
           "'tenant-a-control-plane-extra', which is not read after tenant 'tenant-a'")


def test_objects_made_outside_every_component(pack: Any, stack: list[Recorded]) -> None:
    craft(stack, "kubernetes:core/v1:ConfigMap", "loose-config",
          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "workloads"}},
          provider=find(stack, PROVIDER, "tenant-a-kubernetes"))
    craft(stack, "command:local:Command", "loose-command", {"create": "true"})
    messages = mandatory(analyze_stack(pack, stack), POLICY)
    expect(messages, "'loose-config' is made outside every gpu-tenancy component")
    expect(messages, "'loose-command' is made outside every gpu-tenancy component")
