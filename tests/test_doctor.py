"""`make doctor` (gpu_tenancy/cli/doctor/command.py) on this host, run against stub tools (tests/doctor_stubs.py), one
host case each: every problem on its own line with its fix, exit 1 if any, all of them in one pass. A deployed lab,
the Pulumi state and the `make up`/`make destroy` helpers: tests/test_doctor_lab.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from doctor_stubs import (
    DOCKER_INFO,
    ENGINE_DOWN,
    KIND_BRIDGE,
    KIND_NETWORK,
    ROUTES,
    HostCase,
    df_output,
    free_output,
    kube_list,
    lab_case,
    problems,
)

from gpu_tenancy.cli.doctor import host as doctor_host
from gpu_tenancy.contract import versions


def _info(**changes: Any) -> str:
    return json.dumps({**DOCKER_INFO, **changes})


def test_a_healthy_host_has_no_problems(tmp_path: Path) -> None:
    result, calls = HostCase().run(tmp_path, "--stack", "dev")
    assert result.returncode == 0, result.stdout + result.stderr
    assert problems(result) == []
    assert "doctor: no problems" in result.stdout
    asked = {" ".join(c[:2]) for c in calls}
    assert {"docker info", "kind version", "pulumi version", "sysctl -n", "df -Pk", "free -b"} <= asked


TOOLS_FIX = "Fix: `make tools` installs {} into .tools/bin, which make puts first on PATH"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (HostCase().answer("docker", ["info"], "", ENGINE_DOWN + "\n", 1),
         f"docker: the Docker engine does not answer `docker info` ({ENGINE_DOWN}). Fix: start the daemon (`sudo "
         "systemctl start docker`) and let this user use it (`sudo usermod -aG docker $USER`, then log in again)"),
        (HostCase().without("docker"),
         "docker: not found on PATH. Fix: install Docker Engine (https://docs.docker.com/engine/install/, or your "
         "distribution's docker.io package), start it and let this user use it (`sudo usermod -aG docker $USER`, then "
         "log in again)"),
        (HostCase().answer("docker", ["info"], _info(ServerVersion="23.0.6")),
         "docker: Docker Engine 23.0.6 is older than 24.0. Fix: upgrade Docker Engine (README: Prerequisites)"),
        (HostCase().answer("docker", ["info"], _info(CgroupVersion="1", CgroupDriver="cgroupfs")),
         "cgroup: this host runs cgroup v1: Kubernetes 1.35 kubelets refuse to start on cgroup v1 (failCgroupV1 "
         "defaults to true) and kind's 1.35 node images need v2. Fix: boot with cgroup v2 (kernel argument "
         "systemd.unified_cgroup_hierarchy=1, then reboot)"),
        (HostCase().answer("docker", ["info"], _info(SecurityOptions=["name=seccomp,profile=builtin", "name=rootless",
                                                                      "name=cgroupns"])),
         "docker: rootless Docker: the kind network lives in rootlesskit's network namespace, so neither this host "
         "nor the program's kubectl reaches the tenants' control planes on it (and the workers would need "
         "KubeletInUserNamespace). Fix: use the system Docker daemon (`docker context use default`, or unset "
         "DOCKER_HOST) for sim and sim-nvml stacks"),
        (HostCase().answer("docker", ["info"], _info(OperatingSystem="Docker Desktop")),
         "docker: Docker Desktop runs containers in a VM whose networks are not reachable from this host (kind known "
         "issues), so the tenants' MetalLB addresses cannot be reached. Fix: run the lab on a Linux host with Docker "
         "Engine"),
        (HostCase().answer("sysctl", ["max_user_instances"], "128\n"),
         "inotify: fs.inotify.max_user_instances is 128, below 512 for 3 kubelets (kind known issues: pods fail with "
         "'too many open files'). Fix: sudo sysctl fs.inotify.max_user_instances=512 (persist it in /etc/sysctl.d/)"),
        (HostCase().answer("sysctl", ["max_user_watches"], "8192\n"),
         "inotify: fs.inotify.max_user_watches is 8192, below 524288 (kind known issues). Fix: sudo sysctl "
         "fs.inotify.max_user_watches=524288 (persist it in /etc/sysctl.d/)"),
        # Pulumi.dev.yaml: two sim tenants; docs/live-suite.md "Footprint": 8 GB + 1 per tenant, 2.3 GB + 1.4 per tenant
        (HostCase().answer("df", ["-Pk"], df_output(4 * 1024 * 1024)),
         "disk: 4.0 GiB free under /var/lib/docker, the lab needs 10.0 GiB. Fix: free space (`docker system prune`, "
         "`docker image prune`) or move Docker's data-root"),
        (HostCase().answer("free", ["-b"], free_output(2 * 1024**3)),
         "memory: 2.0 GiB available, the lab needs about 5.1 GiB (2 tenants). Fix: close what uses memory, or declare "
         "fewer tenants"),
        (HostCase().answer("kind", ["version"], "kind v0.31.0 go1.24.2 linux/amd64\n"),
         f"kind: v0.31.0 is not the pinned {versions.KIND_BINARY}. {TOOLS_FIX.format(versions.KIND_BINARY)}"),
        (HostCase().without("kind"), f"kind: not found on PATH. Fix: `make tools` installs kind {versions.KIND_BINARY}"),
        (HostCase().answer("kubectl", ["version", "--client"], json.dumps({"clientVersion": {"gitVersion": "v1.35.4"}})),
         f"kubectl: v1.35.4 is not the pinned {versions.KUBECTL_BINARY}. {TOOLS_FIX.format(versions.KUBECTL_BINARY)}"),
        (HostCase().without("kubectl"),
         f"kubectl: not found on PATH. Fix: `make tools` installs kubectl {versions.KUBECTL_BINARY}"),
        (HostCase().answer("pulumi", ["version"], "v3.200.0\n"),
         f"pulumi: v3.200.0 is not the pinned v3.272.0. {TOOLS_FIX.format('v3.272.0')}"),
        # newer is not the pin either: `make tools` would install the pin over it, so the two must agree
        (HostCase().answer("pulumi", ["version"], "v3.273.0\n"),
         f"pulumi: v3.273.0 is not the pinned v3.272.0. {TOOLS_FIX.format('v3.272.0')}"),
        (HostCase().without("pulumi"), "pulumi: not found on PATH. Fix: `make tools` installs pulumi v3.272.0"),
    ],
    ids=["engine-down", "no-docker-cli", "old-docker", "cgroup-v1", "rootless", "docker-desktop", "inotify-instances",
         "inotify-watches", "disk", "memory", "kind-version", "no-kind", "kubectl-version", "no-kubectl", "old-pulumi",
         "newer-pulumi", "no-pulumi"],
)
def test_each_host_case_is_one_problem_with_its_fix(tmp_path: Path, case: HostCase, expected: str) -> None:
    result, _ = case.run(tmp_path, "--stack", "dev")
    assert result.returncode == 1
    assert problems(result) == [expected]


def test_every_tool_the_tools_installer_accepts_doctor_accepts_and_no_other() -> None:
    """One set of pins and parsers: what `make tools` leaves in place, doctor does not complain about."""
    from gpu_tenancy.cli import tools

    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ())
    outputs = {"kind": "kind {} go1.26.3 linux/amd64", "pulumi": "{}\n",
               "kubectl": json.dumps({"clientVersion": {"gitVersion": "{}"}}).replace("{}", "%s")}
    for tool in tools.TOOLS:
        for version, accepted in ((tool.version, True), (tool.version.replace(".", ".9", 1), False)):
            text = outputs[tool.name].format(version) if tool.name != "kubectl" else outputs["kubectl"] % version
            assert (tool.parse_version(text) == tool.version) is accepted
            found = doctor_host.tool_problems(doctor_host.HostFacts(tool_versions={tool.name: text}), shape)
            assert (found == []) is accepted, (tool.name, version, found)


def test_every_problem_is_found_in_one_pass(tmp_path: Path) -> None:
    case = (HostCase().answer("docker", ["info"], _info(CgroupVersion="1"))
            .answer("sysctl", ["max_user_instances"], "128\n").answer("pulumi", ["version"], "v3.100.0\n"))
    case.env = {"HTTPS_PROXY": "http://proxy.corp:3128"}
    result, _ = case.run(tmp_path, "--stack", "dev")
    subjects = [line.split(":", 1)[0] for line in problems(result)]
    assert sorted(subjects) == ["cgroup", "inotify", "proxy", "pulumi"]
    assert result.stdout.strip().splitlines()[-1] == "doctor: 4 problem(s) (host, Pulumi state and lab, stack dev)"


def test_more_tenants_need_more_inotify_instances() -> None:
    shape = doctor_host.LabShape("big", "sim", "gpu-tenancy-big", "kind", tuple(f"t{i}" for i in range(6)))
    facts = doctor_host.HostFacts(inotify_instances=512, inotify_watches=524288)
    (problem,) = doctor_host.inotify_problems(facts, shape)
    assert "below 896 for 7 kubelets" in problem.what


# --------------------------------------------------------------------------- proxy


@pytest.mark.parametrize(
    ("no_proxy", "network_exists", "missing"),
    [
        ("", True, "172.18.0.0/16"),
        ("localhost,127.0.0.1", True, "172.18.0.0/16"),
        ("localhost,172.18.0.0/16", True, None),
        ("172.16.0.0/12", True, None),  # a larger range covers it
        ("", False, "172.16.0.0/12, 192.168.0.0/16"),  # before kind made the network: Docker's default pools
        ("172.16.0.0/12,192.168.0.0/16", False, None),
    ],
)
def test_a_proxy_must_leave_the_kind_network_alone(
    tmp_path: Path, no_proxy: str, network_exists: bool, missing: str | None
) -> None:
    case = HostCase()
    if not network_exists:
        case.answer("docker", ["network", "inspect"], "[]\n", "Error response from daemon: network kind not found\n", 1)
    case.env = {"http_proxy": "http://proxy.corp:3128", **({"no_proxy": no_proxy} if no_proxy else {})}
    result, _ = case.run(tmp_path, "--stack", "dev")
    found = problems(result)
    if missing is None:
        assert found == []
    else:
        assert len(found) == 1 and f"NO_PROXY does not cover {missing}" in found[0], found


# --------------------------------------------------------------------------- another lab on the network


def _other_lab(case: HostCase, cluster: str, network: str) -> HostCase:
    case.answer("kind", ["get", "clusters"], f"{cluster}\n")
    return case.answer("docker", ["inspect", "{{json .NetworkSettings.Networks}}", f"{cluster}-control-plane"],
                       json.dumps({network: {"IPAddress": "172.18.0.2"}}))


def test_a_second_lab_on_the_same_network_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    result, calls = _other_lab(HostCase(), "gpu-tenancy-dev-nvml", "kind").run(tmp_path, "--stack", "dev", "--before-up")
    (found,) = problems(result)
    assert result.returncode == 1
    assert found == (
        "another lab: kind cluster gpu-tenancy-dev-nvml already run(s) on Docker network 'kind': every lab takes its "
        "MetalLB pool from the top of that network's subnet, so both would hand out the same control-plane addresses. "
        "Fix: destroy the other lab first (`make destroy STACK=<its stack>`), or give this stack its own network "
        "(gpu-tenancy:kind: {network: <name>})")
    assert not [c for c in calls if c[:2] in (["docker", "run"], ["docker", "create"], ["kind", "create"])]


def test_a_lab_on_its_own_network_is_no_conflict(tmp_path: Path) -> None:
    result, _ = _other_lab(HostCase(), "gpu-tenancy-dev-nvml", "lab-b").run(tmp_path, "--stack", "dev")
    assert problems(result) == []


def test_a_worker_of_another_lab_on_the_network_is_found_whatever_its_cluster_is_called(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["ps", "-a", "network=kind"], "mylab-tenant-x-worker\n")
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert "worker mylab-tenant-x-worker" in found


def test_the_stacks_own_lab_is_not_another(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["ps", "-a"], "gpu-tenancy-dev-tenant-a-worker\ngpu-tenancy-dev-tenant-b-worker\n")
    case.answer("kind", ["get", "clusters"], "gpu-tenancy-dev\n")
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []


def test_a_real_stack_asks_nothing_of_docker(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["info"], "", "Cannot connect\n", 1)
    case.env = {"PULUMI_CONFIG_PASSPHRASE": "mine"}
    result, calls = case.run(tmp_path, "--stack", "gpu")
    assert problems(result) == []
    assert not [c for c in calls if c[0] in ("docker", "kind", "sysctl", "df", "free")]


# --------------------------------------------------------------------------- one pass, no traceback, right advice


def test_with_docker_down_the_rest_of_the_host_is_still_checked(tmp_path: Path) -> None:
    case = (HostCase().answer("docker", ["info"], "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                              "Is the docker daemon running?\n", 1)
            .answer("sysctl", ["max_user_instances"], "128\n").without("kind").without("pulumi"))
    found = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert [line.split(":", 1)[0] for line in found] == ["docker", "pulumi", "kind", "inotify"], found
    assert all(". Fix: " in line for line in found)
    assert "`make tools`" in found[1] and "`make tools`" in found[2]


def test_docker_missing_gets_an_install_hint(tmp_path: Path) -> None:
    (found,) = problems(HostCase().without("docker").run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("docker: not found on PATH. Fix: install Docker Engine (https://docs.docker.com/engine/install/")


def test_a_yaml_error_in_the_stack_file_is_one_line_as_make_plan_says_it(tmp_path: Path) -> None:
    from gpu_tenancy.cli.plan.plan_input import InputError, load_document

    stack_file = tmp_path / "Pulumi.broken.yaml"
    stack_file.write_text("config:\n  gpu-tenancy:mode: sim\n  gpu-tenancy:tenants: [\n")
    result, _ = HostCase().run(tmp_path, "--stack", "broken", "--stack-file", str(stack_file))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    with pytest.raises(InputError) as planner:
        load_document(str(stack_file))
    assert result.stderr.strip().splitlines() == [f"doctor: {planner.value}"]


# --------------------------------------------------------------------------- kind's known issues


def _route(interface: str, network: str) -> str:
    import ipaddress

    net = ipaddress.IPv4Network(network)
    little = [bytes(reversed(a.packed)).hex().upper() for a in (net.network_address, net.netmask)]
    return f"{interface}\t{little[0]}\t00000000\t0001\t0\t0\t0\t{little[1]}\t0\t0\t0\n"


def _snap(case: HostCase) -> HostCase:
    return case.answer("docker", ["info"], _info(DockerRootDir="/var/snap/docker/common/var-lib-docker"))


def _firewalld(case: HostCase, backend: str = "nftables") -> HostCase:
    case.host_files["etc/firewalld/firewalld.conf"] = f"DefaultZone=public\nFirewallBackend={backend}\n"
    return case.answer("firewall-cmd", ["--state"], "running\n")


def _vpn_route(case: HostCase) -> HostCase:
    case.host_files["proc/net/route"] = ROUTES + _route("tun0", "172.18.4.0/24")
    return case


SNAP_FIX = ("install Docker Engine from Docker's or your distribution's packages (https://docs.docker.com/engine/install/), "
            "or export TMPDIR=$HOME/tmp (mkdir it first) before make")
DISK_FIX = ("move Docker's data-root (/etc/docker/daemon.json \"data-root\") to an ext4 or xfs filesystem on a plain "
            "partition, then restart Docker")
ROOTFS = ": kubelets there fail with 'failed to get rootfs info' (kind known issues): neither kind's node nor the " \
    "workers mount that device"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (_snap(HostCase()), "docker: Docker is installed as a snap, whose `docker` cannot read $TMPDIR (kind known "
         f"issues, Docker Installed With Snap). Fix: {SNAP_FIX}"),
        (_firewalld(HostCase()), "firewalld: firewalld runs with FirewallBackend=nftables: kind's nodes cannot reach "
         "each other (kind known issues, Fedora: Firewalld). Fix: sudo sed -i 's/^FirewallBackend=.*/FirewallBackend="
         "iptables/' /etc/firewalld/firewalld.conf && sudo systemctl restart firewalld"),
        (_vpn_route(HostCase()), "kind network: the Docker network 'kind' (172.18.0.0/16) overlaps this host's route "
         "172.18.4.0/24 via tun0: addresses there reach either the lab or that network, not both. Fix: with no lab on "
         "it, `docker network rm kind` (Docker then picks a free subnet), or create one (`docker network create "
         "--subnet <free /16> <name>`) and set gpu-tenancy:kind: {network: <name>}"),
        (HostCase().answer("docker", ["info"], _info(Driver="btrfs")),
         f"disk: /var/lib/docker is on btrfs{ROOTFS}. Fix: {DISK_FIX}"),
        (HostCase().answer("docker", ["info"], _info(Driver="overlay2", DriverStatus=[
            ["Supports d_type", "true"], ["Backing Filesystem"], ["Backing Filesystem", "btrfs"]])),
         f"disk: /var/lib/docker is on btrfs{ROOTFS}. Fix: {DISK_FIX}"),
        (HostCase().answer("docker", ["info"], _info(Driver="btrfs", DockerRootDir=None)),
         f"disk: Docker's data root is on btrfs{ROOTFS}. Fix: {DISK_FIX}"),
        (HostCase().answer("findmnt", ["SOURCE"], "/dev/mapper/luks-903aad3d-0c6b\n"),
         "disk: /var/lib/docker is on a device-mapper device (/dev/mapper/luks-903aad3d-0c6b, e.g. LUKS or LVM)"
         f"{ROOTFS}. Fix: {DISK_FIX}"),
    ],
    ids=["snap", "firewalld-nftables", "route-clash", "btrfs-driver", "btrfs-backing", "btrfs-no-root-dir", "luks"],
)
def test_kinds_known_issues_are_named_with_their_fix(tmp_path: Path, case: HostCase, expected: str) -> None:
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [expected]


def test_the_kind_network_is_inspected_once_for_its_subnets_and_its_bridge(tmp_path: Path) -> None:
    """The route check needs both: the subnets to compare and the bridge whose own route is no clash."""
    result, calls = _vpn_route(HostCase()).run(tmp_path, "--stack", "dev")
    assert [p.split(":")[0] for p in problems(result)] == ["kind network"]
    assert [c for c in calls if c[:3] == ["docker", "network", "inspect"]] == [["docker", "network", "inspect", "kind"]]


def test_a_snap_docker_is_known_by_its_command_too() -> None:
    from gpu_tenancy.cli.doctor.known_issues import KnownIssueFacts, snap_problems

    (found,) = snap_problems(KnownIssueFacts(docker_info={"DockerRootDir": "/var/lib/docker"},
                                            docker_cli="/snap/bin/docker"))
    assert found.line().startswith("docker: Docker is installed as a snap")
    assert snap_problems(KnownIssueFacts(docker_info={}, docker_cli="/usr/bin/docker")) == []


def test_every_route_each_kind_subnet_overlaps_is_named() -> None:
    from gpu_tenancy.cli.doctor.known_issues import KnownIssueFacts, route_problems

    facts = KnownIssueFacts(docker_info={}, network_bridge="br-kind", network_subnets=[
        "fc00:f853:ccd:e793::/64", "172.18.0.0/16", "10.89.0.1/24"],  # a subnet written with host bits is read whole
        routes=[("tun0", "172.18.4.0/24"), ("wg0", "10.89.0.0/16"), ("br-kind", "172.18.0.0/16"), ("eth0", "0.0.0.0/0")])
    (found,) = route_problems(facts, "kind")
    assert found.what == ("the Docker network 'kind' (172.18.0.0/16, 10.89.0.0/24) overlaps this host's route "
                          "10.89.0.0/16 via wg0, 172.18.4.0/24 via tun0: addresses there reach either the lab or that "
                          "network, not both")


def test_route_lines_too_short_or_unreadable_are_skipped_not_the_rest() -> None:
    from gpu_tenancy.cli.doctor.known_issues import parse_proc_net_route

    text = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n"
            "eth0\t0000A8C0\n"  # cut short
            "eth1\tnot-hex\t00000000\t0001\t0\t0\t0\t00FFFFFF\n"
            "tun0\t000412AC\t00000000\t0001\t0\t0\t0\t00FFFFFF\n")  # the eight fields a route needs, no more
    assert parse_proc_net_route(text) == [("tun0", "172.18.4.0/24")]


def test_a_network_without_an_id_or_bridge_option_has_no_bridge_known() -> None:
    from gpu_tenancy.cli.doctor.known_issues import bridge_name

    assert bridge_name(json.dumps([{"Name": "kind", "Options": {}}])) is None
    assert bridge_name(json.dumps([{"Name": "kind", "Options": None, "Id": "0123456789abcdef"}])) == "br-0123456789ab"
    assert bridge_name("[]") is None
    # what no bridge network's inspect prints: nothing is guessed from it
    for text in ("", "not json", "{}", '["kind"]', "null"):
        assert bridge_name(text) is None, text


@pytest.mark.parametrize(
    "case",
    [_firewalld(HostCase(), "iptables"), HostCase().answer("firewall-cmd", ["--state"], "not running\n", "", 252)],
    ids=["firewalld-iptables", "firewalld-stopped"],
)
def test_firewalld_is_fine_unless_it_runs_nftables(tmp_path: Path, case: HostCase) -> None:
    case.host_files["etc/firewalld/firewalld.conf"] = case.host_files.get("etc/firewalld/firewalld.conf",
                                                                          "FirewallBackend=nftables\n")
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []


def test_routes_are_read_as_the_kernel_prints_them() -> None:
    from gpu_tenancy.cli.doctor.known_issues import parse_proc_net_route

    assert parse_proc_net_route(ROUTES) == [("eth0", "0.0.0.0/0"), ("eth0", "192.168.0.0/24"),
                                            ("docker0", "172.17.0.0/16"), (KIND_BRIDGE, "172.18.0.0/16")]


def test_a_network_created_with_a_bridge_name_option_is_found_on_that_bridge() -> None:
    """`docker network create -o com.docker.network.bridge.name=kind0 kind`: `docker network inspect` lists the
    option under Options (moby libnetwork/drivers/bridge/labels.go BridgeName) and the bridge is kind0, not br-<id>."""
    from gpu_tenancy.cli.doctor.known_issues import bridge_name

    network_id = "6b1f5c2a9e3d40c1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70819"
    named = {"Name": "kind", "Id": network_id, "Options": {"com.docker.network.bridge.name": "kind0"}}
    assert bridge_name(json.dumps([named])) == "kind0"
    mtu_only = {**named, "Options": {"com.docker.network.driver.mtu": "1500"}}
    assert bridge_name(json.dumps([mtu_only])) == "br-6b1f5c2a9e3d"
    assert bridge_name(json.dumps([{**named, "Options": ["kind0"]}])) == "br-6b1f5c2a9e3d"


def test_doctor_runs_on_the_runtime_dependencies_alone(tmp_path: Path) -> None:
    """`make doctor` and `make up`'s host checks use the runtime venv (`make runtime`): nothing the tests'
    requirements add may be imported."""
    repo = Path(__file__).resolve().parents[1]
    dev_only = [line.split("==")[0].strip().lower().replace("-", "_") for line in
                (repo / "requirements-dev.txt").read_text().splitlines() if "==" in line and not line.startswith("#")]
    guard = tmp_path / "sitecustomize.py"
    guard.write_text(
        "import importlib.abc, sys\n"
        f"BLOCKED = {sorted(dev_only)!r}\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0].lower() in BLOCKED:\n"
        "            raise ImportError('a test-only package: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n")
    case = HostCase()
    case.env = {"PYTHONPATH": f"{tmp_path}:{repo}"}
    result, _ = case.run_process(tmp_path, "--stack", "dev")  # the guard acts in a process of its own
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert "pytest" in dev_only and "jsonschema" in dev_only


@pytest.mark.parametrize(("tool", "args", "modelled"), [
    ("docker", ["info", "--format", "{{json .}}"], True),
    ("docker", ["info"], False),  # prints text, not JSON
    ("sysctl", ["-n", "fs.inotify.max_user_watches"], True),
    ("sysctl", ["fs.inotify.max_user_watches"], False),  # prints "key = value"
    ("df", ["-Pk", "/var/lib/docker"], True),
    ("df", ["-k", "/var/lib/docker"], False),  # without -P a long device name wraps the line
    ("kubectl", ["--kubeconfig", "/k", "--request-timeout=10s", "get", "nodes", "-o", "json"], True),
    ("kubectl", ["--kubeconfig", "/k", "--request-timeout=10s", "get", "nodes"], False),  # a table
    ("kind", ["get", "clusters"], True),
    ("kind", ["get"], False),
])
def test_a_stub_answers_only_a_command_line_the_real_tool_answers_that_way(
        tmp_path: Path, tool: str, args: list[str], modelled: bool) -> None:
    done = HostCase().answer("kubectl", ["get", "nodes"], kube_list()).call(tmp_path, tool, *args)
    if modelled:
        assert done.returncode == 0 and "unmodelled" not in done.stderr, done.stderr
    else:
        assert done.returncode == 127 and f"stub {tool}: unmodelled" in done.stderr


def test_every_call_a_lab_check_makes_fits_a_modelled_shape(tmp_path: Path) -> None:
    # The healthy and the deployed cases together make every kind of call doctor has; none is refused as unmodelled.
    for number, case in enumerate([HostCase(), lab_case()]):
        _, calls = case.run(tmp_path / str(number), "--stack", "dev", "--state-dir", str(tmp_path / "state"))
        assert calls
        refused = [call for call in calls if case.call(tmp_path / str(number), call[0], *call[1:]).returncode == 127]
        assert refused == []


def test_stubs_answered_in_process_answer_as_their_own_processes_do(tmp_path: Path) -> None:
    """`HostCase.run` computes each stub's answer in the test's process: the same doctor run with every stub as
    its own process prints the same and makes the same calls, problems and fixes included."""
    case = lab_case()
    case.answer("docker", ["{{.State.Status}}", "gpu-tenancy-dev-tenant-b-worker"], "exited\n")
    case.answer("kubectl", ["tenant-a.kubeconfig", "get nodes"], "", "Unable to connect to the server: EOF\n", 1)
    case.without("firewall-cmd")
    args = ("--stack", "dev", "--state-dir", str(tmp_path / "state"))
    in_process, in_process_calls = case.run(tmp_path / "in", *args)
    own, own_calls = case.run_process(tmp_path / "own", *args)
    assert problems(in_process) == problems(own) and len(problems(own)) == 2, own.stdout
    assert (in_process.returncode, in_process.stdout) == (own.returncode, own.stdout)
    assert [c for c in in_process_calls if c[0] != "kubectl"] == [c for c in own_calls if c[0] != "kubectl"]
    # kubectl's --kubeconfig names a temporary file of each run: the rest of its calls are the same
    assert [c[:1] + c[3:] for c in in_process_calls if c[0] == "kubectl"] == \
        [c[:1] + c[3:] for c in own_calls if c[0] == "kubectl"]


def test_a_tool_printing_no_version_is_an_unknown_version(tmp_path: Path) -> None:
    (found,) = problems(HostCase().answer("kind", ["version"], "").run(tmp_path, "--stack", "dev")[0])
    assert found.startswith(f"kind: an unknown version is not the pinned {versions.KIND_BINARY}. Fix: `make tools`")


def test_docker_roots_filesystem_is_read_and_the_root_filesystem_while_it_is_not_there_yet(tmp_path: Path) -> None:
    # Docker creates its data root on first start; before that `df` of it fails, and "/" is where it will be.
    case = (HostCase().answer("df", ["-Pk /"], df_output(1024 * 1024))
            .answer("df", ["/var/lib/docker"], "", "df: /var/lib/docker: No such file or directory\n", 1))
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert [c for c in calls if c[0] == "df"] == [["df", "-Pk", "/var/lib/docker"], ["df", "-Pk", "/"]]
    (found,) = problems(result)
    assert found.startswith("disk: 1.0 GiB free under /var/lib/docker, the lab needs")
    # The data root there: only it is asked.
    _, calls = HostCase().run(tmp_path / "there", "--stack", "dev")
    assert [c for c in calls if c[0] == "df"] == [["df", "-Pk", "/var/lib/docker"]]


# --------------------------------------------------------------------------- each clause of the host checks


def test_what_a_failing_tool_prints_is_not_taken_for_an_answer(tmp_path: Path) -> None:
    """A tool that exits non-zero is not read, whatever it printed on stdout."""
    kubectl = json.dumps({"clientVersion": {"gitVersion": versions.KUBECTL_BINARY}})
    case = (HostCase().answer("kind", ["version"], f"kind {versions.KIND_BINARY} go1.24.6 linux/amd64\n", "", 1)
            .answer("kubectl", ["version", "--client"], kubectl, "", 1)
            .answer("sysctl", ["max_user_instances"], "128\n", "", 1)
            .answer("free", ["-b"], free_output(1024), "", 1)
            .answer("findmnt", ["SOURCE"], "/dev/mapper/luks-0\n", "", 1))
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [
        f"kubectl: an unknown version is not the pinned {versions.KUBECTL_BINARY}. "
        f"{TOOLS_FIX.format(versions.KUBECTL_BINARY)}",
        f"kind: an unknown version is not the pinned {versions.KIND_BINARY}. "
        f"{TOOLS_FIX.format(versions.KIND_BINARY)}",
    ]


def test_docker_info_that_is_not_json_is_an_engine_that_does_not_answer(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["info"], "Client: Docker Engine - Community\n")
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == [
        "docker: the Docker engine does not answer `docker info` (`docker info` printed no JSON). Fix: start the "
        "daemon (`sudo systemctl start docker`) and let this user use it (`sudo usermod -aG docker $USER`, then log "
        "in again)"]


def test_the_device_looked_up_is_the_one_under_dockers_data_root(tmp_path: Path) -> None:
    """Docker's data root may sit on its own filesystem (here a LUKS volume) while / does not."""
    case = HostCase().answer("docker", ["info"], _info(DockerRootDir="/srv/docker"))
    case.answer("findmnt", ["--target", "/srv/docker"], "/dev/mapper/luks-srv\n")
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert [c for c in calls if c[0] == "findmnt"] == [["findmnt", "-n", "-o", "SOURCE", "--target", "/srv/docker"]]
    assert problems(result) == [
        f"disk: /srv/docker is on a device-mapper device (/dev/mapper/luks-srv, e.g. LUKS or LVM){ROOTFS}. "
        f"Fix: {DISK_FIX}"]


