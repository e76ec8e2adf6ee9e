"""Stack configuration: the public contract, validated before any resource exists.

`load_config(raw)` takes the `gpu-tenancy:*` keys (without the namespace prefix, values already decoded
from YAML/JSON) and returns a `StackConfig` or raises `ConfigError` with one line that names the key and
the problem, e.g. ``gpu-tenancy:tenants[1].name: 'Tenant_B' is not a DNS-1123 label``.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpu_tenancy.contract import addressing, image_pins, limits, versions
from gpu_tenancy.contract.limits import KONNECTIVITY_PORT, TCP_PORT
from gpu_tenancy.hami import gpu_catalogue
from gpu_tenancy.hami import protocol as hami

NAMESPACE = "gpu-tenancy"
# Modes on a kind cluster of this Docker host, and who registers GPUs with HAMi in each mode.
SIMULATED_MODES = ("sim", "sim-nvml")
# Who registers a tenant's GPUs with HAMi: the mock-GPU agent, HAMi's device plugin on the mock NVML or on the driver.
DeviceLayer = Literal["mock-agent", "nvml-mock", "nvidia"]
DEVICE_LAYERS: dict[str, DeviceLayer] = {"sim": "mock-agent", "sim-nvml": "nvml-mock", "real": "nvidia"}
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Keys that hold credentials: they must be stored encrypted (`pulumi config set --secret`).
SECRET_KEYS = ("managementKubeconfig", "sshPrivateKey")
KUBERNETES_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")
# Kamaji 26.8.2-edge rejects tenants above its vendored kubeadm (v1.36.0); see versions.md §2.1.
MAX_TENANT_MINOR = 36
MIN_TENANT_MINOR = 30


image_tag = image_pins.image_tag


def _pinned(image: str) -> str:
    problem = image_pins.image_problem(image)
    if problem:
        raise ValueError(f"image {image!r} {problem}")
    return image


def _pinned_tag(tag: str) -> str:
    problem = image_pins.tag_problem(tag)
    if problem:
        # An empty tag lets the chart fall back to its own default: Kamaji's chart then runs `latest`.
        hint = "the chart would fall back to its own default tag" if not tag.strip() else "it can move"
        raise ValueError(f"tag {problem} ({hint}); set an exact release tag")
    return tag


def _ipv4(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 address") from None
    return value


def _dns1123(value: str) -> str:
    if len(value) > 63 or not DNS1123_LABEL.match(value):
        raise ValueError(f"{value!r} is not a DNS-1123 label (lower-case letters, digits, '-')")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns1123)]
PinnedImage = Annotated[str, AfterValidator(_pinned)]
PinnedTag = Annotated[str, AfterValidator(_pinned_tag)]


class ConfigError(ValueError):
    """Invalid stack configuration; the message is a single line naming the key."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, strict=True)


class GpuConfig(_Model):
    """Cards of one model. `model` is NVML's name for the card (what `nvidia-smi` prints); `memoryMiB` is
    what NVML reports for it, taken from the GPU catalogue for a known model and required for any other."""

    model: Annotated[str, StringConstraints(min_length=1)]
    memory_mib: int = Field(
        default=None, alias="memoryMiB", gt=0, le=gpu_catalogue.MAX_MEMORY_MIB, validate_default=True
    )
    count: int = Field(gt=0, le=16)

    @field_validator("model")
    @classmethod
    def _nvml_spelling(cls, value: str) -> str:
        if gpu_catalogue.lookup(value) is None and (near := gpu_catalogue.suggestion(value)) is not None:
            raise ValueError(
                f"{value!r} is not how NVML names the card: write {near.nvml_name!r} (what nvidia-smi prints)"
            )
        return value

    @field_validator("memory_mib", mode="before")
    @classmethod
    def _catalogue_memory(cls, value: Any, info: ValidationInfo) -> Any:
        model = info.data.get("model")
        if value is not None or not isinstance(model, str):
            return value
        return gpu_catalogue.registered_memory(model, None)

    @field_validator("memory_mib")
    @classmethod
    def _nvml_memory(cls, value: int, info: ValidationInfo) -> int:
        model = info.data.get("model")
        return gpu_catalogue.registered_memory(model, value) if isinstance(model, str) else value

    @property
    def in_catalogue(self) -> bool:
        """False for a model the catalogue does not know: its memory is the stack's word, not checked."""
        return gpu_catalogue.lookup(self.model) is not None

    @property
    def registered_type(self) -> str:
        """The device type HAMi registers for these cards."""
        return hami.device_type(self.model)


