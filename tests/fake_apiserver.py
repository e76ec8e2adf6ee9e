"""A fake tenant API server serving recorded objects, for the status reader and `make status` tests.

It answers the three list calls the reader makes, as kube-apiserver v1.35 does over HTTP(S):
`GET /api/v1/nodes`, `/api/v1/pods`, `/api/v1/resourcequotas` return a `NodeList`/`PodList`/
`ResourceQuotaList` (`apiVersion: v1`, `metadata.resourceVersion`, `items` without their own kind, as
list responses carry them), in storage key order (`<namespace>/<name>`), paged when the request has
`limit`: `metadata.continue` and `remainingItemCount` while more remain, the next page for `continue`
(staging/src/k8s.io/apiserver/pkg/storage/continue.go `EncodeContinue`: unpadded URL-safe base64 of
`{"v":"meta.k8s.io/v1","rv":<rv>,"start":"<last key>\\u0000"}`; an unreadable token is 400 `BadRequest`).
`GET /version` is version.Info (`gitVersion` the tenant's Kubernetes version) and `GET /readyz` is `ok`
(200, text/plain) or, with `ready=False`, 500 listing the checks (`[-]etcd failed: reason withheld`,
`readyz check failed`), as the healthz handlers write it (staging/src/k8s.io/apiserver/pkg/server/healthz).
A request without the kubeconfig's bearer token or (with `tls=True`) a client certificate signed by the
tenant CA gets 401 with a `Status` body (`Unauthorized`). Anything else is 404 `Status`.
With `tls=True` it serves HTTPS with a certificate for 127.0.0.1 from its own CA, and
`admin_conf()` is a kubeconfig shaped like the admin.conf Kamaji stores for a tenant (CA data, client
certificate and key, no token).

The objects it serves are recorded under tests/fixtures/status/<mode>.json as HAMi v2.10.0 leaves them
(Project-HAMi/HAMi at tag v2.10.0):
- node `hami.io/node-nvidia-register`: in mode sim what the mock-GPU agent writes
  (`gpu_tenancy.hami.protocol.register_annotation`, golden in tests/golden/register-annotations.json); in mode real
  what the device plugin writes, pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go
  `getAPIDevices` + pkg/device/devices.go `MarshalNodeDevices`: Go `encoding/json` of `DeviceInfo` with
  `omitempty` (no `index`/`numa` when 0), devices in map order, NVML names (`NVIDIA L4`, prefixed
  `NVIDIA-` only when the name lacks it), memory in MiB as NVML reports it (an L4: 23034), mode `hami-core`;
- node `hami.io/node-handshake: Requesting_<time.DateTime>`: pkg/device/devices.go (the scheduler);
- pod `hami.io/vgpu-node`, `hami.io/vgpu-time`, `hami.io/vgpu-devices-allocated` and `-to-allocate`
  (`UUID,NVIDIA,<mem>,<cores>:` per device, `;` per container: pkg/device/devices.go
  `EncodePodSingleDevice`; memory of a `gpumem-percentage` request resolved as Fit does, devmem × pct / 100),
  `hami.io/bind-phase: success` and `hami.io/bind-time`: pkg/scheduler/scheduler.go Filter/Bind. In real
  mode the device plugin's Allocate leaves `-to-allocate` as `;;` (plugin/util.go `patchErasedAnnotation`
  re-encodes the decoded list, which has an empty trailing entry); in sim the agent leaves it as is;
- an unschedulable pod's PodScheduled condition: kube-scheduler's FitError message
  (`0/N nodes are available: <count> <HAMi Fit reason>. preemption: ...`) with the extender's per-node
  reason from pkg/device/common/common.go `GenReason` (`2/2 CardTypeMismatch`), shaped like the
  hami-scheduler message quoted in HAMi issue #1527;
- ResourceQuota `status.used`: only `requests.nvidia.com/gpu`, the one GPU key Kubernetes' quota controller
  tracks (pod evaluator: extended resources under `requests.`); HAMi counts `limits.nvidia.com/*` itself.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "status"
LISTS = {"/api/v1/nodes": ("NodeList", "nodes"), "/api/v1/pods": ("PodList", "pods"),
         "/api/v1/resourcequotas": ("ResourceQuotaList", "resourcequotas")}
RESOURCE_VERSION = "9001"
READYZ_CHECKS = ("ping", "log", "etcd", "etcd-readiness", "informer-sync", "poststarthook/start-apiserver-admission-initializer")


def _key(item: Mapping[str, Any]) -> str:
    meta = item.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}" if meta.get("namespace") else str(meta.get("name", ""))


def encode_continue(start: str) -> str:
    body = json.dumps({"v": "meta.k8s.io/v1", "rv": int(RESOURCE_VERSION), "start": start + "\x00"})
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def decode_continue(token: str) -> str:
    decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    if decoded.get("v") != "meta.k8s.io/v1" or not str(decoded.get("start", "")).endswith("\x00"):
        raise ValueError("continue key is not valid")
    return str(decoded["start"])[:-1]


def version_info(git_version: str) -> dict[str, str]:
    """k8s.io/apimachinery/pkg/version.Info as kube-apiserver serves it on /version."""
    major, minor = git_version.lstrip("v").split(".")[:2]
    return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
            "minCompatibilityMajor": major, "minCompatibilityMinor": str(int(minor) - 1),
            "gitVersion": git_version, "gitCommit": "0" * 40, "gitTreeState": "clean",
            "buildDate": "2026-11-12T00:00:00Z", "goVersion": "go1.25.4", "compiler": "gc",
            "platform": "linux/amd64"}


def recorded(mode: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """tenant -> {"nodes", "pods", "resourcequotas"} as recorded for mode sim or real."""
    data: dict[str, dict[str, list[dict[str, Any]]]] = json.loads((FIXTURES / f"{mode}.json").read_text())
    return data


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, common_name)])


class TenantPki:
    """A tenant CA issuing the API server's serving certificate and an admin client certificate,
    as kubeadm's CA does for kube-apiserver and admin.conf (`kubernetes-admin`, `kubeadm:cluster-admins`)."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = self._builder(_name("kubernetes"), self.key).add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(self.key, hashes.SHA256())
        self.serial = 1

    def _builder(self, subject: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        issuer = subject if not hasattr(self, "cert") else self.cert.subject
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1)))

    @property
    def ca_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, subject: x509.Name, server_ip: str | None = None) -> tuple[bytes, bytes]:
        """(certificate PEM, key PEM): a serving certificate for `server_ip`, else a client certificate."""
        key = ec.generate_private_key(ec.SECP256R1())
        builder = self._builder(subject, key)
        if server_ip is not None:
            san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(server_ip))])
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return cert.public_bytes(serialization.Encoding.PEM), key_pem


