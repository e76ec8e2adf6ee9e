"""MetalLB's chart values, its address pool and L2 advertisement."""

from __future__ import annotations

from typing import Any

import yaml

from gpu_tenancy.builders.kube_objects import _YAML_DUMPER


def metallb_values() -> dict[str, Any]:
    # L2 only: neither FRR nor FRR-K8s (the 0.16 default) is needed.
    return {"frrk8s": {"enabled": False}, "speaker": {"frr": {"enabled": False}}}


def ip_address_pool(addresses: list[str]) -> dict[str, Any]:
    return {"addresses": list(addresses), "autoAssign": True, "avoidBuggyIPs": True}


def metallb_ip_address_pool(namespace: str, name: str, addresses: list[str]) -> dict[str, Any]:
    return {"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
            "metadata": {"name": name, "namespace": namespace}, "spec": ip_address_pool(addresses)}


def metallb_l2_advertisement(namespace: str, pool_name: str) -> dict[str, Any]:
    return {"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
            "metadata": {"name": pool_name, "namespace": namespace}, "spec": {"ipAddressPools": [pool_name]}}


def metallb_manifest(objects: list[dict[str, Any]]) -> str:
    """Several objects as one multi-document YAML stream (`kubectl apply -f -`)."""
    return yaml.dump_all(objects, Dumper=_YAML_DUMPER, sort_keys=False)
