"""A Helm chart repository as Helm reads one, and the checks an archive pulled from it must pass.

Read at helm v3 `pkg/repo/index.go` and `pkg/repo/chartrepo.go`: `<repo>/index.yaml` lists, per chart name, its
versions (`ChartVersion`: the Chart.yaml metadata plus `urls`, `created` and `digest`, the archive's sha256 in hex,
`provenance.DigestFile`); a relative URL is resolved against the repository URL with a trailing slash
(`ResolveReferenceURL`). `helm package` puts the chart under a top directory of its name (`<name>/Chart.yaml`) and its
dependencies under `<name>/charts/`, which Helm requires to be there before it installs (`action.CheckDependencies`,
called by pulumi-kubernetes' `checkChartDependencies`, which would otherwise need the network).
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from typing import Any
from urllib.parse import urljoin, urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from gpu_tenancy.contract.chart_lock import ChartRef

MAX_ARCHIVE_BYTES = 50 * 1024 * 1024  # the largest chart here is a few hundred KiB


class PullError(Exception):
    """A chart cannot be pulled as pinned: one line naming the chart and what to do."""


class IndexEntry(BaseModel):
    """One chart version in index.yaml (only what the pull reads; the rest is the chart's own metadata)."""

    model_config = ConfigDict(extra="ignore")
    version: str
    urls: list[str] = Field(min_length=1)
    digest: str | None = None
    created: str = ""
    app_version: str = Field(default="", alias="appVersion")


class RepositoryIndex(BaseModel):
    """The index's charts by name; only the pinned chart's entries are read (`find_version`), so an odd entry of
    another chart in the same repository does not stop the pull."""

    model_config = ConfigDict(extra="ignore")
    entries: dict[str, Any]


class Dependency(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    alias: str | None = None


class ChartMetadata(BaseModel):
    """The archive's Chart.yaml (only what the pull checks)."""

    model_config = ConfigDict(extra="ignore")
    name: str
    version: str
    app_version: str = Field(default="", alias="appVersion")
    dependencies: list[Dependency] = Field(default_factory=list)


_ENTRIES = TypeAdapter(list[IndexEntry])


def index_url(repo: str) -> str:
    return repo.rstrip("/") + "/index.yaml"


def _first_problem(error: ValidationError) -> str:
    first = error.errors()[0]
    return f"{'.'.join(str(part) for part in first['loc']) or '(top level)'}: {first['msg']}"


def parse_index(repo: str, text: bytes) -> RepositoryIndex:
    try:
        # A repository's index lists every version of every chart it serves (megabytes): libyaml when present.
        return RepositoryIndex.model_validate(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError as error:
        raise PullError(f"{index_url(repo)}: not valid YAML ({' '.join(str(error).split())[:120]})") from None
    except ValidationError as error:
        raise PullError(f"{index_url(repo)}: not a Helm repository index: {_first_problem(error)}") from None


def find_version(index: RepositoryIndex, ref: ChartRef) -> IndexEntry:
    """The index's entry for exactly the pinned version (no range: the pin is the version), with its sha256."""
    try:
        versions = _ENTRIES.validate_python(index.entries.get(ref.name, []))
    except ValidationError as error:
        raise PullError(f"{index_url(ref.repo)}: entries.{ref.name}: {_first_problem(error)}; refused") from None
    for entry in versions:
        if entry.version == ref.version:
            digest = (entry.digest or "").lower().removeprefix("sha256:")
            if not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise PullError(f"{ref}: the repository's index publishes no sha256 digest for it "
                                f"({entry.digest!r}), so a download cannot be verified; refused")
            return entry.model_copy(update={"digest": digest})
    have = ", ".join(e.version for e in versions[:5]) or "none"
    raise PullError(f"{ref}: the repository does not publish this version (newest listed: {have}); pin a published "
                    "version in gpu_tenancy/contract/versions.py or the stack's gpu-tenancy:versions")


def download_url(ref: ChartRef, entry: IndexEntry) -> str:
    url = urljoin(ref.repo.rstrip("/") + "/", entry.urls[0])
    if urlsplit(url).scheme not in ("https", "http"):
        raise PullError(f"{ref}: the index points at {url!r}, not an http(s) URL; refused")
    return url


def verify_archive(ref: ChartRef, data: bytes, expected_sha256: str) -> ChartMetadata:
    """The archive's Chart.yaml, once its sha256, its name, its version and its packaged dependencies are right."""
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256.lower():
        raise PullError(f"{ref}: the download has sha256 {actual}, the repository's index says {expected_sha256}; "
                        "refused (nothing was kept)")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            names = archive.getnames()
            member = archive.extractfile(f"{ref.name}/Chart.yaml")
            raw: Any = yaml.safe_load(member.read()) if member else None
    except (tarfile.TarError, KeyError, OSError, yaml.YAMLError) as error:
        raise PullError(f"{ref}: the archive has no readable {ref.name}/Chart.yaml ({error.__class__.__name__}); "
                        "refused") from None
    try:
        metadata = ChartMetadata.model_validate(raw)
    except ValidationError as error:
        raise PullError(f"{ref}: its Chart.yaml: {_first_problem(error)}; refused") from None
    if (metadata.name, metadata.version) != (ref.name, ref.version):
        raise PullError(f"{ref}: the archive holds chart {metadata.name} {metadata.version}; refused")
    for dependency in metadata.dependencies:
        packaged = f"{ref.name}/charts/{dependency.name}"
        if not any(n == packaged or n.startswith((packaged + "/", packaged + "-")) for n in names):
            raise PullError(f"{ref}: its dependency {dependency.name} is not packaged in the archive, so Helm would "
                            "fetch it at install time; refused")
    return metadata
