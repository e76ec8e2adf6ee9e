"""Mutants mutmut 3.8.1 does not make, scored like its own: `make mutation` runs them after mutmut.

mutmut changes operators, numbers, string contents (`"XXDenyXX"`) and arguments; it never drops one entry of a
literal list, tuple or set, never puts another value of the same field in a manifest's enum string, and never
makes a dict path one key short or one key long. Those are the plausible slips in manifests and admission
policies (an operation or a controlled name missing, `Deny` written `Warn`, a pod template looked up at the
wrong path), so this module makes them:

* `drop-entry`: one entry of a list, tuple or set literal removed (not of a subscript's key, an annotation or an
  assignment target);
* `enum`: a string constant equal to a key of ENUM_SWAPS replaced by each of its values (not a dict key: those
  are field names, `"privileged": True`);
* `path-short` / `path-long`: in a chain of two or more lookups with a constant key (`x["a"]["b"]`,
  `x.get("a", {}).get("b")`), one lookup dropped or repeated; in a path given as string arguments
  (`dig(obj, "spec", "template")`) one key dropped or repeated; in a literal path (a tuple or list of strings
  bound to a name, dict or keyword containing `path`) one key repeated (its drop is a `drop-entry` mutant).

Each mutant is the whole module's source with one span replaced, so everything else stays byte for byte; a
mutant that does not parse, or repeats another's source, is not made. `run` copies the repository, runs a
module's covering tests on each mutant in the copy (`pytest -x`, stopped and counted killed after twice their
clean time plus 20 s) and writes `mutants/extra/<module>.json`; tests/mutation_scores.py adds those to mutmut's.

    .venv/bin/python tests/mutation_operators.py list gpu_tenancy/builders/tenant_access/tenant_access.py
    .venv/bin/python tests/mutation_operators.py run gpu_tenancy/builders/tenant_access/tenant_access.py
    .venv/bin/python tests/mutation_operators.py survivors gpu_tenancy/builders/tenant_access/tenant_access.py

`run` takes `--tests` after the module to run those test files (or pytest node ids) instead of the covering
tests, quickest first (`-x` stops at the first failure); the record names them:

    .venv/bin/python tests/mutation_operators.py run policies/gpu_lib.py --tests tests/test_policy_values.py tests/test_policies.py

A module whose whole selection takes minutes per mutant runs quicker in two passes: its quickest tests on every
mutant, then `--survivors-only` with the whole selection on what the first pass left (the record keeps both
selections):

    .venv/bin/python tests/mutation_operators.py run policies/workload_lib.py --tests tests/test_workload_findings.py
    .venv/bin/python tests/mutation_operators.py run policies/workload_lib.py --survivors-only

mutmut's own mutants of a module whose tests reach it in a subprocess (the commands' tests run
`python -m gpu_tenancy`), which `mutmut run`'s coverage does not see: after a `mutmut run`, `--mutmut
--after-mutmut-run <its mutants/ folder>` keeps what that run killed (by mutant name) and runs the rest, each in a
fresh pytest on the `--tests` given.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # import_scan, when run as a script
from import_scan import imported_names

# The other values of a manifest field that a slip could write instead (admissionregistration.k8s.io/v1
# ValidationAction, FailurePolicyType, OperationType, ParameterNotFoundActionType, MatchPolicyType,
# ReinvocationPolicyType, PatchType; LabelSelectorOperator; NetworkPolicy policyTypes and protocols; RBAC
# roleRef kinds; seccomp profile types; taint effects; Status reasons; Pod Security levels).
ENUM_SWAPS: dict[str, tuple[str, ...]] = {
    "Deny": ("Warn", "Allow"),
    "Warn": ("Audit",),
    "Fail": ("Ignore",),
    "Ignore": ("Fail",),
    "Allow": ("Deny",),
    "CREATE": ("UPDATE",),
    "UPDATE": ("CREATE",),
    "DELETE": ("UPDATE",),
    "CONNECT": ("CREATE",),
    "In": ("NotIn",),
    "NotIn": ("In",),
    "Exists": ("DoesNotExist",),
    "DoesNotExist": ("Exists",),
    "Equivalent": ("Exact",),
    "Exact": ("Equivalent",),
    "IfNeeded": ("Never",),
    "ApplyConfiguration": ("JSONPatch",),
    "JSONPatch": ("ApplyConfiguration",),
    "Ingress": ("Egress",),
    "Egress": ("Ingress",),
    "TCP": ("UDP",),
    "UDP": ("TCP",),
    "ClusterRole": ("Role",),
    "Role": ("ClusterRole",),
    "RuntimeDefault": ("Unconfined",),
    "NoSchedule": ("PreferNoSchedule",),
    "NoExecute": ("NoSchedule",),
    "Forbidden": ("Invalid",),
    "restricted": ("baseline",),
    "baseline": ("privileged",),
}

# Functions that take a dict path as their string arguments after the object (policies/value_lib.py `dig`).
PATH_FUNCTIONS = ("dig",)


@dataclass(frozen=True)
class Mutant:
    operator: str
    line: int
    description: str
    source: str
    name: str = ""  # mutmut's key for its own mutants (`<module>.x_<function>__mutmut_<n>`), else empty


def _short(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


class _Source:
    """The module's bytes, with ast positions (UTF-8 byte columns) turned into offsets."""

    def __init__(self, source: str) -> None:
        self.data = source.encode()
        self.starts = [0]
        for index, byte in enumerate(self.data):
            if byte == 0x0A:
                self.starts.append(index + 1)

    def start(self, node: ast.AST) -> int:
        return self.starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> str:
        return self.data[self.start(node) : self.end(node)].decode()

    def replaced(self, start: int, end: int, text: str) -> str:
        return (self.data[:start] + text.encode() + self.data[end:]).decode()


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Ids of nodes no operator touches: docstrings, annotations, f-string pieces, dict keys, subscript keys."""
    skipped: set[int] = set()

    def skip(node: ast.AST | None) -> None:
        if node is not None:
            skipped.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip(body[0])
        if isinstance(node, ast.AnnAssign):
            skip(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            skip(node.returns)
            for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                        node.args.vararg, node.args.kwarg]:
                if arg is not None:
                    skip(arg.annotation)
        elif isinstance(node, ast.JoinedStr):
            skipped.update(id(v) for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.Dict):
            skipped.update(id(k) for k in node.keys if k is not None)
        elif isinstance(node, ast.Subscript):
            skipped.add(id(node.slice))
    return skipped


def _dropped_entries(tree: ast.AST, src: _Source, skipped: set[int]) -> Iterator[tuple[str, int, str, str]]:
    for node in ast.walk(tree):
        if not isinstance(node, (ast.List, ast.Tuple, ast.Set)) or id(node) in skipped:
            continue
        if not isinstance(getattr(node, "ctx", ast.Load()), ast.Load) or not node.elts:
            continue
        texts = [src.text(e) for e in node.elts]
        for index, element in enumerate(node.elts):
            rest = ", ".join(texts[:index] + texts[index + 1 :])
            if isinstance(node, ast.List):
                new = f"[{rest}]"
            elif isinstance(node, ast.Set):
                new = f"{{{rest}}}" if rest else "set()"
            else:
                new = f"({rest},)" if len(node.elts) == 2 else f"({rest})"
            yield ("drop-entry", element.lineno, f"drop {_short(texts[index])} from {_short(src.text(node))}",
                   src.replaced(src.start(node), src.end(node), new))


def _enum_swaps(tree: ast.AST, src: _Source, skipped: set[int]) -> Iterator[tuple[str, int, str, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            for other in ENUM_SWAPS.get(node.value, ()):
                yield ("enum", node.lineno, f"{node.value!r} -> {other!r}",
                       src.replaced(src.start(node), src.end(node), repr(other)))


def _lookup_inner(node: ast.AST) -> ast.expr | None:
    """The object a constant-key lookup reads from: `x` of `x["a"]` or `x.get("a", ...)`; None otherwise."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant)):
        return node.func.value
    return None


