"""Stack configuration: the public contract, validated before any resource exists.

`load_config(raw)` takes the `gpu-tenancy:*` keys (without the namespace prefix, values already decoded
from YAML/JSON) and returns a `StackConfig` or raises `ConfigError` with one line that names the key and
the problem, e.g. ``gpu-tenancy:tenants[1].name: 'Tenant_B' is not a DNS-1123 label``.

The models are `stack_config.StackConfig` and its sections (`tenant_config`, `platform_config`, on the base
and field types of `config_fields`); the checks across keys, run after parsing, are in `config_checks`.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from gpu_tenancy.contract import addressing
from gpu_tenancy.contract.config_checks import Resolver, mode_errors
from gpu_tenancy.contract.platform_config import (
    ControlPlaneConfig,
    KindConfig,
    MetalLBConfig,
    VersionsConfig,
)
from gpu_tenancy.contract.stack_config import StackConfig
from gpu_tenancy.contract.tenant_config import (
    ContainerGpuRequest,
    GpuConfig,
    TenantConfig,
    WorkerHostConfig,
    WorkloadConfig,
)

NAMESPACE = "gpu-tenancy"
# Keys that hold credentials: they must be stored encrypted (`pulumi config set --secret`).
SECRET_KEYS = ("managementKubeconfig", "sshPrivateKey")


class ConfigError(ValueError):
    """Invalid stack configuration; the message is a single line naming the key."""


def _field_aliases() -> dict[str, str]:
    """Field name -> the key a stack file spells (pydantic reports a defaulted field by its name)."""
    models: list[type[BaseModel]] = [
        GpuConfig, ContainerGpuRequest, WorkloadConfig, WorkerHostConfig, TenantConfig, VersionsConfig,
        KindConfig, MetalLBConfig, ControlPlaneConfig, StackConfig,
    ]
    return {name: info.alias for model in models for name, info in model.model_fields.items() if info.alias}


def _known_keys() -> list[str]:
    """Every key a stack file may spell, at any level (the models' aliases, else their field names)."""
    models: list[type[BaseModel]] = [
        GpuConfig, ContainerGpuRequest, WorkloadConfig, WorkerHostConfig, TenantConfig, VersionsConfig,
        KindConfig, MetalLBConfig, ControlPlaneConfig, StackConfig,
    ]
    return sorted({info.alias or name for model in models for name, info in model.model_fields.items()})


def stack_key_location(location: tuple[int | str, ...]) -> tuple[int | str, ...]:
    aliases = _field_aliases()
    return tuple(aliases.get(part, part) if isinstance(part, str) else part for part in location)


def _format_location(location: tuple[int | str, ...]) -> str:
    key = f"{NAMESPACE}:{location[0]}" if location else NAMESPACE
    for part in location[1:]:
        key += f"[{part}]" if isinstance(part, int) else f".{part}"
    return key


def first_error_line(error: ValidationError, under: tuple[int | str, ...] = ()) -> str:
    """`gpu-tenancy:<key>: <problem>` for the error a user should fix first; `under` is where the validated value
    sits in the stack config (`("tenants",)` for a list of TenantConfig validated alone)."""
    # A misspelt key first where a key beside it is missing: the misspelling is why it is "required".
    errors = error.errors()
    missing = {tuple(d["loc"][:-1]) for d in errors if d["type"] == "missing"}
    detail = next((d for d in errors if d["type"] == "extra_forbidden" and tuple(d["loc"][:-1]) in missing), errors[0])
    location = stack_key_location((*under, *detail["loc"]))
    message = detail["msg"].removeprefix("Value error, ")
    if detail["type"] == "missing":
        message = "is required"
    elif detail["type"] == "extra_forbidden":
        message = "is not a known setting"
        near = difflib.get_close_matches(str(location[-1]), _known_keys(), n=1, cutoff=0.75) if location else []
        message += f" (did you mean {near[0]!r}?)" if near else ""
    elif location and location[0] in SECRET_KEYS:
        message = f"{message} (value not shown: it is a secret)"
    elif detail["type"].endswith("_type") or detail["type"] == "literal_error":
        message = f"{message} (got {detail.get('input')!r})"
    return f"{_format_location(location)}: {message}"


def load_config(
    raw: Mapping[str, Any], secret_keys: frozenset[str] = frozenset(), resolve: Resolver | None = None
) -> StackConfig:
    """Validate the stack's `gpu-tenancy:*` values; raise ConfigError with one line on failure.

    `secret_keys` are the keys (without namespace) the stack stores encrypted; a credential key
    outside it fails, so a kubeconfig or SSH key never sits in plain text in `Pulumi.<stack>.yaml`.
    `resolve` (the program passes `resolve_host`) maps worker addresses to IPs, to refuse one machine
    listed under two names.
    """
    for key in SECRET_KEYS:
        if key in raw and key not in secret_keys:
            raise ConfigError(
                f"{NAMESPACE}:{key}: must be a secret (pulumi config set --secret {NAMESPACE}:{key} ...)"
            )
    try:
        config = StackConfig.model_validate(dict(raw))
    except ValidationError as error:
        raise ConfigError(first_error_line(error)) from None
    errors = mode_errors(config, raw, resolve) or addressing.collisions(config.address_claims())
    if errors:
        key, problem = errors[0]
        raise ConfigError(f"{NAMESPACE}:{key}: {problem}")
    return config
