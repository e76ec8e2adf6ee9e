"""gpu_tenancy/cli/status/kube.py's probes and its one-line reasons, against an API server scripted per path.

What the scripted server answers follows kube-apiserver: `/version` a JSON version.Info (k8s.io/apimachinery
pkg/version/types.go `Info`), `/readyz` 200 "ok" or 500 with one `[-]<check> failed` line per failing check
(k8s.io/apiserver pkg/server/healthz/healthz.go `handleRootHealth`), a refused token 401/403 with a body.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import urllib3
from fake_apiserver import kubeconfig_for
from kubernetes.client.exceptions import ApiException

from gpu_tenancy.cli.status import kube

VERSION = json.dumps({"major": "1", "minor": "35", "gitVersion": "v1.35.5"}).encode()
EMPTY_LIST = json.dumps({"kind": "List", "items": [], "metadata": {}}).encode()


class Scripted:
    """Answers each path as scripted: (status, body, seconds to wait first); every list is empty."""

    def __init__(self, script: dict[str, tuple[int, bytes, float]]) -> None:
        answers = {"/version": (200, VERSION, 0.0), "/readyz": (200, b"ok", 0.0), **script}
        self.closing = threading.Event()  # set at teardown: a held answer is then dropped, not written late
        closing = self.closing

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.partition("?")[0]
                code, body, wait = answers.get(path, (200, EMPTY_LIST, 0.0))
                if wait and closing.wait(wait):
                    return
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def read(self, probes: bool = True) -> Any:
        return kube.read_tenant(kubeconfig_for("t", self.url, "token-t"), probes=probes)


@pytest.fixture
def scripted() -> Iterator[list[Scripted]]:
    started: list[Scripted] = []
    yield started
    for server in started:
        server.closing.set()
        server.server.shutdown()
        server.server.server_close()


def serve(started: list[Scripted], **script: tuple[int, bytes, float]) -> Scripted:
    server = Scripted({f"/{path}": answer for path, answer in script.items()})
    started.append(server)
    return server


def test_version_and_readiness_as_the_api_server_answers(scripted: list[Scripted]) -> None:
    read = serve(scripted).read()
    assert (read.version, read.readyz) == ("v1.35.5", "ok")
    no_git_version = serve(scripted, version=(200, json.dumps({"major": "1"}).encode(), 0.0)).read()
    assert no_git_version.version == "?"


def test_a_version_refused_is_its_status_and_body_cut_to_80(scripted: list[Scripted]) -> None:
    body = b"forbidden: " + b"x" * 100
    server = serve(scripted, version=(403, body, 0.0))
    with pytest.raises(kube.TenantUnreachable) as refused:
        server.read()
    assert str(refused.value) == f"cannot read {server.url}: HTTP 403 {body[:80].decode()}"
    silent = serve(scripted, version=(403, b"", 0.0))
    with pytest.raises(kube.TenantUnreachable) as empty:
        silent.read()
    assert str(empty.value) == f"cannot read {silent.url}: HTTP 403 no answer"


def test_not_ready_names_the_failing_checks_or_the_answer_cut_to_80(scripted: list[Scripted]) -> None:
    checks = b"[+]ping ok\n[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\n" \
             b"readyz check failed\n"
    assert serve(scripted, readyz=(500, checks, 0.0)).read().readyz == "not ready: etcd, etcd-readiness"
    prose = "the  server\nis " + "y" * 100
    expected = "not ready: HTTP 503 " + " ".join(prose.split())[:80]
    assert serve(scripted, readyz=(503, prose.encode(), 0.0)).read().readyz == expected
    # A byte that is no UTF-8 is replaced, not a failure to read the tenant.
    assert serve(scripted, readyz=(500, b"[-]etcd failed \xff\n", 0.0)).read().readyz == "not ready: etcd"


@pytest.mark.parametrize("path", ["version", "readyz"])
def test_a_probe_that_never_answers_times_out(scripted: list[Scripted], monkeypatch: pytest.MonkeyPatch,
                                              path: str) -> None:
    monkeypatch.setattr(kube, "READ_TIMEOUT", 0.5)
    server = serve(scripted, **{path: (200, b"ok", 30.0)})
    started = time.monotonic()
    with pytest.raises(kube.TenantUnreachable, match="timed out"):
        server.read()
    assert time.monotonic() - started < 20  # long before the answer


def test_transport_errors_are_their_innermost_cause_in_one_line() -> None:
    wrapped = urllib3.exceptions.MaxRetryError(None, "/api/v1/nodes", reason=OSError("boom  at\nthe end"))  # type: ignore[arg-type]
    assert kube._reason(wrapped) == "boom at the end"
    # status 0: the client's wrapper of a transport error; its reason is the error
    assert kube._reason(ApiException(status=0, reason="SSLError(bad handshake)")) == "SSLError(bad handshake)"
    assert kube._reason(ApiException(status=0, reason="[Errno 111] Connection refused")) == "connection refused"
    assert kube._reason(OSError("z" * 200)) == "z" * 160
    assert kube._reason(OSError()) == "OSError"


def test_a_tenant_that_drops_the_connection_is_tried_once() -> None:
    """One attempt (configuration.retries = False): urllib3 would otherwise try a GET three times more, and one
    unreachable tenant must not hold up the others."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[int] = []

    def drop() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            connection.close()  # no answer at all

    threading.Thread(target=drop, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(kube.TenantUnreachable):
            kube.read_tenant(kubeconfig_for("t", url, "token-t"), probes=False)
    finally:
        listener.close()
    assert accepted == [1]