def _lookup_key(node: ast.AST) -> object:
    if isinstance(node, ast.Subscript):
        return node.slice.value  # type: ignore[attr-defined]
    return node.args[0].value  # type: ignore[attr-defined]


def _lookup_chains(tree: ast.AST, src: _Source) -> Iterator[tuple[str, int, str, str]]:
    inner_ids = {id(_lookup_inner(n)) for n in ast.walk(tree) if _lookup_inner(n) is not None}
    for node in ast.walk(tree):
        if _lookup_inner(node) is None or id(node) in inner_ids:
            continue
        links: list[ast.AST] = []
        current: ast.AST = node
        while (inner := _lookup_inner(current)) is not None:
            links.append(current)
            current = inner
        links.reverse()
        if len(links) < 2 or not any(isinstance(_lookup_key(link), str) for link in links):
            continue
        base = src.text(current)
        parts = []
        previous = current
        for link in links:
            parts.append(src.data[src.end(previous) : src.end(link)].decode())
            previous = link
        chain, line = src.text(node), getattr(node, "lineno", 0)
        for index, link in enumerate(links):
            key = repr(_lookup_key(link))
            yield ("path-short", line, f"{_short(chain)} without its {key} lookup",
                   src.replaced(src.start(node), src.end(node), base + "".join(parts[:index] + parts[index + 1 :])))
            yield ("path-long", line, f"{_short(chain)} with its {key} lookup twice",
                   src.replaced(src.start(node), src.end(node),
                                base + "".join(parts[: index + 1] + parts[index:])))


