"""The etcd behind the tenants' control planes: sized so it raises its space alarm before its disk fills,
shared by every tenant (one kamaji-etcd, a key prefix each) or, per tenant, an etcd of its own.

Sizing. etcd refuses writes once its backend database exceeds `--quota-backend-bytes` (the NOSPACE alarm:
reads and deletes only, for every tenant of that etcd). kamaji-etcd 0.15.0 (values.yaml) sets that quota
to 8 GiB on an 8 GiB volume, so on storage that enforces sizes the volume fills first and etcd fails on a
full disk instead. The volume also holds the write-ahead log (etcd keeps `--max-wals` 5 segments of 64 MB,
server/storage/wal/wal.go SegmentSizeBytes) and, to recover from the alarm (compact, defragment, disarm),
room for a defragmented copy of the database, which etcd writes next to it before swapping it in
(server/storage/backend/backend.go defrag). So the quota is half of what the WAL and a slack leave.
On kind's local-path storage sizes are not enforced at all: the quota is then the only bound, on the
Docker host's own disk.
"""

from __future__ import annotations

from typing import Any

from gpu_tenancy.builders.kamaji import kamaji_chart

MIB = 1024 * 1024
WAL_RESERVE_MIB = 5 * 64  # --max-wals 5 x 64 MB segments (rounded up to MiB)
SLACK_MIB = 128  # snapshots (--max-snapshots 5, small: v2 store and membership) and filesystem overhead


def quota_bytes(volume_mib: int) -> int:
    """etcd's --quota-backend-bytes for a data volume of `volume_mib`: (volume - WAL - slack) / 2."""
    usable = volume_mib - WAL_RESERVE_MIB - SLACK_MIB
    if usable < 2 * 256:
        raise ValueError(f"a {volume_mib} MiB etcd volume leaves no room for a useful quota")
    return usable // 2 * MIB


def etcd_values(volume_mib: int) -> dict[str, Any]:
    """kamaji-etcd chart values that size one single-replica etcd (quota below its volume)."""
    return {
        "replicas": 1,
        "persistentVolumeClaim": {"size": f"{volume_mib}Mi"},
        "quotaBackendBytes": str(quota_bytes(volume_mib)),
    }


def dedicated_name(tenant: str) -> str:
    """A tenant's own etcd: the kamaji-etcd release's fullname and the DataStore's name."""
    return f"{tenant}-etcd"


SELF_SIGNED_ISSUER = "gpu-tenancy-selfsigned"  # ClusterIssuer the dedicated etcds' CAs come from


def dedicated_values(tenant: str, volume_mib: int) -> dict[str, Any]:
    """kamaji-etcd 0.15.0 values for a tenant's own etcd in its management namespace: cert-manager issues its
    CA from the platform's self-signed ClusterIssuer (the chart's CA Issuer then signs the rest,
    templates/etcd_cert-manager_ca.yaml); the program declares the DataStore itself to wait on it."""
    return {
        **etcd_values(volume_mib),
        "fullnameOverride": dedicated_name(tenant),
        "selfSignedCertificates": {"enabled": False},
        "certManager": {
            "enabled": True,
            "issuerRef": {"name": SELF_SIGNED_ISSUER, "kind": "ClusterIssuer", "group": "cert-manager.io"},
        },
        "datastore": {"enabled": False},
    }


def datastore_spec(fullname: str, namespace: str) -> dict[str, Any]:
    """DataStore for a single-replica kamaji-etcd with cert-manager certificates (the chart's own template,
    templates/etcd_datastore.yaml with certManager.enabled and headless endpoints)."""

    def ref(secret: str, key: str) -> dict[str, Any]:
        return {"secretReference": {"name": secret, "namespace": namespace, "keyPath": key}}

    return {
        "driver": "etcd",
        "endpoints": [f"{fullname}-0.{fullname}.{namespace}.svc.cluster.local:2379"],
        "tlsConfig": {
            "certificateAuthority": {
                "certificate": ref(f"{fullname}-ca", "tls.crt"),
                "privateKey": ref(f"{fullname}-ca", "tls.key"),
            },
            "clientCertificate": {
                "certificate": ref(f"{fullname}-client-certs", "tls.crt"),
                "privateKey": ref(f"{fullname}-client-certs", "tls.key"),
            },
        },
    }


def shared_spec() -> dict[str, Any]:
    return datastore_spec("kamaji-etcd", kamaji_chart.KAMAJI_NAMESPACE)
