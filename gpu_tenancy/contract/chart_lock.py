"""The Helm charts a stack installs, pulled once into the project's chart cache and recorded in its lock.

`make charts` (run by `make up` and `make preview`; gpu_tenancy/cli/charts) pulls each chart a stack needs from its
pinned repository, checks the archive against the sha256 `digest` the repository's index.yaml publishes for that
version, and records it here:

    .charts/lock.json                                      what was pulled: repository, URL, sha256, when
    .charts/sha256-<hex>/<name>-<version>.tgz              the archive itself

The program installs from the archive (`cached_chart`): pulumi-kubernetes' `helm.sh/v3:Release` takes a local chart
path in `chart` and, without `repositoryOpts`, never contacts a repository (provider/pkg/provider/helm_release.go
`locateChart`: `localChart` first when `RepoURL` is empty), so a preview or an `up` needs no network. The path is
relative to the project directory, which is the provider's working directory (pulumi/pulumi `plugin.go`
`newPlugin`: `cmd.Dir = ctx.Pwd`), so it is the same on every checkout. The digest is part of the path because the
Release's Diff compares inputs only (a `checksum` input is deprecated and dropped): a changed archive at the same
path would change nothing, a changed path is an update of the release.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from gpu_tenancy.contract import versions
from gpu_tenancy.contract.stack_config import StackConfig

CACHE_DIR = ".charts"  # relative to the project directory (the one holding Pulumi.yaml)
LOCK_FILE = "lock.json"
PROJECT_DIR = Path(__file__).resolve().parents[2]
# The one repository each chart comes from (versions.py).
CHART_REPOSITORIES = {
    "cert-manager": versions.CERT_MANAGER_CHART_REPO,
    "hami": versions.HAMI_CHART_REPO,
    "kamaji": versions.KAMAJI_CHART_REPO,
    "kamaji-etcd": versions.KAMAJI_CHART_REPO,
    "metallb": versions.METALLB_CHART_REPO,
}
# `.charts/sha256-<hex>/<name>-<version>.tgz`, exactly as `archive_path` writes it.
CACHE_PATH = re.compile(
    r"^\.charts/sha256-(?P<sha256>[0-9a-f]{64})/(?P<file>[a-z0-9][a-z0-9-]*-v?[0-9][0-9A-Za-z.+-]*\.tgz)$"
)

Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Text = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]


class ChartCacheError(Exception):
    """A chart is not in the cache as locked: one line naming the chart (or the lock key) and the fix."""


class ChartRef(BaseModel):
    """A chart a stack installs: its name, pinned version and repository."""

    model_config = ConfigDict(frozen=True)
    name: str
    version: str
    repo: str

    def __str__(self) -> str:
        return f"chart {self.name} {self.version} from {self.repo}"


class LockedChart(BaseModel):
    """One pulled chart, as recorded in the lock."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    name: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    version: Text
    repo: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]
    url: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]
    sha256: Sha256
    # What the archive's Chart.yaml says, and when the repository says this build was published: for a moving
    # version (kamaji 0.0.0+latest) these name the build that was pulled.
    app_version: str = Field(default="", alias="appVersion")
    published: str = ""
    pulled_at: Text = Field(alias="pulledAt")

    @property
    def ref(self) -> ChartRef:
        return ChartRef(name=self.name, version=self.version, repo=self.repo)