def _called_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _path_arguments(tree: ast.AST, src: _Source) -> Iterator[tuple[str, int, str, str]]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _called_name(node) not in PATH_FUNCTIONS or node.keywords:
            continue
        keys = node.args[1:]
        if not keys or not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
            continue
        head = src.data[src.start(node) : src.end(node.args[0])].decode()
        texts = [src.text(k) for k in keys]
        for index in range(len(keys)):
            for operator, rest in (("path-short", texts[:index] + texts[index + 1 :]),
                                   ("path-long", texts[: index + 1] + texts[index:])):
                what = "without" if operator == "path-short" else "with twice"
                yield (operator, node.lineno, f"{_short(src.text(node))} {what} {texts[index]}",
                       src.replaced(src.start(node), src.end(node), head + "".join(f", {t}" for t in rest) + ")"))


def _literal_paths(tree: ast.AST) -> Iterator[ast.List | ast.Tuple]:
    """Tuples and lists of strings bound to a name, dict or keyword whose name contains `path`."""
    def strings(node: ast.AST | None) -> bool:
        return (isinstance(node, (ast.List, ast.Tuple)) and bool(node.elts)
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts))

    def values(value: ast.AST | None) -> Iterator[ast.List | ast.Tuple]:
        if strings(value):
            yield value  # type: ignore[misc]
        elif isinstance(value, ast.Dict):
            yield from (v for v in value.values if strings(v))  # type: ignore[misc]

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and "path" in t.id.lower() for t in targets):
                yield from values(node.value)
        elif isinstance(node, ast.keyword) and node.arg and "path" in node.arg.lower():
            yield from values(node.value)


def _repeated_path_keys(tree: ast.AST, src: _Source) -> Iterator[tuple[str, int, str, str]]:
    for node in _literal_paths(tree):
        texts = [src.text(e) for e in node.elts]
        for index in range(len(texts)):
            rest = ", ".join(texts[: index + 1] + texts[index:])
            new = f"[{rest}]" if isinstance(node, ast.List) else f"({rest})"
            yield ("path-long", node.lineno, f"{_short(src.text(node))} with {texts[index]} twice",
                   src.replaced(src.start(node), src.end(node), new))


def mutants(source: str) -> list[Mutant]:
    """Every mutant of the module's source, in a stable order, each parsing and each different."""
    tree = ast.parse(source)
    src = _Source(source)
    skipped = _skipped_nodes(tree)
    seen = {source}
    out = []
    for made in (_dropped_entries(tree, src, skipped), _enum_swaps(tree, src, skipped), _lookup_chains(tree, src),
                 _path_arguments(tree, src), _repeated_path_keys(tree, src)):
        for operator, line, description, new in made:
            if new in seen:
                continue
            try:
                ast.parse(new)
            except SyntaxError:
                continue
            seen.add(new)
            out.append(Mutant(operator, line, description, new))
    return sorted(out, key=lambda m: (m.line, m.operator, m.description))


