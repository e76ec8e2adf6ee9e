"""Ports, names, sizes and version floors a stack's configuration is checked against, with where each comes from.

The builders take the same values from here, so what the contract accepts is what they build.
"""

from __future__ import annotations

# A tenant control plane's API server and Konnectivity ports (Kamaji's TenantControlPlane defaults).
TCP_PORT = 6443
KONNECTIVITY_PORT = 8132

DEFAULT_NETWORK = "kind"  # kind v0.32.0 pkg/cluster/internal/providers/docker/network.go fixedNetworkName

# The etcd data volume of a DataStore: its default and the least that leaves etcd a usable quota
# (gpu_tenancy/builders/tenant_datastore/datastore.py derives the quota from it).
DEFAULT_VOLUME_MIB = 2048
MIN_VOLUME_MIB = 1024

MAX_GPUS_PER_NODE = 8  # NVIDIA's mock NVML: k8s-test-infra engine/device.go MaxDevices

# MutatingAdmissionPolicy, which sim-nvml's CUDA-control mutation needs (gpu_tenancy/builders/mock_nvml/
# cuda_control.py): beta (off unless enabled) from Kubernetes 1.34, GA from 1.36.
MUTATING_ADMISSION_POLICY_BETA_MINOR = 34
MUTATING_ADMISSION_POLICY_GA_MINOR = 36


def kubernetes_minor(version: str) -> int:
    """'v1.35.5' -> 35."""
    return int(version.removeprefix("v").split(".")[1])


def mutating_admission_policy_api(kubernetes_version: str) -> str:
    """The MutatingAdmissionPolicy API version a tenant of this Kubernetes version serves; ValueError before 1.34."""
    minor = kubernetes_minor(kubernetes_version)
    if minor < MUTATING_ADMISSION_POLICY_BETA_MINOR:
        raise ValueError(
            f"sim-nvml needs a tenant Kubernetes of v1.{MUTATING_ADMISSION_POLICY_BETA_MINOR} or later "
            f"(MutatingAdmissionPolicy), not {kubernetes_version}"
        )
    if minor >= MUTATING_ADMISSION_POLICY_GA_MINOR:
        return "admissionregistration.k8s.io/v1"
    return "admissionregistration.k8s.io/v1beta1"
