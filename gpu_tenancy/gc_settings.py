"""Garbage collection while the program is evaluated: full collections deferred.

Evaluating the program builds a heap that only grows until the end: every resource, its inputs and
outputs, and the SDK's futures stay alive until the engine has them all. CPython runs a full collection
(generation 2) after every 10 collections of generation 1, once the objects added since the last one
exceed a quarter of the heap (Modules/gcmodule.c, ``collect_generations``; the ``gc`` module's
documentation). Each one walks the whole heap and finds almost nothing to free, and with a growing heap
they took about half of the evaluation time at 100 tenants: the time per tenant rose with the number of
tenants, for the program as for the bare SDK.

``defer_full_collections`` keeps young collections as they are (they free what dies young, which is where
reference cycles die here) and starts a full collection only after ``FULL_COLLECTION_EVERY`` generation-1
collections instead of 10: about every 7 million container allocations at the default thresholds, which a
program of a few hundred tenants does not reach. Peak memory was the same with and without.

The program calls it once at start; the Pulumi language host runs the program in a process of its own that
exits when the program is done (pulumi/pulumi sdk/python/cmd/pulumi-language-python-exec), so the setting
lasts exactly the program's run. A caller that evaluates the program inside a longer-lived process (the
test harness) restores the previous setting with the function returned.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

FULL_COLLECTION_EVERY = 1000


def defer_full_collections() -> Callable[[], None]:
    """Defer full collections for the rest of the process; returns what puts the previous thresholds back."""
    previous = gc.get_threshold()
    young, middle = previous[:2]
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)

    def restore() -> None:
        gc.set_threshold(*previous)

    return restore
