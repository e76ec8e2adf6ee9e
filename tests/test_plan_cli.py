"""The planner CLI as a user meets it: exit codes, one-line errors naming file and key, help, JSON, widths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gpu_tenancy.cli import status_codes
from gpu_tenancy.cli.plan import command as plan_cli

ROOT = Path(__file__).resolve().parents[1]
DEV_JSON = ROOT / "examples" / "plan-dev.json"
OVERCOMMIT_JSON = ROOT / "examples" / "plan-overcommit.json"


def run(*args: str, columns: int = 100) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "gpu_tenancy", "plan", *args], cwd=ROOT, capture_output=True, text=True, env=env
    )


def main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = plan_cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def edited(tmp_path: Path, change: Callable[[dict], object], source: Path = DEV_JSON, name: str = "in.json") -> Path:
    data = json.loads(source.read_text())
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


# --------------------------------------------------------------------------- verdicts and exit codes


def test_plan_fits_exit_0_and_json() -> None:
    r = run("plan", "--json", "examples/plan-dev.json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fits"] is True


def test_plan_does_not_fit_exit_1_with_hamis_reasons() -> None:
    r = run("plan", "--json", "examples/plan-overcommit.json")
    assert r.returncode == 1
    reasons = {f["reason"] for f in json.loads(r.stdout)["failures"]}
    assert reasons == {"1/1 CardInsufficientCore", "NodeInsufficientDevice"}


def test_report_exits_1_when_something_does_not_fit(tmp_path: Path) -> None:
    r = run("report", "examples/plan-overcommit.json", "--png", str(tmp_path / "o.png"))
    assert r.returncode == 1, r.stderr
    assert "a-infer-5 (a-infer): 1/1 CardInsufficientCore" in r.stdout
    assert "6 replica(s) do not fit" in r.stdout
    assert (tmp_path / "o.png").stat().st_size > 0


def test_report_fits_exit_0_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = main(capsys, "report", str(DEV_JSON), "--width", "200")
    assert code == 0
    assert "gpu-tenancy-dev-tenant-a-worker / NVIDIA A100-SXM4-80GB #0" in out and "a-infer ×4: 40960 MiB, 80%" in out
    assert "quota: gpu 4/6 · gpumem 40960/61440 MiB · gpucores 80/100%" in out
    code, out, _ = main(capsys, "report", str(DEV_JSON), "--json")
    view = json.loads(out)
    assert code == 0 and view["fits"] is True and view["source"] == "planned"
    assert [t["tenant"] for t in view["tenants"]] == ["tenant-a", "tenant-b"]


@pytest.mark.parametrize("stack", ["Pulumi.dev.yaml", "Pulumi.dev-nvml.yaml", "Pulumi.gpu.yaml"])
def test_plan_reads_stack_files_sim_and_real_without_secrets(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The real stack's secrets live in Pulumi's encrypted config, not in the file: nothing asks for them."""
    code, out, err = main(capsys, "plan", str(ROOT / stack), "--json")
    assert code == 0, err
    placed = {p["workload"] for p in json.loads(out)["placements"]}
    assert placed == {"a-infer", "b-notebook"}


def test_stack_file_ignores_secure_values_and_other_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = yaml.safe_load((ROOT / "Pulumi.gpu.yaml").read_text())
    document["config"]["gpu-tenancy:sshPrivateKey"] = {"secure": "v1:AAAA"}
    document["config"]["gpu-tenancy:managementKubeconfig"] = {"secure": "v1:BBBB"}
    path = tmp_path / "Pulumi.real.yaml"
    path.write_text(yaml.safe_dump(document))
    code, out, err = main(capsys, "plan", str(path), "--json")
    assert code == 0, err
    assert "v1:" not in out + err


def test_stack_file_and_json_form_plan_alike(capsys: pytest.CaptureFixture[str]) -> None:
    _, from_stack, _ = main(capsys, "report", str(ROOT / "Pulumi.dev.yaml"), "--json")
    _, from_json, _ = main(capsys, "report", str(DEV_JSON), "--json")

    def shape(view: dict) -> list:
        return [(t["tenant"], [(g["model"], len(g["slices"])) for g in t["gpus"]], t["quota"]) for t in view["tenants"]]

    assert shape(json.loads(from_stack)) == shape(json.loads(from_json))


