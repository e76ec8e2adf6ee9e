"""The policy pack's value helpers (policies/value_lib.py) on their own: the unknown sentinel."""

from __future__ import annotations

import policy_support  # noqa: F401  (puts policies/ on the import path, as the engine runs the pack from there)
from value_lib import UNKNOWN, is_unknown, plain


def test_an_unknown_is_falsy_one_object_and_says_so() -> None:
    # Policy code writes `if value:` and must skip an unknown as it skips an absent value.
    assert not UNKNOWN and bool(UNKNOWN) is False
    assert type(UNKNOWN)() is UNKNOWN
    assert repr(UNKNOWN) == "<unknown>" and f"{[UNKNOWN]}" == "[<unknown>]"
    assert is_unknown(plain("04da6b54-80e4-46f7-96ec-b56ff0331ba9")) and not is_unknown("")
