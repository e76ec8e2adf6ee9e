"""Integer quantities in the form the Kubernetes API server stores them.

The API server returns every quantity canonicalised (k8s.io/apimachinery `pkg/api/resource/quantity.go`
`Quantity.String` / `CanonicalizeBytes`): a decimal integer keeps the largest SI suffix that leaves a whole
mantissa, so `30000` is stored as `30k` and `2000000` as `2M`. pulumi-kubernetes diffs the next run's inputs
against that stored object (`provider.go` `Diff`: the live state pruned to the inputs' keys), so a quantity
sent in any other form is an update on every `pulumi up`. Sending the canonical form keeps the second `up`
a no-op; HAMi and Kubernetes read both forms as the same number.
"""

from __future__ import annotations

_SI_SUFFIXES = ("", "k", "M", "G", "T", "P", "E")


def decimal_si(amount: int) -> str:
    """`amount` as a canonical DecimalSI quantity: 10240 -> '10240', 30000 -> '30k', 0 -> '0'."""
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise TypeError(f"an integer quantity is expected, got {amount!r}")
    if amount == 0:
        return "0"
    sign, mantissa = ("-" if amount < 0 else ""), abs(amount)
    for suffix in _SI_SUFFIXES[:-1]:
        if mantissa % 1000:
            return f"{sign}{mantissa}{suffix}"
        mantissa //= 1000
    return f"{sign}{mantissa}{_SI_SUFFIXES[-1]}"
