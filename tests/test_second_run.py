"""The second `pulumi up` is a no-op: the program registers exactly the same inputs on every run, and those
inputs match what the providers stored after the first.

The engine diffs each resource's new inputs against the state of the last run; any input computed fresh
per run (a timestamp, a random value outside pulumi-random, an order taken from a set or from the file
system) would update, or through `triggers` replace, something on every `up`.

Proof, for each example stack:

1. Dynamic: the program runs twice, each in its own Python process with a different `PYTHONHASHSEED`
   (set and str-keyed dict-of-set iteration order changes with it), a different working directory and a
   different `TZ`, and every registered resource, its inputs, dependencies, provider and options must be
   identical (list order included; property-map key order is not a difference to the engine).
2. Static: no module under __main__.py, components/ and gpu_tenancy/ that the program loads uses a source
   of fresh values:
   `time`, `datetime`, `random`, `secrets`, `uuid.uuid1`/`uuid4`, `os.urandom`, `os.getpid`,
   `socket.gethostname`, `tempfile`, `os.listdir`/`glob`/`Path.iterdir`/`Path.glob` (file-system order).
   Not a fresh value, so not reported: `uuid.uuid5` in gpu_tenancy/hami/protocol.py (name-based, the same for the
   same tenant and index: the mock GPU ids). Allowed because the program never loads them (checked in
   both runs), as of this writing: gpu_tenancy/hami/agent/kube.py (`time`: the mock-GPU agent, which runs in
   the tenant) and gpu_tenancy/cli/kubeconfig.py (`tempfile`: `make kubeconfig`). Values that do differ per resource creation but not per run, and so are no
   concern: command ids (pulumi-command `resource.NewUniqueHex` on create) and pulumi-random results,
   both kept in the state.

3. Against provider state: the engine hands each provider the *stored* state, not the last inputs, and a
   provider stores what its Create and Read found (a daemon default, a normalised quantity, a computed
   digest). tests/provider_state.py models that per provider, with the upstream file it follows; the
   second run's inputs, diffed against the first run's stored state with each provider's own Diff rules,
   must make no replacement and no update.

What mocks cannot show, and is therefore named here: the kubeconfig the kind cluster command reads
(`kind get kubeconfig`) is read once, on create, never per run; the mock-GPU agent's image tag is a digest
of its source files (components/mock_gpu_agent.py `agent_source_digest`), stable while they are.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import harness
import pytest
from policy_support import Recorded
from provider_state import changes_against_state

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"

_DUMP = """
import dataclasses, json, sys
sys.path[:0] = [{tests!r}, {repo!r}]
import harness
harness.CA_PEM = open(sys.argv[3], "rb").read()
from policy_support import dev_stack, gpu_stack
stack = dev_stack() if sys.argv[1] == "dev" else gpu_stack()
loaded = sorted(
    m.__file__ for m in list(sys.modules.values())
    if getattr(m, "__file__", None) and m.__file__.startswith({repo!r})
    and not m.__file__.startswith({tests!r}) and "/.venv/" not in m.__file__
)
with open(sys.argv[2], "w") as out:
    json.dump({{"resources": [dataclasses.asdict(r) for r in stack], "modules": loaded}}, out)
