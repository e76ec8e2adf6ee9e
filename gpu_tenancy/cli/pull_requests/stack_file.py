"""A pull request's stack file, taken as data into a checkout of the default branch.

The previews against a deployed stack run the default branch's program and policy pack on a self-hosted runner
(.github/workflows/preview-deployed.yml). What they take from the pull request is its ``Pulumi.<stack>.yaml``,
and only its ``config:`` mapping: the program validates those values as it would any stack file's. Everything
else a stack file can say (pulumi/pulumi sdk/go/common/workspace/project.go ``ProjectStack``: secretsprovider,
encryptedkey, encryptionsalt, environment) chooses how secrets are decrypted or which environment is imported:
a pull request that changes any of it is refused, never previewed with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TAKEN = "config"
# Keys that must be as the default branch has them (absent there: absent here).
KEPT = ("secretsprovider", "encryptedkey", "encryptionsalt", "environment")


class StackFileRefused(ValueError):
    """The pull request's stack file says something the deployed-state preview does not take from it."""


def _mapping(text: str, where: str) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise StackFileRefused(f"{where}: not YAML ({error.__class__.__name__}); fix the file") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise StackFileRefused(f"{where}: a stack file is a mapping, got {type(loaded).__name__}")
    return loaded


def take_config(pull_request_text: str, base_text: str, where: str = "the pull request's stack file") -> str:
    """The base stack file with its ``config:`` replaced by the pull request's, or StackFileRefused."""
    theirs, ours = _mapping(pull_request_text, where), _mapping(base_text, "the default branch's stack file")
    unknown = sorted(set(theirs) - {TAKEN, *KEPT})
    if unknown:
        raise StackFileRefused(f"{where}: unknown top-level key(s) {unknown}: a stack file holds only "
                               f"{[TAKEN, *KEPT]}; remove them")
    changed = [key for key in KEPT if theirs.get(key) != ours.get(key)]
    if changed:
        raise StackFileRefused(f"{where}: {changed} differ(s) from the default branch: the deployed-state preview "
                               "takes only `config:`; change them in a pull request of their own")
    config = theirs.get(TAKEN, {})
    if not isinstance(config, dict):
        raise StackFileRefused(f"{where}: `config:` must be a mapping, got {type(config).__name__}")
    merged = {**ours, TAKEN: config}
    return yaml.safe_dump(merged, sort_keys=False)


def take_config_file(pull_request_file: Path, base_file: Path) -> None:
    if not pull_request_file.is_file():
        raise StackFileRefused(f"{pull_request_file}: the pull request has no such stack file; nothing to preview")
    text = take_config(pull_request_file.read_text(encoding="utf-8"), base_file.read_text(encoding="utf-8"),
                       where=str(pull_request_file))
    base_file.write_text(text, encoding="utf-8")