class ChartLock(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    charts: list[LockedChart] = Field(default_factory=list)

    def find(self, ref: ChartRef) -> LockedChart | None:
        return next((c for c in self.charts if c.ref == ref), None)

    def with_entry(self, entry: LockedChart) -> ChartLock:
        kept = [c for c in self.charts if c.ref != entry.ref]
        return ChartLock(charts=sorted([*kept, entry], key=lambda c: (c.name, c.version, c.repo)))


def lock_path(root: Path) -> Path:
    return root / CACHE_DIR / LOCK_FILE


def archive_path(name: str, version: str, sha256: str) -> PurePosixPath:
    """Where an archive lives, relative to the project directory (the name `helm package` gives it)."""
    return PurePosixPath(CACHE_DIR, f"sha256-{sha256}", f"{name}-{version}.tgz")


def load_lock(root: Path) -> ChartLock:
    """The lock, or an empty one if there is none yet; ChartCacheError naming the key of a bad file."""
    path = lock_path(root)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ChartLock()
    except (OSError, UnicodeDecodeError) as error:
        raise ChartCacheError(f"{path}: cannot read it ({error.__class__.__name__}); remove it and run "
                              "`make charts` to pull and record the charts again") from None
    try:
        return ChartLock.model_validate(json.loads(text))
    except json.JSONDecodeError as error:
        raise ChartCacheError(f"{path}: not valid JSON ({error.msg}, line {error.lineno}); restore it, or remove "
                              "it and run `make charts` to pull and record the charts again") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ChartCacheError(f"{path}: {where}: {first['msg']}; restore the file, or remove it and run "
                              "`make charts` to pull and record the charts again") from None


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cached_archive_ok(root: Path, entry: LockedChart) -> bool:
    """Whether the archive the lock records is in the cache with its recorded sha256."""
    path = root / archive_path(entry.name, entry.version, entry.sha256)
    return path.is_file() and file_sha256(path) == entry.sha256


def cached_chart(ref: ChartRef, stack: str, root: Path | None = None) -> str:
    """The chart path the program passes to a Release: the locked archive, checked against its sha256."""
    root = PROJECT_DIR if root is None else root
    fix = f"run `make charts STACK={stack}` (`make up` runs it)"
    entry = load_lock(root).find(ref)
    if entry is None:
        raise ChartCacheError(f"{ref}: not in the chart cache ({CACHE_DIR}/{LOCK_FILE}); {fix}")
    relative = archive_path(entry.name, entry.version, entry.sha256)
    if not cached_archive_ok(root, entry):
        raise ChartCacheError(f"{ref}: {relative} is missing or does not have the sha256 the lock records; {fix}")
    return str(relative)


def stack_charts(config: StackConfig) -> list[ChartRef]:
    """Every chart the program installs for this stack (components/), at the stack's versions."""
    wanted = [("cert-manager", config.versions.cert_manager), ("kamaji", config.versions.kamaji_chart),
              ("hami", config.versions.hami)]
    if config.metallb_enabled:
        wanted.append(("metallb", config.versions.metallb))
    if any(tenant.data_store == "dedicated" for tenant in config.tenants):
        wanted.append(("kamaji-etcd", versions.KAMAJI_ETCD_CHART_VERSION))
    return [ChartRef(name=name, version=version, repo=CHART_REPOSITORIES[name]) for name, version in wanted]


def chart_name(chart: object) -> object:
    """The chart a Release installs: its name for an archive of the cache, else `chart` as it is."""
    match = CACHE_PATH.fullmatch(chart) if isinstance(chart, str) else None
    if match is None:
        return chart
    return re.sub(r"-v?[0-9][0-9A-Za-z.+-]*\.tgz$", "", match.group("file"))


def cache_path_problem(chart: object, name: str | None, version: object) -> str | None:
    """Why `chart` is not an archive of the chart cache for chart `name` at `version`, or None (the policy pack's
    check of a Release's `chart`: the program's digest check happens when it runs, see `cached_chart`)."""
    if not isinstance(chart, str):
        return "is not a path in the chart cache"
    match = CACHE_PATH.fullmatch(chart)
    if match is None:
        return f"is not a path in the chart cache ({CACHE_DIR}/sha256-<hex>/<name>-<version>.tgz)"
    if name not in CHART_REPOSITORIES or not isinstance(version, str) or (
        match.group("file") != f"{name}-{version}.tgz"
    ):
        return f"is not the cached archive of a pinned chart at version {version!r}"
    return None


def locked_archive_problem(chart: str, name: str, version: str, root: Path, stack: str) -> str | None:
    """Why `chart`, a path `cache_path_problem` accepts, is not the archive the lock under `root` records for chart
    `name` at `version`, or None (the policy pack's check): the path's digest must be the locked sha256 and, where
    the archive is there, so must the file's. No lock, an unreadable one or no entry fails closed."""
    fix = f"run `make charts STACK={stack}`"
    path = lock_path(root)
    if not path.is_file():
        return f"cannot be checked: there is no chart lock at {path}; {fix}"
    try:
        entry = load_lock(root).find(ChartRef(name=name, version=version, repo=CHART_REPOSITORIES[name]))
    except ChartCacheError as error:
        return f"cannot be checked against the chart lock: {error} (`make charts STACK={stack}`)"
    if entry is None:
        return f"is not in the chart lock {path} (no {name} {version} from {CHART_REPOSITORIES[name]}); {fix}"
    if chart != str(archive_path(name, version, entry.sha256)):
        return f"is not the archive the chart lock {path} records for {name} {version} (sha256 {entry.sha256}); {fix}"
    archive = root / chart
    try:
        digest = file_sha256(archive) if archive.is_file() else entry.sha256
    except OSError as error:
        return f"cannot be read to check its sha256 ({error.__class__.__name__}); {fix}"
    if digest != entry.sha256:
        return f"does not have the sha256 the chart lock records for {name} {version} ({entry.sha256}); {fix}"
    return None
