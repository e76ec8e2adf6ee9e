"""`make status` against a fake cluster: recorded objects as HAMi v2.10.0 writes them (tests/fake_apiserver.py).

Every tenant is served by its own fake API server and reached through its own kubeconfig, which a stub
`pulumi` (tests/pulumi_stub.py) hands out as the stack output `tenantKubeconfigs`, exactly the path
`make status` takes on a deployed stack.
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi_stub
import pytest
from fake_apiserver import FakeTenant, closed_port_url, fake_cluster, kubeconfig_for, recorded
from harness import MAKE, REPO
from loopback import without_proxies

from gpu_tenancy.cli.status import command as status_cli
from gpu_tenancy.cli.status import report as status
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.allocation import AllocationView, TenantView

GOLDEN = json.loads((Path(__file__).parent / "golden" / "register-annotations.json").read_text())


def install_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kubeconfigs: dict[str, str]) -> None:
    """A stub pulumi whose stack `dev` has these tenants, as the program exports them."""
    outputs = {
        "mode": "sim",
        "tenants": {name: {"endpoint": "127.0.0.1:6443", "nodes": []} for name in kubeconfigs},
        "tenantKubeconfigs": kubeconfigs,
        "managementKubeconfig": "apiVersion: v1\nkind: Config\n",
    }
    pulumi_stub.install(tmp_path / "bin", {"dev": outputs})
    monkeypatch.setenv("PATH", pulumi_stub.path_with(tmp_path / "bin"))
    without_proxies(monkeypatch)  # the fake API servers listen on loopback


def dump_file(tmp_path: Path, document: dict[str, Any]) -> Path:
    """What `status --save` writes: tenant -> {nodes, pods, resourcequotas}."""
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(document))
    return dump


@pytest.fixture(params=["sim", "real"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def cluster(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, FakeTenant]]:
    with fake_cluster(recorded(mode)) as tenants:
        install_stack(tmp_path, monkeypatch, {name: t.kubeconfig() for name, t in tenants.items()})
        yield tenants


def registered_model(mode: str, name: str) -> str:
    """The card type the recorded tenant's node registers (its first card)."""
    (node,) = recorded(mode)[name]["nodes"]
    return str(json.loads(node["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION])[0]["type"])


def tenant(view: AllocationView, name: str) -> TenantView:
    (found,) = [t for t in view.tenants if t.tenant == name]
    return found


def test_live_view_per_tenant_and_gpu(mode: str, cluster: dict[str, FakeTenant]) -> None:
    view = status_cli.live("dev")
    assert [t.tenant for t in view.tenants] == ["tenant-a", "tenant-b"]
    a, b = tenant(view, "tenant-a"), tenant(view, "tenant-b")
    (a100,) = a.gpus
    # Both modes register the card as a real host does: NVML's name and total.
    assert a100.model == "NVIDIA A100-SXM4-80GB"
    assert (a100.index, a100.memory_mib, a100.cores, a100.split_count) == (0, 81920, 100, 10)
    assert (a100.memory_allocated, a100.cores_allocated, a100.slots_used) == (40960, 80, 4)
    assert {s.workload for s in a100.slices} == {"a-infer"}
    assert sorted(s.pod for s in a100.slices) == [f"a-infer-6c9f7d8b5-{s}" for s in ("c2vhn", "m4q9w", "t8zr5", "x7k2p")]
    assert [(g.index, g.memory_mib, g.slots_used, g.memory_allocated, g.cores_allocated) for g in b.gpus] == [
        (0, 23034, 0, 0, 0),  # real: the Succeeded nvidia-smi pod's slice no longer counts
        (1, 23034, 2, 23034, 60),  # two 50 % notebooks packed on one card (binpack): 11517 MiB each
    ]
    assert b.gpus[1].label.endswith("/ NVIDIA L4 #1")
    (pending,) = b.unplaced
    assert (pending.workload, pending.pod) == ("b-train", "b-train-7f6b9c4d8-q2w7e")
    assert "2/2 CardTypeMismatch" in pending.reason
    assert {q.key: (q.used, q.limit) for q in b.quota} == {
        "limits.nvidia.com/gpucores": (60, 150),
        "limits.nvidia.com/gpumem": (2 * 11517, 36864),
        "requests.nvidia.com/gpu": (3, 4),
    }
    assert view.verdict == "1 pending" and not view.fits
    for fake in cluster.values():
        assert sorted(set(fake.requests)) == ["/api/v1/nodes", "/api/v1/pods", "/api/v1/resourcequotas"]
        assert all("limit=500" in query for query in fake.queries)  # paged, as kubectl's --chunk-size


def test_make_status_table_and_exit_code(mode: str, cluster: dict[str, FakeTenant],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert status_cli.main(["--stack", "dev", "--width", "200"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    # gpu_tenancy.cli.allocation_chart.render_table, shared with `plan report`
    assert "Live GPU allocation: 1 pending" in out
    assert out.splitlines()[0].startswith("stack dev at ")
    assert "a-infer ×4: 40960 MiB, 80%" in out  # holders per workload; per pod with --pods
    l4 = registered_model(mode, "tenant-b")  # what the agent / HAMi's device plugin registered
    assert (f"pending b-train-7f6b9c4d8-q2w7e (b-train): never fits: asks 1 × A100 (type filter); tenant-b has "
            f"2 × {l4}") in " ".join(out.split())
    # The scheduler's own message, cleaned: one line, no preemption boilerplate, no "pod.."
    assert "    scheduler: 0/1 nodes are available: 1 2/2 CardTypeMismatch\n" in out
    assert "preemption" not in out and ".." not in out
    assert "quota: gpu 4/6 · gpumem 40960/61440 MiB · gpucores 80/100%" in out  # `plan report`'s order
    assert "token-" not in out  # kubeconfigs never reach the terminal


def test_json(cluster: dict[str, FakeTenant], capsys: pytest.CaptureFixture[str]) -> None:
    assert status_cli.main(["--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["source"] == "live" and document["verdict"] == "1 pending" and document["fits"] is False
    a100 = document["tenants"][0]["gpus"][0]
    assert a100["memory_allocated"] == 40960 and a100["slots_used"] == 4 and a100["label"].endswith("#0")
    assert a100["slices"][0] == {"workload": "a-infer", "pod": "a-infer-6c9f7d8b5-c2vhn", "memory_mib": 10240,
                                 "cores": 20}


def test_unreachable_tenant_is_one_line_and_the_others_still_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = recorded("sim")
    with fake_cluster({"tenant-a": objects["tenant-a"]}) as tenants:
        down = closed_port_url()
        install_stack(tmp_path, monkeypatch, {"tenant-a": tenants["tenant-a"].kubeconfig(),
                                              "tenant-b": kubeconfig_for("tenant-b", down, "token-b")})
        assert status_cli.main(["--width", "200"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"status: tenant-b: cannot read {down}: connection refused"]
    assert "a-infer ×4" in out
    assert f"tenant-b: cannot read {down}: connection refused" in out
    assert "1 tenant(s) unreachable" in out


def test_rejected_token_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    with fake_cluster({"tenant-a": recorded("real")["tenant-a"]}) as tenants:
        install_stack(tmp_path, monkeypatch, {"tenant-a": tenants["tenant-a"].kubeconfig(token="stale")})
        assert status_cli.main(["--json"]) == 1
        url = tenants["tenant-a"].url
    out, err = capsys.readouterr()
    assert err.strip() == f"status: tenant-a: cannot read {url}: HTTP 401 Unauthorized"
    assert json.loads(out)["tenants"][0]["error"] == f"cannot read {url}: HTTP 401 Unauthorized"


def test_stack_outputs_failure_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    install_stack(tmp_path, monkeypatch, {})
    assert status_cli.main(["--stack", "nope"]) == 1
    assert capsys.readouterr().err.strip() == "status: pulumi stack output --stack nope: error: no stack named 'nope' found"


# ------------------------------------------------------------------ the reader's rules on recorded objects


def objects(mode: str, name: str) -> dict[str, Any]:
    return copy.deepcopy(recorded(mode)[name])


def view(name: str, data: dict[str, Any]) -> TenantView:
    return status.tenant_view(name, status.TenantObjects(data["nodes"], data["pods"], data["resourcequotas"]))


def test_sim_register_annotation_is_what_the_agent_writes() -> None:
    data = recorded("sim")
    for name in ("tenant-a", "tenant-b"):
        (node,) = data[name]["nodes"]
        assert node["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION] == GOLDEN[name]


def test_real_register_annotation_omits_zero_index_as_go_does() -> None:
    (node,) = recorded("real")["tenant-b"]["nodes"]
    devices = json.loads(node["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION])
    assert [d.get("index") for d in devices] == [1, None] and all("numa" not in d for d in devices)
    assert [g.index for g in view("tenant-b", objects("real", "tenant-b")).gpus] == [0, 1]


def test_pods_of_terminated_phases_do_not_count() -> None:
    data = objects("sim", "tenant-a")
    data["pods"][0]["status"]["phase"] = "Failed"
    data["pods"][1]["status"]["phase"] = "Succeeded"
    (gpu,) = view("tenant-a", data).gpus
    assert gpu.slots_used == 2 and gpu.memory_allocated == 20480


def test_quota_memory_and_cores_are_counted_as_hami_does_not_from_status_used() -> None:
    data = objects("sim", "tenant-a")
    assert "limits.nvidia.com/gpumem" not in data["resourcequotas"][0]["status"]["used"]
    data["pods"] = data["pods"][:3]
    quota = {q.key: q.used for q in view("tenant-a", data).quota}
    assert quota["limits.nvidia.com/gpumem"] == 3 * 10240 and quota["limits.nvidia.com/gpucores"] == 60
    assert quota["requests.nvidia.com/gpu"] == 4  # the quota controller's own count, as recorded


def test_init_container_slices_count_until_every_init_container_succeeded() -> None:
    data = objects("real", "tenant-a")
    pod = data["pods"][0]
    uuid = hami.parse_devices_allocated(pod["metadata"]["annotations"][hami.DEVICES_ALLOCATED_ANNOTATION])[0][0]["uuid"]
    pod["spec"]["initContainers"] = [{"name": "warmup", "image": "registry.k8s.io/pause:3.10"}]
    pod["metadata"]["annotations"][hami.DEVICES_ALLOCATED_ANNOTATION] = f"{uuid},NVIDIA,2048,5:;{uuid},NVIDIA,10240,20:;"
    pod["status"]["initContainerStatuses"] = [{"name": "warmup", "state": {"running": {}}}]
    running = [s.pod for s in view("tenant-a", data).gpus[0].slices]
    assert "a-infer-6c9f7d8b5-x7k2p/init:warmup" in running and "a-infer-6c9f7d8b5-x7k2p/gpu-0" in running
    pod["status"]["initContainerStatuses"] = [{"name": "warmup", "state": {"terminated": {"exitCode": 0}}}]
    done = view("tenant-a", data).gpus[0]
    assert "a-infer-6c9f7d8b5-x7k2p" in [s.pod for s in done.slices] and done.memory_allocated == 40960


@pytest.mark.parametrize(("statuses", "done"), [
    (None, False),  # no status yet: the init containers have not run
    ([], False),
    ([{"name": "a", "state": {"terminated": {"exitCode": 0}}}, {"name": "b", "state": {"terminated": {"exitCode": 0}}}], True),
    ([{"name": "a", "state": {"terminated": {"exitCode": 0}}}, {"name": "b", "state": {"running": {}}}], False),
    ([{"name": "a", "state": {"terminated": {"exitCode": 0}}}, {"name": "b", "state": {"terminated": {"exitCode": 2}}}], False),
    ([{"name": "a", "state": {}}], False),
    ([{"name": "a", "state": {"terminated": {"reason": "Completed"}}}], True),  # Go reads a missing exitCode as 0
])
def test_init_containers_are_done_as_hami_decides(statuses: list[dict[str, Any]] | None, done: bool) -> None:
    pod: dict[str, Any] = {"status": {} if statuses is None else {"initContainerStatuses": statuses}}
    assert status.init_containers_done(pod) is done


def test_a_pod_with_two_gpu_containers_names_each() -> None:
    data = objects("sim", "tenant-b")
    pod = data["pods"][0]
    pod["spec"]["containers"].append({**pod["spec"]["containers"][0], "name": "gpu-1"})
    l4 = [d["id"] for d in json.loads(GOLDEN["tenant-b"])]
    pod["metadata"]["annotations"][hami.DEVICES_ALLOCATED_ANNOTATION] = (
        f"{l4[1]},NVIDIA,11517,30:;{l4[0]},NVIDIA,1024,10:;")
    gpus = view("tenant-b", data).gpus
    name = pod["metadata"]["name"]
    assert [s.pod for s in gpus[0].slices] == [f"{name}/gpu-1"]
    assert f"{name}/gpu-0" in [s.pod for s in gpus[1].slices]


def test_a_slice_on_a_card_no_longer_registered_is_still_shown() -> None:
    data = objects("sim", "tenant-a")
    data["nodes"][0]["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION] = "[]"
    (gpu,) = view("tenant-a", data).gpus
    assert gpu.model == "(not registered)" and gpu.slots_used == 4


def test_pending_without_a_condition_yet_and_user_pods_outside_the_workloads_namespace() -> None:
    data = objects("sim", "tenant-b")
    pending = data["pods"][2]
    pending["metadata"]["namespace"] = "team-x"
    pending["metadata"]["ownerReferences"] = []
    pending["status"].pop("conditions")
    (unplaced,) = view("tenant-b", data).unplaced
    assert unplaced.pod == "team-x/b-train-7f6b9c4d8-q2w7e" and unplaced.workload == "team-x/b-train-7f6b9c4d8-q2w7e"
    assert unplaced.reason == status.NOT_YET_SCHEDULED


def test_unreadable_annotation_marks_only_that_tenant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = recorded("sim")
    data["tenant-a"]["nodes"][0]["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION] = "GPU-1,10"
    dump = dump_file(tmp_path, data)
    assert status_cli.main(["--objects", str(dump), "--json"]) == 1
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["tenants"][0]["error"].startswith("unreadable HAMi state: node gpu-tenancy-dev-tenant-a-worker")
    assert document["tenants"][1]["error"] is None and len(err.splitlines()) == 1


def test_png_is_drawn_with_the_tenants(tmp_path: Path) -> None:
    dump = dump_file(tmp_path, recorded("real"))
    picture = tmp_path / "status.png"
    assert status_cli.main(["--objects", str(dump), "--png", str(picture), "--json"]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_objects_file_errors_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert status_cli.main(["--objects", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.strip() == f"status: {tmp_path / 'missing.json'}: No such file or directory"
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    assert status_cli.main(["--objects", str(bad)]) == 2
    assert "expected an object" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_status_json(cluster: dict[str, FakeTenant], tmp_path: Path) -> None:
    done = subprocess.run([*MAKE, "status", "JSON=1", f"STATE_DIR={tmp_path}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "1 pending"


def test_https_with_the_tenants_ca_and_a_wrong_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """As a Kamaji admin.conf: HTTPS, the tenant CA as certificate-authority-data, a client certificate."""
    objects = recorded("real")
    with fake_cluster(objects, tls=True) as tenants:
        other_ca = FakeTenant("other", {}, tls=True).ca_pem
        install_stack(tmp_path, monkeypatch, {"tenant-a": tenants["tenant-a"].admin_conf(),
                                              "tenant-b": tenants["tenant-b"].kubeconfig(ca_pem=other_ca)})
        assert status_cli.main(["--json"]) == 1
        url = tenants["tenant-b"].url
    out, err = capsys.readouterr()
    assert url.startswith("https://")
    assert err.strip() == f"status: tenant-b: cannot read {url}: certificate verify failed"
    assert json.loads(out)["tenants"][0]["gpus"][0]["slots_used"] == 4  # read with the client certificate


# ------------------------------------------------------------------ filters, watch, dump, paging


def test_tenant_filter_is_repeatable_and_unknown_names_are_usage_errors(
    cluster: dict[str, FakeTenant], capsys: pytest.CaptureFixture[str]
) -> None:
    assert status_cli.main(["--json", "--tenant", "tenant-b"]) == 0
    assert [t["tenant"] for t in json.loads(capsys.readouterr().out)["tenants"]] == ["tenant-b"]
    assert cluster["tenant-a"].requests == []  # a tenant left out is not even read
    assert status_cli.main(["--json", "--tenant", "tenant-b", "--tenant", "tenant-a"]) == 0
    assert [t["tenant"] for t in json.loads(capsys.readouterr().out)["tenants"]] == ["tenant-a", "tenant-b"]
    assert status_cli.main(["--tenant", "tenant-z"]) == 2
    assert capsys.readouterr().err.strip() == "status: stack dev has no tenant 'tenant-z' (tenants: tenant-a, tenant-b)"


def test_pods_flag_lists_every_holder(cluster: dict[str, FakeTenant], capsys: pytest.CaptureFixture[str]) -> None:
    assert status_cli.main(["--pods", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert all(f"a-infer-6c9f7d8b5-{p}: 10240 MiB, 20%" in out for p in ("c2vhn", "m4q9w", "t8zr5", "x7k2p"))


def test_watch_redraws_in_place_until_interrupted(cluster: dict[str, FakeTenant], monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(status_cli, "pause", sleep)
    assert status_cli.main(["--watch", "2", "--width", "120"]) == 0
    out = capsys.readouterr().out
    frames = out.split(status_cli.REDRAW)
    assert frames[0] == "" and len(frames) == 4  # cursor home + clear before each of the three frames
    assert all(frame.startswith("stack dev at ") and "Live GPU allocation: 1 pending" in frame for frame in frames[1:])
    assert naps == [2.0, 2.0, 2.0]
    assert len(cluster["tenant-a"].requests) == 3 * 3  # read again for every frame


def test_watch_needs_a_positive_interval_and_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = dump_file(tmp_path, recorded("real"))
    refused = "status: --watch takes a positive number of seconds and a table (not --json)\n"
    for argv in (["--watch", "0"], ["--watch", "-1"], ["--watch", "--json"]):
        assert status_cli.main([*argv, "--objects", str(dump)]) == 2
        assert capsys.readouterr() == ("", refused)


@pytest.mark.parametrize(("argv", "interval"), [(["--watch"], 5.0), (["--watch", "1"], 1.0),
                                                 (["--watch", "0.5"], 0.5)])
def test_watch_takes_seconds_as_a_number_five_when_not_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str], argv: list[str],
                                                             interval: float) -> None:
    dump = dump_file(tmp_path, recorded("real"))
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        raise KeyboardInterrupt

    monkeypatch.setattr(status_cli, "pause", sleep)
    assert status_cli.main([*argv, "--objects", str(dump)]) == 0
    assert naps == [interval] and capsys.readouterr().out.startswith(status_cli.REDRAW)


def test_save_writes_what_objects_reads_back(mode: str, cluster: dict[str, FakeTenant], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "dump.json"
    assert status_cli.main(["--json", "--save", str(dump)]) == 0
    live = json.loads(capsys.readouterr().out)
    assert oct(dump.stat().st_mode & 0o777) == "0o600"
    saved = json.loads(dump.read_text())
    for name in ("tenant-a", "tenant-b"):  # the objects as the API served them (in its key order)
        for key in ("nodes", "pods", "resourcequotas"):
            assert sorted(json.dumps(o, sort_keys=True) for o in saved[name][key]) == sorted(
                json.dumps(o, sort_keys=True) for o in recorded(mode)[name][key])
        assert saved[name]["version"] == "v1.35.5" and saved[name]["readyz"] == "ok"
    assert status_cli.main(["--json", "--objects", str(dump)]) == 0
    assert json.loads(capsys.readouterr().out) == live


def test_save_keeps_an_unreachable_tenant_as_its_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    down = closed_port_url()
    install_stack(tmp_path, monkeypatch, {"tenant-b": kubeconfig_for("tenant-b", down, "token-b")})
    dump = tmp_path / "dump.json"
    assert status_cli.main(["--json", "--save", str(dump)]) == 1
    assert json.loads(dump.read_text()) == {"tenant-b": {"error": f"cannot read {down}: connection refused"}}
    capsys.readouterr()
    assert status_cli.main(["--json", "--objects", str(dump)]) == 1
    assert json.loads(capsys.readouterr().out)["tenants"][0]["error"] == f"cannot read {down}: connection refused"


def test_large_lists_are_read_page_by_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    data = recorded("sim")
    template = data["tenant-a"]["pods"][0]
    pods = []
    for i in range(1234):  # more than two pages of 500
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"a-infer-6c9f7d8b5-{i:05d}"
        pod["metadata"]["annotations"][hami.DEVICES_ALLOCATED_ANNOTATION] = (
            pod["metadata"]["annotations"][hami.DEVICES_ALLOCATED_ANNOTATION].replace(",10240,20:", ",16,0:"))
        pods.append(pod)
    data["tenant-a"]["pods"] = pods
    with fake_cluster({"tenant-a": data["tenant-a"]}) as tenants:
        install_stack(tmp_path, monkeypatch, {"tenant-a": tenants["tenant-a"].kubeconfig()})
        assert status_cli.main(["--json"]) == 0
        queries = [q for p, q in zip(tenants["tenant-a"].requests, tenants["tenant-a"].queries, strict=True)
                   if p == "/api/v1/pods"]
    assert len(queries) == 3 and "continue=" not in queries[0] and all("continue=" in q for q in queries[1:])
    (gpu,) = json.loads(capsys.readouterr().out)["tenants"][0]["gpus"]
    assert gpu["slots_used"] == 1234 and gpu["memory_allocated"] == 1234 * 16


# --------------------------------------------------------------------------- the command's smaller rules


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_title_says_where_the_view_comes_from_and_when(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")  # rich styles nothing for TERM=dumb
    dump = dump_file(tmp_path, recorded("real"))
    plain, coloured = io.StringIO(), Terminal()
    # wide enough for the title on one line whatever pytest's temporary path (pytest-of-<user>/pytest-<n>/...) is
    assert status_cli.main(["--objects", str(dump), "--width", "300"], out=plain) == 0
    assert re.fullmatch(rf"{re.escape(str(dump))} at \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d \S+",
                        plain.getvalue().splitlines()[0])
    assert "\x1b[" not in plain.getvalue()
    assert status_cli.main(["--objects", str(dump), "--width", "100"], out=coloured) == 0
    assert "\x1b[" in coloured.getvalue()  # a terminal gets colour


def test_json_is_indented_by_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert status_cli.main(["--objects", str(dump_file(tmp_path, recorded("real"))), "--json"]) == 0
    assert capsys.readouterr().out.startswith('{\n  "')


def test_a_dump_entry_may_leave_out_what_it_did_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No nodes, pods or quotas: nothing of them, not an error; the version and readyz a dump kept come back."""
    dump = dump_file(tmp_path, {"t": {}, "u": {"nodes": [], "version": "v1.35.5", "readyz": "ok"}})
    assert status_cli.main(["--objects", str(dump), "--json"]) == 0
    assert [t["tenant"] for t in json.loads(capsys.readouterr().out)["tenants"]] == ["t", "u"]
    read = status_cli.load_dump(dump)
    assert isinstance(read["u"], status.TenantObjects) and (read["u"].version, read["u"].readyz) == ("v1.35.5", "ok")
    assert isinstance(read["t"], status.TenantObjects) and read["t"].nodes == [] and read["t"].pods == []


def test_a_dump_of_an_unreachable_tenant_keeps_the_others_after_it() -> None:
    objects = status.TenantObjects([], [], [], "v1.35.5", "ok")
    assert status_cli.dump_of({"a": "cannot read x", "b": objects}) == {
        "a": {"error": "cannot read x"},
        "b": {"nodes": [], "pods": [], "resourcequotas": [], "version": "v1.35.5", "readyz": "ok"}}


def test_tenant_filter_applies_to_a_dump_and_names_the_file(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    dump = dump_file(tmp_path, recorded("real"))
    assert status_cli.main(["--objects", str(dump), "--tenant", "tenant-b", "--json"]) == 0
    assert [t["tenant"] for t in json.loads(capsys.readouterr().out)["tenants"]] == ["tenant-b"]
    assert status_cli.main(["--objects", str(dump), "--tenant", "tenant-z"]) == 2
    assert capsys.readouterr().err == (
        f"status: {dump} has no tenant 'tenant-z' (tenants: tenant-a, tenant-b)\n")


def test_what_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = dump_file(tmp_path, recorded("real"))
    nowhere = dump / "out"  # under a file
    assert status_cli.main(["--objects", str(dump), "--save", f"{nowhere}.json"]) == 2
    assert capsys.readouterr().err == f"status: cannot write {nowhere}.json: File exists\n"  # its directory
    assert status_cli.main(["--objects", str(dump), "--png", f"{nowhere}.png"]) == 2
    assert capsys.readouterr().err == f"status: cannot write {nowhere}.png: Not a directory\n"


def test_a_picture_gets_the_tables_title_and_pages_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_tenancy.cli import allocation_chart

    titles: list[str | None] = []
    pages: list[list[Path]] = [[tmp_path / "a.png"]]

    def render_png(view: AllocationView, path: Path, title: str | None = None) -> list[Path]:
        titles.append(title)
        return pages[0]

    monkeypatch.setattr(allocation_chart, "render_png", render_png)
    dump = dump_file(tmp_path, recorded("real"))
    out = io.StringIO()
    assert status_cli.main(["--objects", str(dump), "--png", str(tmp_path / "a.png"), "--width", "300"], out=out) == 0
    assert titles == [out.getvalue().splitlines()[0]] and capsys.readouterr().err == ""
    pages[0] = [tmp_path / "a.png", tmp_path / "a-2.png"]
    assert status_cli.main(["--objects", str(dump), "--png", str(tmp_path / "a.png"), "--json"]) == 0
    assert capsys.readouterr().err == (
        f"status: 2 tenants drawn on 2 pages: {tmp_path / 'a.png'}, {tmp_path / 'a-2.png'}\n")


def test_the_stack_named_in_an_outputs_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    pulumi_stub.install(tmp_path / "bin", {"gpu": {"tenants": [], "tenantKubeconfigs": {}}})
    monkeypatch.setenv("PATH", pulumi_stub.path_with(tmp_path / "bin"))
    assert status_cli.main(["--stack", "gpu"]) == 1
    assert capsys.readouterr().err == "status: stack gpu: output 'tenants' is not an object\n"


def test_unknown_tenants_are_all_named_with_the_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = dump_file(tmp_path, recorded("real"))
    assert status_cli.main(["--objects", str(dump), "--tenant", "x", "--tenant", "y"]) == 2
    assert capsys.readouterr().err == f"status: {dump} has no tenant 'x', 'y' (tenants: tenant-a, tenant-b)\n"
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    assert status_cli.main(["--objects", str(empty), "--tenant", "x"]) == 2
    assert capsys.readouterr().err == f"status: {empty} has no tenant 'x' (tenants: none)\n"


def test_a_tenant_without_its_kubeconfig_output_names_the_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    pulumi_stub.install(tmp_path / "bin", {"gpu": {"tenants": {"tenant-a": {"endpoint": "10.0.0.1:6443", "nodes": []}},
                                                   "tenantKubeconfigs": {}}})
    monkeypatch.setenv("PATH", pulumi_stub.path_with(tmp_path / "bin"))
    assert status_cli.main(["--stack", "gpu"]) == 1
    assert capsys.readouterr().err == (
        "status: stack gpu: output 'tenantKubeconfigs' has no kubeconfig for tenant 'tenant-a', which output 'tenants' "
        "lists (outputs of a partial deployment? run `make up`)\n")
