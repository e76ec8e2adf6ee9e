"""Pure helpers for the gpu-tenancy policy pack: reading engine property maps safely, telling
tenants, providers and platform components apart, images, CIDRs and the planner inputs.

Nothing here imports pulumi_policy's server or blocks; the policy group modules wire these into policies.

Property maps arrive from the engine wrapped in pulumi_policy's unknown-checking proxy: touching a value
that is unknown during preview raises ``UnknownValueError``. `plain` converts such a map once into plain
dicts and lists in which every unknown value is the `UNKNOWN` sentinel, so policy code never raises and
can decide for itself to skip a check whose input is not known yet.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from gpu_tenancy.builders.mock_nvml import nvml_mock
from gpu_tenancy.contract import image_pins

# The sentinels pulumi_policy.proxy recognises (same values as in pulumi's rpc module).
_UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string (also pulumi.runtime.rpc.UNKNOWN)
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)

TENANT_LABEL = "gpu-tenancy.io/tenant"
COMPONENT_LABEL = "gpu-tenancy.io/component"
TENANT_TYPE = "gpu-tenancy:tenant:Tenant"
MOCK_AGENT_TYPE = "gpu-tenancy:mock_gpu_agent:MockGpuAgent"
MOCK_NVML_TYPE = "gpu-tenancy:mock_nvml:MockNvml"
# gpu-tenancy.io/component of the mock-GPU agent's DaemonSet (mode sim) and of the mock NVML's (mode sim-nvml).
MOCK_AGENT_COMPONENT = "mock-gpu-agent"
MOCK_NVML_COMPONENT = nvml_mock.COMPONENT
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
# The management provider's clusterIdentifier in both modes (gpu_tenancy/builders/kind_cluster/kind.py).
MANAGEMENT = "management"
STACK_CONFIG_NAMESPACE = "gpu-tenancy"
# Where the mock NVML lays out its driver (libnvidia-ml.so.1, /dev/nvidia*) on each kind worker, i.e. where HAMi's
# device plugin must look in mode sim-nvml (HAMi values devicePlugin.nvidiaDriverRoot): /var/lib/nvml-mock/driver.
MOCK_NVML_DRIVER_ROOT = nvml_mock.DRIVER_ROOT

GPU = "nvidia.com/gpu"
GPUMEM = "nvidia.com/gpumem"
GPUMEM_PERCENTAGE = "nvidia.com/gpumem-percentage"
GPUCORES = "nvidia.com/gpucores"


# --------------------------------------------------------------------------- unknown-safe values


class _Unknown:
    """A value the engine does not know yet (preview). Falsy; compares equal only to itself."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN: Any = _Unknown()


def is_unknown(value: Any) -> bool:
    return value is UNKNOWN


def plain(value: Any) -> Any:
    """A plain copy of an engine property value; unknown values (proxied or raw sentinels) become UNKNOWN."""
    if isinstance(value, str):
        return UNKNOWN if value in _UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                item = value[key]
            except UnknownValueError:
                out[key] = UNKNOWN
                continue
            out[key] = plain(item)
        return out
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                item = value[index]
            except UnknownValueError:
                items.append(UNKNOWN)
                continue
            items.append(plain(item))
        return items
    return value


def dig(value: Any, *path: str | int, default: Any = None) -> Any:
    """value[path[0]][path[1]]...; `default` when a step is missing, UNKNOWN when a step is unknown."""
    current = value
    for step in path:
        if is_unknown(current):
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                return default
            current = current[step]
        else:
            if not isinstance(current, dict) or step not in current:
                return default
            current = current[step]
    return current


def known_str(value: Any) -> str | None:
    return value if isinstance(value, str) and not is_unknown(value) else None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def contains_unknown(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return False


# --------------------------------------------------------------------------- resources


@dataclass
class Provider:
    type: str
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
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)

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
    props = plain(policy_provider.props) if policy_provider.props is not None else {}
    return Provider(policy_provider.resource_type, policy_provider.name, policy_provider.urn, as_dict(props))


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
            dependencies=[d.urn for d in r.dependencies or []],
            property_dependencies={k: [d.urn for d in v] for k, v in (r.property_dependencies or {}).items()},
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


