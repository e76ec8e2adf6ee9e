"""The DataStore's endpoint and every key path of its TLS material, as kamaji-etcd v0.15.0 renders its own
DataStore with cert-manager (charts/kamaji-etcd/templates/etcd_datastore.yaml, the `certManager.enabled`
branch; names from templates/_helpers.tpl `etcd.certManager.ca` = <fullname>-ca and `etcd.certManager.clientCert`
= <fullname>-client-certs, cert-manager's `tls.crt`/`tls.key` keys; endpoints from `etcd.endpointsYAML`:
<sts>-<i>.<service>.<namespace>.svc.cluster.local:2379 for each replica, one here). Kamaji reads each key
path from its Secret (a wrong one: no TLS client, no control plane)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpu_tenancy.builders.tenant_datastore import datastore


def secret(name: str, namespace: str, key: str) -> dict[str, Any]:
    return {"secretReference": {"name": name, "namespace": namespace, "keyPath": key}}


@pytest.mark.parametrize(("fullname", "namespace", "spec"), [
    ("tenant-b-etcd", "tenant-b", lambda: datastore.datastore_spec("tenant-b-etcd", "tenant-b")),
    # The shared etcd: Kamaji's chart's kamaji-etcd subchart (fullnameOverride kamaji-etcd, certManager enabled).
    ("kamaji-etcd", "kamaji-system", datastore.shared_spec),
])
def test_every_key_path_is_the_charts(fullname: str, namespace: str, spec: Callable[[], dict[str, Any]]) -> None:
    # Built in the test, not at import, so that a mutant mutmut activates after import is the one checked.
    assert spec() == {
        "driver": "etcd",
        "endpoints": [f"{fullname}-0.{fullname}.{namespace}.svc.cluster.local:2379"],
        "tlsConfig": {
            "certificateAuthority": {
                "certificate": secret(f"{fullname}-ca", namespace, "tls.crt"),
                "privateKey": secret(f"{fullname}-ca", namespace, "tls.key"),
            },
            "clientCertificate": {
                "certificate": secret(f"{fullname}-client-certs", namespace, "tls.crt"),
                "privateKey": secret(f"{fullname}-client-certs", namespace, "tls.key"),
            },
        },
    }


def test_a_dedicated_etcd_gets_its_ca_from_the_platforms_issuer() -> None:
    values = datastore.dedicated_values("tenant-b", 4096)
    assert values["fullnameOverride"] == "tenant-b-etcd"
    # kamaji-etcd 0.15.0 _helpers.tpl fails when both are on; cert-manager issues the CA the DataStore names.
    assert values["selfSignedCertificates"] == {"enabled": False}
    assert values["certManager"] == {
        "enabled": True,
        "issuerRef": {"name": "gpu-tenancy-selfsigned", "kind": "ClusterIssuer", "group": "cert-manager.io"},
    }
    # The program declares the DataStore itself (to wait on it): the chart's own stays off.
    assert values["datastore"] == {"enabled": False}
    assert values["replicas"] == 1 and values["persistentVolumeClaim"] == {"size": "4096Mi"}


def test_the_smallest_volume_leaves_a_256_mib_quota() -> None:
    # 960 MiB - 320 MiB of WAL - 128 MiB of slack = 512 MiB, halved: 256 MiB; one MiB less is refused.
    assert datastore.quota_bytes(960) == 256 * 1024 * 1024
    assert datastore.quota_bytes(963) == 257 * 1024 * 1024  # 515 MiB usable, halved down to whole MiB
    with pytest.raises(ValueError, match="a 959 MiB etcd volume leaves no room for a useful quota"):
        datastore.quota_bytes(959)
