"""Resources as the policies see them: the types the pack knows, one resource's plain view (`Res`, with
its provider, parent and dependencies) and the component ancestry its URN records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from value_lib import as_dict, plain

TENANT_TYPE = "gpu-tenancy:tenant:Tenant"
MOCK_AGENT_TYPE = "gpu-tenancy:mock_gpu_agent:MockGpuAgent"
MOCK_NVML_TYPE = "gpu-tenancy:mock_nvml:MockNvml"
METALLB_TYPE = "gpu-tenancy:metallb:MetalLB"
KAMAJI_TYPE = "gpu-tenancy:kamaji:Kamaji"
TENANT_DATASTORE_TYPE = "gpu-tenancy:tenant_datastore:TenantDataStore"
TENANT_NETWORK_TYPE = "gpu-tenancy:tenant_network:TenantNetwork"
WORKER_TYPE = "gpu-tenancy:worker:Worker"
HAMI_TYPE = "gpu-tenancy:hami:Hami"
STACK_TYPE = "pulumi:pulumi:Stack"
K8S_PROVIDER_TYPE = "pulumi:providers:kubernetes"
TCP_TYPE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
TCP_COMPONENT_TYPE = "gpu-tenancy:tenant_control_plane:TenantControlPlane"
DATASTORE_TYPE = "kubernetes:kamaji.clastix.io/v1alpha1:DataStore"
SECRET_TYPE = "kubernetes:core/v1:Secret"
L2ADVERTISEMENT_TYPE = "kubernetes:metallb.io/v1beta1:L2Advertisement"
PERSISTENT_VOLUME_TYPE = "kubernetes:core/v1:PersistentVolume"
NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
COMMAND_TYPE = "command:local:Command"
REMOTE_COMMAND_TYPE = "command:remote:Command"
HOST_WORKER_TYPE = "gpu-tenancy:host_worker:HostWorker"
CONTAINER_TYPE = "docker:index/container:Container"
REMOTE_IMAGE_TYPE = "docker:index/remoteImage:RemoteImage"
DOCKER_IMAGE_TYPE = "docker:index/image:Image"
IPADDRESSPOOL_TYPE = "kubernetes:metallb.io/v1beta1:IPAddressPool"
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart", "kubernetes:helm.sh/v3:Chart")
HELM_RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
# Kubernetes types that are components (their children are checked one by one) and may carry no provider.
K8S_COMPONENT_TYPES = frozenset(
    {
        "kubernetes:helm.sh/v4:Chart",
        "kubernetes:helm.sh/v3:Chart",
        "kubernetes:yaml/v2:ConfigGroup",
        "kubernetes:yaml/v2:ConfigFile",
        "kubernetes:yaml:ConfigGroup",
        "kubernetes:yaml:ConfigFile",
        "kubernetes:kustomize/v2:Directory",
        "kubernetes:kustomize:Directory",
    }
)
STACK_CONFIG_NAMESPACE = "gpu-tenancy"


# --------------------------------------------------------------------------- resources


@dataclass
class Provider:
    name: str
    urn: str
    props: dict[str, Any]


@dataclass
class Res:
    """One resource as a policy sees it, with plain props."""

    type: str
    name: str
    urn: str
    props: dict[str, Any]
    provider: Provider | None = None
    parent: Res | None = None
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    # Every URN this resource depends on (its property dependencies and depends_on), as the engine records them.
    dependencies: list[str] = field(default_factory=list)

    @property
    def is_kubernetes(self) -> bool:
        return self.type.startswith("kubernetes:")

    @property
    def kind(self) -> str:
        return self.type.rsplit(":", 1)[-1]

    @property
    def unread(self) -> bool:
        """A Kubernetes object whose view is an empty property bag: not known yet, not "no namespace".

        Every object pulumi-kubernetes returns carries `metadata`. A `.get` yields `{}` when the engine
        skips it (id unknown during preview: pulumi/pulumi pkg/resource/deploy/step.go `ReadStep.Apply`)
        or its provider's kubeconfig is still unknown (the plugin stays unconfigured and `Read` answers an
        empty bag: sdk/go/common/resource/plugin/provider_plugin.go `provider.Read`).
        """
        return (
            self.is_kubernetes
            and self.type not in HELM_TYPES
            and self.type not in K8S_COMPONENT_TYPES
            and "metadata" not in self.props
        )

    def ancestors(self) -> Iterator[Res]:
        seen: set[int] = set()
        node = self.parent
        while node is not None and id(node) not in seen:
            seen.add(id(node))
            yield node
            node = node.parent

    def output_sources(self) -> set[str]:
        """URNs whose outputs flow into this resource's properties (not mere depends_on ordering)."""
        return {urn for urns in self.property_dependencies.values() for urn in urns}


def provider_from(policy_provider: Any) -> Provider | None:
    if policy_provider is None:
        return None
    return Provider(policy_provider.name, policy_provider.urn, as_dict(plain(policy_provider.props)))


def from_policy_resources(resources: Iterable[Any]) -> list[Res]:
    """`PolicyResource`s (stack policies) as `Res`, parents and dependencies resolved by URN."""
    originals = list(resources)
    views = [
        Res(
            type=r.resource_type,
            name=r.name,
            urn=r.urn,
            props=as_dict(plain(r.props)),
            provider=provider_from(r.provider),
            property_dependencies={k: [d.urn for d in v] for k, v in (r.property_dependencies or {}).items()},
            dependencies=[d.urn for d in r.dependencies or []],
        )
        for r in originals
    ]
    by_urn = {v.urn: v for v in views}
    for original, view in zip(originals, views, strict=True):
        if original.parent is not None:
            view.parent = by_urn.get(original.parent.urn)
    return views


def from_resource_args(args: Any) -> Res:
    """`ResourceValidationArgs` (resource policies: inputs, no parent object) as `Res`."""
    return Res(
        type=args.resource_type,
        name=args.name,
        urn=args.urn,
        props=as_dict(plain(args.props)),
        provider=provider_from(args.provider),
    )


# --------------------------------------------------------------------------- URNs


def urn_types(urn: str) -> list[str]:
    """The qualified type of `urn:pulumi:<stack>::<project>::<ancestor types>$<type>::<name>`, split.

    The engine qualifies a type with every ancestor's type but the root stack's (pulumi/pulumi
    pkg/resource/deploy/source_eval.go), so this is the component ancestry a resource cannot set for
    itself the way it sets a label: it comes from where the program constructs it.
    """
    parts = urn.split("::")
    return parts[2].split("$") if len(parts) >= 4 else []


def nearest_component(urn: str) -> str | None:
    """The closest gpu-tenancy component type among a resource's ancestors (from its URN), if any."""
    for typ in reversed(urn_types(urn)[:-1]):
        if typ.startswith(f"{STACK_CONFIG_NAMESPACE}:"):
            return typ
    return None
