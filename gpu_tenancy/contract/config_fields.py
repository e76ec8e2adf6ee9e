"""The base of every stack-config model and the field types the stack file's sections share.

A model refuses unknown keys and converts no types (`strict`), so a typo or a value of the wrong type fails
naming its key; a DNS-1123 name and a pinned image or tag are checked as they are parsed.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from gpu_tenancy.contract import image_pins

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _pinned(image: str) -> str:
    problem = image_pins.image_problem(image)
    if problem:
        raise ValueError(f"image {image!r} {problem}")
    return image


def _pinned_tag(tag: str) -> str:
    problem = image_pins.tag_problem(tag)
    if problem:
        # An empty tag lets the chart fall back to its own default: Kamaji's chart then runs `latest`.
        hint = "the chart would fall back to its own default tag" if not tag.strip() else "it can move"
        raise ValueError(f"tag {problem} ({hint}); set an exact release tag")
    return tag


def _dns1123(value: str) -> str:
    if len(value) > 63 or not DNS1123_LABEL.fullmatch(value):
        raise ValueError(f"{value!r} is not a DNS-1123 label (lower-case letters, digits, '-')")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns1123)]
PinnedImage = Annotated[str, AfterValidator(_pinned)]
PinnedTag = Annotated[str, AfterValidator(_pinned_tag)]


class ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, strict=True)