def test_without_a_data_root_in_docker_info_the_root_filesystem_is_the_one_checked(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["info"], _info(DockerRootDir=None))
    case.answer("findmnt", ["--target", "/"], "/dev/mapper/vg-root\n")
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert ["findmnt", "-n", "-o", "SOURCE", "--target", "/"] in calls
    assert [c for c in calls if c[0] == "df"] == [["df", "-Pk", "/"]]
    assert problems(result) == [
        f"disk: Docker's data root is on a device-mapper device (/dev/mapper/vg-root, e.g. LUKS or LVM){ROOTFS}. "
        f"Fix: {DISK_FIX}"]


def test_a_df_that_fails_on_the_root_filesystem_is_not_asked_again(tmp_path: Path) -> None:
    # GNU df exits 1 when it cannot read a filesystem; what it printed then is not read either.
    case = (HostCase().answer("docker", ["info"], _info(DockerRootDir=None))
            .answer("df", ["-Pk"], df_output(1024), "df: /: EIO\n", 1))
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert problems(result) == []  # free space unknown: nothing to say about it
    assert [c for c in calls if c[0] == "df"] == [["df", "-Pk", "/"]]


def test_host_files_are_read_from_the_root_unless_re_rooted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpu_tenancy.cli.doctor import command

    monkeypatch.delenv(command.HOST_ROOT_ENV, raising=False)
    assert command._host_file("proc/version") == Path("/proc/version").read_text() != ""
    assert command._host_file("proc/gpu-tenancy-absent") == ""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hostname").write_text("lab\n")
    monkeypatch.setenv(command.HOST_ROOT_ENV, str(tmp_path))
    assert command._host_file("etc/hostname") == "lab\n"
    assert command._host_file("proc/version") == ""  # under the new root only


