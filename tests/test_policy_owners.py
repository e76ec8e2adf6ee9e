"""Whose a resource is, as the policy pack decides it (policies/tenancy_lib.py `owner`): the Tenant above it in
the URN parent chain first, else its tenant label (Kubernetes metadata or Docker container labels) or a join
command's GPU_TENANCY_TENANT, and every disagreement between them named."""

from __future__ import annotations

import policy_support  # noqa: F401  (puts policies/ on the import path, as the engine runs the pack from there)
from resource_lib import Res
from tenancy_lib import component_label, labels, owner

TENANT = "gpu-tenancy:tenant:Tenant"
LABEL = "gpu-tenancy.io/tenant"


def _under(tenant: str | None, typ: str, props: dict[str, object]) -> Res:
    component = Res("gpu-tenancy:worker:Worker", "w", "urn:w", {},
                    parent=Res(TENANT, tenant, f"urn:{tenant}", {}) if tenant else None)
    return Res(typ, "r", "urn:r", props, parent=component)


def test_the_parent_chain_decides_and_a_contradicting_label_is_named() -> None:
    res = _under("tenant-a", "kubernetes:core/v1:ConfigMap", {"metadata": {"labels": {LABEL: "tenant-b"}}})
    assert owner(res) == ("tenant-a", ["URN parent chain says 'tenant-a', label gpu-tenancy.io/tenant says 'tenant-b'"])
    assert owner(_under("tenant-a", "kubernetes:core/v1:ConfigMap", {"metadata": {"labels": {LABEL: "tenant-a"}}})) == (
        "tenant-a", [])


def test_without_a_tenant_above_it_a_label_or_the_join_environment_decides() -> None:
    container = _under(None, "docker:index/container:Container", {"labels": [
        {"label": LABEL, "value": "tenant-b"}, {"label": "gpu-tenancy.io/component", "value": "worker"}, {"value": "x"}]})
    assert labels(container) == {LABEL: "tenant-b", "gpu-tenancy.io/component": "worker"}
    assert component_label(container) == "worker"
    assert owner(container) == ("tenant-b", [])
    join = _under(None, "command:local:Command", {"environment": {"GPU_TENANCY_TENANT": "tenant-a"}})
    assert owner(join) == ("tenant-a", [])
    # A command with a label too: both named, and the first in name order owns it.
    both = _under(None, "command:local:Command", {"environment": {"GPU_TENANCY_TENANT": "tenant-b"},
                                                  "metadata": {"labels": {LABEL: "tenant-a"}}})
    assert owner(both) == ("tenant-a", [
        "label gpu-tenancy.io/tenant says 'tenant-a', environment GPU_TENANCY_TENANT says 'tenant-b'"])
    # The join environment counts only on a local Command.
    assert owner(_under(None, "kubernetes:core/v1:Pod", {"environment": {"GPU_TENANCY_TENANT": "tenant-a"}})) == (None, [])