# --------------------------------------------------------------------------- tenants and providers


def labels(res: Res) -> dict[str, Any]:
    """Kubernetes metadata labels, or Docker container labels ([{label, value}]) as a dict."""
    if res.type == CONTAINER_TYPE:
        out: dict[str, Any] = {}
        for item in as_list(res.props.get("labels")):
            label, value = dig(item, "label"), dig(item, "value")
            if isinstance(label, str):
                out[label] = value
        return out
    return as_dict(dig(res.props, "metadata", "labels"))


def label_tenant(res: Res) -> str | None:
    return known_str(labels(res).get(TENANT_LABEL))


def component_label(res: Res) -> str | None:
    return known_str(labels(res).get(COMPONENT_LABEL))


def tenant_component_name(res: Res) -> str:
    return known_str(res.props.get("tenant")) or res.name


def ancestor_tenant(res: Res) -> str | None:
    """The tenant whose Tenant component this resource sits under (URN parent chain)."""
    if res.type == TENANT_TYPE:
        return tenant_component_name(res)
    for ancestor in res.ancestors():
        if ancestor.type == TENANT_TYPE:
            return tenant_component_name(ancestor)
    return None


def env_tenant(res: Res) -> str | None:
    if res.type != COMMAND_TYPE:
        return None
    return known_str(dig(res.props, "environment", "GPU_TENANCY_TENANT"))


def owner(res: Res) -> tuple[str | None, list[str]]:
    """(tenant the resource belongs to, disagreements between the signals that say so)."""
    signals = {
        "URN parent chain": ancestor_tenant(res),
        f"label {TENANT_LABEL}": label_tenant(res),
        "environment GPU_TENANCY_TENANT": env_tenant(res),
    }
    found = {source: tenant for source, tenant in signals.items() if tenant}
    tenants = sorted(set(found.values()))
    conflicts = []
    if len(tenants) > 1:
        conflicts.append(", ".join(f"{source} says {tenant!r}" for source, tenant in found.items()))
    return (signals["URN parent chain"] or (tenants[0] if tenants else None)), conflicts


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


@dataclass(frozen=True)
class Cluster:
    """Which cluster a Kubernetes provider talks to: ("management", None), ("tenant", name) or
    ("unknown", why): a provider the pack cannot attribute, which fails closed."""

    kind: str
    name: str | None

    def describe(self) -> str:
        if self.kind == "tenant":
            return f"tenant {self.name!r}'s provider"
        if self.kind == MANAGEMENT:
            return "the management provider"
        return f"{self.name}"

    @property
    def known(self) -> bool:
        return self.kind in ("tenant", MANAGEMENT)


def _structural_cluster(provider: Provider) -> Cluster | None:
    """The cluster of a provider this program makes, from its place in the stack (URN) and name alone.

    Used only while its clusterIdentifier is unknown (a preview before the control plane exists): the
    management provider is the stack's top-level `management`, a tenant's is `<tenant>-kubernetes` made by
    that tenant's TenantControlPlane component. URNs are unique in a stack, so no other provider can
    take either place.
    """
    types = urn_types(provider.urn)
    if types == [K8S_PROVIDER_TYPE] and provider.name == MANAGEMENT:
        return Cluster(MANAGEMENT, None)
    if types == [TENANT_TYPE, TCP_COMPONENT_TYPE, K8S_PROVIDER_TYPE] and provider.name.endswith("-kubernetes"):
        return Cluster("tenant", provider.name.removesuffix("-kubernetes"))
    return None