def test_the_docker_command_is_known_by_where_it_really_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """/usr/bin/docker may be a link into /snap: the snap check reads the resolved path."""
    from gpu_tenancy.cli.doctor import command

    target = tmp_path / "snap" / "bin" / "docker"
    target.parent.mkdir(parents=True)
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "docker").symlink_to(target)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(command, "run", lambda *args, **kwargs: None)
    facts = command.gather_known_issues(doctor_host.HostFacts())
    assert facts.docker_cli == str(target.resolve())
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert command.gather_known_issues(doctor_host.HostFacts()).docker_cli is None


def test_a_mode_no_layer_registers_is_sized_as_the_bare_lab() -> None:
    shape = doctor_host.LabShape("lab", "quantum", "gpu-tenancy-lab", "kind", ("a", "b", "c"))
    # docs/live-suite.md "Footprint": kind, Kamaji, cert-manager, MetalLB and etcd 2.3 GB; 8 GB of disk + 1 per tenant
    assert doctor_host.footprint_bytes(shape) == (int(2.3 * 2**30), 11 * 2**30)


@pytest.mark.parametrize(("no_proxy", "covered"), [
    ("*", True),  # Go's httpproxy: "*" disables the proxy for every host
    (",, localhost,,172.18.0.0/16", True),  # empty entries are skipped, not the end of the list
    ("example.com,172.18.0.1/16", True),  # a CIDR written with host bits covers its whole network, as Go reads it
    ("not-a-network,10.0.0.0/8", False),
    ("fc00:f853:ccd:e793::/64", False),  # the IPv6 subnet alone does not cover the IPv4 one
    ("*.example.com", False),
])
def test_no_proxy_entries_are_read_as_go_reads_them(no_proxy: str, covered: bool) -> None:
    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ("a",))
    facts = doctor_host.HostFacts(environ={"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": no_proxy},
                                  network_subnets=["172.18.0.0/16"])
    assert (doctor_host.proxy_problems(facts, shape) == []) is covered


