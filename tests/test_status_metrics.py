"""HAMi's metrics are scrapeable in both modes (chart hami 2.10.0 values; see manifests.hami_values).

The chart (Project-HAMi/HAMi v2.10.0 charts/hami/templates) always renders the scheduler Service with a
port named `monitor` (`scheduler.service.monitorPort` -> `monitorTargetPort`, the extender's
`--metrics-bind-address`), renders ServiceMonitors for the scheduler and the device plugin's vGPU monitor
only when `prometheus.enabled` and the cluster serves monitoring.coreos.com/v1 ServiceMonitor, and
exposes the vGPU monitor Service as `devicePlugin.service.type`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import by_type, dev_config, gpu_config, record_stack, registered_gpus, unwrap

from gpu_tenancy import manifests


def hami_releases(config: dict[str, Any], stack: str, **options: Any) -> list[dict[str, Any]]:
    releases = [r for r in by_type(record_stack(config, stack=stack, **options), "kubernetes:helm.sh/v3:Release")
                if unwrap(r.inputs).get("chart") == "hami"]
    assert releases
    return [unwrap(r.inputs)["values"] for r in releases]


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_metrics_wired_in_both_modes(stack: str) -> None:
    if stack == "dev":
        values_list = hami_releases(dev_config(), "dev")
    else:
        config = gpu_config()
        values_list = hami_releases(config, "gpu", node_register=registered_gpus(config))
    for values in values_list:
        assert values["prometheus"] == {"enabled": True}
        assert values["scheduler"]["service"]["type"] == "ClusterIP"  # port `monitor` stays in the tenant
        assert values["devicePlugin"]["service"] == {"type": "ClusterIP"}
        assert values["devicePlugin"]["enabled"] is (stack == "gpu")


def test_metrics_ports_are_the_charts_defaults(shared: Path) -> None:
    """The README's scrape target (svc/hami-scheduler:31993 -> 9395) relies on these defaults staying unset."""
    values = manifests.hami_values("v1.35.5", "v2.10.0")
    assert "metricsBindAddress" not in values["scheduler"]
    assert set(values["scheduler"]["service"]) == {"type"}
    upstream = yaml.safe_load((shared / "charts" / "hami" / "2.10.0" / "values.yaml").read_text())
    assert upstream["scheduler"]["metricsBindAddress"] == ":9395"
    assert upstream["scheduler"]["service"]["monitorPort"] == 31993
    assert upstream["scheduler"]["service"]["monitorTargetPort"] == 9395
    assert upstream["prometheus"] == {"enabled": False}  # off upstream: this program turns it on