def card_counts(gpus: Iterable[GpuConfig]) -> Counter[tuple[str, int]]:
    """How many cards of each (NVML name, MiB)."""
    counts: Counter[tuple[str, int]] = Counter()
    for gpu in gpus:
        counts[(gpu.model, gpu.memory_mib)] += gpu.count
    return counts


def describe_cards(counts: Counter[tuple[str, int]]) -> str:
    return ", ".join(f"{count} x {model} ({mib} MiB)" for (model, mib), count in sorted(counts.items())) or "none"


# Upper bounds on counts: HAMi takes a container's GPUs from one node and no GPU node carries more than 16
# cards (HGX/DGX class), so more could never be scheduled; the rest keep one stack's plan and preview small.
MAX_CARDS_PER_REQUEST = 16
MAX_CONTAINERS = 16
MAX_WORKLOADS = 100
MAX_GPU_GROUPS = 16
MAX_WORKERS = 64
MAX_TENANTS = 100


class ContainerGpuRequest(_Model):
    gpus: int = Field(default=1, gt=0, le=MAX_CARDS_PER_REQUEST)
    gpumem_mib: int | None = Field(default=None, alias="gpumemMiB", gt=0)
    gpumem_percentage: int | None = Field(default=None, alias="gpumemPercentage", gt=0, le=100)
    gpucores: int | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="after")
    def _one_memory_form(self) -> ContainerGpuRequest:
        if self.gpumem_mib is not None and self.gpumem_percentage is not None:
            raise ValueError("set gpumemMiB or gpumemPercentage, not both")
        return self


class WorkloadConfig(_Model):
    name: DnsLabel
    replicas: int = Field(default=1, ge=0, le=1000)
    # The pause release kubeadm 1.35 pins (kubernetes cmd/kubeadm/app/constants PauseVersion).
    image: PinnedImage = "registry.k8s.io/pause:3.10.1"
    containers: list[ContainerGpuRequest] = Field(min_length=1, max_length=MAX_CONTAINERS)
    use_gpu_type: list[str] = Field(default_factory=list, alias="useGpuType")
    nouse_gpu_type: list[str] = Field(default_factory=list, alias="noUseGpuType")
    gpu_scheduler_policy: Literal["binpack", "spread"] | None = Field(
        default=None, alias="gpuSchedulerPolicy"
    )
    node_scheduler_policy: Literal["binpack", "spread"] | None = Field(
        default=None, alias="nodeSchedulerPolicy"
    )



QUOTA_KEYS = ("limits.nvidia.com/gpu", "limits.nvidia.com/gpumem", "limits.nvidia.com/gpucores")


# Host key types pulumi-command can pin. It offers the server only the key's own type as host key algorithm
# (pulumi-command v1.2.1 provider/pkg/provider/remote/connection.go SSHConfig: HostKeyAlgorithms =
# [publicKey.Type()]); for an RSA key that is `ssh-rsa`, i.e. SHA-1 signatures, which OpenSSH 8.8+ servers
# no longer offer, so an RSA host key would never connect.
HOST_KEY_TYPES = (
    "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
)


