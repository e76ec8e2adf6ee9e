"""Pull the charts a stack needs into the cache, each once, verified, and record them in the lock.

For each chart: if the lock records it and its archive is in the cache with the recorded sha256, nothing is
fetched. Otherwise the repository's index.yaml is read; once the lock records a chart, the lock decides: an index
whose digest for that version differs from the locked sha256 is refused (a moving build such as kamaji 0.0.0+latest
was republished, or a release was replaced), naming the command that takes the new build deliberately (`RELOCK`).
A chart the lock does not record yet, or one named in `relock`, is downloaded, checked against the index's digest
(repository.verify_archive) and recorded.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from pathlib import Path

from gpu_tenancy.cli.charts.repository import (
    MAX_ARCHIVE_BYTES,
    PullError,
    RepositoryIndex,
    download_url,
    find_version,
    index_url,
    parse_index,
    verify_archive,
)
from gpu_tenancy.contract.chart_lock import (
    ChartLock,
    ChartRef,
    LockedChart,
    archive_path,
    cached_archive_ok,
    load_lock,
    lock_path,
)

Fetch = Callable[[str], bytes]
TIMEOUT_SECONDS = 60


def write_lock(root: Path, lock: ChartLock) -> None:
    """Replace the lock atomically (a crash leaves the old one or the new one). Here, not in chart_lock, which the
    program loads: nothing it loads computes a fresh value (tests/test_second_run.py), a temporary name included."""
    path = lock_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(lock.model_dump(by_alias=True), indent=2) + "\n"
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".lock-", delete=False) as handle:
        handle.write(text)
    os.replace(handle.name, path)

def http_fetch(url: str) -> bytes:
    """GET `url` (the standard proxy variables apply); PullError naming the URL on any failure."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            data: bytes = response.read(MAX_ARCHIVE_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise PullError(f"cannot fetch {url}: {reason}; let this host reach it (the proxy variables apply), or copy "
                        ".charts/ from a checkout that has pulled this chart") from None
    if len(data) > MAX_ARCHIVE_BYTES:
        raise PullError(f"{url}: larger than {MAX_ARCHIVE_BYTES} bytes; refused")
    return data


def relock_command(stack: str, name: str) -> str:
    return f"make charts STACK={stack} RELOCK={name}"


def _store(root: Path, entry: LockedChart, data: bytes) -> None:
    target = root / archive_path(entry.name, entry.version, entry.sha256)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("wb", dir=target.parent, prefix=".part-", delete=False) as handle:
        handle.write(data)
    os.replace(handle.name, target)


def pull(
    root: Path,
    wanted: list[ChartRef],
    *,
    stack: str,
    fetch: Fetch = http_fetch,
    relock: Collection[str] = (),
    now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
) -> tuple[list[str], list[str]]:
    """(one line per chart pulled or kept, one line per problem); the lock keeps every chart that was pulled."""
    lock = load_lock(root)
    indexes: dict[str, RepositoryIndex] = {}
    done: list[str] = []
    problems: list[str] = []
    for ref in wanted:
        locked = lock.find(ref)
        if locked is not None and ref.name not in relock and cached_archive_ok(root, locked):
            done.append(f"charts: {ref.name} {ref.version} sha256 {locked.sha256[:12]} (cached, nothing fetched)")
            continue
        try:
            if ref.repo not in indexes:
                indexes[ref.repo] = parse_index(ref.repo, fetch(index_url(ref.repo)))
            entry = find_version(indexes[ref.repo], ref)
            digest = str(entry.digest).lower()
            if locked is not None and ref.name not in relock and digest != locked.sha256:
                raise PullError(
                    f"{ref}: the repository now publishes sha256 {digest[:12]}, the lock records "
                    f"{locked.sha256[:12]} (pulled {locked.pulled_at}); the chart changed upstream and was not "
                    f"taken. To take it deliberately: {relock_command(stack, ref.name)}"
                )
            url = download_url(ref, entry)
            data = fetch(url)
            metadata = verify_archive(ref, data, digest)
        except PullError as error:
            problems.append(f"problem: charts: {error}")
            continue
        pulled = LockedChart.model_validate({
            "name": ref.name, "version": ref.version, "repo": ref.repo, "url": url, "sha256": digest,
            "appVersion": metadata.app_version, "published": entry.created,
            "pulledAt": now().replace(microsecond=0).isoformat(),
        })
        _store(root, pulled, data)
        lock = lock.with_entry(pulled)
        write_lock(root, lock)
        was = f" (was {locked.sha256[:12]})" if locked is not None and locked.sha256 != digest else ""
        done.append(f"charts: {ref.name} {ref.version} sha256 {digest[:12]}{was} pulled from {url}")
    return done, problems