ADMIN = x509.Name([x509.NameAttribute(x509.oid.NameOID.ORGANIZATION_NAME, "kubeadm:cluster-admins"),
                   x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "kubernetes-admin")])


class FakeTenant:
    """One tenant's API server on 127.0.0.1 (HTTP, or HTTPS with its own CA), with its token and objects."""

    def __init__(
        self, name: str, objects: Mapping[str, list[dict[str, Any]]], token: str | None = None, tls: bool = False,
        version: str = "v1.35.5", ready: bool = True,
    ) -> None:
        self.name = name
        self.objects = objects
        self.token = token or f"token-{name}"
        self.version = version
        self.ready = ready
        self.requests: list[str] = []
        self.queries: list[str] = []
        self._sorted: dict[str, list[dict[str, Any]]] = {}
        self._pages: dict[tuple[str, str, int], bytes] = {}
        tenant = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any] | bytes, content_type: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                tenant.requests.append(path)
                tenant.queries.append(query)
                peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
                if self.headers.get("Authorization") != f"Bearer {tenant.token}" and not peer:
                    self._send(401, _status(401, "Unauthorized", "Unauthorized"))
                    return
                if path == "/version":
                    self._send(200, version_info(tenant.version))
                    return
                if path == "/readyz":
                    if tenant.ready:
                        self._send(200, b"ok", "text/plain; charset=utf-8")
                    else:
                        lines = [f"[{'-' if c.startswith('etcd') else '+'}]{c} "
                                 f"{'failed: reason withheld' if c.startswith('etcd') else 'ok'}" for c in READYZ_CHECKS]
                        self._send(500, "\n".join([*lines, "readyz check failed", ""]).encode(),
                                   "text/plain; charset=utf-8")
                    return
                if path not in LISTS:
                    self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
                    return
                params = parse_qs(query)
                try:
                    start = decode_continue(params["continue"][0]) if "continue" in params else ""
                except (ValueError, binascii.Error):
                    self._send(400, _status(400, "BadRequest", "continue key is not valid"))
                    return
                limit = int(params.get("limit", ["0"])[0] or 0)
                self._send(200, tenant.page(path, start, limit))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.ca_pem: bytes | None = None
        self.client_cert: tuple[bytes, bytes] | None = None
        if tls:
            pki = TenantPki()
            self.ca_pem = pki.ca_pem
            self.client_cert = pki.issue(ADMIN)
            cert_pem, key_pem = pki.issue(_name("kube-apiserver"), server_ip="127.0.0.1")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            # Client certificates are optional (a token also authenticates), verified against the CA.
            context.verify_mode = ssl.CERT_OPTIONAL
            context.load_verify_locations(cadata=self.ca_pem.decode())
            with tempfile.TemporaryDirectory() as directory:
                cert_file, key_file = Path(directory) / "tls.crt", Path(directory) / "tls.key"
                cert_file.write_bytes(cert_pem)
                key_file.write_bytes(key_pem)
                context.load_cert_chain(cert_file, key_file)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def page(self, path: str, start: str, limit: int) -> bytes:
        """One list answer (all items when `limit` is 0), encoded once and kept: the same request gets the
        same bytes, so a benchmark measures the client, not this server's JSON encoding."""
        cached = self._pages.get((path, start, limit))
        if cached is not None:
            return cached
        kind, key = LISTS[path]
        if key not in self._sorted:
            self._sorted[key] = sorted(self.objects.get(key, []), key=_key)
        items = self._sorted[key]
        first = 0
        if start:
            first = next((i for i, item in enumerate(items) if _key(item) > start), len(items))
        chosen = items[first:first + limit] if limit else items[first:]
        metadata: dict[str, Any] = {"resourceVersion": RESOURCE_VERSION}
        rest = len(items) - first - len(chosen)
        if rest > 0:
            metadata["continue"] = encode_continue(_key(chosen[-1]))
            metadata["remainingItemCount"] = rest
        data = json.dumps({"kind": kind, "apiVersion": "v1", "metadata": metadata, "items": chosen}).encode()
        self._pages[(path, start, limit)] = data
        return data

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{'https' if self.ca_pem else 'http'}://{host!s}:{port}"

    def kubeconfig(self, token: str | None = None, ca_pem: bytes | None = None) -> str:
        return kubeconfig_for(self.name, self.url, token or self.token, ca_pem or self.ca_pem)

    def admin_conf(self) -> str:
        """Like Kamaji's admin.conf: CA data and the admin client certificate, no token."""
        assert self.ca_pem is not None and self.client_cert is not None, "admin_conf needs tls=True"
        return kubeconfig_for(self.name, self.url, None, self.ca_pem, self.client_cert)

    def start(self) -> FakeTenant:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def kubeconfig_for(
    name: str, server: str, token: str | None, ca_pem: bytes | None = None,
    client_cert: tuple[bytes, bytes] | None = None,
) -> str:
    cluster: dict[str, str] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    user: dict[str, str] = {}
    if token is not None:
        user["token"] = token
    if client_cert is not None:
        user["client-certificate-data"] = base64.b64encode(client_cert[0]).decode()
        user["client-key-data"] = base64.b64encode(client_cert[1]).decode()
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": cluster}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "admin"}}],
        "users": [{"name": "admin", "user": user}],
    })


def closed_port_url() -> str:
    """An address nothing listens on (a port bound then released)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    host, port = server.server_address[:2]
    server.server_close()
    return f"http://{host!s}:{port}"


@contextmanager
def fake_cluster(
    objects: Mapping[str, Mapping[str, list[dict[str, Any]]]], tls: bool = False
) -> Iterator[dict[str, FakeTenant]]:
    """One running FakeTenant per tenant in `objects`."""
    tenants = {name: FakeTenant(name, tenant_objects, tls=tls).start() for name, tenant_objects in objects.items()}
    try:
        yield tenants
    finally:
        for tenant in tenants.values():
            tenant.stop()
