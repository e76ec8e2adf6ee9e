"""The fields a resource sets, as paths, and the ones the program itself sets on the types that can run code or
reach a host (allowed_fields.json): anything else on such a type is refused by name (`field-allowlist`).

A path names keys from the resource's inputs down to a value: `spec.template.spec.containers[].securityContext.
privileged`; a list's items share `[]`. Maps whose keys are data, not fields (labels, annotations, resource
quantities, a ConfigMap's data, a command's environment), end the path: their keys are no field of the type.
A value not known yet (a preview) ends it too: it is checked when it is known, before the step runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from pod_lib import POD_SPEC_PATHS, chart_name
from resource_lib import (
    COMMAND_TYPE,
    CONTAINER_TYPE,
    DATASTORE_TYPE,
    HELM_RELEASE_TYPE,
    REMOTE_COMMAND_TYPE,
    TCP_TYPE,
    Res,
    nearest_component,
)
from value_lib import is_unknown

ALLOWED_FIELDS = Path(__file__).with_name("allowed_fields.json")

# Keys whose value is a map keyed by data: its keys are not fields.
DATA_MAPS = frozenset(
    {
        "labels", "annotations", "matchLabels", "nodeSelector", "limits", "requests", "hard", "data",
        "stringData", "binaryData", "environment", "capacity",
    }
)
# Types that run code or reach a host beyond the pod-bearing kinds.
CODE_TYPES = frozenset(
    {TCP_TYPE, DATASTORE_TYPE, CONTAINER_TYPE, HELM_RELEASE_TYPE, COMMAND_TYPE, REMOTE_COMMAND_TYPE,
     "kubernetes:node.k8s.io/v1:RuntimeClass"}
)


def field_checked(res: Res) -> bool:
    """Whether a resource's fields are allow-listed: pod-bearing kinds, their *Patch kinds and CODE_TYPES."""
    if res.type in CODE_TYPES:
        return True
    if not res.is_kubernetes:
        return False
    kind = res.kind.removesuffix("Patch")
    return kind in POD_SPEC_PATHS


# Analyzers see a resource's inputs after its provider's Check (pulumi/pulumi pkg/resource/deploy/step_generator.go
# runs Check, then analyzeAll). A Terraform-bridged provider (pulumi-docker) fills in its schema's defaults there and
# names them in each object's `__defaults` (pulumi-terraform-bridge pkg/tfbridge/schema.go); the bridge computes
# that list itself, so a program cannot pass a field off as a default.
DEFAULTS_KEY = "__defaults"


def paths(value: Any, prefix: str = "") -> Iterator[str]:
    """Every field path in a property value (see the module docstring), but the provider's defaults."""
    if is_unknown(value):
        return
    if isinstance(value, dict):
        defaulted = {d for d in value.get(DEFAULTS_KEY) or [] if isinstance(d, str)}
        value = {k: v for k, v in value.items() if k != DEFAULTS_KEY and k not in defaulted}
        if not value:
            yield prefix
        for key, item in value.items():
            here = f"{prefix}.{key}" if prefix else str(key)
            if key in DATA_MAPS:
                yield here
            else:
                yield from paths(item, here)
    elif isinstance(value, list):
        if not value:
            yield prefix
        for item in value:
            yield from paths(item, f"{prefix}[]")
    else:
        yield prefix


def allowlist_key(res: Res) -> str:
    """Which allow-list a resource meets: the component that made it (its URN), its type, a release's chart."""
    key = f"{nearest_component(res.urn) or 'the stack'}|{res.type}"
    if res.type == HELM_RELEASE_TYPE:
        key += f"|{chart_name(res.props.get('chart')) or '?'}"
    return key


@cache
def allowed_fields() -> dict[str, frozenset[str]]:
    raw = json.loads(ALLOWED_FIELDS.read_text())
    return {key: frozenset(fields) for key, fields in raw.items()}


def unknown_fields(res: Res) -> list[str]:
    """The fields a code-running resource sets that the program does not set on its kind (sorted)."""
    allowed = allowed_fields().get(allowlist_key(res), frozenset())
    return sorted({path for path in paths(res.props) if path and path not in allowed})
