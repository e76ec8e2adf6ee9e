"""What a `pulumi destroy` waits for in a tenant whose worker is dead, step by step, as upstream does it.

Input: a stack as the engine keeps it (tests/policy_support.record_engine_view) and the nodes whose kubelet
is gone (a worker container removed, a GPU host powered off). Output: every delete that would wait for
something that never happens before it is due, i.e. a `destroy` that hangs until the provider's timeout and
then fails.

The engine deletes a resource only after everything that depends on it (pulumi/pulumi v3.259.0
`pkg/resource/deploy/deployment_executor.go` destroy, `pkg/resource/graph/dependency_graph.go`
`DependingOn`): the reverse of registration order is such an order, and nothing runs ahead of it. Per delete:

* pulumi-kubernetes v4.32.0 `provider/pkg/await/await.go` `Deletion`: deletes with the propagation policy of
  the `pulumi.com/deletionPropagationPolicy` annotation, Foreground by default
  (`provider/pkg/metadata/overrides.go` `DeletionPropagation`), then waits until the object is gone
  (`DeletedCondition`), unless `pulumi.com/skipAwait` is "true" and the kind honours it on delete
  (`allowsSkipAwaitWithDelete`: Namespace, Pod, ReplicationController, DaemonSet, Deployment, StatefulSet,
  Job).
* Kubernetes' garbage collector (`pkg/controller/garbagecollector`): Foreground keeps the owner (finalizer
  `foregroundDeletion`) until its dependents are gone; Background deletes the owner at once and its
  dependents after. A Deployment's pods (through its ReplicaSet) and a DaemonSet's pods are its dependents.
* A pod bound to a node whose kubelet is dead is only marked for deletion: the kubelet never confirms it.
  It disappears once its Node object is removed (`pkg/controller/podgc` `gcOrphaned` force-deletes pods
  bound to a node that no longer exists).
* The namespace controller (`pkg/controller/namespace/deletion` `namespaced_resources_deleter.go`) keeps a
  deleted Namespace Terminating until every object in it, pods included, is gone.
* pulumi-kubernetes `helm_release.go` `Delete`: `helm uninstall` with `Wait` waits for the release's own
  objects, which Helm deletes in the background (helm v3 `pkg/kube/client.go` `Delete`, propagation
  Background): never for their pods.
* Commands: a delete that removes a Node (a kind worker's or a GPU host's `-node` command: their
  script runs `kubectl delete node`) makes PodGC remove that node's pods. A Docker container that is already
  gone is not an error (terraform-provider-docker `resourceDockerContainerDelete` ignores "No such
  container").

Pods are derived from what the stack runs in each tenant: `spec.replicas` pods per Deployment and one per
node per DaemonSet, bound to the tenant's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness import unwrap
from policy_support import Recorded

SKIP_AWAIT_ON_DELETE = {"Namespace", "Pod", "ReplicationController", "DaemonSet", "Deployment", "StatefulSet", "Job"}
POD_OWNERS = {"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"}


@dataclass
class Pod:
    owner: str  # urn
    namespace: str
    node: str
    tenant: str


@dataclass
class Blocked:
    name: str
    waits_for: str


@dataclass
class World:
    dead_nodes: set[str]
    pods: list[Pod] = field(default_factory=list)
    nodes: dict[str, set[str]] = field(default_factory=dict)  # tenant -> registered Node names


def _kind(resource: Recorded) -> str:
    return resource.type.rsplit(":", 1)[-1]


TENANT_COMPONENT = "gpu-tenancy:tenant:Tenant"


def _tenant_of(resource: Recorded, by_urn: dict[str, Recorded]) -> str | None:
    """The tenant a resource belongs to: the name of the Tenant component above it."""
    parent = by_urn.get(resource.parent)
    while parent is not None:
        if parent.type == TENANT_COMPONENT:
            return parent.name
        parent = by_urn.get(parent.parent)
    return None


def _in_tenant(resource: Recorded, by_urn: dict[str, Recorded]) -> str | None:
    """The tenant whose cluster holds this object (through the tenant's provider), if any."""
    tenant = _tenant_of(resource, by_urn)
    provider = resource.provider.rsplit("::", 1)[0] if resource.provider else ""
    return tenant if tenant and provider.endswith(f"::{tenant}-kubernetes") else None


def _annotations(resource: Recorded) -> dict[str, str]:
    metadata = unwrap(resource.inputs).get("metadata") or {}
    return dict(metadata.get("annotations") or {})


def _removed_node(resource: Recorded, by_urn: dict[str, Recorded]) -> tuple[str, str] | None:
    """(tenant, node) whose Node this command's delete removes."""
    if not resource.type.startswith("command:"):
        return None
    delete = str(unwrap(resource.inputs).get("delete") or "")
    environment = unwrap(resource.inputs).get("environment") or {}
    node = environment.get("GPU_TENANCY_WORKER") or environment.get("GPU_TENANCY_NODE")
    tenant = _tenant_of(resource, by_urn)
    if "delete node" not in delete or not node or tenant is None:
        return None
    return tenant, str(node)


def lab_world(stack: list[Recorded], dead_nodes: set[str]) -> World:
    """The running lab the stack describes: every tenant's registered nodes and the pods on them."""
    by_urn = {r.urn: r for r in stack}
    world = World(dead_nodes=set(dead_nodes))
    for resource in stack:
        removed = _removed_node(resource, by_urn)
        if removed:
            world.nodes.setdefault(removed[0], set()).add(removed[1])
    for resource in stack:
        tenant = _in_tenant(resource, by_urn)
        if tenant is None or resource.read or _kind(resource) not in POD_OWNERS:
            continue
        inputs = unwrap(resource.inputs)
        namespace = (inputs.get("metadata") or {}).get("namespace", "default")
        nodes = sorted(world.nodes.get(tenant, set()))
        if _kind(resource) == "DaemonSet":
            placed = nodes
        else:
            replicas = int((inputs.get("spec") or {}).get("replicas", 1))
            placed = [nodes[i % len(nodes)] for i in range(replicas)] if nodes else []
        world.pods += [Pod(resource.urn, namespace, node, tenant) for node in placed]
    return world


def _pods_gone(world: World, pods: list[Pod]) -> bool:
    """Pods marked for deletion are gone unless their node's kubelet is dead and the Node still exists."""
    return all(p.node not in world.dead_nodes or p.node not in world.nodes.get(p.tenant, set()) for p in pods)


def destroy(stack: list[Recorded], world: World) -> list[Blocked]:
    """Run a destroy of `stack` in `world`; every delete that waits for what cannot happen yet."""
    by_urn = {r.urn: r for r in stack}
    blocked: list[Blocked] = []
    for resource in reversed(stack):
        if not resource.custom or resource.read:
            continue
        removed = _removed_node(resource, by_urn)
        if removed:
            world.nodes.get(removed[0], set()).discard(removed[1])
            continue
        tenant = _in_tenant(resource, by_urn)
        if tenant is None or resource.type.startswith("kubernetes:helm.sh/"):
            continue
        kind = _kind(resource)
        annotations = _annotations(resource)
        awaited = not (annotations.get("pulumi.com/skipAwait") == "true" and kind in SKIP_AWAIT_ON_DELETE)
        policy = annotations.get("pulumi.com/deletionPropagationPolicy", "foreground").lower()
        if kind in POD_OWNERS:
            owned = [p for p in world.pods if p.owner == resource.urn]
            if policy == "foreground" and awaited and not _pods_gone(world, owned):
                blocked.append(Blocked(resource.name, f"pods of {kind} on a dead node: {sorted({p.node for p in owned})}"))
        elif kind == "Namespace":
            namespace = (unwrap(resource.inputs).get("metadata") or {}).get("name")
            inside = [p for p in world.pods if p.tenant == tenant and p.namespace == namespace]
            if awaited and not _pods_gone(world, inside):
                blocked.append(Blocked(resource.name, f"Namespace {namespace} Terminating while its pods are on a dead node"))
    return blocked


def terminating_at_the_end(stack: list[Recorded], world: World) -> list[str]:
    """Namespaces a finished destroy leaves Terminating (their pods' Nodes were never removed)."""
    by_urn = {r.urn: r for r in stack}
    left = []
    for resource in stack:
        tenant = _in_tenant(resource, by_urn)
        if tenant is None or _kind(resource) != "Namespace" or resource.read:
            continue
        namespace = (unwrap(resource.inputs).get("metadata") or {}).get("name")
        inside = [p for p in world.pods if p.tenant == tenant and p.namespace == namespace]
        if not _pods_gone(world, inside):
            left.append(f"{tenant}/{namespace}")
    return left


def dead_workers(stack: list[Recorded]) -> set[str]:
    """Every node of every tenant."""
    by_urn = {r.urn: r for r in stack}
    nodes: set[str] = set()
    for resource in stack:
        removed = _removed_node(resource, by_urn)
        if removed:
            nodes.add(removed[1])
    return nodes

