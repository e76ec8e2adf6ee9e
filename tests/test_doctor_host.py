"""The doctor's host checks as plain functions (gpu_tenancy/cli/doctor/host.py), one clause per test: what each
reads, the closest case it lets pass. tests/test_doctor.py runs the whole command against stub tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_tenancy.cli.doctor import host

GIB = 1024**3
DEV = host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ("tenant-a", "tenant-b"))
REAL = host.LabShape("gpu", "real", "gpu-tenancy-gpu", "kind", ("tenant-a",))


def _what(problems: list[host.Problem]) -> list[str]:
    return [p.what for p in problems]


# Go's net/http (golang.org/x/net/http/httpproxy FromEnvironment), which the providers and kubectl use, and curl
# read the proxy from any of these four names.
@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"])
def test_a_proxy_under_any_of_its_four_names_is_checked(name: str) -> None:
    facts = host.HostFacts(environ={name: "http://proxy.corp:3128"}, network_subnets=["172.18.0.0/16"])
    (problem,) = host.proxy_problems(facts, DEV)
    assert problem.what.startswith("a proxy is set (http://proxy.corp:3128) and NO_PROXY does not cover 172.18.0.0/16")
    facts.environ = {name: "http://proxy.corp:3128", "NO_PROXY": "172.18.0.0/16"}
    assert host.proxy_problems(facts, DEV) == []
    facts.environ = {"NO_PROXY": "10.0.0.0/8"}
    assert host.proxy_problems(facts, DEV) == []


@pytest.mark.parametrize(("memory_gib", "disk_gib", "found"), [
    (0.6, 2.1, []),
    (0.4, 2.1, ["memory"]),
    (0.6, 1.9, ["disk"]),
])
def test_a_deployed_lab_needs_half_a_gib_of_memory_and_two_of_disk(
        memory_gib: float, disk_gib: float, found: list[str]) -> None:
    # docs/troubleshooting.md: a deployed lab needs headroom only, not a second footprint.
    facts = host.HostFacts(memory_available_bytes=int(memory_gib * GIB), disk_free_bytes=int(disk_gib * GIB))
    assert [p.subject for p in host.capacity_problems(facts, DEV, deployed=True)] == found


def test_a_fresh_lab_needs_its_footprint() -> None:
    # Two sim tenants: 2.3 GiB for the management cluster and 1.4 GiB per tenant; 8 GiB of disk and 1 per tenant.
    assert host.footprint_bytes(DEV) == (int(5.1 * GIB), 10 * GIB)
    facts = host.HostFacts(memory_available_bytes=5 * GIB, disk_free_bytes=9 * GIB,
                           docker_info={"DockerRootDir": "/var/lib/docker"})
    assert _what(host.capacity_problems(facts, DEV, deployed=False)) == [
        "9.0 GiB free under /var/lib/docker, the lab needs 10.0 GiB",
        "5.0 GiB available, the lab needs about 5.1 GiB (2 tenants)"]
    assert host.capacity_problems(facts, REAL, deployed=False) == []


def test_every_group_of_checks_is_asked() -> None:
    facts = host.HostFacts(
        docker_info=None, docker_error="Cannot connect", environ={"http_proxy": "http://p:3128"},
        network_subnets=["172.18.0.0/16"], inotify_instances=128, disk_free_bytes=1, memory_available_bytes=1,
        tool_versions={"pulumi": None}, kind_clusters=["gpu-tenancy-other"])
    assert [p.subject for p in host.host_problems(facts, DEV, deployed=False)] == [
        "docker", "pulumi", "proxy", "inotify", "disk", "memory", "another lab"]


def test_a_real_stack_asks_for_kubectl_and_pulumi_only() -> None:
    facts = host.HostFacts(tool_versions={"kubectl": None, "pulumi": None, "docker": None, "kind": None})
    assert [p.subject for p in host.tool_problems(facts, REAL)] == ["kubectl", "pulumi"]
    assert [p.subject for p in host.tool_problems(facts, DEV)] == ["kubectl", "pulumi", "docker", "kind"]


def test_another_lab_names_its_clusters_then_its_workers() -> None:
    facts = host.HostFacts(kind_clusters=["gpu-tenancy-b", "gpu-tenancy-a", "gpu-tenancy-dev", "unrelated"],
                           workers_on_network=["lab-x-worker", "gpu-tenancy-dev-tenant-a-worker"])
    (problem,) = host.other_lab_problems(facts, DEV)
    assert problem.what.startswith("kind cluster gpu-tenancy-a, kind cluster gpu-tenancy-b, worker lab-x-worker "
                                   "already run(s) on Docker network 'kind'")


@pytest.mark.parametrize("text", [
    "",
    "Filesystem 1024-blocks Used Available Capacity Mounted on\n",
    "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 100\n",  # a line cut short
    "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 100 20 lots 20% /\n",
])
def test_df_output_without_a_number_where_available_is_no_figure(text: str) -> None:
    assert host.parse_df_available(text) is None


def test_df_reads_the_available_column_in_kib() -> None:
    text = "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/sda1 100 20 80 20% /\n"
    assert host.parse_df_available(text) == 80 * 1024


@pytest.mark.parametrize("text", [
    "",
    "               total        used        free      shared  buff/cache   available\nMem:  16\n",
    "               total        used        free      shared  buff/cache   available\nMem: 1 2 3 4 5 lots\n",
    "               total        used        free      shared     buffers      cached\nMem: 1 2 3 4 5 6\n",  # procps 3.2
])
def test_free_output_without_an_available_figure_is_none(text: str) -> None:
    assert host.parse_free_available(text) is None


@pytest.mark.parametrize(("text", "subnets"), [
    (json.dumps([{"IPAM": {"Config": [{"Subnet": "fc00::/64"}, {"Subnet": "172.18.0.0/16"}]}}]),
     ["fc00::/64", "172.18.0.0/16"]),
    (json.dumps([{"IPAM": {"Config": None}}]), []),
    (json.dumps([{"Name": "kind"}]), []),
    (json.dumps([]), None),
    ("Error response from daemon: network kind not found", None),
])
def test_a_networks_subnets_are_read_from_its_ipam_config(text: str, subnets: list[str] | None) -> None:
    assert host.parse_network_subnets(text) == subnets


# --------------------------------------------------------------------------- how a tool is asked (command.run)


def test_a_tool_that_does_not_answer_in_time_is_a_timeout_in_words(tmp_path: Path) -> None:
    from gpu_tenancy.cli.doctor import command

    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nexec sleep 5\n")
    slow.chmod(0o755)
    # 124 as timeout(1) exits; the words end up in the problem doctor prints (`docker info` not answering).
    assert command.run([str(slow)], timeout=0.2) == (124, "", "no answer in 0 s")
    assert command.run([str(slow)], timeout=1.4) == (124, "", "no answer in 1 s")


def test_a_tool_that_cannot_be_run_is_126_with_the_reason(tmp_path: Path) -> None:
    from gpu_tenancy.cli.doctor import command

    broken = tmp_path / "broken"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    code, out, err = command.run([str(broken)]) or (None, None, None)
    # 126 as a shell reports a command found but not executable (POSIX 2.8.2).
    assert (code, out) == (126, "") and "No such file or directory" in err
    assert command.run([str(tmp_path / "absent")]) is None


def test_a_tool_answers_with_its_exit_code_output_and_errors(tmp_path: Path) -> None:
    from gpu_tenancy.cli.doctor import command

    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\ncat\necho warn >&2\nexit 3\n")
    tool.chmod(0o755)
    assert command.run([str(tool)], stdin="in\n") == (3, "in\n", "warn\n")


def test_a_tool_runs_in_the_c_locale_with_the_rest_of_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A German host's `free` prints `Speicher:` for `Mem:` (procps-ng po/de.po), and the memory check would find
    nothing to compare: the tools answer in the C locale, and still see PATH, DOCKER_HOST, KUBECONFIG and the rest."""
    from gpu_tenancy.cli.doctor import command

    tool = tmp_path / "tool"
    tool.write_text('#!/bin/sh\necho "$LC_ALL|$LANG|$DOCKER_HOST"\n')
    tool.chmod(0o755)
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/user/1000/docker.sock")
    assert command.run([str(tool)]) == (0, "C|de_DE.UTF-8|unix:///run/user/1000/docker.sock\n", "")


