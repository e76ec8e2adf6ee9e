"""Canonical DecimalSI quantities, as k8s.io/apimachinery `pkg/api/resource` stores them (`Quantity.String`:
the largest SI suffix that leaves a whole mantissa, the sign kept, no suffix for a mantissa not divisible by
1000). Expected values are written out from that rule, not computed."""

from __future__ import annotations

import pytest

from gpu_tenancy.builders.workloads.quantity import decimal_si


@pytest.mark.parametrize(("amount", "stored"), [
    (0, "0"),
    (1, "1"),
    (999, "999"),
    (1000, "1k"),
    (10240, "10240"),
    (30000, "30k"),
    (81920, "81920"),
    (2000000, "2M"),
    (1500000, "1500k"),
    (7 * 10**9, "7G"),
    (10**18, "1E"),
    (9 * 10**18, "9E"),  # int64's range ends at 9.22E: no larger quantity reaches the API server as an integer
    (-1, "-1"),
    (-5000, "-5k"),
    (-2500000, "-2500k"),
])
def test_the_form_the_api_server_stores(amount: int, stored: str) -> None:
    assert decimal_si(amount) == stored


@pytest.mark.parametrize("amount", [True, False, 1.0, "30k", None])
def test_only_integers_that_are_not_booleans(amount: object) -> None:
    with pytest.raises(TypeError, match=rf"an integer quantity is expected, got {amount!r}"):
        decimal_si(amount)  # type: ignore[arg-type]
