"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok (nodes and pods without a kubelet), each a process of the binaries tests/realcp/build.py makes.

Every port is chosen free, every certificate made in Python (tests/realcp/pki.py), every wait bounded; `stop()`
ends every process and removes its data. What a process printed is kept in `<workdir>/<name>.log` and quoted in
the error when it does not come up.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realcp import pki

START_TIMEOUT = 120.0  # seconds; a cold kube-apiserver on a loaded 2-core machine took about 25 s here
SERVICE_CIDR = "10.96.0.0/16"
# The selector kwok manages nodes by: only nodes the tests register as fake, annotated so.
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


class StartError(Exception):
    """A component did not come up in time; the message quotes the end of its log."""


def wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0, interval: float = 0.3) -> Any:
    """Poll `check` until it returns something true, and return that; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class RealControlPlane:
    binaries: dict[str, Path]
    workdir: Path
    ca: pki.CertificateAuthority = field(default_factory=pki.CertificateAuthority)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    api_port: int = 0

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    # -- credentials -------------------------------------------------------------------------------------------

    def kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig with a client certificate for `user` in `groups`, signed by the cluster's CA."""
        name = "-".join([user.replace(":", "_"), *groups]).replace(":", "_")[:100]
        return pki.write_kubeconfig(self.workdir / f"kubeconfig-{name}", self.server, self.ca,
                                    self.ca.issue(user, groups), user)

    @property
    def admin_kubeconfig(self) -> Path:
        path = self.workdir / "kubeconfig-admin"
        if not path.is_file():
            pki.write_kubeconfig(path, self.server, self.ca, self.ca.issue("realcp-admin", ("system:masters",)),
                                 "realcp-admin")
        return path

    # -- raw HTTPS, for readiness before any client library is involved -----------------------------------------

    def _admin_ssl(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        admin = self.workdir / "admin-client"
        if not admin.with_suffix(".crt").is_file():
            issued = self.ca.issue("realcp-admin", ("system:masters",))
            admin.with_suffix(".crt").write_bytes(issued.cert_pem)
            admin.with_suffix(".key").write_bytes(issued.key_pem)
        context.load_cert_chain(admin.with_suffix(".crt"), admin.with_suffix(".key"))
        return context

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
        connection = http.client.HTTPSConnection("127.0.0.1", self.api_port, context=self._admin_ssl(),
                                                 timeout=timeout)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def get_json(self, path: str) -> Any:
        status, body = self.get(path)
        if status != 200:
            raise StartError(f"GET {path}: HTTP {status}: {body[:300]!r}")
        return json.loads(body)

    # -- processes -----------------------------------------------------------------------------------------------

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        """Start a process of the plane (stopped with it); `env` adds to the environment."""
        log = (self.workdir / f"{name}.log").open("wb")
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                cwd=self.workdir, start_new_session=True,
                                                env={**os.environ, **(env or {})})
        log.close()

    def wait(self, name: str, ready: Any, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            process = self.processes[name]
            if process.poll() is not None:
                raise StartError(f"{name} exited with {process.returncode}:\n{_log_tail(self.workdir / f'{name}.log')}")
            try:
                if ready():
                    return
            except (OSError, StartError, http.client.HTTPException) as error:
                last = str(error)
            time.sleep(0.5)
        raise StartError(f"{name} not ready after {timeout:.0f} s ({last}):\n{_log_tail(self.workdir / f'{name}.log')}")

    def _write(self, name: str, data: bytes) -> Path:
        path = self.workdir / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def start(self) -> RealControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        bins = {name: str(path) for name, path in self.binaries.items()}
        etcd_client, etcd_peer, self.api_port = free_port(), free_port(), free_port()

        self.spawn("etcd", [
            bins["etcd"], "--name=realcp", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_client}", f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=realcp=http://127.0.0.1:{etcd_peer}", "--log-level=warn",
            # A throwaway store: no fsync (etcd's own flag for tests).
            "--unsafe-no-fsync",
        ])

        def etcd_ready() -> bool:
            connection = http.client.HTTPConnection("127.0.0.1", etcd_client, timeout=5)
            try:
                connection.request("GET", "/health")
                return json.loads(connection.getresponse().read()).get("health") == "true"
            finally:
                connection.close()

        self.wait("etcd", etcd_ready)

        serving = self.ca.issue("kube-apiserver", server_ips=("127.0.0.1", "10.96.0.1"),
                                server_names=("localhost", "kubernetes", "kubernetes.default",
                                              "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
        sa_private, sa_public = pki.service_account_keys()
        ca_file = self._write("ca.crt", self.ca.cert_pem)
        self.spawn("kube-apiserver", [
            bins["kube-apiserver"], f"--etcd-servers=http://127.0.0.1:{etcd_client}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--tls-cert-file={self._write('apiserver.crt', serving.cert_pem)}",
            f"--tls-private-key-file={self._write('apiserver.key', serving.key_pem)}",
            f"--client-ca-file={ca_file}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self._write('sa.pub', sa_public)}",
            f"--service-account-signing-key-file={self._write('sa.key', sa_private)}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true", "--profiling=false",
            # MutatingAdmissionPolicy is GA and served as v1 in 1.36 (k8s.io/apiserver pkg/features); v1beta1, what
            # a 1.35 tenant serves, only when asked for.
            "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
        ])
        self.wait("kube-apiserver", lambda: self.get("/readyz")[0] == 200)

        admin = str(self.admin_kubeconfig)
        controller = self.kubeconfig("system:kube-controller-manager")
        self.spawn("kube-controller-manager", [
            bins["kube-controller-manager"], f"--kubeconfig={controller}", "--leader-elect=false", "--secure-port=0",
            f"--service-account-private-key-file={self.workdir / 'sa.key'}", f"--root-ca-file={ca_file}",
            "--use-service-account-credentials=true", f"--service-cluster-ip-range={SERVICE_CIDR}",
        ])
        scheduler = self.kubeconfig("system:kube-scheduler")
        self.spawn("kube-scheduler", [bins["kube-scheduler"], f"--kubeconfig={scheduler}", "--leader-elect=false",
                                       "--secure-port=0"])
        stages = subprocess.run([bins["kwok-default-stages"]], capture_output=True, check=True).stdout
        key, value = KWOK_NODE_ANNOTATION
        self.spawn("kwok", [
            bins["kwok"], f"--kubeconfig={admin}", f"--config={self._write('kwok-stages.yaml', stages)}",
            "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={key}={value}",
            f"--server-address=127.0.0.1:{free_port()}", "--node-ip=127.0.0.1",
        ])
        # The controller manager is ready for the tests once it has made the default namespace's service account
        # (pods are refused without it).
        self.wait("kube-controller-manager",
                   lambda: self.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200)
        return self

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=15)
        self.processes.clear()

    def alive(self) -> dict[str, bool]:
        return {name: process.poll() is None for name, process in self.processes.items()}


@contextlib.contextmanager
def running(binaries: dict[str, Path], workdir: Path) -> Iterator[RealControlPlane]:
    plane = RealControlPlane(binaries, workdir)
    try:
        yield plane.start()
    finally:
        plane.stop()
