"""The policy pack's value helpers on their own: the unknown sentinel (policies/value_lib.py) and the stack config
as the engine hands it to the pack (policies/gpu_lib.py)."""

from __future__ import annotations

import policy_support  # noqa: F401  (puts policies/ on the import path, as the engine runs the pack from there)
import pytest
from gpu_lib import stack_config
from pod_lib import exact_kubernetes_version
from value_lib import UNKNOWN, is_unknown, plain, range_networks


def test_an_unknown_is_falsy_one_object_and_says_so() -> None:
    # Policy code writes `if value:` and must skip an unknown as it skips an absent value.
    assert not UNKNOWN and bool(UNKNOWN) is False
    assert type(UNKNOWN)() is UNKNOWN
    assert repr(UNKNOWN) == "<unknown>" and f"{[UNKNOWN]}" == "[<unknown>]"
    assert is_unknown(plain("04da6b54-80e4-46f7-96ec-b56ff0331ba9")) and not is_unknown("")


@pytest.mark.parametrize(("raw", "value"), [
    (None, None),  # no PULUMI_CONFIG: the pack runs outside a stack
    ("{not json", None),
    ('["gpu-tenancy:mode"]', None),  # not the engine's object of keys
    ('{"gpu-tenancy:mode": "real"}', "real"),  # a plain string, not JSON
    ('{"gpu-tenancy:tenants": "[{\\"name\\": \\"tenant-a\\"}]"}', [{"name": "tenant-a"}]),  # structured: JSON in a string
    ('{"other:mode": "real"}', None),
])
def test_the_stack_config_is_read_as_the_engine_hands_it_over(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, value: object
) -> None:
    key = "tenants" if "tenants" in (raw or "") else "mode"
    if raw is None:
        monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    else:
        monkeypatch.setenv("PULUMI_CONFIG", raw)
    assert stack_config(key) == value


@pytest.mark.parametrize(("entry", "networks"), [
    ("10.20.0.0/30", ["10.20.0.0/30"]),
    (" 10.20.0.5 ", ["10.20.0.5/32"]),
    ("10.20.0.240-10.20.0.250", ["10.20.0.240/29", "10.20.0.248/31", "10.20.0.250/32"]),
    ("10.20.0.250-10.20.0.240", []),  # a backwards range covers nothing
    ("not-an-address", []),
    ("not an address", []),
    (UNKNOWN, []),
    (5, []),
])
def test_a_metallb_address_entry_covers_its_cidr_or_range(entry: object, networks: list[str]) -> None:
    assert [str(n) for n in range_networks(entry)] == networks


def test_an_exact_kubernetes_version_is_the_whole_value() -> None:
    assert exact_kubernetes_version("v1.35.5")
    assert not any(exact_kubernetes_version(v) for v in ("v1.35.5\n", "1.35.5", "v1.35", "v1.35.5-rc.1", None))