def provider_cluster(provider: Provider | None) -> Cluster:
    """The cluster a provider reaches, by its `clusterIdentifier` (`management` or `tenant/<name>`).

    Fails closed: the default provider, a provider without a clusterIdentifier or with one of another
    form, or a tenant identifier on a provider that is not that tenant's own, are "unknown"; a resource
    going through one cannot be attributed to a tenant or to the platform.
    """
    if provider is None:
        return Cluster("unknown", "the default provider (no provider= given)")
    identifier = provider.props.get("clusterIdentifier")
    if is_unknown(identifier):
        unattributed = f"provider {provider.name!r} (clusterIdentifier not known yet, not a provider of the program)"
        return _structural_cluster(provider) or Cluster("unknown", unattributed)
    if not isinstance(identifier, str) or not identifier:
        return Cluster("unknown", f"provider {provider.name!r}, which has no clusterIdentifier")
    if identifier == MANAGEMENT:
        if urn_types(provider.urn) != [K8S_PROVIDER_TYPE]:
            return Cluster("unknown", f"provider {provider.name!r}, which is not the stack's management provider")
        return Cluster(MANAGEMENT, None)
    if identifier.startswith("tenant/"):
        tenant = identifier.removeprefix("tenant/")
        expected = Cluster("tenant", tenant)
        if _structural_cluster(provider) != expected:
            return Cluster(
                "unknown",
                f"provider {provider.name!r}, which claims {identifier!r} but is not {tenant!r}'s TenantControlPlane "
                "provider",
            )
        return expected
    return Cluster("unknown", f"provider {provider.name!r} (clusterIdentifier {identifier!r})")


def resource_tenant(res: Res) -> str | None:
    """A resource policy's view of the tenant: label first, then the tenant provider it goes through."""
    tenant = label_tenant(res)
    if tenant:
        return tenant
    if res.is_kubernetes:
        cluster = provider_cluster(res.provider)
        if cluster.kind == "tenant":
            return cluster.name
    return None


# --------------------------------------------------------------------------- pods and images

POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def pod_spec(res: Res) -> dict[str, Any] | None:
    if not res.is_kubernetes:
        return None
    path = POD_SPEC_PATHS.get(res.kind)
    if path is None:
        return None
    spec = dig(res.props, *path)
    return spec if isinstance(spec, dict) else None


def pod_labels(res: Res) -> dict[str, Any]:
    path = POD_SPEC_PATHS.get(res.kind)
    if path is None:
        return {}
    template = dig(res.props, *path[:-1], "metadata", "labels") if len(path) > 1 else None
    return as_dict(template)


def containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        out.extend(c for c in as_list(spec.get(key)) if isinstance(c, dict))
    return out


def image_problem(ref: Any) -> str | None:
    """Why an image reference is not pinned (gpu_tenancy.contract.image_pins), or None. Image IDs count as pinned."""
    if not isinstance(ref, str) or is_unknown(ref):
        return None
    if ref.startswith("sha256:"):
        return None  # an image ID (docker.Container.image from RemoteImage.image_id)
    return image_pins.image_problem(ref)


# Charts whose own default image tag moves, so the values must set one (chart -> dotted values path).
# Kamaji's chart has appVersion `latest` and `image.tag: ""` (charts/kamaji values.yaml, Chart.yaml).
REQUIRED_CHART_TAGS: dict[str, str] = {"kamaji": "image.tag"}


def helm_value_image_problems(values: Any, path: str = "values") -> Iterator[tuple[str, str]]:
    """(path, problem) for image references and tags in Helm values that do not pin one release."""
    if isinstance(values, dict):
        for key, value in values.items():
            here = f"{path}.{key}"
            if key in ("tag", "imageTag") and isinstance(value, str) and not is_unknown(value):
                problem = image_pins.tag_problem(value)
                if problem:
                    yield here, f"tag {problem}"
            elif key == "image" and isinstance(value, str):
                problem = image_problem(value)
                if problem:
                    yield here, f"image {value!r} {problem}"
            else:
                yield from helm_value_image_problems(value, here)
    elif isinstance(values, list):
        for index, value in enumerate(values):
            yield from helm_value_image_problems(value, f"{path}[{index}]")


def chart_name(chart: Any) -> str | None:
    """A Helm chart's name from `chart` (`name`, `repo/name` or an oci:// / https:// reference)."""
    text = known_str(chart)
    if not text:
        return None
    return text.rstrip("/").rsplit("/", 1)[-1].removesuffix(".tgz")


# --------------------------------------------------------------------------- quantities and CIDRs


