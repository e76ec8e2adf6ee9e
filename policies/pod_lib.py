"""Pods and what they run: the pod spec of each workload kind and its containers, and whether the images,
Helm charts (and the image tags in their values) and Kubernetes versions they name pin one release.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from resource_lib import Res
from value_lib import as_list, dig, known_str

from gpu_tenancy.contract import chart_lock, image_pins

# --------------------------------------------------------------------------- pods and images

POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def pod_spec(res: Res) -> dict[str, Any] | None:
    if not res.is_kubernetes:
        return None
    # A server-side apply patch (`<Kind>Patch`) carries the same pod template as the kind it patches.
    path = POD_SPEC_PATHS.get(res.kind.removesuffix("Patch"))
    if path is None:
        return None
    spec = dig(res.props, *path)
    return spec if isinstance(spec, dict) else None


def containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        out.extend(c for c in as_list(spec.get(key)) if isinstance(c, dict))
    return out


def image_problem(ref: Any) -> str | None:
    """Why an image reference is not pinned (gpu_tenancy.contract.image_pins), or None. Image IDs count as pinned."""
    if not isinstance(ref, str):  # nor UNKNOWN, which is no string
        return None
    if ref.startswith("sha256:"):
        return None  # an image ID (docker.Container.image from RemoteImage.image_id)
    return image_pins.image_problem(ref)


# Charts whose own default image tag moves, so the values must set one (chart -> dotted values path).
# Kamaji's chart has appVersion `latest` and `image.tag: ""` (charts/kamaji values.yaml, Chart.yaml).
REQUIRED_CHART_TAGS: dict[str, str] = {"kamaji": "image.tag"}


def helm_value_image_problems(values: Any, path: str = "values") -> Iterator[tuple[str, str]]:
    """(path, problem) for image references and tags in Helm values that do not pin one release."""
    if isinstance(values, dict):
        for key, value in values.items():
            here = f"{path}.{key}"
            if key in ("tag", "imageTag") and isinstance(value, str):
                problem = image_pins.tag_problem(value)
                if problem:
                    yield here, f"tag {problem}"
            elif key == "image" and isinstance(value, str):
                problem = image_problem(value)
                if problem:
                    yield here, f"image {value!r} {problem}"
            else:
                yield from helm_value_image_problems(value, here)
    elif isinstance(values, list):
        for index, value in enumerate(values):
            yield from helm_value_image_problems(value, f"{path}[{index}]")


# `helm package` names an archive `<name>-<version>.tgz` (helm pkg/chartutil/save.go `Save`). Helm parses the
# version loosely (Masterminds semver); a version of three numbers, as charts use, is recognised here.
_ARCHIVE_VERSION = re.compile(r"-v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")


def chart_name(chart: Any) -> str | None:
    """A Helm chart's name from `chart`: `name`, `repo/name`, an oci:// reference, or a packaged chart's path or
    URL (`.../name-1.2.3.tgz`)."""
    text = known_str(chart)
    if not text:
        return None
    last = text.rstrip("/").rpartition("/")[2]
    return _ARCHIVE_VERSION.sub("", last[: -len(".tgz")]) if last.endswith(".tgz") else last


# The chart lock `make charts` writes is in the project the pack belongs to (policies/ sits in it). A job that runs
# another checkout's pack (preview.yml: the base branch's) names the previewed project's directory here.
CHART_PROJECT_ENV = "GPU_TENANCY_CHART_PROJECT"


def chart_project() -> Path:
    return Path(os.environ.get(CHART_PROJECT_ENV) or Path(__file__).resolve().parent.parent).resolve()


def cached_chart_problem(chart: Any, version: Any) -> str | None:
    """Why a Release's `chart` is not the archive of the chart cache that the project's lock records for its chart at
    `version`, or None: the path's shape, then its digest (and the file's) against the lock."""
    name = chart_name(chart)
    problem = chart_lock.cache_path_problem(chart, name, version)
    if problem is not None or not isinstance(chart, str) or name is None or not isinstance(version, str):
        return problem or "is not a path in the chart cache"
    stack = os.environ.get("PULUMI_STACK") or "<stack>"  # the engine sets it for the pack (analyzer_plugin.go)
    return chart_lock.locked_archive_problem(chart, name, version, chart_project(), stack)


# --------------------------------------------------------------------------- Kubernetes versions

_KUBERNETES_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")


def exact_kubernetes_version(value: Any) -> bool:
    return isinstance(value, str) and bool(_KUBERNETES_VERSION.fullmatch(value))