""".format(tests=str(TESTS), repo=str(REPO))


def _run(stack: str, out: Path, seed: str, cwd: Path, tz: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": tz}
    # The tenants' CA lives in the management cluster and is the same on both runs; the harness mints a
    # fresh one per process (tests/harness.py `_test_ca_pem`), so both runs get this one.
    ca = out.with_suffix(".ca.pem")
    ca.write_bytes(harness.CA_PEM)
    done = subprocess.run([sys.executable, "-c", _DUMP, stack, str(out), str(ca)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _as_the_engine_compares(resource: dict[str, Any]) -> dict[str, Any]:
    """Dependency lists in a fixed order: the SDK gathers them in sets (pulumi 3.272.0
    `pulumi/runtime/resource.py` `prepare_resource`), and their order makes no step: the engine emits an
    update or replace only from the provider's Diff of the inputs or a changed provider, else a same step
    (pulumi/pulumi v3.259.0 `pkg/resource/deploy/step_generator.go`, "Diff didn't produce any steps")."""
    return {
        **resource,
        "dependencies": sorted(resource["dependencies"]),
        "property_dependencies": {k: sorted(v) for k, v in resource["property_dependencies"].items()},
    }


@pytest.fixture(scope="module", params=["dev", "dev-nvml", "gpu"])
def two_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    tmp = tmp_path_factory.mktemp(f"second-run-{request.param}")
    first = _run(request.param, tmp / "first.json", "1", REPO, "UTC")
    second = _run(request.param, tmp / "second.json", "2", tmp, "Pacific/Chatham")
    return first, second


def test_every_resource_registers_the_same_inputs_and_options(two_runs: tuple[Any, Any]) -> None:
    # Registration order follows asyncio scheduling and means nothing to the engine; URNs identify.
    first, second = ({r["urn"]: _as_the_engine_compares(r) for r in run["resources"]} for run in two_runs)
    assert sorted(first) == sorted(second)
    assert [urn for urn in first if first[urn] != second[urn]] == []
    assert len(first) > 50  # the whole stack, not a failed half


def test_the_second_up_changes_nothing_against_what_the_providers_stored(two_runs: tuple[Any, Any]) -> None:
    first, second = ([Recorded(**r) for r in run["resources"]] for run in two_runs)
    assert sum(r.type == "docker:index/container:Container" for r in first) in (0, 2)
    assert changes_against_state(first, second) == {}


# --------------------------------------------------------------------------- static scan

FRESH_MODULES = {"time", "datetime", "random", "secrets", "tempfile", "glob"}
FRESH_CALLS = {
    ("uuid", "uuid1"), ("uuid", "uuid4"), ("os", "urandom"), ("os", "getpid"), ("os", "listdir"),
    ("os", "scandir"), ("os", "walk"), ("socket", "gethostname"),
}
FRESH_METHODS = {"iterdir", "glob", "rglob"}


def fresh_value_sources(source: str) -> list[str]:
    """Names in `source` that yield a different value per run (see the module docstring).

    A directory listing passed straight to `sorted(...)` has a fixed order and is not reported.
    """
    tree = ast.parse(source)
    in_sorted = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sorted"
        for argument in node.args
        for inner in ast.walk(argument)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in in_sorted:
            continue
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in FRESH_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root in FRESH_MODULES:
                found.append(node.module)
            found += [f"{root}.{a.name}" for a in node.names if (root, a.name) in FRESH_CALLS]
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and (node.value.id, node.attr) in FRESH_CALLS:
                found.append(f"{node.value.id}.{node.attr}")
            elif node.attr in FRESH_METHODS:
                found.append(f".{node.attr}")
    return found


def test_the_scan_finds_what_it_looks_for() -> None:
    planted = (
        "import time\nfrom datetime import datetime\nimport uuid\nimport os\nfrom pathlib import Path\n"
        "a = uuid.uuid4()\nb = uuid.uuid5(uuid.NAMESPACE_DNS, 'x')\nc = os.urandom(4)\nd = list(Path('.').glob('*'))\n"
        "e = sorted(Path('.').glob('*'))\n"
    )
    assert fresh_value_sources(planted) == ["time", "datetime", "uuid.uuid4", "os.urandom", ".glob"]


def test_no_module_the_program_loads_computes_fresh_values(two_runs: tuple[Any, Any]) -> None:
    loaded = {str(Path(m).relative_to(REPO)) for run in two_runs for m in run["modules"]}
    assert {"components/kind_cluster.py", "components/tenant.py", "gpu_tenancy/builders/kube_objects.py"} & loaded
    sources = [REPO / "__main__.py", *(REPO / "components").rglob("*.py"), *(REPO / "gpu_tenancy").rglob("*.py")]
    found = {}
    for path in sources:
        relative = str(path.relative_to(REPO))
        names = fresh_value_sources(path.read_text())
        if names and (relative in loaded or relative == "__main__.py"):
            found[relative] = names
    assert found == {}