def quantity(value: Any) -> int | None:
    """An integer Kubernetes quantity ('2', 2, '2.0'); None when absent, unknown or not an integer."""
    if isinstance(value, bool) or value is None or is_unknown(value):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if number.is_integer() else None
    return None


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def network(value: Any) -> Network | None:
    if not isinstance(value, str) or is_unknown(value):
        return None
    try:
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        return None


def range_networks(value: Any) -> list[Network]:
    """Networks covering a MetalLB address entry: a CIDR or a 'first-last' range."""
    if not isinstance(value, str) or is_unknown(value):
        return []
    if "-" in value:
        first, _, last = value.partition("-")
        try:
            start, end = ipaddress.ip_address(first.strip()), ipaddress.ip_address(last.strip())
            return list(ipaddress.summarize_address_range(start, end))
        except (ValueError, TypeError):
            return []
    net = network(value)
    return [net] if net else []


def overlaps(a: Network, b: Network) -> bool:
    return a.version == b.version and a.overlaps(b)


# --------------------------------------------------------------------------- stack config


def stack_config(key: str) -> Any:
    """A `gpu-tenancy:<key>` stack config value as the engine hands it to the pack (PULUMI_CONFIG)."""
    raw = os.environ.get("PULUMI_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError:
        return None
    value = config.get(f"{STACK_CONFIG_NAMESPACE}:{key}") if isinstance(config, dict) else None
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


# --------------------------------------------------------------------------- planner inputs

_KUBERNETES_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")


def exact_kubernetes_version(value: Any) -> bool:
    return isinstance(value, str) and bool(_KUBERNETES_VERSION.match(value))


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def planner_inputs(
    tenant: str,
    nodes: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    workloads: Sequence[Mapping[str, Any]],
    quota: Mapping[str, Any] | None,
    split_count: int,
) -> tuple[list[Any], list[Any], Any]:
    """The tenant's declaration (Tenant props / stack config, by alias) as gpu_tenancy.hami.planner.model inputs.

    `nodes` are (node name, the GPU groups on it). Each node's register is what HAMi's device plugin writes
    for its cards (gpu_tenancy.hami.protocol.device_inventory, memory from the GPU catalogue where the declaration
    leaves it out); fitting itself is left to gpu_tenancy.hami.planner.schedule.plan. Raises ValueError on a malformed
    declaration.
    """
    from gpu_tenancy.hami import gpu_catalogue
    from gpu_tenancy.hami import protocol as hami
    from gpu_tenancy.hami.planner.model import ContainerRequest, Quota, Workload, node_from_register

    try:
        planned_nodes = []
        for node_name, gpus in nodes:
            groups = [
                {
                    "model": str(g["model"]),
                    "memoryMiB": gpu_catalogue.registered_memory(str(g["model"]), _optional_int(g.get("memoryMiB"))),
                    "count": int(g["count"]),
                }
                for g in gpus
            ]
            key = tenant if len(nodes) == 1 else f"{tenant}/{node_name}"
            devices = hami.device_inventory(key, groups, split_count)
            planned_nodes.append(node_from_register(node_name, devices, tenant))
        planned = [
            Workload(
                name=str(w["name"]),
                containers=tuple(
                    ContainerRequest(
                        gpus=int(c.get("gpus", 1) if c.get("gpus") is not None else 1),
                        gpumem_mib=_optional_int(c.get("gpumemMiB")),
                        gpumem_percentage=_optional_int(c.get("gpumemPercentage")),
                        # Unset stays unset: HAMi's webhook gives a whole-card request 100 cores.
                        gpucores=_optional_int(c.get("gpucores")),
                    )
                    for c in w.get("containers") or []
                ),
                replicas=int(w.get("replicas", 1) if w.get("replicas") is not None else 1),
                use_gpu_type=tuple(w.get("useGpuType") or ()),
                nouse_gpu_type=tuple(w.get("noUseGpuType") or ()),
                gpu_scheduler_policy=w.get("gpuSchedulerPolicy") or "spread",
                node_scheduler_policy=w.get("nodeSchedulerPolicy") or "binpack",
                tenant=tenant,
            )
            for w in workloads
        ]
        limits = Quota.from_dict(quota) if quota else None
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"malformed declaration ({type(error).__name__}: {error})") from None
    return planned_nodes, planned, limits