# --------------------------------------------------------------------------- input errors: one line, exit 2


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = main(capsys, "plan", "nope.json")
    assert code == 2 and out == ""
    assert one_line(err) == "nope.json: no such file"


def test_bad_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"nodes": [}')
    code, _, err = main(capsys, "report", str(path))
    assert code == 2
    assert one_line(err).startswith(f"{path}: not valid JSON: Expecting value")


def test_bad_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text("config:\n  gpu-tenancy:tenants: [\n")
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2 and one_line(err).startswith(f"{path}: not valid YAML:")


def test_missing_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = edited(tmp_path, lambda d: d["workloads"][1].pop("name"))
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2 and one_line(err) == f"{path}: workloads[1].name: is required"
    path = edited(tmp_path, lambda d: d.pop("nodes"))
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2 and one_line(err) == f"{path}: nodes: is required"


def test_misspelt_key_is_an_error_not_a_quota_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13: `gpumemMib` was silently ignored and the whole card then failed the quota."""
    def misspell(d: dict) -> None:
        d["workloads"][0]["containers"][0] = {"gpus": 1, "gpumemMib": 10240, "gpucores": 20}

    path = edited(tmp_path, misspell)
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2
    assert one_line(err) == f"{path}: workloads[0].containers[0].gpumemMib: is not a known setting"


def test_stack_file_errors_name_the_config_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpu-tenancy:tenants"][1]["workloads"][0]["containers"][0]["gpumemMib"] = 5
    path = tmp_path / "Pulumi.typo.yaml"
    path.write_text(yaml.safe_dump(document))
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2
    assert one_line(err) == f"{path}: gpu-tenancy:tenants[1].workloads[0].containers[0].gpumemMib: is not a known setting (did you mean 'gpumemMiB'?)"
    path.write_text(yaml.safe_dump({"config": {"gpu-tenancy:mode": "sim"}}))
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2 and one_line(err) == f"{path}: gpu-tenancy:tenants: is required"


def test_zero_percentage_is_refused_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stack config refuses gpumemPercentage 0 (HAMi would silently give the whole card); so does the CLI."""
    path = edited(tmp_path, lambda d: d["workloads"][1]["containers"][0].update(gpumemPercentage=0))
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2
    line = one_line(err)
    assert line.startswith(f"{path}: workloads[1].containers[0].gpumemPercentage: Input should be greater than 0")
    assert "HAMi ignores 0 and gives the whole card" in line


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["nodes"][0]["devices"][0].update(mode="mig"),
         "nodes[0].devices[0].mode: MIG mode is not modelled by the planner"),
        (lambda d: d["nodes"][1]["devices"].extend(
            {**d["nodes"][1]["devices"][0], "id": f"GPU-x{i}", "index": 2 + i} for i in range(11)),
         "nodes[1].devices: 13 GPUs on one node; the planner reproduces HAMi's device order only up to 12"),
        (lambda d: d["workloads"][0].update(gpuSchedulerPolicy="mutex"),
         "workloads[0].gpuSchedulerPolicy: Input should be 'binpack' or 'spread' (got 'mutex')"),
        (lambda d: d["workloads"][0].update(annotations={"nvidia.com/use-gpuuuid": "GPU-a100-0"}),
         "workloads[0].annotations: is not a known setting"),
        (lambda d: d["nodes"][0]["devices"][0].update(cordoned=True),
         "nodes[0].devices[0].cordoned: is not a known setting"),
        (lambda d: d["workloads"][0].update(tenant="tenant-z"),
         "workloads[0].tenant: no node belongs to tenant 'tenant-z'"),
        (lambda d: d["quota"]["tenant-a"].update({"limits.nvidia.com/gpumemory": 1}),
         "quota.tenant-a: unknown quota key 'limits.nvidia.com/gpumemory'; allowed: limits.nvidia.com/gpu,"),
    ],
)
def test_unmodelled_or_inconsistent_inputs_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Callable[[dict], object], expected: str
) -> None:
    path = edited(tmp_path, change)
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2
    assert one_line(err).startswith(f"{path}: {expected}")