def test_a_lock_file_that_cannot_be_read_is_skipped_and_the_others_are_read(tmp_path: Path) -> None:
    import socket

    from gpu_tenancy.cli.doctor import command

    # The file backend's locks: <state>/.pulumi/locks/<org>/<project>/<stack>/<id>.json (pulumi pkg/backend/diy).
    folder = tmp_path / ".pulumi" / "locks" / "organization" / "gpu-tenancy" / "dev"
    folder.mkdir(parents=True)
    (folder / "1-half-written.json").write_text('{"pid": 12')  # not JSON: a lock being written
    (folder / "2-a-folder.json").mkdir()  # cannot be read as a file (OSError)
    dead_pid = 2**22 + 12345  # above the kernel's default pid_max: never running
    (folder / "3-stale.json").write_text(json.dumps({"pid": dead_pid, "hostname": socket.gethostname()}))
    (folder / "4-other-host.json").write_text(json.dumps({"pid": dead_pid, "hostname": "elsewhere"}))
    assert command.stack_locks(tmp_path, "dev") == [
        {"path": str(folder / "3-stale.json"), "pid": dead_pid, "hostname": socket.gethostname(), "alive": False},
        # Another host's process cannot be asked: counted alive, as the backend would wait for it.
        {"path": str(folder / "4-other-host.json"), "pid": dead_pid, "hostname": "elsewhere", "alive": True},
    ]
