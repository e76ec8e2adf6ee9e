"""Clauses of the status reader, the status command and the promotion command, each pinned by a case that
fails when the clause changes (an exception class, a message fragment, a default, a fallback).

The tenant's API server is tests/fake_apiserver.py's FakeTenant. Transport failures are made where urllib3
2.x makes them: urllib3/connection.py `HTTPConnection._new_conn` calls `urllib3.util.connection
.create_connection` and turns `socket.gaierror` into NameResolutionError, a socket timeout into
ConnectTimeoutError ("... timed out") and any other OSError into NewConnectionError; the replaced
`create_connection` raises what the kernel and glibc report (EHOSTUNREACH "No route to host", EAI_NONAME
"Name or service not known"). Expected texts are typed from those upstream messages.
"""

from __future__ import annotations

import copy
import errno
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3.util.connection
from fake_apiserver import FakeTenant, TenantPki, kubeconfig_for, recorded

from gpu_tenancy.cli.status import command as status_cli
from gpu_tenancy.cli.status import kube

# --------------------------------------------------------------------------------------- the status reader


@pytest.fixture
def tenant_b() -> Iterator[FakeTenant]:
    server = FakeTenant("tenant-b", copy.deepcopy(recorded("real")["tenant-b"]), tls=True).start()
    yield server
    server.stop()


def test_without_probes_the_reader_leaves_version_and_readyz_unset(tenant_b: FakeTenant) -> None:
    read = kube.read_tenant(tenant_b.kubeconfig(), probes=False)
    assert (read.version, read.readyz) == (None, None)
    assert [n["metadata"]["name"] for n in read.nodes] == ["gpu-l4-01"]
    assert "/version" not in tenant_b.requests


@pytest.mark.parametrize("probes", [False, True])
def test_a_server_certificate_of_another_ca_is_one_line(tenant_b: FakeTenant, probes: bool) -> None:
    # rest.py RESTClientObject.request wraps urllib3's SSLError in ApiException(status=0): the list call's
    # and the /version probe's (kube._get) alike.
    other_ca = TenantPki().ca_pem
    with pytest.raises(kube.TenantUnreachable) as raised:
        kube.read_tenant(tenant_b.kubeconfig(ca_pem=other_ca), probes=probes)
    assert str(raised.value) == f"cannot read {tenant_b.url}: certificate verify failed"


def test_a_refused_token_is_the_http_status_and_reason(tenant_b: FakeTenant) -> None:
    with pytest.raises(kube.TenantUnreachable) as raised:
        kube.read_tenant(tenant_b.kubeconfig(token="not-the-token"), probes=False)
    assert str(raised.value) == f"cannot read {tenant_b.url}: HTTP 401 Unauthorized"


@pytest.mark.parametrize(("raised", "said"), [
    (TimeoutError("timed out"), "timed out"),
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "name or service not known"),
    (OSError(errno.EHOSTUNREACH, "No route to host"), "no route to host"),
    (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused"),
])
def test_each_known_transport_failure_is_named(raised: OSError, said: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def create_connection(*args: Any, **kwargs: Any) -> socket.socket:
        raise raised

    monkeypatch.setattr(urllib3.util.connection, "create_connection", create_connection)
    server = "http://10.20.0.12:6443"
    with pytest.raises(kube.TenantUnreachable) as caught:
        kube.read_tenant(kubeconfig_for("tenant-b", server, "t0ken"), probes=False)
    assert str(caught.value) == f"cannot read {server}: {said}"


class _NotKubernetes(http.server.BaseHTTPRequestHandler):
    """A proxy or captive portal on the API server's address: 200 with an HTML page for every path."""

    def do_GET(self) -> None:
        body = b"<html><body>Sign in to continue</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_an_answer_that_is_not_json_is_one_line() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotKubernetes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(kube.TenantUnreachable) as raised:
            kube.read_tenant(kubeconfig_for("tenant-b", url, "t0ken"), probes=False)
    finally:
        server.shutdown()
        server.server_close()
    # json.JSONDecodeError's own text (a ValueError)
    assert str(raised.value) == f"cannot read {url}: Expecting value: line 1 column 1 (char 0)"


@pytest.mark.parametrize(("kubeconfig", "said"), [
    ("clusters: [\n", "unusable kubeconfig: while parsing a flow node expected the node content, but found "
                      "'<stream end>' in \"<unicode string>\", line 2, column 1: ^"),  # yaml.YAMLError, its snippet
    # kubernetes config/kube_config.py KubeConfigLoader: ConfigException
    ("apiVersion: v1\nkind: Config\n", "unusable kubeconfig: Invalid kube-config file. Expected key "
                                       "current-context in kube-config"),
    # the server's URL is parsed (urllib.parse.urlsplit) when configuration.host is set: ValueError
    (kubeconfig_for("tenant-b", "https://[fd00::1:6443", "t0ken"), "unusable kubeconfig: Invalid IPv6 URL"),
    ("- 1\n", "kubeconfig is not a YAML mapping"),
])
def test_an_unusable_kubeconfig_is_one_line(kubeconfig: str, said: str) -> None:
    with pytest.raises(kube.TenantUnreachable) as raised:
        kube.read_tenant(kubeconfig, probes=False)
    assert str(raised.value) == said


# -------------------------------------------------------------------------------------- the status command


def test_a_dump_that_is_not_json_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "objects.json"
    dump.write_text("{not json")
    assert status_cli.main(["--objects", str(dump)]) == 2
    assert capsys.readouterr().err == (
        f"status: {dump}: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)\n")


def test_without_a_terminal_the_table_is_120_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """shutil.get_terminal_size: COLUMNS/LINES unset and no terminal on stdout give the fallback."""
    dump = tmp_path / "objects.json"
    dump.write_text(json.dumps(recorded("real")))
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)

    def no_terminal(*args: Any) -> Any:
        raise OSError(errno.ENOTTY, "Inappropriate ioctl for device")

    monkeypatch.setattr("os.get_terminal_size", no_terminal)
    assert status_cli.main(["--objects", str(dump)]) == 0
    fallback = capsys.readouterr().out
    assert status_cli.main(["--objects", str(dump), "--width", "120"]) == 0
    explicit = capsys.readouterr().out
    strip = [line for line in fallback.splitlines() if " at " not in line]  # the title's clock
    assert strip == [line for line in explicit.splitlines() if " at " not in line]
    assert max(map(len, fallback.splitlines())) == 120