def _host_key(value: str) -> str:
    """An OpenSSH public key line `<type> <base64> [comment]`, as `ssh-keyscan` prints after the host."""
    fields = value.split()
    if fields and fields[0] not in HOST_KEY_TYPES and len(fields) >= 3:
        fields = fields[1:]  # a whole `ssh-keyscan` line: drop the leading host
    if len(fields) < 2:
        raise ValueError("is not an SSH public key line '<type> <base64>' (from ssh-keyscan)")
    if fields[0] == "ssh-rsa":
        raise ValueError(
            "is an RSA key, which pulumi-command would negotiate as ssh-rsa (SHA-1) and OpenSSH 8.8+ refuses; "
            "use the host's ed25519 key (ssh-keyscan -t ed25519 <address>)"
        )
    if fields[0] not in HOST_KEY_TYPES:
        raise ValueError(f"key type {fields[0]!r} is not one of {', '.join(HOST_KEY_TYPES)}")
    try:
        blob = base64.b64decode(fields[1], validate=True)
    except ValueError:
        raise ValueError("is not valid base64 after the key type") from None
    length = int.from_bytes(blob[:4], "big") if len(blob) >= 4 else -1
    if blob[4 : 4 + length].decode(errors="replace") != fields[0]:
        raise ValueError(f"its key data is not a {fields[0]} key")
    return f"{fields[0]} {fields[1]}"


class WorkerHostConfig(_Model):
    """A real GPU host (mode real), prepared and joined to its tenant over SSH."""

    name: DnsLabel
    address: Annotated[str, StringConstraints(min_length=1)]
    user: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_-]*$")]
    port: int = Field(default=22, gt=0, lt=65536)
    # The cards in this host; a tenant's only host has the tenant's `gpus` unless it says otherwise.
    gpus: list[GpuConfig] = Field(default_factory=list)
    # Required in mode real (mode_errors): without it pulumi-command accepts any host key.
    host_key: Annotated[str, AfterValidator(_host_key)] | None = Field(default=None, alias="hostKey")

    @field_validator("address")
    @classmethod
    def _host_address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not DNS1123_SUBDOMAIN.match(value):
                raise ValueError(f"{value!r} is neither an IP address nor a host name") from None
        return value