def test_a_failing_docker_inspect_or_network_inspect_is_not_read(tmp_path: Path) -> None:
    case = _other_lab(HostCase(), "gpu-tenancy-other", "kind")
    case.answer("docker", ["inspect", "{{json .NetworkSettings.Networks}}", "gpu-tenancy-other-control-plane"],
                json.dumps({"kind": {}}), "Error: No such object: gpu-tenancy-other-control-plane\n", 1)
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []
    case = HostCase().answer("docker", ["network", "inspect"], json.dumps(KIND_NETWORK), "Error response\n", 1)
    case.env = {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "172.18.0.0/16"}
    (found,) = problems(case.run(tmp_path / "network", "--stack", "dev")[0])
    assert "NO_PROXY does not cover 172.16.0.0/12, 192.168.0.0/16: the kind network 'kind' does not exist yet" in found


def test_every_other_lab_on_the_host_is_looked_at_not_only_the_first(tmp_path: Path) -> None:
    case = _other_lab(HostCase(), "gpu-tenancy-other", "lab-b")
    case.answer("kind", ["get", "clusters"], "gpu-tenancy-dev\ngpu-tenancy-other\n")
    result, calls = case.run(tmp_path, "--stack", "dev")
    assert problems(result) == []  # the other lab is on its own network
    assert [c[-1] for c in calls if c[:2] == ["docker", "inspect"] and "{{json .NetworkSettings.Networks}}" in c] == [
        "gpu-tenancy-other-control-plane"]


