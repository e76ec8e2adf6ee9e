"""`make status`/`make tenants` reading a tenant (gpu_tenancy/cli/status/kube.py) against the real kube-apiserver:
what tests/test_status_kube.py's scripted server stands in for (its `/version`, `/readyz` and a refused list)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_tenancy.cli.status import kube
from tests.realcp.cluster import RealControlPlane


def _pinned_kubernetes() -> str:
    # Read from the committed go.mod, as test_control_plane.py does, not from the code under test.
    text = (Path(__file__).parent / "modules" / "kubernetes" / "go.mod").read_text()
    found = re.search(r"k8s\.io/kubernetes (v[0-9][^\s]*)", text)
    assert found
    return found.group(1)


def test_an_admin_reads_the_version_readiness_and_lists(real_control_plane: RealControlPlane) -> None:
    read = kube.read_tenant(real_control_plane.admin_kubeconfig.read_text(), probes=True)
    assert (read.version, read.readyz) == (_pinned_kubernetes(), "ok")
    assert isinstance(read.nodes, list) and isinstance(read.pods, list) and isinstance(read.quotas, list)


def test_an_identity_without_rights_is_one_line_with_the_api_servers_status(
    real_control_plane: RealControlPlane,
) -> None:
    # /version and /readyz are open to any authenticated user (system:public-info-viewer); the lists are not.
    nobody = real_control_plane.kubeconfig("status-reader-without-rights").read_text()
    with pytest.raises(kube.TenantUnreachable) as refused:
        kube.read_tenant(nobody, probes=True)
    assert str(refused.value) == f"cannot read {real_control_plane.server}: HTTP 403 Forbidden"
