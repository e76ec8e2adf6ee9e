"""examples/nvidia-smi-slice.yaml: a valid pod for Kubernetes 1.35 that asks HAMi for one small slice."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import yaml

from gpu_tenancy.builders.workloads.workloads import HAMI_SCHEDULER_NAME
from gpu_tenancy.cli.status import report as status
from gpu_tenancy.hami import protocol as hami

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nvidia-smi-slice.yaml"


def test_example_is_a_valid_hami_pod() -> None:
    pod = yaml.safe_load(EXAMPLE.read_text())
    kubernetes_validate.validate(pod, "1.35.0", strict=True)
    assert pod["spec"]["schedulerName"] == HAMI_SCHEDULER_NAME
    (container,) = pod["spec"]["containers"]
    limits = container["resources"]["limits"]
    assert limits == {hami.RESOURCE_GPU: 1, hami.RESOURCE_GPU_MEMORY: 4096, hami.RESOURCE_GPU_CORES: 10}
    assert status.asks_for_gpu(pod)
    # Opting out of HAMi-core (server.go Allocate skips /etc/ld.so.preload) would defeat the example.
    assert "CUDA_DISABLE_CONTROL" not in {e["name"] for e in container.get("env", [])}
    assert ":" in container["image"] and not container["image"].endswith(":latest")
