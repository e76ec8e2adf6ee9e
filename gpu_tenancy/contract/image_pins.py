"""What counts as a pinned container image: a digest, or a tag that names exactly one release.

One rule for the stack config (gpu_tenancy.contract.config_fields) and the policy pack (`images-pinned`), so neither
accepts what the other refuses. A tag is a label a registry lets its owner move; only some are moved in
practice, so the rule accepts tag shapes that name one build and refuses the rest:

* exact releases with at least three numeric parts, optionally suffixed: `v1.35.5`, `26.8.2-edge`,
  `3.10.1`, `12.4.1-base-ubuntu22.04`;
* date stamps, optionally with a commit: `v20260528-9350166c` (kindnetd's scheme);
* content or commit hashes of 12+ hex digits (the images this program builds tag themselves so).

Refused: no tag, named channels (`latest`, `main`, `edge`, `stable`, ...), bare majors or
major.minor lines (`v1`, `3.11`: `python:3.11` moves with every patch release). Pin those by digest
(`repo:tag@sha256:...`), which is always accepted.
"""

from __future__ import annotations

import re

_EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(?:[.+_-][0-9A-Za-z][0-9A-Za-z.+_-]*)?$")
_DATE_STAMP = re.compile(r"^v?20\d{6}(?:-[0-9a-f]{7,40})?$")
_HASH = re.compile(r"^[0-9a-f]{12,64}$")
# Tags that registries move by convention; named so the error says why.
MOVING_TAGS = frozenset(
    {
        "latest", "main", "master", "edge", "stable", "nightly", "dev", "devel", "develop", "head", "canary",
        "beta", "alpha", "rc", "next", "current", "lts", "release", "unstable", "testing", "rolling",
    }
)


def image_tag(image: str) -> str:
    """The tag of an image reference (digest stripped); '' when it has none."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else ""


def has_digest(image: str) -> bool:
    return "@sha256:" in image


def tag_problem(tag: str) -> str | None:
    """Why a tag does not pin one release, or None."""
    if not tag.strip():
        return "is empty"
    if tag.lower() in MOVING_TAGS:
        return f"{tag!r} is a moving tag"
    if _EXACT_VERSION.fullmatch(tag) or _DATE_STAMP.fullmatch(tag) or _HASH.fullmatch(tag):
        return None
    return f"{tag!r} is not an exact release (use a vX.Y.Z tag or pin a digest @sha256:...)"


def image_problem(image: str) -> str | None:
    """Why an image reference is not pinned, or None. A digest always pins it."""
    if not image.strip():
        return "is empty"
    if has_digest(image):
        return None
    tag = image_tag(image)
    if not tag:
        return "has no tag"
    problem = tag_problem(tag)
    return f"tag {problem}" if problem else None
