"""Pinning: control-plane versions, images and Helm charts are exact, so a preview shows every change.

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pod_lib import (
    REQUIRED_CHART_TAGS,
    cached_chart_problem,
    chart_name,
    containers,
    exact_kubernetes_version,
    helm_value_image_problems,
    image_problem,
    pod_spec,
)
from policy_common import MANDATORY, describe, policy_config
from pulumi_policy import (
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from resource_lib import (
    CONTAINER_TYPE,
    DOCKER_IMAGE_TYPE,
    HELM_TYPES,
    REMOTE_COMMAND_TYPE,
    REMOTE_IMAGE_TYPE,
    TCP_TYPE,
    Res,
    from_policy_resources,
    from_resource_args,
)
from tenancy_lib import ancestor_tenant, component_label, owner
from value_lib import as_list, dig, is_unknown, known_str

from gpu_tenancy.contract import chart_pins, versions
from gpu_tenancy.contract.image_pins import image_tag

# --------------------------------------------------------------------------- 4 tcp-version-pinned


def _worker_images(resources: list[Res]) -> dict[str, list[tuple[Res, str]]]:
    images: dict[str, list[tuple[Res, str]]] = defaultdict(list)
    for res in resources:
        tenant = ancestor_tenant(res)
        if not tenant:
            continue
        ref = None
        if res.type == REMOTE_IMAGE_TYPE:
            ref = known_str(res.props.get("name"))
        elif res.type == CONTAINER_TYPE and component_label(res) == "worker":
            image = known_str(res.props.get("image"))
            ref = image if image and not image.startswith("sha256:") else None
        elif res.type == REMOTE_COMMAND_TYPE:
            # A real GPU host is (re)prepared for the version it carries in its triggers.
            versions = [t for t in as_list(res.props.get("triggers")) if exact_kubernetes_version(t)]
            ref = f"kubelet:{versions[0]}" if versions else None
        if ref:
            images[tenant].append((res, ref))
    return images


def validate_tcp_version_pinned(args: StackValidationArgs, report: ReportViolation) -> None:
    resources = from_policy_resources(args.resources)
    worker_images = _worker_images(resources)
    for res in resources:
        if res.type != TCP_TYPE:
            continue
        version = dig(res.props, "spec", "kubernetes", "version")
        if is_unknown(version):
            continue
        tenant, _ = owner(res)
        name = dig(res.props, "metadata", "name")
        if not exact_kubernetes_version(version):
            report(
                f"TenantControlPlane {name!r} has spec.kubernetes.version {version!r}; pin an exact "
                "version like 'v1.35.5' (gpu-tenancy:versions.kubernetes).",
                res.urn,
            )
            continue
        for image_res, ref in worker_images.get(tenant or "", []):
            tag = image_tag(ref)
            if tag != version:
                what = f"host {image_res.name!r} is prepared for {tag}" if ref.startswith("kubelet:") else (
                    f"worker image {ref!r} ({image_res.name!r})"
                )
                report(
                    f"tenant {tenant!r}: {what}, which does not match its control plane version {version!r}; "
                    "the worker kubelet must run the control plane's version (workerImage / versions.kubernetes).",
                    image_res.urn,
                )


tcp_version_pinned = StackValidationPolicy(
    name="tcp-version-pinned",
    description=(
        "Every TenantControlPlane pins an exact Kubernetes version (vX.Y.Z) and its tenant's workers run the same "
        "version (kind workers: the kindest/node image tag; GPU hosts: the version they are prepared for)."
    ),
    validate=validate_tcp_version_pinned,
    enforcement_level=MANDATORY,
)


# --------------------------------------------------------------------------- 5 images-pinned


def validate_images_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    res = from_resource_args(args)
    found: list[tuple[str, Any]] = []
    spec = pod_spec(res)
    if spec is not None:
        for container in containers(spec):
            found.append((f"container {container.get('name')!r}", container.get("image")))
    elif res.type == REMOTE_IMAGE_TYPE:
        found.append(("name", res.props.get("name")))
    elif res.type == DOCKER_IMAGE_TYPE:
        found.append(("imageName", res.props.get("imageName")))
    elif res.type == CONTAINER_TYPE:
        found.append(("image", res.props.get("image")))
    elif res.type in HELM_TYPES:
        values = res.props.get("values")
        for path, problem in helm_value_image_problems(values):
            report(f"{describe(res)}: {path} {problem}; pin an exact release tag or a digest.", None)
        required = REQUIRED_CHART_TAGS.get(chart_name(res.props.get("chart")) or "")
        if required and dig(values, *required.split(".")) is None:  # unknown values dig to UNKNOWN, not None
            report(
                f"{describe(res)}: values.{required} is not set, so the chart runs its own default tag (a moving "
                "one); set an exact release tag.",
                None,
            )
        return
    for where, ref in found:
        if ref is None and spec is not None:
            report(f"{describe(res)}: {where} has no image.", None)
            continue
        why = image_problem(ref)
        if why:
            report(f"{describe(res)}: {where} image {ref!r} {why}; pin an exact release tag or a digest.", None)


images_pinned = ResourceValidationPolicy(
    name="images-pinned",
    description=(
        "Every container image is pinned to a digest or an exact release tag (vX.Y.Z, a date stamp or a content "
        "hash; never a moving tag such as latest or main, nor an empty one): pods in any workload, Docker images "
        "and containers, image tags in Helm values, and the tag of a chart whose own default moves (Kamaji)."
    ),
    validate=validate_images_pinned,
    enforcement_level=MANDATORY,
)


# --------------------------------------------------------------------------- 6 charts-pinned

_RANGE_CHARACTERS = set("^~*<>|= xX")
# Moving builds deployed knowingly (gpu_tenancy/contract/versions.py UNPINNED_CHARTS); any other one is refused.
DEFAULT_ACCEPTED_MOVING_BUILDS = sorted(chart_pins.chart_key(c, v) for c, v in versions.UNPINNED_CHARTS.items())


def validate_charts_pinned(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type not in HELM_TYPES:
        return
    res = from_resource_args(args)
    chart, version = res.props.get("chart"), res.props.get("version")
    repo = dig(res.props, "repositoryOpts", "repo")
    if is_unknown(chart) or is_unknown(version) or is_unknown(repo):
        return
    name = chart_name(chart) or chart  # a cached archive's path names its chart
    if not isinstance(version, str) or not version.strip():
        report(f"{describe(res)}: chart {name!r} has no version; set version= to an exact chart version.", None)
    elif any(ch in _RANGE_CHARACTERS for ch in version) or version.lower() in ("latest", "stable"):
        report(f"{describe(res)}: chart {name!r} version {version!r} is a range; pin an exact version.", None)
    elif (label := chart_pins.moving_build_label(version)) and isinstance(chart, str) and chart_pins.chart_key(
        str(name), version
    ) not in policy_config(args, "acceptMovingBuilds", DEFAULT_ACCEPTED_MOVING_BUILDS):
        report(
            f"{describe(res)}: chart {name!r} version {version!r} is a moving build ({label!r} is republished "
            "from a branch), not a pin; pin a released version.", None
        )
    is_url = isinstance(chart, str) and chart.startswith(("oci://", "https://", "http://"))
    if is_url or (isinstance(repo, str) and repo.strip()):
        return
    # No repository: Helm takes `chart` as a local path first (helm_release.go `locateChart`), so it must be an
    # archive of the chart cache, which `make charts` pulled from the chart's pinned repository and verified.
    problem = cached_chart_problem(chart, version)
    if problem:
        report(
            f"{describe(res)}: chart {chart!r} has no repository and {problem}; install it from the chart cache "
            "(components/charts.py cached_chart, filled by `make charts`).", None
        )


charts_pinned = ResourceValidationPolicy(
    name="charts-pinned",
    description=(
        "Every Helm chart names an exact version, not a range or a moving build such as 0.0.0+latest, and either "
        "its repository (repositoryOpts.repo or an oci:// URL) or an archive of the chart cache at that version "
        "(.charts/sha256-<hex>/<name>-<version>.tgz, pulled and verified by `make charts`) under the sha256 the "
        "project's .charts/lock.json records for it."
    ),
    validate=validate_charts_pinned,
    enforcement_level=MANDATORY,
    config_schema=PolicyConfigSchema(
        properties={
            "acceptMovingBuilds": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_ACCEPTED_MOVING_BUILDS,
                "description": "chart@version moving builds deployed knowingly (no pinnable release exists).",
            }
        }
    ),
)
