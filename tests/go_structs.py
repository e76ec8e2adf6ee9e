"""Field names and types of Go structs as encoding/json sees them, read from Go source.

Used to record (and re-check) the JSON shape of NVIDIA/k8s-test-infra's mock NVML configuration,
`pkg/gpu/mocknvml/engine/config_types.go`, which the mock decodes with sigs.k8s.io/yaml (YAML -> JSON ->
encoding/json): a field's name is its `json:"..."` tag, an embedded struct without a tag name has its
fields promoted (encoding/json typeFields), a field tagged `json:"-"` is skipped.
"""

from __future__ import annotations

import re

_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*(\w+)?\s*([\w\.\*\[\]]+)?\s*`json:\"([^\"]*)\"`", re.M)


def struct_fields(source: str) -> dict[str, dict[str, str]]:
    """{struct: {json name: Go type}}; an embedded struct appears as {"...": "<Type>"} to be promoted."""
    structs: dict[str, dict[str, str]] = {}
    for match in _STRUCT.finditer(source):
        fields: dict[str, str] = {}
        for line in match.group(2).splitlines():
            field = _FIELD.match(line)
            if not field:
                continue
            name, go_type, tag = field.group(1), field.group(2), field.group(3)
            json_name = tag.split(",", 1)[0]
            if json_name == "-":
                continue
            if go_type is None:  # embedded: `DeviceConfig `json:",inline"``
                go_type, name = name, None
            if name is None or (json_name == "" and go_type == name):
                fields["..."] = go_type or ""
            else:
                fields[json_name or name] = go_type or ""
        structs[match.group(1)] = fields
    return structs
