"""The stack file's keys as the config models accept them, and each field's type and default as the page shows them.

Read from the JSON schema pydantic generates for the models (`model_json_schema`: types, bounds, aliases, required
fields, defaults), so the page cannot drift from what `load_config` accepts.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from gpu_tenancy.cli.config_reference.keys import NOT_SETTINGS, Key
from gpu_tenancy.contract import stack_config


class _FactoryDefaults(GenerateJsonSchema):
    """The schema with a `default_factory`'s value as the field's default (pydantic's hook for it)."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        return super().get_default_value(schema)


@functools.cache
def model_schema(model: type[BaseModel] = stack_config.StackConfig) -> JsonSchemaValue:
    return model.model_json_schema(schema_generator=_FactoryDefaults)


@dataclass(frozen=True)
class Setting:
    """One key: its property in the JSON schema (references left as `$ref`) and whether it is required."""

    schema: JsonSchemaValue
    required: bool


def _non_null(schema: JsonSchemaValue) -> JsonSchemaValue:
    """An optional field's schema without its `null` branch; a union of several types has no rendering."""
    branches = schema.get("anyOf")
    if branches is None:
        return schema
    kept = [branch for branch in branches if branch != {"type": "null"}]
    if len(kept) != 1:
        raise TypeError(f"no rendering for a union: {schema!r}")
    return {**{k: v for k, v in schema.items() if k != "anyOf"}, **kept[0]}


def _ref(schema: JsonSchemaValue) -> str | None:
    """The model a schema names (`#/$defs/<Model>`), if any."""
    ref = schema.get("$ref")
    return str(ref).rsplit("/", 1)[-1] if ref else None


def _range(low: int | None, high: int | None, unit: str = "") -> str:
    if low is None and high is None:
        return ""
    if high is None:
        return f", ≥ {low}{unit}"
    if low is None:
        return f", ≤ {high}{unit}"
    return f", {low}–{high}{unit}"


def _bounds(schema: JsonSchemaValue) -> tuple[int | None, int | None]:
    """An integer's inclusive bounds (an exclusive bound is one step further in)."""
    low = schema.get("minimum", None if "exclusiveMinimum" not in schema else schema["exclusiveMinimum"] + 1)
    high = schema.get("maximum", None if "exclusiveMaximum" not in schema else schema["exclusiveMaximum"] - 1)
    return low, high


def _scalar(schema: JsonSchemaValue) -> str:
    if "const" in schema or "enum" in schema:
        values = schema.get("enum", [schema.get("const")])
        return "one of " + ", ".join(f"`{value}`" for value in values)
    if schema.get("format") == "password" and schema.get("writeOnly"):  # SecretStr
        return "secret string"
    names = {"boolean": "boolean", "integer": "integer", "string": "string"}
    if schema.get("type") in names:
        return names[schema["type"]]
    raise TypeError(f"no rendering for {schema!r}")


def type_text(setting: Setting) -> str:
    """A field's type as the page shows it, with its bounds: `integer, 1–16`, `list of objects, 1–100`."""
    schema = _non_null(setting.schema)
    if _ref(schema):
        return "object"
    if schema.get("type") == "array":
        item = _non_null(schema["items"])
        what = "objects" if _ref(item) else f"{_scalar(item)}s"
        high = schema.get("maxItems")
        return f"list of {what}{_range(schema.get('minItems'), high, ' entries' if high else '')}"
    if schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict):
        key = _scalar(schema.get("propertyNames", {"type": "string"}))
        return f"map of {key} to {_scalar(_non_null(schema['additionalProperties']))}"
    text = _scalar(schema)
    if schema.get("type") == "integer":
        text += _range(*_bounds(schema))
    return text


def default_text(setting: Setting, key: Key) -> str:
    if key.default is not None:
        return key.default
    if setting.required:
        return "required"
    if "default" not in setting.schema:
        raise TypeError(f"no default in the schema: {setting.schema!r}")  # a factory that takes the data
    value = setting.schema["default"]
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict) and _ref(_non_null(setting.schema)):
        return "see below"
    if isinstance(value, list | dict):
        return f"`{value!r}`" if value else "none"
    return f"`{value}`"


def _child(schema: JsonSchemaValue) -> tuple[str | None, bool]:
    """(the model a field holds, itself or per list item, if any; whether in a list)."""
    branches = [branch for branch in schema.get("anyOf", [schema]) if branch != {"type": "null"}]
    if len(branches) != 1:
        return None, False
    schema = {**schema, **branches[0]}
    if schema.get("type") == "array":
        return _ref(schema.get("items", {})), True
    return _ref(schema), False


def model_keys(model: type[BaseModel] = stack_config.StackConfig, prefix: str = "") -> Iterator[tuple[str, Setting]]:
    """Every key the models accept, as a stack file spells it, depth first, each once (a model met again,
    such as a host's `gpus`, is the key itself without its children)."""
    root = model_schema(model)
    defs = root.get("$defs", {})
    seen: set[str] = set()

    def walk(current: JsonSchemaValue, name: str, path: str) -> Iterator[tuple[str, Setting]]:
        seen.add(name)
        required = set(current.get("required", ()))
        for field, schema in current.get("properties", {}).items():
            key = f"{path}{field}"
            yield key, Setting(schema, field in required)
            child, listed = _child(schema)
            if child is not None and child not in seen:
                yield from walk(defs[child], child, f"{key}[]." if listed else f"{key}.")

    yield from walk(root, str(root.get("title")), prefix)


def documented_keys() -> list[tuple[str, Setting]]:
    return [(key, setting) for key, setting in model_keys() if key not in NOT_SETTINGS]