class TenantConfig(_Model):
    name: DnsLabel
    gpus: list[GpuConfig] = Field(min_length=1, max_length=MAX_GPU_GROUPS)
    workers: list[WorkerHostConfig] = Field(default_factory=list, max_length=MAX_WORKERS)
    control_plane_address: str | None = Field(default=None, alias="controlPlaneAddress")
    node_port: int | None = Field(default=None, alias="nodePort", ge=30000, le=32766)
    pod_cidr: str | None = Field(default=None, alias="podCidr")
    service_cidr: str | None = Field(default=None, alias="serviceCidr")
    workloads: list[WorkloadConfig] = Field(default_factory=list, max_length=MAX_WORKLOADS)
    quota: dict[str, int] = Field(default_factory=dict)
    # "shared": the platform's etcd, a key prefix per tenant; "dedicated": an etcd of its own
    # (docs/threat-model.md: Datastore).
    data_store: Literal["shared", "dedicated"] = Field(default="shared", alias="dataStore")
    # A non-admin kubeconfig for the tenant's users (gpu_tenancy/builders/tenant_access/tenant_access.py), output
    # tenantUserKubeconfigs.
    user_access: bool = Field(default=False, alias="userAccess")

    @field_validator("name")
    @classmethod
    def _short_name(cls, value: str) -> str:
        if len(value) > 40:
            raise ValueError(f"{value!r} is longer than 40 characters (it prefixes derived names)")
        return value

    @field_validator("control_plane_address")
    @classmethod
    def _ipv4_address(cls, value: str | None) -> str | None:
        if value is not None:
            _ipv4(value)
        return value

    @field_validator("pod_cidr", "service_cidr")
    @classmethod
    def _ipv4_cidr(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            network = ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a valid CIDR ({exc})") from None
        if network.version != 4 or network.prefixlen > 24:
            raise ValueError(f"{value!r} must be an IPv4 CIDR of /24 or larger")
        return value

    @field_validator("quota")
    @classmethod
    def _quota_keys(cls, value: dict[str, int]) -> dict[str, int]:
        for key, amount in value.items():
            if key not in QUOTA_KEYS:
                raise ValueError(f"unknown quota key {key!r}; allowed: {', '.join(QUOTA_KEYS)}")
            # 0 is a limit like any other: HAMi v2.10.0 keeps an explicit 0 as a hard block (pkg/device/
            # quota.go `LimitSet`), and Kubernetes' quota admits no pod asking for requests.nvidia.com/gpu.
            if amount < 0:
                raise ValueError(f"quota {key!r} must be >= 0 (0 admits no pod asking for it)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _single_host_has_the_tenants_gpus(cls, data: Any) -> Any:
        if isinstance(data, dict):
            workers = data.get("workers")
            only = workers[0] if isinstance(workers, list) and len(workers) == 1 else None
            if isinstance(only, dict) and "gpus" not in only and "gpus" in data:
                data = {**data, "workers": [{**only, "gpus": data["gpus"]}]}
        return data

    @model_validator(mode="after")
    def _hosts_hold_the_tenants_gpus(self) -> TenantConfig:
        tenant = self
        if not tenant.workers:
            return tenant
        for index, worker in enumerate(tenant.workers):
            if not worker.gpus:
                raise ValueError(
                    f"workers[{index}].gpus is required when a tenant has several hosts: say which cards "
                    f"host {worker.name} has"
                )
        declared = card_counts(tenant.gpus)
        hosted = card_counts(gpu for worker in tenant.workers for gpu in worker.gpus)
        if declared != hosted:
            raise ValueError(
                f"its hosts' gpus ({describe_cards(hosted)}) differ from its gpus ({describe_cards(declared)}): "
                "the tenant's gpus are the sum of its hosts'"
            )
        return tenant

    @model_validator(mode="after")
    def _unique_workloads(self) -> TenantConfig:
        names = [w.name for w in self.workloads]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate workload name(s): {', '.join(duplicates)}")
        return self

    @field_validator("workers")
    @classmethod
    def _unique_workers(cls, workers: list[WorkerHostConfig]) -> list[WorkerHostConfig]:
        for attribute in ("name", "address"):
            values = [getattr(w, attribute) for w in workers]
            duplicates = sorted({v for v in values if values.count(v) > 1})
            if duplicates:
                raise ValueError(f"duplicate worker {attribute}(s): {', '.join(duplicates)}")
        return workers


class VersionsConfig(_Model):
    """Per-stack overrides of `gpu_tenancy.contract.versions`."""

    kind_node_image: PinnedImage = Field(default=versions.KIND_NODE_IMAGE, alias="kindNodeImage")
    kubernetes: str = versions.TENANT_KUBERNETES_VERSION
    worker_image: PinnedImage = Field(default=versions.WORKER_IMAGE, alias="workerImage")
    cert_manager: str = Field(default=versions.CERT_MANAGER_CHART_VERSION, alias="certManager")
    metallb: str = versions.METALLB_CHART_VERSION
    kamaji_chart: str = Field(default=versions.KAMAJI_CHART_VERSION, alias="kamajiChart")
    kamaji_image_tag: PinnedTag = Field(default=versions.KAMAJI_IMAGE_TAG, alias="kamajiImageTag")
    hami: str = versions.HAMI_CHART_VERSION
    hami_image_tag: PinnedTag = Field(default=versions.HAMI_IMAGE_TAG, alias="hamiImageTag")
    kindnetd_image: PinnedImage = Field(default=versions.KINDNETD_IMAGE, alias="kindnetdImage")
    # sim-nvml: the NVIDIA/k8s-test-infra commit the mock NVML image is built from (a full SHA: a tag or
    # branch could move under the same image name).
    nvml_mock_commit: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")] = Field(
        default=versions.NVML_MOCK_COMMIT, alias="nvmlMockCommit"
    )

    @field_validator("kubernetes")
    @classmethod
    def _supported_version(cls, value: str) -> str:
        match = KUBERNETES_VERSION.match(value)
        if not match:
            raise ValueError(f"{value!r} is not an exact version like 'v1.35.5'")
        minor = int(match.group(1))
        if not MIN_TENANT_MINOR <= minor <= MAX_TENANT_MINOR:
            raise ValueError(
                f"{value!r} is outside what Kamaji {versions.KAMAJI_IMAGE_TAG} accepts "
                f"(v1.{MIN_TENANT_MINOR} .. v1.{MAX_TENANT_MINOR})"
            )
        return value

    @model_validator(mode="after")
    def _worker_matches_tenant(self) -> VersionsConfig:
        if image_tag(self.worker_image) != self.kubernetes:
            raise ValueError(
                f"workerImage tag {image_tag(self.worker_image)!r} must equal kubernetes "
                f"{self.kubernetes!r} (the worker kubelet must match its control plane)"
            )
        return self


class KindConfig(_Model):
    cluster_name: DnsLabel | None = Field(default=None, alias="clusterName")
    network: str = limits.DEFAULT_NETWORK


class MetalLBConfig(_Model):
    """sim: always on, pool derived from the kind network. real: optional, pool given explicitly."""

    enabled: bool | None = None
    # A fixed size, not tenants + spare: a pool that shrank when a tenant was removed would drop its lowest
    # addresses, which MetalLB hands out first (internal/allocator/allocator.go), i.e. the oldest
    # tenant's, and so re-address it. Raising it only adds addresses below the existing ones.
    pool_size: int = Field(default=16, ge=1, le=1024, alias="poolSize")
    headroom: int | None = None  # replaced by poolSize; refused with a hint below
    addresses: list[str] = Field(default_factory=list)

    @field_validator("headroom")
    @classmethod
    def _headroom_replaced(cls, value: int | None) -> int | None:
        if value is not None:
            raise ValueError(
                "is replaced by metallb.poolSize (a fixed pool size, so removing a tenant re-addresses no "
                "other); set poolSize to at least your old tenants + headroom"
            )
        return value

    @field_validator("addresses")
    @classmethod
    def _ipv4_ranges(cls, values: list[str]) -> list[str]:
        for value in values:
            parts = value.split("-")
            try:
                if len(parts) == 2:
                    first, last = (ipaddress.IPv4Address(p.strip()) for p in parts)
                    if last < first:
                        raise ValueError("the range ends before it starts")
                elif len(parts) == 1:
                    ipaddress.IPv4Network(value, strict=True)
                else:
                    raise ValueError("expected a CIDR or 'first-last'")
            except ValueError as exc:
                raise ValueError(f"{value!r} is not an IPv4 CIDR or range ({exc})") from None
        return values


class DataStoreConfig(_Model):
    """The etcd volumes (the shared one and each dedicated one); etcd's quota is derived (gpu_tenancy/datastore)."""

    volume_mib: int = Field(default=limits.DEFAULT_VOLUME_MIB, ge=limits.MIN_VOLUME_MIB, le=1024 * 1024,
                            alias="volumeMiB")


class ControlPlaneConfig(_Model):
    """How tenant API servers are exposed from the management cluster."""

    service_type: Literal["LoadBalancer", "NodePort"] = Field(default="LoadBalancer", alias="serviceType")
    # NodePort: a tenant serves its API on a port derived from its name (gpu_tenancy.contract.addressing), from
    # base up, and Konnectivity on the next one; tenants[].nodePort sets it explicitly.
    node_port_base: int = Field(default=31000, ge=30000, le=32766, alias="nodePortBase")


# Kubernetes label syntax (apimachinery validation.IsQualifiedName / IsValidLabelValue).
_LABEL_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                         r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class MetricsConfig(_Model):
    """Prometheus Operator ServiceMonitors for HAMi's scheduler and vGPU monitor in every tenant
    (hami_chart.hami_service_monitors): off unless asked, since they need the operator's CRDs in the tenant."""

    service_monitors: bool = Field(default=False, alias="serviceMonitors")
    # What the tenant's Prometheus selects ServiceMonitors by, e.g. kube-prometheus-stack's
    # `release: <its release name>` (its default serviceMonitorSelector).
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _label_syntax(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if len(key.rpartition("/")[0]) > 253 or not _LABEL_NAME.match(key):
                raise ValueError(f"{key!r} is not a Kubernetes label name")
            if not _LABEL_VALUE.match(text):
                raise ValueError(f"{key}: {text!r} is not a Kubernetes label value (63 characters, alphanumeric ends)")
        return value


class StackConfig(_Model):
    mode: Literal["sim", "sim-nvml", "real"]
    tenants: list[TenantConfig] = Field(min_length=1, max_length=MAX_TENANTS)
    versions: VersionsConfig = Field(default_factory=VersionsConfig)
    kind: KindConfig | None = None
    metallb: MetalLBConfig = Field(default_factory=MetalLBConfig)
    control_plane: ControlPlaneConfig = Field(default_factory=ControlPlaneConfig, alias="controlPlane")
    datastore: DataStoreConfig = Field(default_factory=DataStoreConfig)
    inventory_mismatch: Literal["error", "warn"] = Field(default="error", alias="inventoryMismatch")
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    # Secrets (mode real): set with `pulumi config set --secret`; SecretStr keeps them out of reprs.
    management_kubeconfig: SecretStr | None = Field(default=None, alias="managementKubeconfig")
    ssh_private_key: SecretStr | None = Field(default=None, alias="sshPrivateKey")

    @field_validator("tenants")
    @classmethod
    def _unique_tenants(cls, tenants: list[TenantConfig]) -> list[TenantConfig]:
        names = [t.name for t in tenants]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate tenant name(s): {', '.join(duplicates)}")
        return tenants

    def cidrs(self, tenant: TenantConfig) -> tuple[str, str]:
        """Pod and service CIDR of a tenant: explicit, or derived from its name alone."""
        pod, service = addressing.default_cidrs(tenant.name)
        return tenant.pod_cidr or pod, tenant.service_cidr or service

    def cluster_name(self, stack: str) -> str:
        return (self.kind and self.kind.cluster_name) or f"gpu-tenancy-{stack}"

    @property
    def kind_network(self) -> str:
        return self.kind.network if self.kind else KindConfig().network

    @property
    def simulated(self) -> bool:
        """sim and sim-nvml: a kind management cluster and kind worker containers on this Docker host."""
        return self.mode in SIMULATED_MODES

    @property
    def device_layer(self) -> DeviceLayer:
        """Who registers the tenants' GPUs with HAMi (DeviceLayer)."""
        return DEVICE_LAYERS[self.mode]

    @property
    def metallb_enabled(self) -> bool:
        return self.simulated or bool(self.metallb.enabled)

    def control_plane_ports(self, tenant: TenantConfig) -> tuple[int, int]:
        """API server and Konnectivity ports of a tenant's control plane."""
        if self.control_plane.service_type == "NodePort":
            if tenant.node_port is not None:
                return tenant.node_port, tenant.node_port + 1
            return addressing.default_node_ports(tenant.name, self.control_plane.node_port_base)
        return TCP_PORT, KONNECTIVITY_PORT

    def address_claims(self) -> list[addressing.Claim]:
        """Every tenant's pod/service CIDR and (NodePort) control-plane ports, explicit or derived."""
        claims = []
        for index, tenant in enumerate(self.tenants):
            pod, service = self.cidrs(tenant)
            claims.append(addressing.Claim(index, tenant.name, "podCidr", pod, tenant.pod_cidr is not None))
            claims.append(
                addressing.Claim(index, tenant.name, "serviceCidr", service, tenant.service_cidr is not None)
            )
            if self.control_plane.service_type == "NodePort":
                api, konnectivity = self.control_plane_ports(tenant)
                claims.append(
                    addressing.Claim(
                        index, tenant.name, "nodePort", f"{api}-{konnectivity}", tenant.node_port is not None
                    )
                )
        return claims


def _field_aliases() -> dict[str, str]:
    """Field name -> the key a stack file spells (pydantic reports a defaulted field by its name)."""
    models: list[type[BaseModel]] = [
        GpuConfig, ContainerGpuRequest, WorkloadConfig, WorkerHostConfig, TenantConfig, VersionsConfig,
        KindConfig, MetalLBConfig, ControlPlaneConfig, StackConfig,
    ]
    return {name: info.alias for model in models for name, info in model.model_fields.items() if info.alias}


def stack_key_location(location: tuple[int | str, ...]) -> tuple[int | str, ...]:
    aliases = _field_aliases()
    return tuple(aliases.get(part, part) if isinstance(part, str) else part for part in location)


def _format_location(location: tuple[int | str, ...]) -> str:
    key = f"{NAMESPACE}:{location[0]}" if location else NAMESPACE
    for part in location[1:]:
        key += f"[{part}]" if isinstance(part, int) else f".{part}"
    return key


def _first_error_line(error: ValidationError) -> str:
    detail = error.errors(include_url=False)[0]
    location = stack_key_location(tuple(p for p in detail["loc"] if not str(p).startswith("function-")))
    message = detail["msg"].removeprefix("Value error, ")
    if detail["type"] == "missing":
        message = "is required"
    elif detail["type"] == "extra_forbidden":
        message = "is not a known setting"
    elif location and location[0] in SECRET_KEYS:
        message = f"{message} (value not shown: it is a secret)"
    elif detail["type"].endswith("_type") or detail["type"] == "literal_error":
        message = f"{message} (got {detail.get('input')!r})"
    return f"{_format_location(location)}: {message}"


Resolver = Callable[[str], set[str]]


def resolve_host(address: str) -> set[str]:
    """Every IP address a worker address stands for (itself for an IP); empty when it does not resolve."""
    try:
        return {str(ipaddress.ip_address(address))}
    except ValueError:
        pass
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(address, None)}
    except OSError:
        return set()


def _literal_address(address: str) -> set[str]:
    try:
        return {str(ipaddress.ip_address(address))}
    except ValueError:
        return {address.lower()}


def _duplicate_hosts(config: StackConfig, resolve: Resolver | None) -> list[tuple[str, str]]:
    """A machine listed twice (same address, or a name resolving to another worker's address) in any tenant:
    both joins would "succeed" and destroying one would `kubeadm reset` the other's host."""
    errors: list[tuple[str, str]] = []
    seen: dict[str, tuple[str, str, str]] = {}  # address -> (tenant, worker, as written)
    for tenant_index, tenant in enumerate(config.tenants):
        for worker_index, host in enumerate(tenant.workers):
            addresses = _literal_address(host.address) | (resolve(host.address) if resolve else set())
            clash = next((seen[a] for a in sorted(addresses) if a in seen), None)
            if clash:
                first_tenant, first_worker, written = clash
                same = "" if written == host.address else f" ({written} and {host.address} resolve to the same address)"
                errors.append(
                    (
                        f"tenants[{tenant_index}].workers[{worker_index}].address",
                        f"host {host.address} is already a worker of tenant {first_tenant} ({first_worker}){same}; "
                        "a machine joins one tenant once",
                    )
                )
            for address in addresses:
                seen.setdefault(address, (tenant.name, host.name, host.address))
    return errors


def mode_errors(
    config: StackConfig, raw: Mapping[str, Any], resolve: Resolver | None = None
) -> list[tuple[str, str]]:
    """Settings that belong to the other mode, or that the chosen mode needs: (key, problem)."""
    errors: list[tuple[str, str]] = []
    if config.simulated:
        for key in ("managementKubeconfig", "sshPrivateKey", "inventoryMismatch"):
            if key in raw:
                errors.append(
                    (key, f"is only for mode 'real' ({config.mode} builds its own kind cluster and workers)")
                )
        if config.mode == "sim-nvml":
            errors += _nvml_mock_errors(config)
        for index, tenant in enumerate(config.tenants):
            if tenant.workers:
                errors.append(
                    (f"tenants[{index}].workers", "worker hosts are only for mode 'real' (sim starts kind nodes)")
                )
            if tenant.control_plane_address:
                errors.append(
                    (f"tenants[{index}].controlPlaneAddress", "is only for mode 'real' (sim takes MetalLB's address)")
                )
            if tenant.node_port is not None:
                errors.append(
                    (f"tenants[{index}].nodePort", "is only for mode 'real' with controlPlane.serviceType NodePort")
                )
        if config.metallb.enabled is False:
            errors.append(("metallb.enabled", "sim needs MetalLB for the control planes' LoadBalancer services"))
        if config.metallb.addresses:
            errors.append(("metallb.addresses", "sim derives the pool from the kind network; remove it"))
        if len(config.tenants) > config.metallb.pool_size:
            errors.append(
                (
                    "metallb.poolSize",
                    f"{config.metallb.pool_size} addresses for {len(config.tenants)} tenants' control planes; "
                    "raise it (existing addresses stay)",
                )
            )
        if "controlPlane" in raw:
            errors.append(("controlPlane", "is only for mode 'real' (sim exposes control planes through MetalLB)"))
        return errors
    if "kind" in raw:
        errors.append(
            ("kind", "is only for modes 'sim' and 'sim-nvml' (real uses the cluster in managementKubeconfig)")
        )
    if config.management_kubeconfig is None:
        errors.append(("managementKubeconfig", "is required in mode 'real' (pulumi config set --secret ...)"))
    if config.ssh_private_key is None:
        errors.append(("sshPrivateKey", "is required in mode 'real' to prepare and join the worker hosts"))
    for index, tenant in enumerate(config.tenants):
        if not tenant.workers:
            errors.append((f"tenants[{index}].workers", "mode 'real' needs at least one worker host per tenant"))
        if config.control_plane.service_type == "NodePort" and not tenant.control_plane_address:
            errors.append(
                (f"tenants[{index}].controlPlaneAddress", "is required with controlPlane.serviceType NodePort")
            )
        if config.control_plane.service_type != "NodePort" and tenant.node_port is not None:
            errors.append((f"tenants[{index}].nodePort", "is only used with controlPlane.serviceType NodePort"))
    if config.metallb.enabled and not config.metallb.addresses:
        errors.append(("metallb.addresses", "is required when MetalLB is enabled in mode 'real'"))
    if config.metallb.addresses and not config.metallb.enabled:
        errors.append(("metallb.addresses", "is set but metallb.enabled is not true"))
    for index, tenant in enumerate(config.tenants):
        for worker_index, host in enumerate(tenant.workers):
            if host.host_key is None:
                errors.append(
                    (
                        f"tenants[{index}].workers[{worker_index}].hostKey",
                        f"worker {host.name} has no SSH host key, so anyone between here and {host.address} would "
                        f"receive its join token; set it from `ssh-keyscan -t ed25519 -p {host.port} {host.address}` "
                        "after checking the fingerprint on the host (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub)",
                    )
                )
    errors += _duplicate_hosts(config, resolve)
    return errors


def _nvml_mock_errors(config: StackConfig) -> list[tuple[str, str]]:
    """sim-nvml puts each tenant's GPUs on one worker, served by NVIDIA's mock NVML."""
    errors: list[tuple[str, str]] = []
    try:
        limits.mutating_admission_policy_api(config.versions.kubernetes)
    except ValueError as error:
        errors.append(("versions.kubernetes", str(error)))
    for index, tenant in enumerate(config.tenants):
        total = sum(gpu.count for gpu in tenant.gpus)
        if total > limits.MAX_GPUS_PER_NODE:
            errors.append(
                (
                    f"tenants[{index}].gpus",
                    f"{total} GPUs on tenant {tenant.name}'s one worker; the mock NVML serves at most "
                    f"{limits.MAX_GPUS_PER_NODE} per node (k8s-test-infra engine/device.go MaxDevices)",
                )
            )
    return errors


def load_config(
    raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset(), resolve: Resolver | None = None
) -> StackConfig:
    """Validate the stack's `gpu-tenancy:*` values; raise ConfigError with one line on failure.

    `secret_keys` are the keys (without namespace) the stack stores encrypted; a credential key
    outside it fails, so a kubeconfig or SSH key never sits in plain text in `Pulumi.<stack>.yaml`.
    `resolve` (the program passes `resolve_host`) maps worker addresses to IPs, to refuse one machine
    listed under two names.
    """
    for key in SECRET_KEYS:
        if key in raw and key not in secret_keys:
            raise ConfigError(
                f"{NAMESPACE}:{key}: must be a secret (pulumi config set --secret {NAMESPACE}:{key} ...)"
            )
    try:
        config = StackConfig.model_validate(dict(raw))
    except ValidationError as error:
        raise ConfigError(_first_error_line(error)) from None
    errors = mode_errors(config, raw, resolve) or addressing.collisions(config.address_claims())
    if errors:
        key, problem = errors[0]
        raise ConfigError(f"{NAMESPACE}:{key}: {problem}")
    return config