def test_a_failing_docker_ps_or_an_unreadable_inspect_names_no_other_lab(tmp_path: Path) -> None:
    case = HostCase().answer("docker", ["ps", "-a", "network=kind"], "mylab-tenant-x-worker\n", "error\n", 1)
    assert problems(case.run(tmp_path, "--stack", "dev")[0]) == []
    case = _other_lab(HostCase(), "gpu-tenancy-other", "kind")
    case.answer("docker", ["inspect", "{{json .NetworkSettings.Networks}}", "gpu-tenancy-other-control-plane"], "<nil>")
    result, _ = case.run(tmp_path / "inspect", "--stack", "dev")
    assert (problems(result), result.stderr) == ([], "")


@pytest.mark.parametrize(("info", "expected"), [
    (_info(ServerVersion="24.0.0"), []),  # the minimum itself is enough
    (_info(ServerVersion=None), ["docker: Docker Engine ? is older than 24.0. Fix: upgrade Docker Engine (README: "
                                 "Prerequisites)"]),
])
def test_the_docker_engine_minimum_is_inclusive_and_a_missing_version_is_too_old(
        tmp_path: Path, info: str, expected: list[str]) -> None:
    assert problems(HostCase().answer("docker", ["info"], info).run(tmp_path, "--stack", "dev")[0]) == expected


