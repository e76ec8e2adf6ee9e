"""tests/mutation_operators.py: each operator makes exactly the mutants written out here by hand."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mutation_operators import covering_tests, main, mutants
from mutation_scores import main as scores_main


def _made(source: str, operator: str | None = None) -> set[str]:
    return {m.source for m in mutants(source) if operator is None or m.operator == operator}


def test_one_entry_of_a_list_tuple_or_set_is_dropped() -> None:
    source = 'OPS = ["CREATE", "UPDATE"]\nKEYS = ("a", "b", "c")\nS = {1, 2}\nT = ("x", "y")\nONE = ("z",)\n'
    assert _made(source, "drop-entry") == {
        'OPS = ["UPDATE"]\nKEYS = ("a", "b", "c")\nS = {1, 2}\nT = ("x", "y")\nONE = ("z",)\n',
        'OPS = ["CREATE"]\nKEYS = ("a", "b", "c")\nS = {1, 2}\nT = ("x", "y")\nONE = ("z",)\n',
        'OPS = ["CREATE", "UPDATE"]\nKEYS = ("b", "c")\nS = {1, 2}\nT = ("x", "y")\nONE = ("z",)\n',
        'OPS = ["CREATE", "UPDATE"]\nKEYS = ("a", "c")\nS = {1, 2}\nT = ("x", "y")\nONE = ("z",)\n',
        'OPS = ["CREATE", "UPDATE"]\nKEYS = ("a", "b")\nS = {1, 2}\nT = ("x", "y")\nONE = ("z",)\n',
        'OPS = ["CREATE", "UPDATE"]\nKEYS = ("a", "b", "c")\nS = {2}\nT = ("x", "y")\nONE = ("z",)\n',
        'OPS = ["CREATE", "UPDATE"]\nKEYS = ("a", "b", "c")\nS = {1}\nT = ("x", "y")\nONE = ("z",)\n',
        # A two-entry tuple keeps its comma; an emptied tuple is `()`.
        'OPS = ["CREATE", "UPDATE"]\nKEYS = ("a", "b", "c")\nS = {1, 2}\nT = ("y",)\nONE = ("z",)\n',
        'OPS = ["CREATE", "UPDATE"]\nKEYS = ("a", "b", "c")\nS = {1, 2}\nT = ("x",)\nONE = ("z",)\n',
        'OPS = ["CREATE", "UPDATE"]\nKEYS = ("a", "b", "c")\nS = {1, 2}\nT = ("x", "y")\nONE = ()\n',
    }


def test_an_emptied_set_stays_a_set_and_targets_keys_and_annotations_are_left() -> None:
    source = 'S = {"only"}\na, b = f()\nx: tuple[int, str] = d[1, 2]\n'
    assert _made(source, "drop-entry") == {'S = set()\na, b = f()\nx: tuple[int, str] = d[1, 2]\n'}


def test_a_manifest_enum_is_swapped_for_the_other_values_of_its_field() -> None:
    source = 'b = {"validationActions": ["Deny"], "failurePolicy": "Fail", "op": "NotIn", "note": "Denying"}\n'
    assert _made(source, "enum") == {
        'b = {"validationActions": [\'Warn\'], "failurePolicy": "Fail", "op": "NotIn", "note": "Denying"}\n',
        'b = {"validationActions": [\'Allow\'], "failurePolicy": "Fail", "op": "NotIn", "note": "Denying"}\n',
        'b = {"validationActions": ["Deny"], "failurePolicy": \'Ignore\', "op": "NotIn", "note": "Denying"}\n',
        'b = {"validationActions": ["Deny"], "failurePolicy": "Fail", "op": \'In\', "note": "Denying"}\n',
    }


def test_no_enum_swap_in_a_dict_key_a_docstring_or_an_f_string() -> None:
    source = '"""Deny"""\nd = {"Deny": 1}\ne = f"Deny{x}"\n\n\ndef g() -> None:\n    """CREATE"""\n'
    assert _made(source, "enum") == set()


def test_a_lookup_chain_loses_or_repeats_one_key() -> None:
    source = 'v = obj["spec"]["template"]\nw = obj.get("a", {}).get("b")\nu = obj["only"]\n'
    assert _made(source, "path-short") == {
        'v = obj["template"]\nw = obj.get("a", {}).get("b")\nu = obj["only"]\n',
        'v = obj["spec"]\nw = obj.get("a", {}).get("b")\nu = obj["only"]\n',
        'v = obj["spec"]["template"]\nw = obj.get("b")\nu = obj["only"]\n',
        'v = obj["spec"]["template"]\nw = obj.get("a", {})\nu = obj["only"]\n',
    }
    assert _made(source, "path-long") == {
        'v = obj["spec"]["spec"]["template"]\nw = obj.get("a", {}).get("b")\nu = obj["only"]\n',
        'v = obj["spec"]["template"]["template"]\nw = obj.get("a", {}).get("b")\nu = obj["only"]\n',
        'v = obj["spec"]["template"]\nw = obj.get("a", {}).get("a", {}).get("b")\nu = obj["only"]\n',
        'v = obj["spec"]["template"]\nw = obj.get("a", {}).get("b").get("b")\nu = obj["only"]\n',
    }


def test_a_path_given_as_arguments_loses_or_repeats_one_key() -> None:
    source = 'x = dig(res, "spec", "template")\n'
    assert _made(source, "path-short") == {'x = dig(res, "template")\n', 'x = dig(res, "spec")\n'}
    assert _made(source, "path-long") == {
        'x = dig(res, "spec", "spec", "template")\n', 'x = dig(res, "spec", "template", "template")\n',
    }


def test_a_literal_path_repeats_one_key_and_other_string_tuples_do_not() -> None:
    source = 'POD_SPEC_PATHS = {"CronJob": ("spec", "jobTemplate")}\nNAMES = ("spec", "jobTemplate")\n'
    assert _made(source, "path-long") == {
        'POD_SPEC_PATHS = {"CronJob": ("spec", "spec", "jobTemplate")}\nNAMES = ("spec", "jobTemplate")\n',
        'POD_SPEC_PATHS = {"CronJob": ("spec", "jobTemplate", "jobTemplate")}\nNAMES = ("spec", "jobTemplate")\n',
    }


def test_the_rest_of_the_source_stays_byte_for_byte_with_non_ascii_text_before_the_span() -> None:
    source = 'NOTE = "é → ü"  # keeps its comment\nOPS = ["CREATE"]  # and this one\n'
    made = mutants(source)
    assert [(m.operator, m.line, m.source) for m in made] == [
        ("drop-entry", 2, 'NOTE = "é → ü"  # keeps its comment\nOPS = []  # and this one\n'),
        ("enum", 2, 'NOTE = "é → ü"  # keeps its comment\nOPS = [\'UPDATE\']  # and this one\n'),
    ]


def test_covering_tests_are_the_mapped_files_and_those_importing_the_module(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("from gpu_tenancy.builders.x import y\n")
    (tmp_path / "tests" / "test_b.py").write_text("import gpu_tenancy.builders.x.y as z\n")
    (tmp_path / "tests" / "test_c.py").write_text("from gpu_tenancy.builders.x import other\n")
    (tmp_path / "tests" / "test_d.py").write_text("from pod_lib import dig\n")
    assert covering_tests("gpu_tenancy/builders/x/y.py", tmp_path) == ["tests/test_a.py", "tests/test_b.py"]
    # A pack module: its importers, then the pack's clause and stack tests, which reach it through tenant_policies.
    assert covering_tests("policies/pod_lib.py", tmp_path) == [
        "tests/test_d.py", "tests/test_policy_clauses.py", "tests/test_policies.py"]
    assert covering_tests("policies/control_plane_policies.py", tmp_path) == [
        "tests/test_policy_clauses.py", "tests/test_policies.py"]
    # A file mutmut's runs leave out is left out here too.
    (tmp_path / "pyproject.toml").write_text('[tool.mutmut]\npytest_add_cli_args_test_selection = ["tests", '
                                              '"--ignore=tests/test_b.py"]\n')
    assert covering_tests("gpu_tenancy/builders/x/y.py", tmp_path) == ["tests/test_a.py"]
    (tmp_path / "pyproject.toml").unlink()
    # A module also reached through the program: its importers first, then the mapped files.
    (tmp_path / "tests" / "test_worker.py").write_text("from gpu_tenancy.builders.worker import kind_node\n")
    (tmp_path / "tests" / "test_e.py").write_text("from gpu_tenancy.builders.worker.kind_node import host_flags\n")
    assert covering_tests("gpu_tenancy/builders/worker/kind_node.py", tmp_path) == [
        "tests/test_e.py", "tests/test_worker.py", "tests/test_policies.py"]


def test_list_prints_one_line_per_mutant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = tmp_path / "binding.py"
    module.write_text('"""A binding."""\n\nBINDING = {"validationActions": ["Deny"]}\n')
    assert main(["list", str(module)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{module}:3 drop-entry: drop \"Deny\" from [\"Deny\"]",
        f"{module}:3 enum: 'Deny' -> 'Allow'",
        f"{module}:3 enum: 'Deny' -> 'Warn'",
    ]


def test_scores_add_the_extra_mutants_to_mutmuts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = "gpu_tenancy/builders/metallb/netpool.py"
    meta = tmp_path / f"{module}.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 0},
                                "durations_by_key": {}}))
    extra = tmp_path / "extra" / f"{module}.json"
    extra.parent.mkdir(parents=True)
    statuses = ["killed", "killed", "timeout", "survived"]
    extra.write_text(json.dumps({"module": module, "tests": [], "mutants": [{"status": s} for s in statuses]}))
    # mutmut 6 of 7, extra 3 of 4: 9 of 11 = 81.8 %.
    assert scores_main(["--mutants", str(tmp_path), "--fail-under", "90", module]) == 1
    out = capsys.readouterr().out
    assert "81.8%" in out and "below 90%" in out
    extra.write_text(json.dumps({"module": module, "tests": [], "mutants": [{"status": "killed"}] * 4}))
    # 10 of 11 = 90.9 %.
    assert scores_main(["--mutants", str(tmp_path), "--fail-under", "90", module]) == 0
    assert "90.9%" in capsys.readouterr().out


def test_run_takes_the_tests_given_after_the_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import mutation_operators

    ran: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(mutation_operators, "run",
                        lambda module, tests, out, survivors_only, operators, after_mutmut_run:
                        ran.append((module, tests)))
    module = "policies/gpu_lib.py"
    given = ["tests/test_policy_values.py", "tests/test_policies.py::test_dev_stack_passes"]
    assert main(["run", module, "--tests", *given, "--out", str(tmp_path)]) == 0
    assert ran == [(module, given)]
    # Without --tests: the covering tests.
    assert main(["run", module, "--out", str(tmp_path)]) == 0
    assert ran[1] == (module, covering_tests(module))
    assert ran[1][1] != given


def test_a_second_pass_runs_only_the_first_passs_survivors_and_keeps_its_kills(tmp_path: Path) -> None:
    import subprocess

    from mutation_operators import run

    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "ops.py").write_text('OPERATIONS = ["CREATE", "UPDATE", "DELETE"]\n')
    # The quick test pins CREATE only; the whole selection pins all three.
    (repo / "tests" / "test_quick.py").write_text(
        "from ops import OPERATIONS\n\ndef test_create():\n    assert 'CREATE' in OPERATIONS\n")
    (repo / "tests" / "test_whole.py").write_text(
        "from ops import OPERATIONS\n\ndef test_all():\n    assert OPERATIONS == ['CREATE', 'UPDATE', 'DELETE']\n")
    (repo / "conftest.py").write_text("")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    out = tmp_path / "out"
    first = run("ops.py", ["tests/test_quick.py"], out, repo=repo)
    statuses = {(m["operator"], m["description"]): m["status"] for m in first["mutants"]}  # type: ignore[union-attr]
    # Dropping CREATE or swapping it for UPDATE is caught; dropping UPDATE or DELETE, or swapping them, is not.
    assert statuses == {
        ("drop-entry", 'drop "CREATE" from ["CREATE", "UPDATE", "DELETE"]'): "killed",
        ("drop-entry", 'drop "DELETE" from ["CREATE", "UPDATE", "DELETE"]'): "survived",
        ("drop-entry", 'drop "UPDATE" from ["CREATE", "UPDATE", "DELETE"]'): "survived",
        ("enum", "'CREATE' -> 'UPDATE'"): "killed",
        ("enum", "'DELETE' -> 'UPDATE'"): "survived",
        ("enum", "'UPDATE' -> 'CREATE'"): "survived",
    }
    # A second pass with a selection that kills nothing: the first pass's kills are kept, not run again.
    (repo / "tests" / "test_nothing.py").write_text("def test_passes():\n    pass\n")
    second = run("ops.py", ["tests/test_nothing.py"], out, repo=repo, survivors_only=True)
    assert [m["status"] for m in second["mutants"]] == [m["status"] for m in first["mutants"]]  # type: ignore[index]
    # The whole selection on what is left: every survivor killed; the record names each pass's selection.
    third = run("ops.py", ["tests/test_whole.py"], out, repo=repo, survivors_only=True)
    assert [m["status"] for m in third["mutants"]] == ["killed"] * 6  # type: ignore[index]
    assert third["tests"] == ["tests/test_whole.py"]
    assert third["earlier_tests"] == [["tests/test_quick.py"], ["tests/test_nothing.py"]]
    assert json.loads((out / "ops.py.json").read_text()) == third


def test_mutmuts_own_mutants_are_the_ones_mutmut_run_makes() -> None:
    # mutmut is installed by `make mutation` (requirements-mutation.txt), not by `make test`.
    pytest.importorskip("mutmut", reason="mutmut is not installed: `make mutation` installs requirements-mutation.txt")
    from mutation_operators import mutmut_mutants
    from mutmut.mutation.file_mutation import mutate_file_contents

    module = "gpu_tenancy/builders/mock_nvml/cuda_control.py"
    source = (Path(__file__).resolve().parents[1] / module).read_text()
    made = mutmut_mutants(source, module)
    # As many as `mutmut run` switches on (its trampolines name one per mutant), each one change of the source.
    assert len(made) == len(mutate_file_contents(module, source).mutant_names) == 70
    # Named as `mutmut run` names them, in its order, so a mutmut run's results can be read per mutant.
    for named in ("policies/resource_lib.py", "gpu_tenancy/cli/tools.py", module):
        text = (Path(__file__).resolve().parents[1] / named).read_text()
        dotted = named.removesuffix(".py").replace("/", ".")
        assert [m.name for m in mutmut_mutants(text, named)] == [
            f"{dotted}.{name}" for name in mutate_file_contents(named, text).mutant_names]
    # A method's name carries its class (`xǁToolǁurl__mutmut_1`), a function's an `x_` prefix.
    assert mutmut_mutants("class A:\n    def f(self):\n        return 1\n", "pkg/mod.py")[0].name == \
        "pkg.mod.xǁAǁf__mutmut_1"
    assert all(m.source != source and m.operator == "mutmut" for m in made)
    tiny = "def f(x):\n    return x + 1\n\nLIMIT = 2 + 3\n"
    # Inside a function only, as mutmut: the module-level constant is left alone.
    assert {m.source for m in mutmut_mutants(tiny)} == {
        "def f(x):\n    return x - 1\n\nLIMIT = 2 + 3\n", "def f(x):\n    return x + 2\n\nLIMIT = 2 + 3\n"}


def test_after_a_mutmut_run_only_what_it_did_not_kill_runs_fresh(tmp_path: Path) -> None:
    pytest.importorskip("mutmut", reason="mutmut is not installed: `make mutation` installs requirements-mutation.txt")
    import subprocess

    from mutation_operators import run

    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def f(x):\n    return x + 1\n")
    # Only a subprocess reaches f (as the doctor's tests reach it): the test kills both mutants when run.
    (repo / "tests" / "test_calc.py").write_text(
        "import subprocess, sys\n\ndef test_f():\n    out = subprocess.run([sys.executable, '-c', "
        "'import calc; print(calc.f(2))'], capture_output=True, text=True, check=True).stdout\n"
        "    assert out == '3\\n'\n")
    (repo / "conftest.py").write_text("")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    # The mutmut run killed `x + 2` and ran no test on `x - 1` (its coverage does not see the subprocess).
    mutants_dir = tmp_path / "mutmut" / "mutants"
    mutants_dir.mkdir(parents=True)
    from mutmut.mutation.file_mutation import compute_function_hashes

    (mutants_dir / "calc.py.meta").write_text(json.dumps({"exit_code_by_key": {
        "calc.x_f__mutmut_1": 33, "calc.x_f__mutmut_2": 1},
        "hash_by_function_name": compute_function_hashes("def f(x):\n    return x + 1\n")}))
    (mutants_dir.parent / "pyproject.toml").write_text(
        '[tool.mutmut]\npytest_add_cli_args_test_selection = ["tests/test_calc.py"]\n')
    # A selection that kills nothing shows which mutant ran here: only the one mutmut run did not kill.
    (repo / "tests" / "test_nothing.py").write_text("def test_passes():\n    pass\n")
    out = tmp_path / "out"
    record = run("calc.py", ["tests/test_nothing.py"], out, repo=repo, operators="mutmut", after_mutmut_run=mutants_dir)
    assert [(m["name"], m["description"], m["status"]) for m in record["mutants"]] == [  # type: ignore[union-attr]
        ("calc.x_f__mutmut_1", "x + 1 -> x - 1", "survived"), ("calc.x_f__mutmut_2", "1 -> 2", "killed")]
    assert record["earlier_tests"] == ["mutmut run: tests/test_calc.py"]
    record = run("calc.py", ["tests/test_calc.py"], out, repo=repo, operators="mutmut", after_mutmut_run=mutants_dir)
    assert [m["status"] for m in record["mutants"]] == ["killed", "killed"]  # type: ignore[index]


def test_a_mutmut_runs_kills_count_only_for_functions_unchanged_since(tmp_path: Path) -> None:
    """Numbered per function: after `g` changed, `x_g__mutmut_1` may name another mutant, so it runs again; `f`'s
    kills stand (moved lines do not matter). A `# pragma: no mutate` leaves `h`'s code alike and numbers its mutants
    anew: they run again too. A record without the run's function hashes keeps nothing."""
    pytest.importorskip("mutmut", reason="mutmut is not installed: `make mutation` installs requirements-mutation.txt")
    from mutation_operators import killed_by_mutmut_run, mutmut_mutants
    from mutmut.mutation.file_mutation import compute_function_hashes

    then = ("def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x * 2\n\n\n"
            "def h(x):\n    a = x + 1\n    return a - 2\n\n\nclass C:\n    def m(self):\n        return 1\n")
    now = "# moved\n\n" + then.replace("x * 2", "x * 3").replace("a = x + 1\n", "a = x + 1  # pragma: no mutate\n")
    ran = {m.name: 1 for m in mutmut_mutants(then, "calc.py")}
    mutants_dir = tmp_path / "mutmut" / "mutants"
    mutants_dir.mkdir(parents=True)
    (mutants_dir.parent / "pyproject.toml").write_text("[tool.mutmut]\n")
    meta = mutants_dir / "calc.py.meta"
    meta.write_text(json.dumps({"exit_code_by_key": ran}))
    with pytest.raises(SystemExit, match="records no function hashes"):
        killed_by_mutmut_run(mutants_dir, "calc.py", now)
    meta.write_text(json.dumps({"exit_code_by_key": ran, "hash_by_function_name": compute_function_hashes(then)}))
    killed, _ = killed_by_mutmut_run(mutants_dir, "calc.py", now)
    assert {name.split("__mutmut_")[0] for name in killed} == {"calc.x_f", "calc.x\u01c1C\u01c1m"}
    assert killed_by_mutmut_run(mutants_dir, "calc.py", then)[0] == set(ran)