def mutmut_mutants(source: str, filename: str = "module.py") -> list[Mutant]:
    """mutmut's own mutants of the module (mutmut 3.8.1 `create_mutations`: those inside a top-level function or a
    top-level class's method, as `mutmut run` makes them), each as the whole source with that one change, for
    a module whose every test run records the program: `mutmut run` then takes hours to learn which test reaches
    which function, and a fresh pytest per mutant on the module's own tests takes minutes."""
    import libcst as cst
    from mutmut.mutation.file_mutation import create_mutations
    from mutmut.mutation.trampoline_templates import mangle_function_name

    module, made, ignored_classes, ignored_functions = create_mutations(filename, source)
    # Each mutated function by the mangled name `mutmut run` gives it (file_mutation.py `combine_mutations_to_source`).
    mutated: dict[cst.CSTNode, str] = {}
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value not in ignored_functions:
            mutated[statement] = mangle_function_name(name=statement.name.value, class_name=None)
        elif (isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock)
              and statement.name.value not in ignored_classes):
            mutated.update((m, mangle_function_name(name=m.name.value, class_name=statement.name.value))
                           for m in statement.body.body if isinstance(m, cst.FunctionDef))
    dotted = filename.removesuffix(".py").replace("/", ".")
    numbered: dict[cst.CSTNode, int] = {}
    positions = cst.metadata.MetadataWrapper(module, unsafe_skip_copy=True).resolve(cst.metadata.PositionProvider)
    out = []
    for mutation in made:
        function = mutation.contained_by_top_level_function
        if function not in mutated:
            continue
        # Numbered from 1 per function in create_mutations' order (`function_trampoline_arrangement`).
        numbered[function] = numbered.get(function, 0) + 1
        before, after = (module.code_for_node(n) for n in (mutation.original_node, mutation.mutated_node))
        line = positions[mutation.original_node].start.line
        new = module.deep_replace(mutation.original_node, mutation.mutated_node)
        assert isinstance(new, cst.Module)
        out.append(Mutant("mutmut", line, f"{_short(before)} -> {_short(after)}", new.code,
                          f"{dotted}.{mutated[function]}__mutmut_{numbered[function]}"))
    return out


# --------------------------------------------------------------------------- running a module's mutants

REPO = Path(__file__).resolve().parents[1]
# Tests that reach a module without importing it (through the program a stack recording runs, or the pack's
# analyzer): added to the test files that import it. The real control-plane tier is left to `make test`.
COVERING_TESTS: dict[str, tuple[str, ...]] = {
    "gpu_tenancy/builders/tenant_access/tenant_access.py": ("tests/test_workload_network.py",
                                                            "tests/test_policy_controls_grpc.py"),
    "gpu_tenancy/builders/mock_gpu_agent/agent_admission.py": ("tests/test_mock_gpu_agent_component.py",),
    "gpu_tenancy/builders/mock_nvml/cuda_control.py": ("tests/test_sim_nvml_program.py", "tests/test_policies.py",
                                                       "tests/test_policy_controls_grpc.py"),
    "gpu_tenancy/builders/mock_nvml/nvml_mock.py": ("tests/test_sim_nvml_program.py", "tests/test_policies.py"),
    "gpu_tenancy/builders/worker/kind_node.py": ("tests/test_worker.py", "tests/test_policies.py"),
    "gpu_tenancy/builders/tenant_datastore/datastore.py": ("tests/test_datastore.py", "tests/test_provider_isolation.py",
                                                           "tests/test_policy_allowlist_grpc.py", "tests/test_policies.py"),
    "gpu_tenancy/contract/tenant_config.py": ("tests/test_config.py", "tests/test_one_validation.py"),
    # The pack's admission of a tenant's own etcd (its kamaji-etcd release and DataStore) needs that stack recorded.
    "policies/provider_policies.py": ("tests/test_datastore.py",),
}
# The doctor's modules: each test file reaches all four through the command (the stubs answer in the test's process).
DOCTOR_TESTS = ("tests/test_doctor.py", "tests/test_doctor_lab.py", "tests/test_doctor_host.py",
                "tests/test_integration_faults.py", "tests/test_device_layers.py", "tests/test_docs.py",
                *(f"tests/test_day_after.py::{name}" for name in (
                    "test_a_powered_off_host_blocks_only_its_reset", "test_an_unknown_host_is_refused_in_one_line",
                    "test_make_up_replaces_exactly_the_built_images_docker_no_longer_has",
                    "test_with_docker_down_nothing_is_replaced")))