def test_a_docker_info_failing_without_a_word_is_no_answer(tmp_path: Path) -> None:
    (found,) = problems(HostCase().answer("docker", ["info"], "", "", 1).run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("docker: the Docker engine does not answer `docker info` (no answer). Fix: ")


def test_docker_naming_no_cgroup_version_is_taken_for_v1(tmp_path: Path) -> None:
    (found,) = problems(HostCase().answer("docker", ["info"], _info(CgroupVersion=None)).run(tmp_path, "--stack", "dev")[0])
    assert found.startswith("cgroup: this host runs cgroup v1: Kubernetes 1.35 kubelets refuse to start")


def test_a_proxy_problem_names_what_is_missing_where_and_the_export_that_fixes_it() -> None:
    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ("a",))
    environ = {"https_proxy": "http://proxy:3128", "no_proxy": "localhost"}
    (existing,) = doctor_host.proxy_problems(doctor_host.HostFacts(
        environ=environ, network_subnets=["fc00:f853:ccd:e793::/64", "172.18.0.1/16"]), shape)
    assert existing.line() == (
        "proxy: a proxy is set (http://proxy:3128) and NO_PROXY does not cover 172.18.0.0/16: the kind network 'kind' "
        "is 172.18.0.0/16, and the program's kubectl and providers would send the tenants' API traffic to the proxy. "
        "Fix: export NO_PROXY=\"$NO_PROXY,172.18.0.0/16\" (and no_proxy alike)")
    (before,) = doctor_host.proxy_problems(doctor_host.HostFacts(environ=environ), shape)
    assert before.what == (
        "a proxy is set (http://proxy:3128) and NO_PROXY does not cover 172.16.0.0/12, 192.168.0.0/16: the kind "
        "network 'kind' does not exist yet, so its subnet is one Docker picks from 172.16.0.0/12, 192.168.0.0/16, and "
        "the program's kubectl and providers would send the tenants' API traffic to the proxy")
    assert before.fix == "export NO_PROXY=\"$NO_PROXY,172.16.0.0/12,192.168.0.0/16\" (and no_proxy alike)"