def test_a_second_pass_tells_apart_mutmuts_mutants_that_share_a_line_and_description(tmp_path: Path) -> None:
    pytest.importorskip("mutmut", reason="mutmut is not installed: `make mutation` installs requirements-mutation.txt")
    import subprocess

    from mutation_operators import run

    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    # A long first argument: each mutant of the second or third is described alike once shortened.
    (repo / "calc.py").write_text('def g(a, b, c):\n    return (b, c)\n\n\n'
                                  'def f(x):\n    return g("a very long first argument to push the rest past the cut", x, x)\n')
    (repo / "tests" / "test_b.py").write_text("import calc\n\ndef test_b():\n    assert calc.f(1)[0] == 1\n")
    (repo / "tests" / "test_nothing.py").write_text("def test_passes():\n    pass\n")
    (repo / "conftest.py").write_text("")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    out = tmp_path / "out"
    first = run("calc.py", ["tests/test_b.py"], out, repo=repo, operators="mutmut")
    by_name = {m["name"]: m["status"] for m in first["mutants"]}  # type: ignore[union-attr]
    # `b` as None is killed, `c` as None is not, though both read alike.
    assert (by_name["calc.x_f__mutmut_2"], by_name["calc.x_f__mutmut_3"]) == ("killed", "survived")
    second = run("calc.py", ["tests/test_nothing.py"], out, repo=repo, operators="mutmut", survivors_only=True)
    assert {m["name"]: m["status"] for m in second["mutants"]} == by_name  # type: ignore[union-attr]