def test_register_entries_read_as_hami_decodes_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DeviceInfo's fields are all omitempty and json.Unmarshal leaves absent ones at Go's zero value:
    the device plugin leaves `health` out exactly when the card is unhealthy."""
    path = edited(tmp_path, lambda d: d["nodes"][0]["devices"][0].pop("health"))
    code, out, _ = main(capsys, "plan", str(path), "--json")
    assert code == 1
    assert {f["reason"] for f in json.loads(out)["failures"] if f["workload"] == "a-infer"} == {"1/1 CardNotHealth"}
    path = edited(tmp_path, lambda d: d["nodes"][0]["devices"][0].pop("count"))
    code, out, _ = main(capsys, "plan", str(path), "--json")
    assert code == 1
    assert {f["reason"] for f in json.loads(out)["failures"]} == {"1/1 CardTimeSlicingExhausted"}


def test_stack_with_more_gpus_than_the_planner_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    document["config"]["gpu-tenancy:tenants"][1]["gpus"][0]["count"] = 13
    path = tmp_path / "Pulumi.big.yaml"
    path.write_text(yaml.safe_dump(document))
    code, _, err = main(capsys, "plan", str(path))
    assert code == 2
    assert one_line(err).startswith(f"{path}: gpu-tenancy:tenants[1].gpus: 13 GPUs")


def test_unwritable_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = main(capsys, "report", str(DEV_JSON), "--png", str(tmp_path / "missing-dir" / "x.png"))
    assert code == 2 and one_line(err).startswith(str(tmp_path / "missing-dir" / "x.png"))


# --------------------------------------------------------------------------- usage, help, width


@pytest.mark.parametrize("args", [[], ["frobnicate", "x"], ["plan"], ["report", "x", "--bogus"]])
def test_usage_errors_one_line_exit_2(args: list[str]) -> None:
    r = run(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert one_line(r.stderr).startswith("gpu-tenancy plan")


@pytest.mark.parametrize("command", [[], ["plan"], ["report"]])
def test_help_on_every_command(command: list[str]) -> None:
    r = run(*command, "--help")
    assert r.returncode == 0
    assert "Pulumi.<stack>.yaml" in r.stdout or "plan" in r.stdout
    if command:
        assert "--json" in r.stdout and "stack file" in r.stdout
    if command == ["report"]:
        assert "--png" in r.stdout


@pytest.mark.parametrize("columns", [80, 120])
def test_tables_follow_the_terminal_width(columns: int) -> None:
    for command in ("plan", "report"):
        r = run(command, "examples/plan-overcommit.json", columns=columns)
        assert r.returncode == 1
        widths = {len(line) for line in r.stdout.splitlines() if line.startswith(("┏", "└"))}
        assert widths == {columns}, (command, widths)


def _order_case(tmp_path: Path, numa: int | None = 0) -> str:
    """One L4, w0 {11517 MiB, no cores} then w1 2 x {2048 MiB, 50 cores}: if w1's pods are scheduled first
    the card's cores are full and w0 gets CardComputeUnitsExhausted."""
    doc = {
        "nodes": [{"name": "l4", "devices": [{"id": "GPU-0", "type": "NVIDIA-NVIDIA L4", "devmem": 23034,
                                              "devcore": 100, "count": 10, "numa": numa, "health": True}]}],
        "workloads": [
            {"name": "w0", "containers": [{"gpumemMiB": 11517}]},
            {"name": "w1", "replicas": 2, "containers": [{"gpumemMiB": 2048, "gpucores": 50}]},
        ],
    }
    path = tmp_path / "order.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_plan_that_depends_on_the_order_exits_3_and_says_on_what(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _order_case(tmp_path)
    code, out, _ = main(capsys, "plan", path, "--width", "100")
    assert code == status_codes.DEPENDS == 3
    assert "In declaration order: 3 GPU slice(s) placed; everything placed" in out
    assert "fits in some orders only: w0 replica 0: depends on the order pods are created and scheduled in" in out
    assert "Verdict: 1 replica(s) fit in some orders only" in out
    code, out, _ = main(capsys, "plan", "--json", path)
    order = json.loads(out)["order"]
    assert code == 3 and order["verdict"] == "depends"
    assert [(r["workload"], r["replica"], r["verdict"]) for r in order["replicas"]] == [
        ("w0", 0, "depends"), ("w1", 0, "fits"), ("w1", 1, "fits")]
    code, out, _ = main(capsys, "report", "--json", path)
    assert code == 3 and json.loads(out)["order"]["verdict"] == "depends"


