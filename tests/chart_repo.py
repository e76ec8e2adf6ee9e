"""A Helm chart repository for the tests, laid out as `helm package` and `helm repo index` lay one out, and a
project chart cache as `make charts` leaves one (the program's tests install from it).

Followed: helm v3 `pkg/chartutil/save.go` `Save` (the archive `<name>-<version>.tgz` holds `<name>/Chart.yaml` and
the dependencies under `<name>/charts/`), `pkg/repo/index.go` (`index.yaml`: `entries.<name>[]` with `version`,
`urls`, `created`, `digest` = the archive's sha256 in hex). Digests are computed here with hashlib, never by the
code under test.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import io
import json
import socket
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml


def chart_archive(name: str, version: str, *, app_version: str = "1.0", templates: str = "",
                  dependencies: tuple[str, ...] = (), packaged: bool = True, chart_name: str | None = None) -> bytes:
    """A packaged chart, byte for byte the same for the same arguments (fixed mtimes)."""
    metadata: dict[str, Any] = {"apiVersion": "v2", "name": chart_name or name, "version": version,
                                "appVersion": app_version}
    if dependencies:
        metadata["dependencies"] = [{"name": d, "version": "*", "repository": "https://x.test"} for d in dependencies]
    files = {f"{name}/Chart.yaml": yaml.safe_dump(metadata).encode(),
             f"{name}/templates/cm.yaml": templates.encode()}
    for dependency in dependencies if packaged else ():
        files[f"{name}/charts/{dependency}/Chart.yaml"] = yaml.safe_dump(
            {"apiVersion": "v2", "name": dependency, "version": "0.15.0"}).encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mtime = len(data), 0
            archive.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeRepository:
    """A directory served over HTTP on 127.0.0.1: `publish` adds an archive and rewrites index.yaml."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.directory = base / "charts"  # served as http://127.0.0.1:<port>/charts
        self.directory.mkdir(parents=True, exist_ok=True)
        self.entries: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[str] = []
        self.url = ""

    def publish(self, name: str, version: str, data: bytes, *, digest: str | None = None,
                url: str | None = None, created: str = "2026-12-01T10:00:00Z") -> str:
        file = f"{name}-{version}.tgz"
        (self.directory / file).write_bytes(data)
        entry = {"apiVersion": "v2", "name": name, "version": version, "created": created, "urls": [url or file],
                 "digest": sha256(data) if digest is None else digest, "appVersion": "1.0"}
        if digest == "":
            del entry["digest"]
        self.entries[name] = [e for e in self.entries.get(name, []) if e["version"] != version] + [entry]
        (self.directory / "index.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "entries": self.entries}))
        return sha256(data)

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        repository = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(repository.base), **kwargs)

            def log_message(self, *args: Any) -> None:
                repository.requests.append(self.path)

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}/charts"
        try:
            yield self.url
        finally:
            server.shutdown()
            server.server_close()


def closed_port_url() -> str:
    """An http URL nothing listens on: any fetch from it fails at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/charts"


def fill_cache(root: Path, name: str, version: str, repo: str, templates: str = "") -> str:
    """Put a chart into a project's cache and lock as `make charts` would; its path relative to `root`."""
    data = chart_archive(name, version, templates=templates)
    digest = sha256(data)
    relative = f".charts/sha256-{digest}/{name}-{version}.tgz"
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_bytes(data)
    lock_file = root / ".charts" / "lock.json"
    lock = json.loads(lock_file.read_text()) if lock_file.exists() else {"charts": []}
    lock["charts"] = [c for c in lock["charts"] if (c["name"], c["version"], c["repo"]) != (name, version, repo)]
    lock["charts"].append({"name": name, "version": version, "repo": repo, "url": f"{repo}/{name}-{version}.tgz",
                           "sha256": digest, "appVersion": "1.0", "published": "2026-12-01T10:00:00Z",
                           "pulledAt": "2026-12-06T06:00:00+00:00"})
    lock_file.write_text(json.dumps(lock))
    return relative