def test_a_second_pass_keeps_mutmut_results_only_of_functions_unchanged_since(tmp_path: Path) -> None:
    """Kills kept by name where the function's code is as it was (moved lines do not matter); a changed function's
    mutants all run again, even those whose line and description read as before."""
    pytest.importorskip("mutmut", reason="mutmut is not installed: `make mutation` installs requirements-mutation.txt")
    import subprocess

    from mutation_operators import run

    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def f(x):\n    return x + 1\n\n\ndef g(x):\n    y = x\n    return y * 2\n")
    (repo / "tests" / "test_calc.py").write_text(
        "import calc\n\ndef test_calc():\n    assert calc.f(1) == 2 and calc.g(3) == 6\n")
    (repo / "tests" / "test_nothing.py").write_text("def test_passes():\n    pass\n")
    (repo / "conftest.py").write_text("")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    out = tmp_path / "out"
    first = run("calc.py", ["tests/test_calc.py"], out, repo=repo, operators="mutmut")
    assert first["function_hashes"] and {m["status"] for m in first["mutants"]} == {"killed"}  # type: ignore[union-attr]
    # f moves down a line, unchanged; g's code changes and its mutants keep their names (`y` renamed `z`).
    (repo / "calc.py").write_text("# moved\ndef f(x):\n    return x + 1\n\n\ndef g(x):\n    z = x\n    return z * 2\n")
    second = run("calc.py", ["tests/test_nothing.py"], out, repo=repo, operators="mutmut", survivors_only=True)
    status = {m["name"]: m["status"] for m in second["mutants"]}  # type: ignore[union-attr]
    assert {s for n, s in status.items() if "x_f__" in n} == {"killed"}  # kept
    assert {s for n, s in status.items() if "x_g__" in n} == {"survived"}  # run again on a test that checks nothing
    record = json.loads((out / "calc.py.json").read_text())
    del record["function_hashes"]
    (out / "calc.py.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="records no function hashes"):
        run("calc.py", ["tests/test_nothing.py"], out, repo=repo, operators="mutmut", survivors_only=True)


def test_scores_read_mutmuts_mutants_run_fresh_where_mutmut_run_left_no_results(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = "gpu_tenancy/builders/tenant_datastore/datastore.py"
    fresh = tmp_path / "fresh" / f"{module}.json"
    fresh.parent.mkdir(parents=True)
    fresh.write_text(json.dumps({"module": module, "tests": [], "mutants": [
        {"status": s} for s in ["killed"] * 8 + ["timeout", "survived"]]}))
    assert scores_main(["--mutants", str(tmp_path), "--fail-under", "90", module]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(module))
    assert row.split()[1:] == ["9", "1", "0", "0", "0", "90.0%"]


def test_the_copy_holds_the_repositorys_files_and_links_its_environment(tmp_path: Path) -> None:
    import subprocess

    from mutation_operators import _copy_repository

    repo, copy = tmp_path / "repo", tmp_path / "copy"
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / "src" / "m.py").write_text("X = 1\n")
    (repo / "ignored.log").write_text("x")
    (repo / ".gitignore").write_text(".venv/\n*.log\n")
    # A file older than the environment built from it (`.venv/bin/.runtime` after requirements.txt).
    os.utime(repo / "src" / "m.py", (1_600_000_000, 1_600_000_000))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    copy.mkdir()
    _copy_repository(repo, copy)
    assert (copy / "src" / "m.py").read_text() == "X = 1\n" and not (copy / "ignored.log").exists()
    # Copied with its time: make finds the environment as up to date as in the repository.
    assert (copy / "src" / "m.py").stat().st_mtime == 1_600_000_000
    # Tests run tools from .venv/bin (shellcheck): the copy reaches the same environment.
    assert (copy / ".venv").is_symlink() and (copy / ".venv").resolve() == (repo / ".venv").resolve()
    assert not (copy / ".tools").exists()
