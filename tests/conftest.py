from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
# `make mutation` runs the tests from a copy of the repository (mutants/), one level further down.
SHARED = Path(os.environ.get("GPU_TENANCY_SHARED") or REPO.parent / "shared")
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Tests import the harness both as `harness` and as `tests.harness`: one module object, so that its chart project
# (the GPU_TENANCY_CHART_PROJECT the policy pack reads) and its test CA are made once, whatever order files run in.
import harness  # noqa: E402

sys.modules.setdefault("tests.harness", harness)

# Property tests run the same examples on every run, CI or not (Hypothesis' own "ci" profile: derandomised,
# no example database, no deadline). HYPOTHESIS_PROFILE=default draws fresh random examples instead, and
# HYPOTHESIS_PROFILE=local fresh ones with four times the examples, to hunt for a new counterexample.
settings.register_profile("local", max_examples=400, deadline=None, derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The policy pack imports its modules as top-level names (the engine runs it from policies/). Under mutmut,
# whose mutants know a module by its path (policies.gpu_policies), the top-level names are aliased to the
# package modules so that a mutant is switched on where the tests call it.
# Aliased in import order: a module comes after every pack module it imports (tenant_policies imports the others).
POLICY_MODULES = ("value_lib", "resource_lib", "tenancy_lib", "pod_lib", "gpu_lib", "policy_common", "workload_lib",
                  "gpu_policies", "provider_policies", "control_plane_policies", "data_plane_policies",
                  "pinning_policies", "plan_policies", "workload_policies", "fields_lib",
                  "allowlist_policies", "identity_policies", "controls_policies", "tenant_policies")
if "MUTANT_UNDER_TEST" in os.environ:
    for _name in POLICY_MODULES:
        sys.modules.setdefault(_name, importlib.import_module(f"policies.{_name}"))


@pytest.fixture(autouse=True, scope="session")
def _no_mutmut_stats_in_subprocesses() -> Iterator[None]:
    """While mutmut collects which tests reach which function, a process a test starts (the policy analyzer,
    a second program run) would try to record too, from a directory without mutmut's configuration. The
    variable is left out of their environment; mutmut itself keeps its own copy of it. Mutants are still
    switched on in such processes."""
    stats = os.environ.get("MUTANT_UNDER_TEST") == "stats"
    if stats:
        del os.environ["MUTANT_UNDER_TEST"]
    yield
    if stats:
        os.environ["MUTANT_UNDER_TEST"] = "stats"


@pytest.fixture
def stack() -> Any:
    """A private copy of the dev stack's registrations to craft variants from (a module may define its own)."""
    from policy_support import copy_stack, dev_stack

    return copy_stack(dev_stack())


@pytest.fixture
def pack(request: pytest.FixtureRequest) -> Any:
    """The running policy pack's analyzer: the `analyzer` fixture a module imports from tests/test_policy_pack_grpc.py."""
    return request.getfixturevalue("analyzer")


@pytest.fixture
def shared() -> Path:
    if not (SHARED / "schemas").is_dir():
        pytest.skip(f"upstream schemas and charts not found at {SHARED} (../shared is absent)")
    return SHARED
