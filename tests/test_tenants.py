"""`make tenants` against the recorded tenants, each served by its own fake API server (tests/fake_apiserver.py)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi_stub
import pytest
from fake_apiserver import FakeTenant, closed_port_url, kubeconfig_for, recorded
from harness import MAKE, REPO
from loopback import without_proxies
from test_status import install_stack

from gpu_tenancy.cli import status_codes
from gpu_tenancy.cli.status import command as status_cli
from gpu_tenancy.cli.tenants import command as tenants_cli
from gpu_tenancy.cli.tenants import health as tenants
from gpu_tenancy.cli.tenants import health as tenants_health
from gpu_tenancy.cli.tenants.command import render_table
from gpu_tenancy.cli.tenants.health import TenantHealth
from gpu_tenancy.hami import protocol as hami


@pytest.fixture
def servers() -> Iterator[dict[str, FakeTenant]]:
    objects = recorded("real")
    started = {name: FakeTenant(name, objects[name]).start() for name in objects}
    try:
        yield started
    finally:
        for server in started.values():
            server.stop()


def stack_file(tmp_path: Path, counts: dict[str, int]) -> Path:
    """A stack file declaring `counts[tenant]` L4s per tenant (NVML's name and MiB for the card)."""
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(json.dumps({"config": {"gpu-tenancy:mode": "sim", "gpu-tenancy:tenants": [
        {"name": name, "gpus": [{"model": "NVIDIA L4", "memoryMiB": 23034, "count": n}]} for name, n in counts.items()
    ]}}))
    return path


def test_one_row_per_tenant_with_version_control_plane_nodes_gpus_and_pods(
    servers: dict[str, FakeTenant], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    install_stack(tmp_path, monkeypatch, {name: s.kubeconfig() for name, s in servers.items()})
    declared = stack_file(tmp_path, {"tenant-a": 1, "tenant-b": 2})
    assert tenants_cli.main(["--json", "--stack-file", str(declared)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {"tenant": "tenant-a", "endpoint": "127.0.0.1:6443", "version": "v1.35.5", "control_plane": "ready",
         "nodes_ready": 1, "nodes_total": 1, "gpus_registered": 1, "gpus_declared": 1, "pods_holding_gpus": 4,
         "pending_gpu_pods": 0, "problems": [], "healthy": True},
        # real mode: the nvidia-smi pod has Succeeded, so it holds nothing; b-train waits (wrong card type)
        {"tenant": "tenant-b", "endpoint": "127.0.0.1:6443", "version": "v1.35.5", "control_plane": "ready",
         "nodes_ready": 1, "nodes_total": 1, "gpus_registered": 2, "gpus_declared": 2, "pods_holding_gpus": 2,
         "pending_gpu_pods": 1, "problems": [], "healthy": True},
    ]
    for server in servers.values():
        assert {"/version", "/readyz"} <= set(server.requests)


def test_table_and_an_unreachable_tenant_is_a_row_that_says_so(
    servers: dict[str, FakeTenant], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    down = closed_port_url()
    install_stack(tmp_path, monkeypatch, {"tenant-a": servers["tenant-a"].kubeconfig(),
                                          "tenant-b": kubeconfig_for("tenant-b", down, "token-b")})
    declared = stack_file(tmp_path, {"tenant-a": 1, "tenant-b": 2})
    assert tenants_cli.main(["--stack-file", str(declared), "--width", "200"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["TENANT", "VERSION", "CONTROL", "PLANE", "ENDPOINT", "NODES", "GPUS", "HOLDING",
                              "PENDING", "HEALTH"]
    assert out[1].split() == ["tenant-a", "v1.35.5", "ready", "127.0.0.1:6443", "1/1", "1/1", "4", "0", "healthy"]
    assert out[2].split()[:8] == ["tenant-b", "-", "unreachable", "127.0.0.1:6443", "-", "-/2", "-", "-"]
    assert f"unreachable: cannot read {down}: connection refused" in out[2]
    assert out[3].startswith("2 tenant(s), 1 not healthy")


@pytest.mark.parametrize(("change", "problem"), [
    ("not-ready", "control plane not ready: etcd, etcd-readiness"),
    ("node-not-ready", "node(s) not Ready: gpu-l4-01"),
    ("no-node", "no node joined; 0 GPU(s) registered, 2 declared"),
    ("gpu-missing", "1 GPU(s) registered, 2 declared"),
    ("gpu-unhealthy", "1 GPU(s) registered unhealthy"),
])
def test_what_makes_a_tenant_unhealthy(change: str, problem: str) -> None:
    objects = copy.deepcopy(recorded("real")["tenant-b"])
    readyz = "ok"
    if change == "not-ready":
        server = FakeTenant("tenant-b", objects, ready=False).start()
        try:
            from gpu_tenancy.cli.status.kube import read_tenant

            read = read_tenant(server.kubeconfig(), probes=True)
        finally:
            server.stop()
        readyz = str(read.readyz)
    (node,) = objects["nodes"]
    annotations = node["metadata"]["annotations"]
    devices = json.loads(annotations[hami.NODE_REGISTER_ANNOTATION])
    if change == "node-not-ready":
        node["status"]["conditions"][0]["status"] = "Unknown"
    if change == "no-node":
        objects["nodes"] = []
    if change == "gpu-missing":
        annotations[hami.NODE_REGISTER_ANNOTATION] = json.dumps(devices[:1])
    if change == "gpu-unhealthy":
        devices[0].pop("health")  # Go's omitempty: a card reported unhealthy has no "health" key
        annotations[hami.NODE_REGISTER_ANNOTATION] = json.dumps(devices)
    from gpu_tenancy.cli.status.report import TenantObjects

    row = tenants.health("tenant-b", TenantObjects(objects["nodes"], objects["pods"], objects["resourcequotas"],
                                                   "v1.35.5", readyz), "10.0.0.1:6443", 2)
    assert "; ".join(row.problems) == problem and not row.healthy


def test_declared_gpus_come_from_the_stack_file_as_the_program_reads_it(tmp_path: Path) -> None:
    assert tenants.declared_gpus(REPO / "Pulumi.dev.yaml") == {"tenant-a": 1, "tenant-b": 2}
    assert tenants.declared_gpus(tmp_path / "Pulumi.none.yaml") is None
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  gpu-tenancy:tenants:\n    - name: Tenant_A\n      gpus: []\n")
    with pytest.raises(ValueError, match=r"Pulumi.bad.yaml: gpu-tenancy:tenants\[0\].name: 'Tenant_A' is not a DNS-1123"):
        tenants.declared_gpus(bad)


def test_a_dump_from_status_save_is_read_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "dump.json"
    objects = recorded("sim")
    dump.write_text(json.dumps({name: {**o, "version": "v1.35.5", "readyz": "ok"} for name, o in objects.items()}))
    assert tenants_cli.main(["--objects", str(dump), "--json", "--tenant", "tenant-b"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["tenant"], row["gpus_registered"], row["pods_holding_gpus"], row["pending_gpu_pods"]) == (
        "tenant-b", 2, 2, 1)
    assert row["gpus_declared"] is None  # no stack file given: nothing to compare with


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_tenants(servers: dict[str, FakeTenant], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_stack(tmp_path, monkeypatch, {name: s.kubeconfig() for name, s in servers.items()})
    done = subprocess.run([*MAKE, "tenants", "JSON=1", "TENANT=tenant-a",
                           f"STATE_DIR={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    # the repository's Pulumi.dev.yaml declares tenant-a's one A100
    assert row["tenant"] == "tenant-a" and row["gpus_declared"] == 1 and row["healthy"] is True


# --------------------------------------------------------------------------- the table's layout and the exit codes


def _row(**overrides: Any) -> TenantHealth:
    fields: dict[str, Any] = {"tenant": "tenant-with-a-long-name", "endpoint": "172.18.255.201:6443",
                              "version": "v1.35.5", "control_plane": "ready", "nodes_ready": 12, "nodes_total": 12,
                              "gpus_registered": 16, "gpus_declared": 16, "pods_holding_gpus": 7, "pending_gpu_pods": 3}
    return TenantHealth(**{**fields, **overrides})


def test_a_narrow_table_keeps_names_versions_and_counts_whole_and_counts_right_aligned() -> None:
    """At 100 columns something must give: the endpoint and control plane may, the tenant's name, its version and the
    NODES/GPUS counts may not, and every count sits at the right of its column, under the end of its heading."""
    narrow = render_table([_row(), _row(tenant="b", nodes_ready=1, nodes_total=1, gpus_registered=1,
                                        gpus_declared=1, pods_holding_gpus=0, pending_gpu_pods=0)], 100)
    lines = narrow.splitlines()
    assert any("tenant-with-a-long-name" in line for line in lines), narrow
    assert any("v1.35.5" in line for line in lines) and any("12/12" in line for line in lines), narrow
    header = next(line for line in lines if line.startswith("TENANT"))
    for heading, long_value, short_value in (("NODES", "12/12", "1/1"), ("GPUS", "16/16", "1/1"),
                                             ("HOLDING", "7", "0"), ("PENDING", "3", "0")):
        end = header.index(heading) + len(heading)
        long_line = next(line for line in lines if line.startswith("tenant-with-a-long-name"))
        short_line = next(line for line in lines if line.startswith("b "))
        for line, value in ((long_line, long_value), (short_line, short_value)):
            assert line[end - len(value):end] == value, (heading, value, narrow)


def test_at_50_columns_the_name_version_and_counts_are_what_is_left_whole() -> None:
    """Squeezed, the other columns give way and these four stay on one line each, unbroken."""
    lines = render_table([_row()], 50).splitlines()
    assert lines[0].split() == ["TENANT", "VERSION", "NODES", "GPUS"], lines
    assert lines[1].split() == ["tenant-with-a-long-name", "v1.35.5", "12/12", "16/16"], lines


@pytest.mark.parametrize("error", [status_cli.UsageError("--tenant x: no such tenant"), ValueError("bad dump")],
                         ids=["usage", "value"])
def test_a_bad_request_is_one_line_and_exit_2(error: Exception, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    def fail(*_: Any) -> Any:
        raise error

    monkeypatch.setattr(tenants_health, "gather", fail)
    assert tenants_cli.main(["--stack", "dev"]) == status_codes.USAGE == 2
    assert capsys.readouterr().err == f"tenants: {error}\n"


def test_without_a_terminal_the_table_is_120_columns_wide(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Piped (make's output to a file, CI), shutil's fallback decides: 120 columns, as in the docs' examples."""
    monkeypatch.delenv("COLUMNS", raising=False)
    widths: list[int] = []
    monkeypatch.setattr(tenants_health, "gather", lambda *_: [_row()])
    monkeypatch.setattr(tenants_cli, "render_table", lambda rows, width, color=False: widths.append(width) or "")
    monkeypatch.setattr(tenants_cli.shutil, "get_terminal_size",
                        lambda fallback=(80, 24): os.terminal_size(fallback))  # what it returns off a terminal
    tenants_cli.main(["--stack", "dev"])
    assert widths == [120]


@pytest.mark.parametrize("value", [
    "[1]",  # JSON, but not a list of objects
    "[{",  # not JSON
    "GPU-0,10,24576",  # the pre-2.8 form cut short
    7,  # not text: a hand-edited `--objects` dump
])
def test_a_register_annotation_that_cannot_be_read_is_a_problem_of_its_node(value: Any) -> None:
    from gpu_tenancy.cli.status.report import TenantObjects

    node = {"metadata": {"name": "w", "annotations": {hami.NODE_REGISTER_ANNOTATION: value}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    row = tenants.health("tenant-a", TenantObjects([node], [], [], "v1.35.5", "ok"), "10.0.0.1:6443", None)
    assert row.problems == (f"node w: unreadable {hami.NODE_REGISTER_ANNOTATION}",)


@pytest.mark.parametrize(("text", "said"), [
    ("config: [\n", "not YAML: while parsing a flow node"),  # PyYAML's first line for it
    ("- a list\n", "not a stack file: expected a mapping with a `config:` mapping"),
    ("config:\n  - a list\n", "not a stack file: expected a mapping with a `config:` mapping"),
])
def test_a_stack_file_that_is_no_stack_config_is_one_line(tmp_path: Path, text: str, said: str) -> None:
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text(text)
    with pytest.raises(ValueError) as refused:
        tenants.declared_gpus(bad)
    assert str(refused.value) == f"{bad}: {said}"


def test_a_tenants_health_names_what_is_not_ready() -> None:
    from gpu_tenancy.cli.status.report import TenantObjects
    from gpu_tenancy.cli.tenants.health import health

    def node(name: str, conditions: list[dict[str, str]]) -> dict[str, Any]:
        return {"metadata": {"name": name}, "status": {"conditions": conditions}}

    ready = [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]
    nodes = [node("w-2", [{"type": "Ready", "status": "False"}]), node("w-1", []), node("w-0", ready)]
    # A node with no Ready condition is not Ready (the kubelet has not reported); no register annotation is no
    # card, not an unreadable one; a /readyz not asked is "not probed".
    found = health("tenant-a", TenantObjects(nodes=nodes, readyz=None), "", None)
    assert found.problems == ("control plane not probed", "node(s) not Ready: w-1, w-2")
    assert (found.nodes_ready, found.nodes_total, found.gpus_registered) == (1, 3, 0)


# --------------------------------------------------------------------------- what the pages show, and the table's text


def test_the_table_the_day_two_page_shows_is_what_make_tenants_prints(
    servers: dict[str, FakeTenant], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/day-two.md: `make tenants STACK=gpu` at 100 columns, each tenant's API serving what HAMi v2.10.0 wrote
    (tests/fixtures/status/real.json), the stack's outputs naming the LoadBalancer endpoints the page shows."""
    from test_docs import shown

    expected, code = shown(REPO / "docs" / "day-two.md", "make tenants STACK=gpu")
    endpoints = {"tenant-a": "10.20.0.240:6443", "tenant-b": "10.20.0.241:6443"}
    without_proxies(monkeypatch)  # the fake API servers listen on loopback
    pulumi_stub.install(tmp_path / "bin", {"gpu": {
        "mode": "real", "tenants": {name: {"endpoint": endpoints[name], "nodes": []} for name in servers},
        "tenantKubeconfigs": {name: server.kubeconfig() for name, server in servers.items()},
        "managementKubeconfig": "apiVersion: v1\nkind: Config\n"}})
    monkeypatch.setenv("PATH", pulumi_stub.path_with(tmp_path / "bin"))
    monkeypatch.chdir(REPO)  # Pulumi.gpu.yaml declares the GPUs
    assert tenants_cli.main(["--stack", "gpu", "--width", "100"]) == code == 0
    assert capsys.readouterr().out == "".join(line + "\n" for line in expected)


def _unknowns() -> list[TenantHealth]:
    return [
        _row(tenant="a", endpoint="1.2.3.4:6443", nodes_ready=1, nodes_total=1, gpus_registered=1, gpus_declared=1,
             pods_holding_gpus=0, pending_gpu_pods=0),
        TenantHealth("b", problems=("unreachable: refused", "z")),
        _row(tenant="c", version=None, endpoint="", nodes_ready=0, nodes_total=0, gpus_registered=0,
             gpus_declared=None, pods_holding_gpus=0, pending_gpu_pods=0, problems=("no node joined",)),
    ]


def test_what_is_not_known_is_a_dash_and_undeclared_gpus_a_question_mark() -> None:
    assert render_table(_unknowns(), 100) == (
        "TENANT  VERSION  CONTROL PLANE  ENDPOINT      NODES  GPUS  HOLDING  PENDING  HEALTH\n"
        "a       v1.35.5  ready          1.2.3.4:6443    1/1   1/1        0        0  healthy\n"
        "b       -        unreachable    -                 -   -/?        -        -  unreachable: refused; z\n"
        "c       -        ready          -               0/0   0/?        0        0  no node joined\n"
        "3 tenant(s), 2 not healthy (NODES: Ready/total, GPUS: registered/declared)\n")


def test_a_long_problem_is_folded_whole_not_cut() -> None:
    """HEALTH folds: a word wider than the column (an address) breaks across lines rather than ending in `…`."""
    url = "https://tenant-with-a-long-name.example.internal:6443/readyz"
    table = render_table([_row(tenant="a", endpoint="1.2.3.4:6443", problems=(f"unreachable: cannot read {url}",))],
                         100).splitlines()
    column = table[0].index("HEALTH")
    assert "…" not in "".join(table)
    assert "".join(line[column:] for line in table[1:-1]).replace(" ", "") == f"unreachable:cannotread{url}"


RED, GREEN, BOLD = "\x1b[31m", "\x1b[32m", "\x1b[1m"


def test_on_a_terminal_health_is_in_colour_unless_no_color_is_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """On a terminal: headings bold, `healthy` green, problems red; NO_COLOR (https://no-color.org) takes the colours
    away and leaves the bold; piped, no escape at all."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")  # rich styles nothing for TERM=dumb
    monkeypatch.setattr(tenants_health, "gather", lambda *_: _unknowns())
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert tenants_cli.main(["--width", "100"]) == 1
    coloured = capsys.readouterr().out
    assert coloured.startswith(f"{BOLD}TENANT\x1b[0m")
    assert f"{GREEN}healthy\x1b[0m" in coloured and f"{RED}no node joined\x1b[0m" in coloured
    assert "\n3 tenant(s), 2 not healthy (NODES: Ready/total, GPUS: registered/declared)" in coloured  # not highlighted
    monkeypatch.setenv("NO_COLOR", "1")
    assert tenants_cli.main(["--width", "100"]) == 1
    plain = capsys.readouterr().out
    assert plain.startswith(f"{BOLD}TENANT") and RED not in plain and GREEN not in plain
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert tenants_cli.main(["--width", "100"]) == 1
    assert "\x1b" not in capsys.readouterr().out


def test_json_is_a_list_indented_by_two(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(tenants_health, "gather", lambda *_: [TenantHealth("b", problems=("z",))])
    assert tenants_cli.main(["--json"]) == 1
    assert capsys.readouterr().out.startswith('[\n  {\n    "tenant": "b",\n    "endpoint": "",\n')


def test_stack_outputs_that_cannot_be_read_are_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from gpu_tenancy.cli import stack_outputs

    def fail(*_: Any) -> Any:
        raise stack_outputs.OutputsError("no stack named gpu")

    monkeypatch.setattr(tenants_health, "gather", fail)
    assert tenants_cli.main(["--stack", "gpu"]) == status_codes.FAILURE == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "tenants: no stack named gpu\n")


def test_the_stack_file_given_is_the_one_compared_with(
    servers: dict[str, FakeTenant], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Live and from a dump: the GPUs `--stack-file` declares, not the repository's Pulumi.dev.yaml (1 and 2); a
    tenant the file does not name declares none."""
    install_stack(tmp_path, monkeypatch, {name: s.kubeconfig() for name, s in servers.items()})
    monkeypatch.chdir(REPO)
    declared = stack_file(tmp_path, {"tenant-a": 3})
    assert tenants_cli.main(["--json", "--stack-file", str(declared)]) == 1
    live = json.loads(capsys.readouterr().out)
    dump = tmp_path / "dump.json"
    objects = recorded("real")
    dump.write_text(json.dumps({name: {**o, "version": "v1.35.5", "readyz": "ok"} for name, o in objects.items()}))
    assert tenants_cli.main(["--objects", str(dump), "--json", "--stack-file", str(declared)]) == 1
    offline = json.loads(capsys.readouterr().out)
    for rows in (live, offline):
        assert [(row["tenant"], row["gpus_declared"], row["problems"]) for row in rows] == [
            ("tenant-a", 3, ["1 GPU(s) registered, 3 declared"]), ("tenant-b", 0, ["2 GPU(s) registered, 0 declared"])]
    assert [row["endpoint"] for row in offline] == ["", ""]  # a dump has no stack outputs


def test_a_node_without_a_name_is_named_by_a_question_mark() -> None:
    from gpu_tenancy.cli.status.report import TenantObjects

    nameless = {"metadata": {}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    row = tenants.health("tenant-a", TenantObjects(nodes=[nameless], readyz="ok"), "", None)
    assert row.problems == ("node(s) not Ready: ?",)


def test_cards_are_counted_over_every_node_past_an_unreadable_one() -> None:
    from gpu_tenancy.cli.status.report import TenantObjects

    def node(name: str, annotation: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, "annotations": {hami.NODE_REGISTER_ANNOTATION: annotation}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    register = json.loads(recorded("real")["tenant-b"]["nodes"][0]["metadata"]["annotations"][
        hami.NODE_REGISTER_ANNOTATION])  # two L4s, as HAMi v2.10.0 wrote them
    sick = [{**register[0]}]
    sick[0].pop("health")  # Go's omitempty: an unhealthy card has no "health"
    nodes = [node("w-0", "[{"), node("w-1", json.dumps(register)), node("w-2", json.dumps(register[:1])),
             node("w-3", json.dumps(sick)), node("w-4", json.dumps(sick))]
    row = tenants.health("tenant-b", TenantObjects(nodes=nodes, readyz="ok"), "", 5)
    assert row.gpus_registered == 5
    assert row.problems == (f"node w-0: unreadable {hami.NODE_REGISTER_ANNOTATION}", "2 GPU(s) registered unhealthy")


def test_a_stack_file_that_does_not_validate_names_the_first_key_and_its_problem(tmp_path: Path) -> None:
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  gpu-tenancy:tenants:\n    - name: tenant-a\n      gpus: []\n")
    with pytest.raises(ValueError) as refused:
        tenants.declared_gpus(bad)
    # pydantic's message for a list below its min_length, at the first tenant's gpus
    assert str(refused.value) == (
        f"{bad}: gpu-tenancy:tenants[0].gpus: List should have at least 1 item after validation, not 0")


def test_gather_without_a_stack_file_declares_nothing_and_names_the_stack_in_errors(
    servers: dict[str, FakeTenant], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_stack(tmp_path, monkeypatch, {name: s.kubeconfig() for name, s in servers.items()})
    rows = tenants.gather("dev", [], tmp_path / "Pulumi.none.yaml")
    assert [(row.tenant, row.gpus_declared, row.endpoint) for row in rows] == [
        ("tenant-a", None, "127.0.0.1:6443"), ("tenant-b", None, "127.0.0.1:6443")]
    pulumi_stub.install(tmp_path / "bin", {"dev": {"tenants": [], "tenantKubeconfigs": {}}})
    from gpu_tenancy.cli import stack_outputs

    with pytest.raises(stack_outputs.OutputsError, match=r"^stack dev: output 'tenants' is not an object$"):
        tenants.gather("dev", [], None)
