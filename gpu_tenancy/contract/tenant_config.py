"""The tenant section of the stack file (`tenants[]`): a tenant, its GPUs, its GPU hosts (mode real) and its
workloads, with the checks within one tenant (its hosts hold its GPUs, no name twice).
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections import Counter
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, ValidationInfo, field_validator, model_validator

from gpu_tenancy.contract.config_fields import ConfigModel, DnsLabel, PinnedImage
from gpu_tenancy.hami import gpu_catalogue
from gpu_tenancy.hami import protocol as hami

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _ipv4(value: str) -> str:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 address") from None
    return value


class GpuConfig(ConfigModel):
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
    return ", ".join(f"{count} x {model} ({mib} MiB)" for (model, mib), count in sorted(counts.items()))


# Upper bounds on counts: HAMi takes a container's GPUs from one node and no GPU node carries more than 16
# cards (HGX/DGX class), so more could never be scheduled; the rest keep one stack's plan and preview small.
MAX_CARDS_PER_REQUEST = 16
MAX_CONTAINERS = 16
MAX_WORKLOADS = 100
MAX_GPU_GROUPS = 16
MAX_WORKERS = 64
MAX_TENANTS = 100


class ContainerGpuRequest(ConfigModel):
    gpus: int = Field(default=1, gt=0, le=MAX_CARDS_PER_REQUEST)
    # HAMi keeps a request's MiB in an int32 (pkg/device/devices.go ContainerDeviceRequest.Memreq), as a card's.
    gpumem_mib: int | None = Field(default=None, alias="gpumemMiB", gt=0, le=gpu_catalogue.MAX_MEMORY_MIB)
    gpumem_percentage: int | None = Field(default=None, alias="gpumemPercentage", gt=0, le=100)
    gpucores: int | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="after")
    def _one_memory_form(self) -> ContainerGpuRequest:
        if self.gpumem_mib is not None and self.gpumem_percentage is not None:
            raise ValueError("set gpumemMiB or gpumemPercentage, not both")
        return self


class WorkloadConfig(ConfigModel):
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


QUOTA_KEYS = hami.NVIDIA.quota_keys


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
    # The blob starts with the key type as an SSH string (RFC 4253 6.6): a 4-byte length, then the name.
    length = int.from_bytes(blob[:4], "big")
    if blob[4 : 4 + length].decode(errors="replace") != fields[0]:
        raise ValueError(f"its key data is not a {fields[0]} key")
    return f"{fields[0]} {fields[1]}"


class WorkerHostConfig(ConfigModel):
    """A real GPU host (mode real), prepared and joined to its tenant over SSH."""

    name: DnsLabel
    address: Annotated[str, StringConstraints(min_length=1)]
    user: Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_-]*$")]
    port: int = Field(default=22, gt=0, lt=65536)
    # The cards in this host; a tenant's only host has the tenant's `gpus` unless it says otherwise.
    gpus: list[GpuConfig] = Field(default_factory=list)
    # Required in mode real (config_checks.mode_errors): without it pulumi-command accepts any host key.
    host_key: Annotated[str, AfterValidator(_host_key)] | None = Field(default=None, alias="hostKey")
    # Each card's NUMA node (`nvidia-smi topo -m`), in the order of `gpus`: HAMi breaks ties between cards
    # of equal score by it. Unset, the planner takes every tie-break as possible.
    numa: list[Annotated[int, Field(ge=0)]] | None = None

    @model_validator(mode="after")
    def _numa_per_card(self) -> WorkerHostConfig:
        cards = sum(g.count for g in self.gpus)
        if self.numa is not None and self.gpus and len(self.numa) != cards:
            raise ValueError(f"numa lists {len(self.numa)} NUMA node(s) for {cards} card(s): give one per card")
        return self

    @field_validator("address")
    @classmethod
    def _host_address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if not DNS1123_SUBDOMAIN.fullmatch(value):
                raise ValueError(f"{value!r} is neither an IP address nor a host name") from None
        return value


class TenantConfig(ConfigModel):
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
            # HAMi v2.10.0 reads a quota with Quantity.AsInt64 and skips one that does not fit: no limit at all
            # (pkg/device/quota.go addQuotaLocked).
            if amount > 2**63 - 1:
                raise ValueError(f"quota {key!r} must be at most {2**63 - 1} (a Kubernetes quantity's int64 value)")
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
            if worker.gpus:
                continue
            if len(tenant.workers) == 1:
                raise ValueError(
                    f"workers[0].gpus is empty: leave it out to give host {worker.name} the tenant's gpus"
                )
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
