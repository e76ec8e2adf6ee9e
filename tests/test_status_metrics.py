"""HAMi's metrics reach a Prometheus with the labels its dashboard uses (chart hami 2.10.0; hami_chart.hami_values,
hami_chart.hami_service_monitors, the scrape config on docs/metrics.md).

Checked against what upstream exports and queries, recorded under tests/fixtures/hami_metrics/ (HAMi v2.10.0 =
commit 4707fb02c91c545bc7343ce26dba4c32919f9a3e, prometheus-operator v0.93.0 = f8fafd475f3d132e239432ae6172de60a6cb6516,
rendered with helm-python-sdk 0.2.2):
- `exporters.v2.10.0.json`: every `hami_*` metric with its labels and the component serving it
  (Project-HAMi/HAMi v2.10.0 cmd/scheduler/metrics.go, cmd/vGPUmonitor/metrics.go `prometheus.NewDesc`);
- `hami-vgpu-dashboard.v2.10.0.json`: HAMi's Grafana dashboard (dashboards/hami-vgpu-dashboard.json);
- `hami-metrics-services.gpu.tenant-a.yaml`: the chart's scheduler and vGPU monitor Services as Helm's Go SDK
  renders chart hami 2.10.0 for the values this program sends (`hami-values.gpu.tenant-a.json`), re-rendered
  when the SDK and chart are at hand (GPU_TENANCY_HELM_PYTHON, GPU_TENANCY_HAMI_CHART; see
  tests/test_nvml_hami_render.py);
- `servicemonitors.monitoring.coreos.com.v0.93.0.yaml`: the Prometheus Operator's ServiceMonitor CRD
  (prometheus-operator/prometheus-operator v0.93.0 example/prometheus-operator-crd/).

Prometheus attaches its own target labels; the operator's ServiceMonitor targets get `namespace`, `service`,
`pod`, `container`, `endpoint` besides `job` and `instance` (prometheus-operator pkg/prometheus/promcfg.go,
generateServiceMonitorConfig). A scraped label of the same name is renamed `exported_<name>` unless
`honor_labels` is set (Prometheus scrape/target.go, `mutateSampleLabels`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from harness import REPO, by_type, dev_config, gpu_config, record_stack, registered_gpus, unwrap

from gpu_tenancy.builders.hami import hami_chart
from gpu_tenancy.contract.chart_lock import chart_name
from gpu_tenancy.contract.config import ConfigError, load_config

FIXTURES = Path(__file__).parent / "fixtures" / "hami_metrics"
EXPORTERS = json.loads((FIXTURES / "exporters.v2.10.0.json").read_text())["metrics"]
SERVICES = {s["metadata"]["name"]: s for s in yaml.safe_load_all((FIXTURES / "hami-metrics-services.gpu.tenant-a.yaml")
                                                                  .read_text())}
VALUES = FIXTURES / "hami-values.gpu.tenant-a.json"
OPERATOR_TARGET_LABELS = {"namespace", "service", "pod", "container", "endpoint", "job", "instance"}
KUBE_PROMETHEUS_STACK = {"release": "kube-prometheus-stack"}


def releases_and_monitors(config: dict[str, Any], stack: str, **options: Any) -> tuple[list[Any], list[Any]]:
    resources = record_stack(config, stack=stack, **options)
    releases = [r for r in by_type(resources, "kubernetes:helm.sh/v3:Release") if chart_name(unwrap(r.inputs).get("chart")) == "hami"]
    monitors = by_type(resources, "kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
    return releases, monitors


def gpu_stack(**metrics: Any) -> tuple[list[Any], list[Any]]:
    config = gpu_config()
    if metrics:
        config["metrics"] = metrics
    return releases_and_monitors(config, "gpu", node_register=registered_gpus(config))


def dashboard_queries() -> dict[str, set[str]]:
    """Metric -> labels the dashboard reads from it (matchers, `by (...)`, `on (...)`, legend `{{label}}`)."""
    used: dict[str, set[str]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                expr, legend = node["expr"], str(node.get("legendFormat") or "")
                grouping = {label.strip() for group in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr)
                            for label in group.split(",")}
                legend_labels = set(re.findall(r"{{\s*(\w+)\s*}}", legend))
                for metric, matchers in re.findall(r"(hami_[a-z_]+)(?:\{([^}]*)\})?", expr):
                    labels = used.setdefault(metric, set())
                    labels |= set(re.findall(r"(\w+)\s*=~?", matchers)) | grouping | legend_labels
            if isinstance(node.get("query"), dict) and "label_values" in str(node["query"].get("query", "")):
                metric, label = re.findall(r"label_values\((\w+),\s*(\w+)\)", node["query"]["query"])[0]
                used.setdefault(metric, set()).add(label)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads((FIXTURES / "hami-vgpu-dashboard.v2.10.0.json").read_text()))
    return used


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_hami_services_stay_in_the_tenant_and_the_charts_monitors_stay_off(stack: str) -> None:
    releases, monitors = releases_and_monitors(dev_config(), "dev") if stack == "dev" else gpu_stack()
    for release in releases:
        values = unwrap(release.inputs)["values"]
        assert values["prometheus"] == {"enabled": False}  # no honorLabels possible in the chart's own
        assert values["scheduler"]["service"]["type"] == "ClusterIP"
        assert values["devicePlugin"]["service"] == {"type": "ClusterIP"}
        assert values["devicePlugin"]["enabled"] is (stack == "gpu")
    assert monitors == []  # off unless the stack asks: they need the operator's CRDs in the tenant


def test_the_recorded_services_were_rendered_from_what_the_program_sends() -> None:
    releases, _ = gpu_stack()
    (release,) = [r for r in releases if r.name == "tenant-a-hami-chart"]
    assert json.loads(VALUES.read_text()) == unwrap(release.inputs)["values"], "values changed: re-render"


@pytest.mark.parametrize(("stack", "components"), [("dev", {"hami-scheduler"}),
                                                    ("gpu", {"hami-scheduler", "hami-device-plugin"})])
def test_service_monitors_select_the_charts_services_keep_labels_and_carry_the_selected_labels(
    stack: str, components: set[str]
) -> None:
    metrics = {"serviceMonitors": True, "labels": KUBE_PROMETHEUS_STACK}
    if stack == "dev":
        _, monitors = releases_and_monitors({**dev_config(), "metrics": metrics}, "dev")
    else:
        _, monitors = gpu_stack(**metrics)
    crd = yaml.safe_load((FIXTURES / "servicemonitors.monitoring.coreos.com.v0.93.0.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    tenants = {unwrap(m.inputs)["metadata"]["labels"]["gpu-tenancy.io/tenant"] for m in monitors}
    assert tenants == {"tenant-a", "tenant-b"} and len(monitors) == 2 * len(components)
    for monitor in monitors:
        document = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", **unwrap(monitor.inputs)}
        jsonschema.validate(document, version["schema"]["openAPIV3Schema"])
        metadata, spec = document["metadata"], document["spec"]
        assert metadata["labels"].items() >= KUBE_PROMETHEUS_STACK.items()
        assert metadata["labels"]["app.kubernetes.io/component"] in components
        # the one Service it selects, in the namespace the chart puts it, by a port that Service has
        selected = [s for s in SERVICES.values()
                    if spec["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
        assert len(selected) == 1
        (service,) = selected
        assert spec["namespaceSelector"] == {"matchNames": [service["metadata"]["namespace"]]}
        (endpoint,) = spec["endpoints"]
        assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
        assert endpoint["path"] == "/metrics" and endpoint["honorLabels"] is True


def test_what_the_dashboard_queries_is_scraped_with_the_labels_it_reads() -> None:
    queries = dashboard_queries()
    assert {"hami_gpu_memory_allocated_bytes", "hami_host_gpu_memory_used_bytes",
            "hami_vgpu_memory_used_bytes"} <= set(queries)  # the parser sees both exporters' panels
    monitors = hami_chart.hami_service_monitors("t", device_plugin=True, extra_labels={})
    ports_scraped = {m["spec"]["endpoints"][0]["port"] for m in monitors}
    service_of_port = {p["name"]: name for name, s in SERVICES.items() for p in s["spec"]["ports"]}
    exporter_of_service = {"hami-scheduler": "hami-scheduler", "hami-device-plugin-monitor": "hami-device-plugin"}
    exporters_scraped = {exporter_of_service[service_of_port[port]] for port in ports_scraped}
    for metric, labels in queries.items():
        exported = EXPORTERS[metric]
        assert exported["exporter"] in exporters_scraped, metric
        assert labels <= set(exported["labels"]), (metric, labels - set(exported["labels"]))
        clashing = labels & OPERATOR_TARGET_LABELS
        if clashing:  # e.g. namespace/pod/container of hami_vgpu_memory_used_bytes: only honorLabels keeps them
            owner = [m for m in monitors if exporter_of_service[service_of_port[m["spec"]["endpoints"][0]["port"]]]
                     == exported["exporter"]]
            assert all(m["spec"]["endpoints"][0]["honorLabels"] for m in owner), (metric, clashing)


def documented_scrape_config() -> list[dict[str, Any]]:
    page = (REPO / "docs" / "metrics.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", page, re.S) if "scrape config for a Prometheus" in b]
    parsed: list[dict[str, Any]] = yaml.safe_load(block)
    return parsed


def test_the_documented_scrape_config_keeps_both_services_and_their_labels() -> None:
    (job,) = documented_scrape_config()
    assert job["honor_labels"] is True
    assert job["kubernetes_sd_configs"] == [{"role": "endpoints", "namespaces": {"names": ["kube-system"]}}]
    (keep,) = job["relabel_configs"]
    assert keep["action"] == "keep"
    assert keep["source_labels"] == ["__meta_kubernetes_service_name", "__meta_kubernetes_endpoint_port_name"]
    kept = {(name, port["name"]) for name, service in SERVICES.items() for port in service["spec"]["ports"]
            if re.fullmatch(keep["regex"], f"{name};{port['name']}")}  # Prometheus anchors relabel regexes
    assert kept == {("hami-scheduler", "monitor"), ("hami-device-plugin-monitor", "monitorport")}


def test_service_monitor_labels_are_validated() -> None:
    config = {**dev_config(), "metrics": {"serviceMonitors": True, "labels": {"release": "bad value!"}}}
    with pytest.raises(ConfigError, match=r"gpu-tenancy:metrics.labels: .*release.*not a Kubernetes label value"):
        load_config(config)


def test_helm_renders_the_recorded_services_again() -> None:
    python, chart = os.environ.get("GPU_TENANCY_HELM_PYTHON"), os.environ.get("GPU_TENANCY_HAMI_CHART")
    if not (python and chart and Path(python).exists() and Path(chart, "Chart.yaml").exists()):
        pytest.skip("needs Helm's SDK and HAMi's v2.10.0 chart (GPU_TENANCY_HELM_PYTHON, GPU_TENANCY_HAMI_CHART)")
    script = ("import json, sys, helm_python as helm\n"
              "out = helm.Chart.load(sys.argv[1]).render(json.load(open(sys.argv[2])), name='hami',"
              " namespace='kube-system', is_install=True)\n"
              "print(json.dumps([m for k, m in sorted(out.items()) if k.endswith(('scheduler/service.yaml',"
              " 'device-plugin/monitorservice.yaml'))]))\n")
    rendered = json.loads(subprocess.run([python, "-c", script, chart, str(VALUES)], check=True, capture_output=True,
                                         text=True).stdout)
    assert {d["metadata"]["name"]: d for d in map(yaml.safe_load, rendered)} == SERVICES
