"""What HAMi's chart renders for mode sim-nvml: its device plugin reaches the mock NVML.

The recorded rendering (tests/fixtures/nvml_mock/hami-device-plugin.dev-nvml.tenant-a.yaml) is Helm's own
output for the values the program sends; it is re-rendered here when Helm's SDK and the chart are at hand:

    python -m venv /tmp/helmvenv && /tmp/helmvenv/bin/pip install helm-python-sdk pyyaml
    git -C <HAMi clone> archive v2.10.0 charts/hami | tar -x -C /tmp/hami-chart
    GPU_TENANCY_HELM_PYTHON=/tmp/helmvenv/bin/python GPU_TENANCY_HAMI_CHART=/tmp/hami-chart/charts/hami \
        pytest tests/test_nvml_hami_render.py

Helm warns "cannot overwrite table with non table for hami.devicePlugin.extraEnvs (map[])": the chart's
default is `{}` but its template writes the value into the container's `env` list (`toYaml | nindent 12`),
so a list is what works; the rendering below shows it does.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from policy_support import shared_recording

from gpu_tenancy.builders.mock_nvml import nvml_mock
from tests.harness import nvml_config, record_stack, unwrap

FIXTURES = Path(__file__).parent / "fixtures" / "nvml_mock"
RENDERED = FIXTURES / "hami-device-plugin.dev-nvml.tenant-a.yaml"
VALUES = FIXTURES / "hami-values.dev-nvml.tenant-a.json"

_RENDER = """
import json, sys, helm_python as helm
chart = helm.Chart.load(sys.argv[1])
out = chart.render(json.load(open(sys.argv[2])), name="hami", namespace="kube-system", is_install=True)
sys.stdout.write(next(m for k, m in out.items() if k.endswith("device-plugin/daemonsetnvidia.yaml")))
"""


@pytest.fixture
@shared_recording
def program_values() -> dict[str, Any]:
    resources = record_stack(nvml_config(), stack="dev-nvml")
    (release,) = [r for r in resources if r.name == "tenant-a-hami-chart"]
    return unwrap(release.inputs)["values"]


def _daemon_set() -> dict[str, Any]:
    return yaml.safe_load(RENDERED.read_text())


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def test_the_recording_was_rendered_from_what_the_program_sends(program_values: dict[str, Any]) -> None:
    assert json.loads(VALUES.read_text()) == program_values, "values changed: re-render (see module docstring)"


def test_the_plugin_loads_the_mocks_library_both_ways() -> None:
    pod = _daemon_set()["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    plugin, monitor = containers["device-plugin"], containers["vgpu-monitor"]
    env = _env(plugin)
    # go-nvml with the library under /driver-root (the mounted driver root) ...
    assert env["NVIDIA_DRIVER_ROOT"] == nvml_mock.DRIVER_ROOT
    assert ("driver-root", "/driver-root") in {(m["name"], m["mountPath"]) for m in plugin["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["driver-root"]["hostPath"] == {"path": nvml_mock.DRIVER_ROOT, "type": "Directory"}
    # ... and the package-level dlopen through LD_LIBRARY_PATH, in the plugin and in the monitor (host /var
    # at /hostvar).
    assert env["LD_LIBRARY_PATH"] == "/driver-root/usr/lib64"
    assert _env(monitor)["LD_LIBRARY_PATH"] == "/hostvar/lib/nvml-mock/driver/usr/lib64"
    assert volumes["hostvar"]["hostPath"]["path"] == "/var"
    # Pods get the mock's /dev/nvidia<i> from the plugin (no NVIDIA runtime hook under runc).
    assert env["PASS_DEVICE_SPECS"] == "true" and env["DEVICE_LIST_STRATEGY"] == "envvar"


def test_a_change_of_mock_devices_restarts_the_plugin(program_values: dict[str, Any]) -> None:
    annotations = _daemon_set()["spec"]["template"]["metadata"]["annotations"]
    digest = program_values["devicePlugin"]["podAnnotations"]["gpu-tenancy.io/nvml-mock-config"]
    assert annotations["gpu-tenancy.io/nvml-mock-config"] == digest


def test_the_plugin_runs_on_the_nodes_the_program_labels() -> None:
    from gpu_tenancy.builders import kube_objects

    selector = _daemon_set()["spec"]["template"]["spec"]["nodeSelector"]
    assert selector.items() <= kube_objects.gpu_node_labels("tenant-a").items()


def test_helm_renders_the_recording_again() -> None:
    python, chart = os.environ.get("GPU_TENANCY_HELM_PYTHON"), os.environ.get("GPU_TENANCY_HAMI_CHART")
    if not (python and chart and Path(python).exists() and Path(chart, "Chart.yaml").exists()):
        pytest.skip("needs Helm's SDK and HAMi's v2.10.0 chart (GPU_TENANCY_HELM_PYTHON, GPU_TENANCY_HAMI_CHART)")
    rendered = subprocess.run(
        [python, "-c", _RENDER, chart, str(VALUES)], check=True, capture_output=True, text=True
    ).stdout
    assert yaml.safe_load(rendered) == _daemon_set()
