"""The real control-plane tier: one etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok per test
session, built from their Go modules (tests/realcp/build.py) and started on 127.0.0.1 (tests/realcp/cluster.py).

Without a Go toolchain the tier is skipped with one line saying what it needs, except under CI (CI=true, as
`.ci/run` and GitHub Actions set it) or GPU_TENANCY_REALCP=1, where it must run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.realcp import build
from tests.realcp.cluster import RealControlPlane, running


def _required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("GPU_TENANCY_REALCP") == "1"


@pytest.fixture(scope="session")
def realcp_binaries() -> dict[str, Path]:
    if shutil.which("go") is None and not _required():
        pytest.skip("real control-plane tier: needs a Go 1.26 toolchain on PATH to build Kubernetes, etcd and kwok "
                    "from their modules (https://go.dev/doc/install)")
    try:
        return build.build_all()
    except build.BuildError as error:
        pytest.fail(f"real control-plane tier: {error}", pytrace=False)


@pytest.fixture(scope="session")
def real_control_plane(realcp_binaries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
                       ) -> Iterator[RealControlPlane]:
    workdir = tmp_path_factory.mktemp("realcp")
    with running(realcp_binaries, workdir) as plane:
        yield plane
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def admin_api(real_control_plane: RealControlPlane) -> client.ApiClient:
    """The official Python client as a cluster admin (system:masters)."""
    return config.new_client_from_config(str(real_control_plane.admin_kubeconfig))