def test_a_stack_file_with_ordered_workloads_plans_the_declared_order(tmp_path: Path) -> None:
    from gpu_tenancy.cli.plan.order_verdicts import ordered_tenants
    from gpu_tenancy.hami.planner.model import ContainerRequest, Workload

    workloads = [Workload("w", (ContainerRequest(1, 1024),), tenant="tenant-a")]
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpu-tenancy:orderedWorkloads": True}}))
    assert ordered_tenants(str(stack), workloads) == frozenset({"tenant-a"})
    stack.write_text(yaml.safe_dump({"config": {"gpu-tenancy:orderedWorkloads": False}}))
    assert ordered_tenants(str(stack), workloads) == frozenset()


@pytest.mark.parametrize("stack", ["Pulumi.dev.yaml", "Pulumi.dev-nvml.yaml", "Pulumi.gpu.yaml"])
def test_the_example_stacks_fit_whatever_the_order(capsys: pytest.CaptureFixture[str], stack: str) -> None:
    code, out, _ = main(capsys, "plan", "--json", str(ROOT / stack))
    assert code == 0
    assert json.loads(out)["order"]["verdict"] == "fits"


@pytest.mark.parametrize(("numa", "code"), [((0, 1), 0), ((None, None), 3), ((0, 0), 3)])
def test_numa_nodes_in_the_json_form_decide_a_card_tie(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, numa: tuple[int | None, int | None], code: int
) -> None:
    """Two A100s, w0 then w1 (three containers): after w1's first container both cards score the same;
    HAMi tries the higher NUMA node first. Declared and different, w1 fits; unknown (null) or equal, the
    plan does not know the order HAMi keeps, so it depends."""
    devices = [{"id": f"GPU-{i}", "index": i, "type": "NVIDIA-NVIDIA A100-SXM4-80GB", "devmem": 81920,
                "devcore": 100, "count": 10, "numa": n, "health": True} for i, n in enumerate(numa)]
    doc = {"nodes": [{"name": "h", "devices": devices}], "workloads": [
        {"name": "w0", "containers": [{"gpumemMiB": 20480, "gpucores": 60}, {"gpumemMiB": 8192, "gpucores": 20}]},
        {"name": "w1", "containers": [{"gpumemMiB": 20480, "gpucores": 20}, {"gpumemMiB": 40960, "gpucores": 20},
                                      {"gpumemMiB": 8192, "gpucores": 60}]},
    ]}
    path = tmp_path / "numa.json"
    path.write_text(json.dumps(doc))
    got, out, _ = main(capsys, "plan", "--json", str(path))
    assert got == code
    verdict = {(r["workload"], r["verdict"]) for r in json.loads(out)["order"]["replicas"]}
    assert verdict == {("w0", "fits"), ("w1", "fits" if code == 0 else "depends")}


def test_the_picture_carries_the_verdict_over_every_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_tenancy.cli import allocation_chart

    drawn: list[str | None] = []
    monkeypatch.setattr(allocation_chart, "render_png", lambda view, path, title=None: drawn.append(title))
    code, _, _ = main(capsys, "report", _order_case(tmp_path), "--png", str(tmp_path / "plan.png"))
    assert code == 3 and drawn == ["Verdict: 1 replica(s) fit in some orders only"]