# --------------------------------------------------------------------------- promotion: which layer a resource is in

# docs/modes-and-promotion.md "make promotion-diff": the platform layer is kind or an existing cluster with what the
# tenants share on it (MetalLB's pool, cert-manager, Kamaji and its DataStore); the device layer is the node
# containers or SSH hosts, bootstrap tokens, the mock-GPU agent, the mock NVML, what HAMi's device plugin is pointed
# at, kubelet settings; everything else a tenant has is the tenant layer.
@pytest.mark.parametrize(("typ", "name", "inputs", "layer"), [
    ("gpu-tenancy:kind_cluster:KindCluster", "lab", {}, "platform"),
    ("kubernetes:kamaji.clastix.io/v1alpha1:DataStore", "default", {}, "platform"),
    ("kubernetes:helm.sh/v3:Release", "kamaji-chart", {"chart": "kamaji"}, "platform"),
    ("kubernetes:helm.sh/v3:Release", "metallb-chart", {"chart": "metallb"}, "platform"),
    ("kubernetes:helm.sh/v3:Release", "cert-manager", {"chart": "cert-manager"}, "platform"),
    ("kubernetes:helm.sh/v3:Release", "tenant-a-hami-chart", {"chart": "hami"}, "tenant"),
    ("random:index/randomPassword:RandomPassword", "tenant-a-token", {}, "device"),
    ("kubernetes:apps/v1:DaemonSet", "tenant-a-node", {"metadata": {"labels": {"gpu-tenancy.io/component": "worker"}}},
     "device"),
    ("kubernetes:apps/v1:DaemonSet", "tenant-a-app", {"metadata": {"labels": {"gpu-tenancy.io/component": "app"}}},
     "tenant"),
])
def test_each_resource_is_in_the_layer_the_promotion_docs_put_it(
    typ: str, name: str, inputs: dict[str, Any], layer: str
) -> None:
    from gpu_tenancy.cli.promotion.layers import Record, layer_of

    assert layer_of(Record(typ, name, inputs)) == layer


TCP_TYPE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
VAP_TYPE = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"


@pytest.mark.parametrize(("typ", "before", "after", "field"), [
    (TCP_TYPE, {"spec": {"kubernetes": {"kubelet": {"cgroupfs": "systemd"}, "version": "v1"}}},
     {"spec": {"kubernetes": {"kubelet": {"cgroupfs": "cgroupfs"}, "version": "v1"}}}, "spec.kubernetes.kubelet"),
    (TCP_TYPE, {"spec": {"controlPlane": {"deployment": {"extraArgs": {"apiServer": ["--a"]}, "replicas": 1}}}},
     {"spec": {"controlPlane": {"deployment": {"extraArgs": {}, "replicas": 1}}}},
     "spec.controlPlane.deployment.extraArgs"),
    (VAP_TYPE, {"spec": {"variables": [{"name": "cudaControlMarker", "expression": "'T'"}, {"name": "x"}]}},
     {"spec": {"variables": [{"name": "cudaControlMarker", "expression": "''"}, {"name": "x"}]}},
     "spec.variables.@cudaControlMarker"),
    (RELEASE_TYPE, {"chart": "hami", "values": {"devicePlugin": {"enabled": False}, "global": {}}},
     {"chart": "hami", "values": {"devicePlugin": {"enabled": True}, "global": {}}}, "values.devicePlugin"),
    (RELEASE_TYPE, {"chart": "hami", "values": {"scheduler": {"extender": {"extraArgs": ["--t=30s"]}, "x": 1}}},
     {"chart": "hami", "values": {"scheduler": {"extender": {"extraArgs": []}, "x": 1}}},
     "values.scheduler.extender.extraArgs"),
])
def test_a_device_field_of_a_tenant_resource_is_a_device_change(
    typ: str, before: dict[str, Any], after: dict[str, Any], field: str
) -> None:
    from gpu_tenancy.cli.promotion.layers import Record, promotion_diff

    diff = promotion_diff([Record(typ, "tenant-a-x", before)], [Record(typ, "tenant-a-x", after)])
    assert diff.tenant == [] and diff.platform == []
    assert len(diff.device) == 1 and f": {field}" in diff.device[0]


