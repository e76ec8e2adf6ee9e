"""Which Helm chart versions are moving builds, republished under the same version from a branch.

Kamaji is the case at hand: CLASTIX publishes no versioned chart for its edge releases; CI publishes
`0.0.0+latest` to https://clastix.github.io/charts on every push to master (clastix/kamaji
`.github/workflows/helm.yaml` job `release`; `docs/content/reference/versioning.md`: "missing version
pinning of artefacts"), and the weekly edge release publishes images only (`.goreleaser.yaml`: `kos`).
Such a version names no fixed content, so it is not a pin even though it has no range characters.
"""

from __future__ import annotations

import re

# A SemVer pre-release or build metadata that is only one of these names a branch head, not a release.
# ("edge" and "dev" are not here: "26.8.2-edge" or "1.2.0-dev.3" name one build.)
MOVING_LABELS = frozenset({"latest", "nightly", "snapshot", "head", "main", "master", "trunk"})

_VERSION = re.compile(
    r"^v?(?P<core>\d+(?:\.\d+){0,2})(?:-(?P<pre>[0-9A-Za-z.-]+))?(?:\+(?P<build>[0-9A-Za-z.-]+))?$"
)


def moving_build_label(version: str) -> str | None:
    """Why `version` is a moving build ('latest' for '0.0.0+latest'), or None if it names one release.

    A pre-release or build identifier naming a branch head moves; so does any suffixed 0.0.0, which is a
    placeholder, not a release (Kamaji published `0.0.0+edge` before `0.0.0+latest`, clastix/kamaji #982).
    """
    match = _VERSION.match(version.strip())
    if not match:
        return None
    suffixes = [part for part in (match.group("pre"), match.group("build")) if part]
    for part in suffixes:
        if part.lower() in MOVING_LABELS:  # alone: "nightly.20260101" names one night's build
            return part
    if suffixes and match.group("core") in ("0", "0.0", "0.0.0"):
        return suffixes[-1]
    return None


def chart_key(chart: str, version: str) -> str:
    """How a chart version is named where it is accepted knowingly (`kamaji@0.0.0+latest`)."""
    return f"{chart.rsplit('/', 1)[-1]}@{version}"


def unpinned_warning(chart: str, version: str, image_tag: str, checked_commit: str) -> str:
    """One line for every preview and update while a moving chart is deployed."""
    return (
        f"chart {chart} {version} is NOT pinned: it is republished from a branch, so its templates and CRDs "
        f"can differ from image {image_tag}; this program was checked against the chart at commit "
        f"{checked_commit[:12]} (see docs/operations.md: The Kamaji chart is not pinned)"
    )
