"""Helpers shared by the policy groups: enforcement levels, per-stack config lookup, resource labels."""

from __future__ import annotations

from typing import Any

from pulumi_policy import EnforcementLevel
from resource_lib import Res

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY


def policy_config(args: Any, key: str, default: Any) -> Any:
    # pulumi_policy (policy.py `get_config`) hands each policy its config as a Mapping.
    value = (args.get_config() or {}).get(key)
    return default if value is None else value


def describe(res: Res) -> str:
    return f"{res.type} {res.name!r}"
