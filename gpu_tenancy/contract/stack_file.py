"""A stack file (``Pulumi.<stack>.yaml``) validated as the program validates its config, for the tools that read the
file instead of asking Pulumi: the planner (`make plan`, `make promotion-diff`) and `make doctor`.

The program gets the same ``gpu-tenancy:*`` values from Pulumi and passes them to `load_config` (``__main__.py``
``read_config``), so a file is accepted or refused here with the words the program uses, prefixed by the file's
path. Two things the file cannot say are left to the program: a secret's value (``secure:`` values are
encrypted; one not set yet in a `real` stack is taken as set, so a pull request without secrets can be
planned), and which worker names resolve to the same machine (the program asks DNS).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpu_tenancy.contract.config import NAMESPACE, SECRET_KEYS, ConfigError, load_config
from gpu_tenancy.contract.device_layers import find_layer
from gpu_tenancy.contract.stack_config import StackConfig

# Stands for an encrypted value: never parsed, only present.
SECRET_PLACEHOLDER = "(a secret: not read from the stack file)"


def stack_file_values(path: str | Path) -> tuple[dict[str, Any], frozenset[str]]:
    """The file's ``gpu-tenancy:*`` values (without the namespace) and the keys stored as secrets."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read it ({error.__class__.__name__}: {error})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: config: is required (a Pulumi stack file has a top-level 'config')")
    raw: dict[str, Any] = {}
    secrets: set[str] = set()
    for key, value in config.items():
        if not isinstance(key, str) or not key.startswith(f"{NAMESPACE}:"):
            continue
        short = key.split(":", 1)[1]
        if isinstance(value, dict) and set(value) == {"secure"}:  # `pulumi config set --secret`
            secrets.add(short)
            value = SECRET_PLACEHOLDER
        raw[short] = value
    layer = find_layer(raw.get("mode"))
    # A layer on GPU hosts needs the credentials a stack file never shows (they are set as secrets).
    if layer is not None and not layer.simulated:
        for key in SECRET_KEYS:
            if key not in raw:
                raw[key] = SECRET_PLACEHOLDER
                secrets.add(key)
    return raw, frozenset(secrets)


def load_stack_file(path: str | Path) -> StackConfig:
    """The validated config of a stack file; ConfigError with one line, ``<path>: <key>: <problem>``."""
    raw, secrets = stack_file_values(path)
    try:
        return load_config(raw, secrets)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
