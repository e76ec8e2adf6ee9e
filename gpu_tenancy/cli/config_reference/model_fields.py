"""The stack file's keys as the config models accept them, and each field's type and default as the page shows them.

Read from the pydantic models themselves (annotations, annotated_types bounds, defaults), so the page cannot
drift from what `load_config` accepts.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from typing import Any

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gpu_tenancy.cli.config_reference.keys import NOT_SETTINGS, Key
from gpu_tenancy.contract import stack_config


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without Annotated and None, whether None is allowed)."""
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = optional or len(args) < len(typing.get_args(annotation))
            annotation = args[0] if len(args) == 1 else annotation
            if len(args) != 1:
                return annotation, optional
        else:
            return annotation, optional


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (itself, or per list item), if any."""
    inner, _ = _unwrap(annotation)
    if typing.get_origin(inner) is list:
        inner, _ = _unwrap(typing.get_args(inner)[0])
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _bounds(metadata: list[Any]) -> tuple[int | None, int | None]:
    """An integer field's inclusive bounds from its annotated_types constraints."""
    low: int | None = None
    high: int | None = None
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            low = int(typing.cast(int, item.ge))
        elif isinstance(item, annotated_types.Gt):
            low = int(typing.cast(int, item.gt)) + 1
        elif isinstance(item, annotated_types.Le):
            high = int(typing.cast(int, item.le))
        elif isinstance(item, annotated_types.Lt):
            high = int(typing.cast(int, item.lt)) - 1
    return low, high


def _lengths(metadata: list[Any]) -> tuple[int | None, int | None]:
    low = next((m.min_length for m in metadata if isinstance(m, annotated_types.MinLen)), None)
    high = next((m.max_length for m in metadata if isinstance(m, annotated_types.MaxLen)), None)
    return low, high


def _range(low: int | None, high: int | None, unit: str = "") -> str:
    if low is None and high is None:
        return ""
    if high is None:
        return f", ≥ {low}{unit}"
    if low is None:
        return f", ≤ {high}{unit}"
    return f", {low}–{high}{unit}"


def _scalar(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(f"`{value}`" for value in typing.get_args(annotation))
    if annotation is SecretStr:
        return "secret string"
    names = {bool: "boolean", int: "integer", str: "string"}
    if annotation in names:
        return names[annotation]
    raise TypeError(f"no rendering for {annotation!r}")


def type_text(info: FieldInfo, section_anchor: str | None = None) -> str:
    """A field's type as the page shows it, with its bounds: `integer, 1–16`, `list of objects, 1–100`."""
    annotation, _ = _unwrap(info.annotation)
    origin = typing.get_origin(annotation)
    if origin is list:
        item, _ = _unwrap(typing.get_args(annotation)[0])
        what = "objects" if _model_of(item) else f"{_scalar(item)}s"
        low, high = _lengths(info.metadata)
        return f"list of {what}{_range(low, high, ' entries' if high else '')}"
    if origin is dict:
        key, value = (_scalar(_unwrap(a)[0]) for a in typing.get_args(annotation))
        return f"map of {key} to {value}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    text = _scalar(annotation)
    if annotation is int:
        text += _range(*_bounds(info.metadata))
    return text


def default_text(info: FieldInfo, key: Key) -> str:
    if key.default is not None:
        return key.default
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "see below"
        return f"`{value!r}`" if value else ("none" if isinstance(value, list | dict) else f"`{value}`")
    value = info.default
    if value is None or value is PydanticUndefined:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def model_keys(model: type[BaseModel] = stack_config.StackConfig, prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """Every key the models accept, as a stack file spells it, depth first, each once (a model met again,
    such as a host's `gpus`, is the key itself without its children)."""
    seen: set[type[BaseModel]] = set()

    def walk(current: type[BaseModel], path: str) -> Iterator[tuple[str, FieldInfo]]:
        seen.add(current)
        for name, info in current.model_fields.items():
            key = f"{path}{info.alias or name}"
            yield key, info
            child = _model_of(info.annotation)
            if child is not None and child not in seen:
                listed = typing.get_origin(_unwrap(info.annotation)[0]) is list
                yield from walk(child, f"{key}[]." if listed else f"{key}.")

    yield from walk(model, prefix)


def documented_keys() -> list[tuple[str, FieldInfo]]:
    return [(key, info) for key, info in model_keys() if key not in NOT_SETTINGS]
