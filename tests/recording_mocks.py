"""Pulumi mocks that record every registration and echo its inputs as outputs, for a component tested alone."""

from __future__ import annotations

from typing import Any

import pulumi


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        outputs = dict(args.inputs)
        if args.typ == "docker:index/image:Image":
            outputs.setdefault("repoDigest", "sha256:0")  # what pulumi-docker reports once the image is built
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None