COVERING_TESTS.update({f"gpu_tenancy/cli/doctor/{name}.py": DOCTOR_TESTS
                       for name in ("command", "deployment", "host", "known_issues", "lab")})
# Every module of the pack: tenant_policies imports the policy groups, which no test file needs to import itself.
PACK_TESTS = ("tests/test_policy_clauses.py", "tests/test_policies.py")


def _ignored(repo: Path) -> set[str]:
    """The test files mutmut's runs leave out (`--ignore=` in [tool.mutmut] pytest_add_cli_args_test_selection):
    the live-suite harness and the slowest whole-program runs."""
    return {arg.removeprefix("--ignore=") for arg in _test_selection(repo / "pyproject.toml")
            if arg.startswith("--ignore=")}


def _test_selection(pyproject: Path) -> list[str]:
    """`[tool.mutmut] pytest_add_cli_args_test_selection` of a pyproject.toml; empty when there is none."""
    if not pyproject.is_file():
        return []
    return list(tomllib.loads(pyproject.read_text()).get("tool", {}).get("mutmut", {}).get(
        "pytest_add_cli_args_test_selection", []))


def covering_tests(module: str, repo: Path = REPO) -> list[str]:
    """Every tests/test_*.py that imports the module (by its dotted name; a pack module also by its top-level
    name, as the engine imports it) and that mutmut's runs do not leave out, then COVERING_TESTS' files and,
    for a pack module, PACK_TESTS."""
    dotted = module.removesuffix(".py").replace("/", ".")
    names = {dotted} | ({dotted.removeprefix("policies.")} if dotted.startswith("policies.") else set())
    found = [str(path.relative_to(repo)) for path in sorted((repo / "tests").glob("test_*.py"))
             if names & imported_names(path.read_text()) and str(path.relative_to(repo)) not in _ignored(repo)]
    # The importers first: their unit tests are the quickest to fail under `-x`.
    mapped = [*COVERING_TESTS.get(module, ()), *(PACK_TESTS if module.startswith("policies/") else ())]
    return found + [path for path in dict.fromkeys(mapped) if path not in found]


def _copy_repository(repo: Path, target: Path) -> None:
    """The working tree's tracked and untracked-but-not-ignored files (what `make mutation` would test), and links
    to the virtual environment and the pinned tools (tests run shellcheck from .venv/bin, as `make test` does)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = repo / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
            # Their times too: make then finds .venv as up to date as in the repository (tests run `make tenants`).
            stat = source.stat()
            os.utime(target / name, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    for folder in (".venv", ".tools"):
        if (repo / folder).is_dir():
            (target / folder).symlink_to(repo / folder)


def _pytest(copy: Path, tests: list[str], timeout: float | None) -> tuple[int | None, float]:
    """pytest's exit code (None when stopped at `timeout`) and its wall time; its whole process group is
    stopped, so an analyzer or program run it started does not outlive it."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "HYPOTHESIS_PROFILE": os.environ.get("HYPOTHESIS_PROFILE",
           "ci"), "GPU_TENANCY_SHARED": os.environ.get("GPU_TENANCY_SHARED") or str(REPO.parent / "shared")}
    env.pop("MUTANT_UNDER_TEST", None)
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests]
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=copy, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        code: int | None = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return code, time.monotonic() - started


def _key(entry: dict[str, object]) -> tuple[object, object, object, object]:
    # mutmut's name as well where there is one: two of its mutants of a line can share a shortened description.
    return entry["line"], entry["operator"], entry["description"], entry.get("name")