def test_limits_met_exactly_are_enough() -> None:
    shape = doctor_host.LabShape("dev", "sim", "gpu-tenancy-dev", "kind", ("a", "b"))
    # kind known issues: 512 instances and 524288 watches; docs/live-suite.md "Footprint": 10 GiB, 5.1 GiB for two
    memory, disk = int((2.3 + 2 * 1.4) * 2**30), 10 * 2**30
    facts = doctor_host.HostFacts(docker_info=dict(DOCKER_INFO), inotify_instances=512, inotify_watches=524288,
                                  disk_free_bytes=disk, memory_available_bytes=memory)
    assert doctor_host.host_problems(facts, shape, deployed=False) == []
    facts = doctor_host.HostFacts(docker_info=dict(DOCKER_INFO), inotify_instances=511, inotify_watches=524287,
                                  disk_free_bytes=disk - 1, memory_available_bytes=memory - 1)
    assert [p.subject for p in doctor_host.host_problems(facts, shape, deployed=False)] == [
        "inotify", "inotify", "disk", "memory"]


def test_low_disk_with_the_engine_down_is_measured_on_the_root_filesystem(tmp_path: Path) -> None:
    case = (HostCase().answer("docker", ["info"], "", ENGINE_DOWN + "\n", 1)
            .answer("df", ["-Pk", "/"], df_output(1024 * 1024)))
    found = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found[1] == ("disk: 1.0 GiB free under Docker's data root, the lab needs 10.0 GiB. Fix: free space (`docker "
                        "system prune`, `docker image prune`) or move Docker's data-root")