@pytest.mark.parametrize(("typ", "before", "after", "field"), [
    (TCP_TYPE, {"spec": {"kubernetes": {"kubelet": {}, "version": "v1.35.0"}}},
     {"spec": {"kubernetes": {"kubelet": {}, "version": "v1.36.0"}}}, "spec.kubernetes.version"),
    (TCP_TYPE, {"spec": {"controlPlane": {"deployment": {"extraArgs": {}, "replicas": 1}}}},
     {"spec": {"controlPlane": {"deployment": {"extraArgs": {}, "replicas": 2}}}}, "spec.controlPlane.deployment.replicas"),
    (RELEASE_TYPE, {"chart": "hami", "values": {"devicePlugin": {}, "global": {"imageTag": "v2.10.0"}}},
     {"chart": "hami", "values": {"devicePlugin": {}, "global": {"imageTag": "v2.11.0"}}}, "values.global.imageTag"),
    (RELEASE_TYPE, {"chart": "hami", "values": {"scheduler": {"extender": {"extraArgs": [], "replicas": 1}}}},
     {"chart": "hami", "values": {"scheduler": {"extender": {"extraArgs": [], "replicas": 2}}}},
     "values.scheduler.extender.replicas"),
])
def test_the_field_beside_a_device_field_stays_in_the_tenant_layer(
    typ: str, before: dict[str, Any], after: dict[str, Any], field: str
) -> None:
    from gpu_tenancy.cli.promotion.layers import Record, promotion_diff

    diff = promotion_diff([Record(typ, "tenant-a-x", before)], [Record(typ, "tenant-a-x", after)])
    assert diff.device == [] and diff.platform == []
    assert len(diff.tenant) == 1 and f": {field}: " in diff.tenant[0]


# --------------------------------------------------------------------------- promotion: the marker variable, long values

GPU_ACCESS_VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
MARKER = {"name": "cudaControlMarker", "expression": "''"}


def _vap_diff(before: Any, after: Any) -> Any:
    from gpu_tenancy.cli.promotion.layers import Record, promotion_diff

    return promotion_diff([Record(GPU_ACCESS_VAP, "tenant-a-gpu-access", {"spec": {"variables": before}})],
                          [Record(GPU_ACCESS_VAP, "tenant-a-gpu-access", {"spec": {"variables": after}})])


def test_only_the_marker_variable_is_carved_out_and_the_others_stay_tenant_fields() -> None:
    # gpu_access.MARKER_VARIABLE is a device field (sim-nvml's value), the policy's other variables are not.
    other = {"name": "gpus", "expression": "1"}
    diff = _vap_diff([other, MARKER], [{**other, "expression": "2"}, {**MARKER, "expression": "'on'"}])
    assert diff.device == ["ValidatingAdmissionPolicy tenant-a-gpu-access: spec.variables.@cudaControlMarker.expression: "
                           "\"''\" -> \"'on'\""]
    assert diff.tenant == ["ValidatingAdmissionPolicy tenant-a-gpu-access: spec.variables: [{'name': 'gpus', "
                           "'expression': '1'}] -> [{'name': 'gpus', 'expression': '2'}]"]
    # Without the marker (sim, real): nothing to carve out, no crash.
    assert _vap_diff([other], [{**other, "expression": "2"}]).device == []
    # Variables that are no list (not what the API takes): compared whole, as a tenant field.
    diff = _vap_diff({"a": 1}, {"a": 2})
    assert (diff.device, diff.tenant) == ([], ["ValidatingAdmissionPolicy tenant-a-gpu-access: spec.variables.a: 1 -> 2"])


@pytest.mark.parametrize(("length", "shown"), [(78, None), (79, 77)])
def test_a_long_value_is_cut_at_eighty_characters(length: int, shown: int | None) -> None:
    from gpu_tenancy.cli.promotion.layers import Record, promotion_diff

    value = "x" * length  # its repr is two characters longer
    diff = promotion_diff([Record("gpu-tenancy:tenant:Tenant", "t", {"note": "a"})],
                          [Record("gpu-tenancy:tenant:Tenant", "t", {"note": value})])
    expected = repr(value) if shown is None else repr(value)[:shown] + "..."
    assert diff.tenant == [f"Tenant t: note: 'a' -> {expected}"]
