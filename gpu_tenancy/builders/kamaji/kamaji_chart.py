"""cert-manager's and Kamaji's chart values, and the shared etcd DataStore."""

from __future__ import annotations

from typing import Any

KAMAJI_NAMESPACE = "kamaji-system"  # fixed: Kamaji's CRDs hard-code kamaji-system/kamaji-serving-cert


DATASTORE_NAME = "default"


def cert_manager_values() -> dict[str, Any]:
    return {"crds": {"enabled": True}}


def kamaji_values(image_tag: str, etcd_volume_mib: int = 2048) -> dict[str, Any]:
    """Kamaji sized for one host; the DataStore is declared by the program to gate on readiness."""
    from gpu_tenancy.builders.tenant_datastore import datastore  # datastore builds on this module
    return {
        "image": {"tag": image_tag, "pullPolicy": "IfNotPresent"},
        "defaultDatastoreName": DATASTORE_NAME,
        "telemetry": {"disabled": True},
        "resources": {
            "requests": {"cpu": "50m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        # One replica; etcd's quota below its volume (gpu_tenancy/builders/tenant_datastore/datastore.py).
        "kamaji-etcd": {
            "deploy": True,
            "fullnameOverride": "kamaji-etcd",
            **datastore.etcd_values(etcd_volume_mib),
            "datastore": {"enabled": False},
        },
    }


def etcd_datastore_spec() -> dict[str, Any]:
    """DataStore for the kamaji-etcd subchart (one replica, cert-manager issued certificates)."""
    from gpu_tenancy.builders.tenant_datastore import datastore  # datastore builds on this module

    return datastore.shared_spec()
