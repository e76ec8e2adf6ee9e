"""The mock NVML DaemonSet's RBAC and readiness probe (gpu_tenancy/builders/mock_nvml/nvml_mock.py), each decided by a
case: NVIDIA k8s-test-infra's chart (deployments/nvml-mock/helm/nvml-mock/templates/rbac.yaml) grants get and patch
on nodes because setup.sh and cleanup.sh run `kubectl label node $NODE_NAME`; here only on the one node."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpu_tenancy.builders.mock_nvml import nvml_mock


def test_the_mock_may_get_and_label_its_own_node_only() -> None:
    assert nvml_mock.rbac_rules("gpu-tenancy-dev-tenant-a-worker") == [
        {"apiGroups": [""], "resources": ["nodes"], "resourceNames": ["gpu-tenancy-dev-tenant-a-worker"],
         "verbs": ["get", "patch"]}]


def test_the_probe_is_ready_once_setup_added_num_devices(tmp_path: Path) -> None:
    """Run as the kubelet runs an exec probe (its exit status decides) against the configuration before and after
    setup.sh's step 6 (`sed '/^system:/a  num_devices: N'`)."""
    spec = nvml_mock.daemon_set_spec("tenant-a", nvml_mock.image_name(), "cm", "sa", 1, "abc")
    command = spec["template"]["spec"]["containers"][0]["readinessProbe"]["exec"]["command"]
    assert command[-1] == f"{nvml_mock.DRIVER_ROOT}/config/config.yaml"
    before, after = tmp_path / "before.yaml", tmp_path / "after.yaml"
    before.write_text("version: '1.0'\nsystem:\n  driver_version: x\n")
    after.write_text("version: '1.0'\nsystem:\n  num_devices: 1\n  driver_version: x\n")
    assert subprocess.run([*command[:-1], str(after)], capture_output=True).returncode == 0
    assert subprocess.run([*command[:-1], str(before)], capture_output=True).returncode != 0
