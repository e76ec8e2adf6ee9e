"""`make doctor`, what the Pulumi state says: the resources and pending operations of a `pulumi stack export`
deployment (pulumi sdk/go/common/apitype `DeploymentV3`: `resources` with `urn`, `type` and `inputs`;
`pending_operations` with `type` and `resource`). Pure functions over the exported JSON;
gpu_tenancy/cli/doctor/command.py runs the export.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

IMAGE_TYPE = "docker:index/image:Image"
# The sim-nvml mock NVML image, built by a command (components/nvml_mock_image.py) that names it in $IMAGE.
IMAGE_BUILD = "gpu-tenancy:nvml_mock_image:NvmlMockImage$command:local:Command::"


def urn_name(urn: str) -> str:
    """A resource's name: what follows the third `::` of `urn:pulumi:<stack>::<project>::<type>::<name>`, `::` in it
    too (pulumi sdk/go/common/resource/urn.go `URN.Name`)."""
    return urn.split("::", 3)[-1]


def state_resources(deployment: Mapping[str, Any]) -> list[tuple[str, object, dict[str, Any]]]:
    """(URN, type, inputs) of each resource of a `pulumi stack export` deployment (apitype ResourceV3); an entry
    without a URN names nothing that could be replaced or dropped, and is left out."""
    found = []
    for resource in deployment.get("resources") or []:
        urn = resource.get("urn") if isinstance(resource, dict) else None
        if isinstance(urn, str) and urn:
            inputs = resource.get("inputs")
            found.append((urn, resource.get("type"), inputs if isinstance(inputs, dict) else {}))
    return found


def built_images(deployment: Mapping[str, Any]) -> dict[str, str]:
    """URN -> image name of what the stack built into the local Docker (no registry holds it)."""
    images = {}
    for urn, kind, inputs in state_resources(deployment):
        if kind == IMAGE_TYPE and inputs.get("imageName"):
            images[urn] = str(inputs["imageName"])
        elif IMAGE_BUILD in urn and isinstance(inputs.get("environment"), dict) and inputs["environment"].get("IMAGE"):
            images[urn] = str(inputs["environment"]["IMAGE"])
    return images


def image_loads(deployment: Mapping[str, Any]) -> dict[str, str]:
    """Name -> URN of the commands that load an image into a worker's containerd."""
    return {urn_name(urn): urn for urn, _, _ in state_resources(deployment) if urn.endswith("-image-load")}


def pending_operations(deployment: Mapping[str, Any]) -> list[dict[str, str]]:
    """What an interrupted `up` left unfinished (`pulumi stack export`: deployment.pending_operations), with the
    names a recovery needs (a container's name, a Helm release's namespace and name: top-level inputs of both)."""
    pending = []
    for operation in deployment.get("pending_operations") or []:
        resource = operation.get("resource") or {}
        inputs = resource.get("inputs") or {}
        pending.append({
            "name": urn_name(str(resource.get("urn") or "?")),
            "type": str(resource.get("type") or "?"),
            "op": str(operation.get("type") or "?"),
            "object": str(inputs.get("name") or ""),
            "namespace": str(inputs.get("namespace") or ""),
        })
    return pending