def test_a_version_answer_that_is_no_version_is_quoted(tmp_path: Path) -> None:
    case = HostCase().answer("kind", ["version"], "kind version: development build\n")
    (found,) = problems(case.run(tmp_path, "--stack", "dev")[0])
    assert found == (f"kind: 'kind version: development build' is not the pinned {versions.KIND_BINARY}. "
                     f"{TOOLS_FIX.format(versions.KIND_BINARY)}")
    from gpu_tenancy.cli.tools import TOOLS_BY_NAME

    assert TOOLS_BY_NAME["kind"].parse_version("kind v0.32.0-alpha+1f2e go1.26.3 linux/amd64\n") == "v0.32.0-alpha+1f2e"


def test_without_a_stack_doctor_checks_dev(tmp_path: Path) -> None:
    result, calls = HostCase().run(tmp_path)
    assert result.stdout.splitlines()[-1] == "doctor: no problems (host, Pulumi state and lab, stack dev)"
    assert ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", "dev"] in calls


def test_a_real_stack_without_a_passphrase_is_told_to_choose_one(tmp_path: Path) -> None:
    result, _ = HostCase().run(tmp_path, "--stack", "gpu")
    assert problems(result) == [
        "passphrase: neither PULUMI_CONFIG_PASSPHRASE nor PULUMI_CONFIG_PASSPHRASE_FILE is set: a real stack's secrets "
        "are encrypted with a passphrase you choose. Fix: export PULUMI_CONFIG_PASSPHRASE=<yours> (the same every time "
        "for this stack)"]
    case = HostCase()
    case.env = {"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "passphrase")}
    assert problems(case.run(tmp_path / "file", "--stack", "gpu")[0]) == []
