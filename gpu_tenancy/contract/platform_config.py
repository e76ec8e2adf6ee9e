"""The platform sections of the stack file: the pinned versions, the kind lab, MetalLB, how the control
planes are exposed, the etcd volumes and the ServiceMonitors for HAMi's metrics.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from gpu_tenancy.contract import limits, versions
from gpu_tenancy.contract.config_fields import ConfigModel, DnsLabel, PinnedImage, PinnedTag
from gpu_tenancy.contract.image_pins import image_tag

KUBERNETES_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")
# Kamaji 26.8.2-edge rejects tenants above its vendored kubeadm (v1.36.0); see versions.md §2.1.
MAX_TENANT_MINOR = 36
MIN_TENANT_MINOR = 30


class VersionsConfig(ConfigModel):
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
        match = KUBERNETES_VERSION.fullmatch(value)
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


class KindConfig(ConfigModel):
    cluster_name: DnsLabel | None = Field(default=None, alias="clusterName")
    network: str = limits.DEFAULT_NETWORK


class MetalLBConfig(ConfigModel):
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


class DataStoreConfig(ConfigModel):
    """The etcd volumes (the shared one and each dedicated one); etcd's quota is derived
    (gpu_tenancy/builders/tenant_datastore)."""

    volume_mib: int = Field(default=limits.DEFAULT_VOLUME_MIB, ge=limits.MIN_VOLUME_MIB, le=1024 * 1024,
                            alias="volumeMiB")


class ControlPlaneConfig(ConfigModel):
    """How tenant API servers are exposed from the management cluster."""

    service_type: Literal["LoadBalancer", "NodePort"] = Field(default="LoadBalancer", alias="serviceType")
    # NodePort: a tenant serves its API on a port derived from its name (gpu_tenancy.contract.addressing), from
    # base up, and Konnectivity on the next one; tenants[].nodePort sets it explicitly.
    node_port_base: int = Field(default=31000, ge=30000, le=32766, alias="nodePortBase")


# Kubernetes label syntax (apimachinery validation.IsQualifiedName / IsValidLabelValue).
_LABEL_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                         r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class MetricsConfig(ConfigModel):
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
            if len(key.rpartition("/")[0]) > 253 or not _LABEL_NAME.fullmatch(key):
                raise ValueError(f"{key!r} is not a Kubernetes label name")
            if not _LABEL_VALUE.fullmatch(text):
                raise ValueError(f"{key}: {text!r} is not a Kubernetes label value (63 characters, alphanumeric ends)")
        return value
