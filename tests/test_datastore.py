"""The etcd behind the control planes: its quota below its volume, and a tenant's own etcd on request."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from harness import dev_config, record_stack, unwrap
from policy_support import copy_stack, find, record_engine_view, run_resource_policy, run_stack_policy, set_both
from pulumi_policy import StackValidationPolicy

from gpu_tenancy.builders.kamaji import kamaji_chart
from gpu_tenancy.builders.tenant_datastore import datastore
from gpu_tenancy.contract.chart_lock import chart_name
from gpu_tenancy.contract.config import ConfigError, load_config

import tenant_policies as tp  # isort: skip  (policies/ is put on sys.path by policy_support)

MIB = 1024 * 1024


def test_the_quota_leaves_room_for_the_wal_and_a_defragmented_copy() -> None:
    # 2048 MiB volume: 320 MiB of WAL (5 x 64 MB segments), 128 MiB slack, the rest halved.
    assert datastore.quota_bytes(2048) == 800 * MIB
    for volume in (1024, 2048, 8192, 65536):
        quota = datastore.quota_bytes(volume)
        assert 2 * quota + 5 * 64 * MIB <= volume * MIB
    with pytest.raises(ValueError):
        datastore.quota_bytes(600)


def test_kamaji_etcd_no_longer_sets_a_quota_equal_to_its_volume(shared: Any) -> None:
    """Upstream's defaults (8 GiB quota on an 8 GiB volume) are what the program overrides."""
    upstream = yaml.safe_load((shared / "charts" / "kamaji-etcd" / "0.15.0" / "values.yaml").read_text())
    assert int(upstream["quotaBackendBytes"]) == 8 * 1024 * MIB and upstream["persistentVolumeClaim"]["size"] == "8Gi"
    etcd = kamaji_chart.kamaji_values("26.8.2-edge")["kamaji-etcd"]
    assert etcd["persistentVolumeClaim"] == {"size": "2048Mi"}
    assert int(etcd["quotaBackendBytes"]) == 800 * MIB


def dedicated(config: dict[str, Any] | None = None) -> dict[str, Any]:
    config = config or dev_config()
    config["tenants"][1]["dataStore"] = "dedicated"
    config["datastore"] = {"volumeMiB": 4096}
    return config


def test_a_dedicated_tenant_gets_its_own_etcd_and_datastore() -> None:
    resources = record_stack(dedicated())
    tcps = {r.inputs["metadata"]["name"]: unwrap(r.inputs)["spec"]["dataStore"]
            for r in resources if r.typ.endswith("TenantControlPlane") and r.custom}
    assert tcps == {"tenant-a": "default", "tenant-b": "tenant-b-etcd"}
    (release,) = [r for r in resources if r.typ == "kubernetes:helm.sh/v3:Release" and chart_name(r.inputs["chart"]) == "kamaji-etcd"]
    values = unwrap(release.inputs)["values"]
    assert release.inputs["namespace"] == "tenant-b" and release.inputs["version"] == "0.15.0"
    assert values["fullnameOverride"] == "tenant-b-etcd" and values["replicas"] == 1
    assert values["persistentVolumeClaim"] == {"size": "4096Mi"}
    assert int(values["quotaBackendBytes"]) == (4096 - 320 - 128) // 2 * MIB
    assert values["certManager"]["issuerRef"]["kind"] == "ClusterIssuer"
    stores = {r.inputs["metadata"]["name"]: unwrap(r.inputs)["spec"] for r in resources
              if r.typ == "kubernetes:kamaji.clastix.io/v1alpha1:DataStore"}
    assert stores["tenant-b-etcd"]["endpoints"] == ["tenant-b-etcd-0.tenant-b-etcd.tenant-b.svc.cluster.local:2379"]
    assert stores["tenant-b-etcd"]["tlsConfig"]["clientCertificate"]["certificate"]["secretReference"] == {
        "name": "tenant-b-etcd-client-certs", "namespace": "tenant-b", "keyPath": "tls.crt"}
    # The shared etcd takes the configured volume too.
    kamaji = next(r for r in resources if r.name == "kamaji-chart")
    assert unwrap(kamaji.inputs)["values"]["kamaji-etcd"]["persistentVolumeClaim"] == {"size": "4096Mi"}
    assert any(r.inputs.get("kind") == "ClusterIssuer" for r in resources)


def test_the_pack_passes_a_dedicated_stack_and_refuses_another_tenants_etcd() -> None:
    stack = copy_stack(record_engine_view(dedicated()))
    for policy in tp.ALL_POLICIES:
        run = run_stack_policy if isinstance(policy, StackValidationPolicy) else run_resource_policy
        assert run(policy, stack) == [], policy.name
    store = find(stack, "kubernetes:kamaji.clastix.io/v1alpha1:DataStore", "tenant-b-control-plane-datastore-datastore")
    set_both(store, ["metadata", "name"], "tenant-a-etcd")
    messages = [m for m, _ in run_stack_policy(tp.tenant_provider_isolation, stack)]
    assert any("of tenant 'tenant-b' is DataStore 'tenant-a-etcd'" in m for m in messages), messages


def test_the_datastore_choice_is_checked() -> None:
    config = dev_config()
    config["tenants"][0]["dataStore"] = "own"
    with pytest.raises(ConfigError, match=r"^gpu-tenancy:tenants\[0\]\.dataStore: "):
        load_config(config)
    config = dev_config()
    config["datastore"] = {"volumeMiB": 512}
    with pytest.raises(ConfigError, match=r"^gpu-tenancy:datastore\.volumeMiB: "):
        load_config(config)
