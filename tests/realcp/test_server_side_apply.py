"""What the example stacks register, server-side applied into a real API server: every object accepted, and the same
objects applied again change nothing (same resourceVersion, generation and managedFields), the real counterpart of
"a second `up` changes nothing" for the Kubernetes layer. How objects are sent: tests/realcp/tenant_layer.py.

Each tenant is a separate cluster in reality, with the same names in it (`workloads`, `gpu-tenancy-gpu-access`,
`kindnet`...). So each tenant's layer is applied as registered, names unchanged, into a state where none of its objects
exists, then removed before the next: renaming them would send objects the program never sends (names are
referenced from bindings, selectors and parameters), and sharing one state would make the second tenant's first
apply an update of the first tenant's objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from policy_support import EXAMPLE_STACKS, Recorded, copy_stack, find
from pulumi.runtime import rpc

from tests.realcp.cluster import wait_until
from tests.realcp.tenant_layer import (
    Cluster,
    UnknownValue,
    describe,
    ensure_namespace,
    field_manager,
    manifest,
    ordered,
    present,
    provider_name,
    refusal,
    tenant_layer,
    tenants,
    user_access_stack,
)

TENANTS = ("tenant-a", "tenant-b")
# The management cluster's custom resources, typed by the CRDs Kamaji's and MetalLB's charts install.
MANAGEMENT_KINDS = ("DataStore", "TenantControlPlane", "IPAddressPool", "L2Advertisement")
UPSTREAM_CRDS = ("kamaji.clastix.io_datastores.yaml", "kamaji.clastix.io_tenantcontrolplanes.yaml",
                 "metallb.io_ipaddresspools.yaml", "metallb.io_l2advertisements.yaml")
# Made by the MetalLB Helm release (`createNamespace: true`), not by a registered object.
RELEASE_NAMESPACES = ("metallb-system",)


@pytest.fixture(scope="module")
def cluster(admin_api: Any) -> Cluster:
    return Cluster(admin_api)


def _established(cluster: Cluster, crd: dict[str, Any]) -> bool:
    live = cluster.get(crd) or {}
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in live.get("status", {}).get("conditions") or [])


@pytest.fixture(scope="module")
def upstream_crds(cluster: Cluster) -> Iterator[Any]:
    """Installs the upstream CRDs (from ../shared/schemas, given by the `shared` fixture) on first use; removes those it
    installed at the end of the module."""
    installed: list[dict[str, Any]] = []

    def install(shared: Path) -> None:
        if installed:
            return
        for name in UPSTREAM_CRDS:
            for crd in (d for d in yaml.safe_load_all((shared / "schemas" / name).read_text()) if d):
                if cluster.get(crd) is None:
                    installed.append(crd)
                cluster.apply(crd, "realcp-upstream-crds")
                wait_until(f"CRD {crd['metadata']['name']} established", lambda crd=crd: _established(cluster, crd))

    yield install
    for crd in installed:
        cluster.delete(crd)
    cluster.wait_gone(installed)


def apply_twice(cluster: Cluster, objects: list[Recorded]) -> None:
    """Applies `objects` into a state without them, then again; removes them whatever happened."""
    bodies = [manifest(r) for r in objects]
    leftovers = present(cluster, bodies)
    assert not leftovers, f"not a fresh state, already there: {leftovers}"
    try:
        first: list[dict[str, Any]] = []
        refused = []
        for resource, body in zip(objects, bodies, strict=True):
            try:
                first.append(cluster.apply(body, field_manager(resource)))
            except ApiException as error:
                refused.append(f"{describe(body)} ({resource.name}): {refusal(error)}")
        assert not refused, "refused by the API server:\n" + "\n".join(refused)
        cluster.settled(bodies)  # controllers (quota, deployment, daemon set) have written their status

        changed = []
        for resource, body, applied in zip(objects, bodies, first, strict=True):
            before = cluster.get(body)  # read just before, so a controller's late write is not counted as ours
            assert before is not None, describe(body)
            after = cluster.apply(body, field_manager(resource))
            for what, old, new in (
                ("resourceVersion", before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"]),
                ("generation", applied["metadata"].get("generation"), after["metadata"].get("generation")),
                ("managedFields", before["metadata"]["managedFields"], after["metadata"]["managedFields"]),
            ):
                if old != new:
                    changed.append(f"{describe(body)} ({resource.name}): {what} {old!r} -> {new!r}")
        assert not changed, "the second apply changed:\n" + "\n".join(changed)
    finally:
        for body in reversed(bodies):
            cluster.delete(body)
        cluster.wait_gone(bodies)


@pytest.mark.parametrize("stack_name", sorted(EXAMPLE_STACKS))
def test_every_example_stack_has_the_two_tenants_applied_here(stack_name: str) -> None:
    assert tuple(tenants(EXAMPLE_STACKS[stack_name]())) == TENANTS


# The example stacks, and dev with tenant-a's non-admin identity on (tests/realcp/test_user_access.py uses it).
STACKS = {**EXAMPLE_STACKS, "dev+userAccess": user_access_stack}


@pytest.mark.parametrize(("stack_name", "tenant"), [(s, t) for s in STACKS for t in TENANTS])
def test_a_tenant_layer_is_accepted_and_a_second_apply_changes_nothing(cluster: Cluster, stack_name: str,
                                                                        tenant: str) -> None:
    objects = tenant_layer(STACKS[stack_name](), tenant)
    kinds = {r.inputs["kind"] for r in objects}
    # What every tenant gets (networking, GPU access, workloads); fewer would mean the layer was not found.
    assert {"Namespace", "ServiceAccount", "ClusterRoleBinding", "DaemonSet", "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding", "ConfigMap", "ResourceQuota", "Deployment"} <= kinds, kinds
    apply_twice(cluster, objects)


def management_layer(stack: list[Recorded]) -> list[Recorded]:
    """The custom resources the program registers on the management cluster and the namespaces they live in."""
    objects = [r for r in stack if provider_name(r) == "management" and not r.read
               and r.inputs.get("kind") in (*MANAGEMENT_KINDS, "Namespace")]
    return ordered(objects)


@pytest.mark.parametrize("stack_name", sorted(EXAMPLE_STACKS))
def test_the_management_custom_resources_are_valid_under_the_upstream_crds(
        cluster: Cluster, upstream_crds: Any, shared: Path, stack_name: str) -> None:
    upstream_crds(shared)
    objects = management_layer(EXAMPLE_STACKS[stack_name]())
    assert {r.inputs["kind"] for r in objects} == {*MANAGEMENT_KINDS, "Namespace"}
    for namespace in RELEASE_NAMESPACES:
        ensure_namespace(cluster, namespace)
    try:
        apply_twice(cluster, objects)
    finally:
        for namespace in RELEASE_NAMESPACES:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            cluster.delete(body)
            cluster.wait_gone([body])


def test_an_unknown_value_left_in_the_inputs_is_refused_not_sent() -> None:
    # The guard the tests above rely on: a computed value the recording left unknown is never applied as a string.
    stack = copy_stack(EXAMPLE_STACKS["dev"]())
    quota = find(stack, "kubernetes:core/v1:ResourceQuota", "tenant-a-workloads-quota")
    quota.inputs["spec"]["hard"]["requests.nvidia.com/gpu"] = rpc.UNKNOWN
    with pytest.raises(UnknownValue, match=r"\.spec\.hard\.requests\.nvidia\.com/gpu"):
        manifest(quota)