def _function_of(name: str) -> str:
    """`pkg.mod.x_f__mutmut_3` -> `x_f` (`xǁClassǁm` for a method): the function a mutmut mutant is in."""
    return name.rsplit(".", 1)[-1].split("__mutmut_")[0]


def killed_by_mutmut_run(mutants_dir: Path, module: str, source: str) -> tuple[set[str], list[str]]:
    """The mutants a `mutmut run` killed (its mutants/<module>.meta, keyed by mutant name) and the test selection
    it ran them on (`pytest_add_cli_args_test_selection` of the pyproject.toml beside that mutants/). Only those of
    functions that `source` still has as they were when it ran: the same code (the hash of each function's code the
    run recorded, mutmut's `compute_function_hashes`) and the same mutant names (a `# pragma: no mutate` or another
    `do_not_mutate` leaves the code alike and numbers the mutants anew). Any other name may now name another mutant."""
    from mutation_scores import KILLED

    meta_path = mutants_dir / f"{module}.meta"
    if not meta_path.is_file():
        raise SystemExit(f"{module}: `mutmut run` left no results in {mutants_dir} ({meta_path})")
    meta = json.loads(meta_path.read_text())
    ran_hashes = meta.get("hash_by_function_name")
    if not ran_hashes:
        raise SystemExit(f"{module}: {meta_path} records no function hashes, so which kills still apply is unknown")
    codes = meta["exit_code_by_key"]
    unchanged = _unchanged_functions(ran_hashes, codes, module, source)
    selection = _test_selection(mutants_dir.parent / "pyproject.toml")
    killed = {name for name, code in codes.items() if code in KILLED and _function_of(name) in unchanged}
    return killed, [f"mutmut run: {' '.join(selection)}"]


def _unchanged_functions(ran_hashes: dict[str, str], ran_mutants: Iterable[str], module: str, source: str) -> set[str]:
    """The functions whose code hash (mutmut's `compute_function_hashes`) and mutant names are what they were when
    `ran_mutants` ran: only their results still name the same mutants."""
    from mutmut.mutation.file_mutation import compute_function_hashes

    ran_names: dict[str, set[str]] = {}
    for name in ran_mutants:
        ran_names.setdefault(_function_of(name), set()).add(name)
    now_names: dict[str, set[str]] = {}
    for mutant in mutmut_mutants(source, module):
        now_names.setdefault(_function_of(mutant.name), set()).add(mutant.name)
    now_hashes = compute_function_hashes(source)
    return {function for function, code in ran_hashes.items()
            if now_hashes.get(function) == code and ran_names.get(function) == now_names.get(function)}


def run(module: str, tests: list[str], out_dir: Path, repo: Path = REPO, survivors_only: bool = False,
        operators: str = "extra", after_mutmut_run: Path | None = None) -> dict[str, object]:
    """Each mutant of `module` against `tests` in a copy of the repository; the record written to out_dir.
    With survivors_only, a mutant the module's last record counts killed keeps that status and only the
    others run (a quick test selection first, then the whole one on what it left). With after_mutmut_run (a
    `mutmut run`'s mutants/ folder), mutmut's own mutants that run killed keep that status, and the rest (those
    it left alive, and those it ran no test on: tests that reach the module only in a subprocess, which its
    coverage does not see) run here."""
    original = (repo / module).read_text()
    made = mutmut_mutants(original, module) if operators == "mutmut" else mutants(original)
    path = out_dir / f"{module}.json"
    earlier: dict[tuple[object, object, object, object], str] = {}
    earlier_tests: list[str] = []
    killed_by_name: set[str] = set()  # by mutmut's name: two of its mutants may share a line and description
    if after_mutmut_run is not None:
        killed_by_name, earlier_tests = killed_by_mutmut_run(after_mutmut_run, module, original)
    elif survivors_only:
        if not path.is_file():
            raise SystemExit(f"{module}: no earlier record to take the survivors of ({path})")
        previous = json.loads(path.read_text())
        if operators == "mutmut" and not previous.get("function_hashes"):
            raise SystemExit(f"{module}: {path} records no function hashes, so which of its results still apply is "
                             "unknown: run the module again without --survivors-only")
        if operators == "mutmut":  # results of functions unchanged since, by name
            unchanged = _unchanged_functions(previous["function_hashes"], [e["name"] for e in previous["mutants"]],
                                             module, original)
            killed_by_name = {e["name"] for e in previous["mutants"]
                              if e["status"] != "survived" and _function_of(e["name"]) in unchanged}
        else:  # the other operators' (or an older record): by line, operator and description
            earlier = {_key(entry): entry["status"] for entry in previous["mutants"]}
        earlier_tests = [*previous.get("earlier_tests", []), previous["tests"]]
    results = []
    with tempfile.TemporaryDirectory(prefix="mutation-operators-") as tmp:
        copy = Path(tmp)
        _copy_repository(repo, copy)
        code, clean = _pytest(copy, tests, None)
        if code != 0:
            raise SystemExit(f"{module}: its tests fail without a mutant (pytest exit {code}): {' '.join(tests)}")
        limit = 2 * clean + 20
        for number, mutant in enumerate(made, 1):
            entry = {k: v for k, v in asdict(mutant).items() if k != "source" and (k != "name" or v)}
            # A record written before mutants were named matches by line, operator and description.
            status = ("killed" if mutant.name in killed_by_name
                      else earlier.get(_key(entry), earlier.get(_key({**entry, "name": None}), "survived")))
            if status == "survived":
                (copy / module).write_text(mutant.source)
                code, _ = _pytest(copy, tests, limit)
                status = "timeout" if code is None else "survived" if code == 0 else "killed"
            results.append({**entry, "status": status})
            print(f"  {number}/{len(made)} {status:8} line {mutant.line} {mutant.operator}: {mutant.description}",
                  flush=True)
        (copy / module).write_text(original)
    record: dict[str, object] = {"module": module, "tests": tests, "mutants": results}
    if operators == "mutmut":  # which results a later --survivors-only may keep: those of functions unchanged since
        from mutmut.mutation.file_mutation import compute_function_hashes

        record["function_hashes"] = compute_function_hashes(original)
    if survivors_only or after_mutmut_run is not None:
        record["earlier_tests"] = earlier_tests  # the selections that killed the rest, in the order they ran
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("list", "run", "survivors"))
    parser.add_argument("modules", nargs="+", help="source paths, e.g. gpu_tenancy/builders/metallb/netpool.py")
    parser.add_argument("--tests", nargs="*", help="test files to run (default: covering_tests)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where records go (default mutants/extra, with --mutmut mutants/fresh)")
    parser.add_argument("--mutmut", action="store_true",
                        help="mutmut's own mutants, each in a fresh pytest, instead of the operators it lacks")
    parser.add_argument("--survivors-only", action="store_true",
                        help="run only the mutants the module's last record has surviving; keep its kills")
    parser.add_argument("--after-mutmut-run", type=Path, metavar="MUTANTS_DIR",
                        help="with --mutmut: keep the kills of the `mutmut run` whose mutants/ folder this is, "
                             "run the rest")
    args = parser.parse_args(argv)
    args.out = args.out or REPO / "mutants" / ("fresh" if args.mutmut else "extra")
    for module in args.modules:
        if args.action == "list":
            source = (REPO / module).read_text()
            for mutant in mutmut_mutants(source, module) if args.mutmut else mutants(source):
                print(f"{module}:{mutant.line} {mutant.operator}: {mutant.description}")
        elif args.action == "run":
            tests = args.tests or covering_tests(module)
            if not tests:
                print(f"== {module}: no test imports it; give --tests")
                return 1
            print(f"== {module}: {len(tests)} test files", flush=True)
            if args.after_mutmut_run and (not args.mutmut or args.survivors_only):
                parser.error("--after-mutmut-run takes --mutmut and not --survivors-only")
            run(module, tests, args.out, survivors_only=args.survivors_only,
                operators="mutmut" if args.mutmut else "extra", after_mutmut_run=args.after_mutmut_run)
        else:
            record_path = args.out / f"{module}.json"
            if not record_path.is_file():
                print(f"{module}: not run yet")
                continue
            for entry in json.loads(record_path.read_text())["mutants"]:
                if entry["status"] == "survived":
                    print(f"{module}:{entry['line']} {entry['operator']}: {entry['description']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
