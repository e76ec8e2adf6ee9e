"""Stand-ins for the tools `make doctor` asks, answering as the real ones do on a given host.

`HostCase()` is a healthy Linux host with a reachable Docker Engine and nothing deployed; a test changes what
one tool answers (`case.answer(tool, match, stdout=..., rc=...)`, matched against the joined arguments, the most
recent answer first) or removes a tool (`case.without(tool)`), then `case.run(tmp_path, *doctor_args)` runs
`gpu-tenancy doctor` with a PATH holding only the stubs (in this process, its environment and working directory
swapped, each stub's answer computed in this process from the stub's own source; `case.run_process` runs
`python -m gpu_tenancy doctor` as its own process, and it the stubs as theirs). Every call is logged.

A call answers only in a shape listed in COMMAND_SHAPES, each the whole command line a real tool needs to print
what the answers below print (`docker info` without `--format '{{json .}}'` prints text, `sysctl` without `-n`
prints `key = value`, `df` without `-P` may wrap lines); any other call exits 127 as an unmodelled command, so a
doctor that asks in another shape fails its tests instead of reading an answer the real tool would not give.

What each answer follows:
* `docker info --format '{{json .}}'`: moby v28.5 `api/types/system.Info` marshalled (`ServerVersion`,
  `CgroupVersion` "2"/"1", `SecurityOptions` as "name=seccomp,profile=builtin" etc., `OperatingSystem`
  "Docker Desktop" on Desktop, `DockerRootDir`); an unreachable daemon prints "Cannot connect to the Docker
  daemon at unix:///var/run/docker.sock. Is the docker daemon running?" on stderr and exits 1.
* `docker network inspect NAME`: a JSON list with `IPAM.Config[].Subnet`; a missing network prints
  "Error response from daemon: network NAME not found" and exits 1 (docker/cli `network inspect`).
* `docker inspect --format ...`: the formatted field; a missing object "Error: No such object: NAME", exit 1.
* `kind version`: "kind v0.32.0 go1.24.6 linux/amd64" (kind `pkg/cmd/kind/version` `DisplayVersion`);
  `kind get clusters`: one name per line, "No kind clusters found." on stderr when none (exit 0).
* `kubectl version --client -o json`: `{"clientVersion": {"gitVersion": "v1.35.5", ...}}`; `kubectl get ... -o
  json`: a `List` with `items`; an unreachable server: "Unable to connect to the server: ..." on stderr, exit 1.
* `pulumi version`: "v3.272.0"; `pulumi stack output` as tests/pulumi_stub.py; `pulumi stack export`: the
  deployment JSON (`deployment.pending_operations`).
* `sysctl -n KEY`: the value alone; `df -Pk PATH`: POSIX format; `free -b`: procps-ng 3.3 columns.
* `findmnt -n -o SOURCE --target PATH` (util-linux): the device alone; `firewall-cmd --state`: "running" (exit 0)
  or "not running" (exit 252). Files under the host root (`host_files`): /proc/net/route, /etc/firewalld/...
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]

# Each shape: the arguments' regular expressions, matched in full one for one; "..." takes any arguments after it.
COMMAND_SHAPES: dict[str, list[list[str]]] = {
    "docker": [["info", "--format", "{{json .}}"], ["network", "inspect", "[^-].*"],
               ["inspect", "--format", r"{{\.State\.Status}}|{{json \.NetworkSettings\.Networks}}", "[^-].*"],
               ["ps", "-a", "--filter", "label=[^=]+(=.+)?", "--filter", "network=.+", "--format", r"{{\.Names}}"],
               ["image", "inspect", "--format", r"{{\.Id}}", "[^-].*"]],
    "kind": [["version"], ["get", "clusters"]],
    "kubectl": [["version", "--client", "-o", "json"],
                ["--kubeconfig", "/.+", "--request-timeout=10s", "get", "[a-z]+", "..."]],
    "pulumi": [["version"], ["stack", "output", "--json", "--show-secrets", "--stack", "[^-].*"],
               ["stack", "export", "--stack", "[^-].*"]],
    "sysctl": [["-n", r"fs\.inotify\.max_user_(instances|watches)"]],
    "df": [["-Pk", "/.*"]],
    "free": [["-b"]],
    "findmnt": [["-n", "-o", "SOURCE", "--target", "/.*"]],
    "firewall-cmd": [["--state"]],
}

# How a stub answers one call: the stub scripts run it as their own process; `HostCase.run` runs it in this one.
ANSWER = r'''
import json, os, re

def answer(tool, args, env):
    """(exit code, stdout, stderr) of `tool args` on the host the FAKE_* files describe; the call logged."""
    argv = " ".join(args)
    with open(env["FAKE_LOG"], "a") as log:
        log.write(json.dumps([tool, *args]) + "\n")

    def fits(shape):
        if "..." in shape:
            head = shape[:shape.index("...")]
            return len(args) >= len(head) and all(re.fullmatch(p, a) for p, a in zip(head, args))
        return len(args) == len(shape) and all(re.fullmatch(p, a) for p, a in zip(shape, args))

    unmodelled = (127, "", f"stub {tool}: unmodelled {argv!r}\n")
    if not any(fits(shape) for shape in json.load(open(env["FAKE_SHAPES"])).get(tool, [])):
        return unmodelled
    if tool == "kubectl" and args[-2:] != ["-o", "json"]:  # kubectl prints tables unless asked for JSON
        return unmodelled
    for answer in json.load(open(env["FAKE_TOOLS"])).get(tool, []):
        if all(part in argv for part in answer["match"]):
            return answer["rc"], answer["stdout"], answer["stderr"]
    return unmodelled
'''

# -S: the answer needs the standard library only, and a stub starts in half the time without site-packages.
STUB = "#!{python} -S\n" + ANSWER + """
import sys
code, out, err = answer(os.path.basename(sys.argv[0]), sys.argv[1:], os.environ)
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(code)
"""

DOCKER_INFO: dict[str, Any] = {
    "ServerVersion": "28.5.2",
    "CgroupVersion": "2",
    "CgroupDriver": "systemd",
    "SecurityOptions": ["name=apparmor", "name=seccomp,profile=builtin", "name=cgroupns"],
    "OperatingSystem": "Ubuntu 24.04.3 LTS",
    "DockerRootDir": "/var/lib/docker",
    "MemTotal": 16_000_000_000,
    "NCPU": 4,
}
KIND_NETWORK = [{"Name": "kind", "Id": "6b1f5c2a9e3d40c1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70819", "Options": {},
                 "IPAM": {"Driver": "default", "Config": [
                     {"Subnet": "fc00:f853:ccd:e793::/64"}, {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"}]}}]
KIND_BRIDGE = "br-6b1f5c2a9e3d"  # moby: "br-" + the network id's first 12
# /proc/net/route (the kernel's fib_route_seq_show: destination, gateway and mask as native-endian hex): a default
# route and the LAN on eth0, Docker's bridges for docker0 and the kind network.
ROUTES = (
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
    "eth0\t0000A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
    "docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
    f"{KIND_BRIDGE}\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
)
DF = ("Filesystem     1024-blocks      Used Available Capacity Mounted on\n"
      "/dev/sda1        102400000  20000000  82400000      20% /\n")
FREE = ("               total        used        free      shared  buff/cache   available\n"
        "Mem:     16000000000  4000000000  8000000000      100000  4000000000 12000000000\n"
        "Swap:              0           0           0\n")


def free_output(available: int) -> str:
    return FREE.replace("12000000000", str(available))


def df_output(available_kib: int) -> str:
    return DF.replace("82400000", str(available_kib))


class HostCase:
    def __init__(self) -> None:
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self.missing: set[str] = set()
        self.env: dict[str, str] = {}
        self.answer("docker", ["info"], json.dumps(DOCKER_INFO))
        self.answer("docker", ["network", "inspect"], json.dumps(KIND_NETWORK))
        self.answer("docker", ["ps", "-a"], "")
        self.answer("docker", ["inspect", "--format", "{{.State.Status}}"], "running\n")
        self.answer("kind", ["version"], "kind v0.32.0 go1.24.6 linux/amd64\n")
        self.answer("kind", ["get", "clusters"], "", "No kind clusters found.\n")
        self.answer("kubectl", ["version", "--client"], json.dumps(
            {"clientVersion": {"major": "1", "minor": "35", "gitVersion": "v1.35.5", "platform": "linux/amd64"}}))
        self.answer("pulumi", ["version"], "v3.272.0\n")
        self.answer("pulumi", ["stack", "output"], "", "error: no stack named 'dev' found\n", 255)
        self.answer("pulumi", ["stack", "export"], "", "error: no stack named 'dev' found\n", 255)
        self.answer("sysctl", ["max_user_instances"], "8192\n")
        self.answer("sysctl", ["max_user_watches"], "1048576\n")
        self.answer("df", ["-Pk"], DF)
        self.answer("free", ["-b"], FREE)
        self.answer("findmnt", ["SOURCE"], "/dev/sda1\n")
        self.answer("firewall-cmd", ["--state"], "not running\n", "", 252)
        self.host_files: dict[str, str] = {"proc/net/route": ROUTES}

    def answer(self, tool: str, match: list[str], stdout: str = "", stderr: str = "", rc: int = 0) -> HostCase:
        self.answers.setdefault(tool, []).insert(0, {"match": match, "stdout": stdout, "stderr": stderr, "rc": rc})
        return self

    def without(self, tool: str) -> HostCase:
        self.missing.add(tool)
        return self

    def deployed(self, outputs: dict[str, Any], clusters: list[str], export: dict[str, Any] | None = None) -> HostCase:
        """A lab deployed for this stack: its outputs, the kind clusters there are, its state export."""
        self.answer("pulumi", ["stack", "output"], json.dumps(outputs))
        self.answer("pulumi", ["stack", "export"], json.dumps(export or {"version": 3, "deployment": {}}))
        self.answer("kind", ["get", "clusters"], "".join(f"{c}\n" for c in clusters),
                    "" if clusters else "No kind clusters found.\n")
        return self

    def run(self, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
        """`gpu-tenancy doctor` in this process, its environment and working directory those of a process started
        as run_process starts one (so a mutation run sees which test reaches which line); the stubs' call log."""
        from gpu_tenancy.cli.main import main

        env, log = self._host(tmp_path)
        saved, cwd = dict(os.environ), Path.cwd()
        out, err = io.StringIO(), io.StringIO()
        try:
            # MUTANT_UNDER_TEST goes with the rest: mutmut 3.8 keeps its own copy (trampoline.get_mutant_under_test).
            os.environ.clear()
            os.environ.update(env)
            os.chdir(REPO)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stubs_in_process(tmp_path):
                code = main(["doctor", *args])
        finally:
            os.environ.clear()
            os.environ.update(saved)
            os.chdir(cwd)
        done = subprocess.CompletedProcess(["gpu-tenancy", "doctor", *args], code, out.getvalue(), err.getvalue())
        return done, self._calls(log)

    def run_process(self, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
        """`python -m gpu_tenancy doctor` as its own process, with only the stubs on PATH."""
        env, log = self._host(tmp_path)
        done = subprocess.run([sys.executable, "-m", "gpu_tenancy", "doctor", *args], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)
        return done, self._calls(log)

    @staticmethod
    def _calls(log: Path) -> list[list[str]]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def call(self, tmp_path: Path, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        """One stub called as doctor would call it."""
        env, _ = self._host(tmp_path)
        return subprocess.run([str(tmp_path / "stub-bin" / tool), *args], env=env, capture_output=True, text=True,
                              timeout=60)

    def _host(self, tmp_path: Path) -> tuple[dict[str, str], Path]:
        """The stubs, answers and host files written under tmp_path; the environment to run with, the call log."""
        bin_dir = tmp_path / "stub-bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        tools = {"docker", "kind", "kubectl", "pulumi", "sysctl", "df", "free", "findmnt", "firewall-cmd"} - self.missing
        host_root = tmp_path / "host-root"  # /proc and /etc as doctor reads them (GPU_TENANCY_DOCTOR_HOST_ROOT)
        for name, text in self.host_files.items():
            (host_root / name).parent.mkdir(parents=True, exist_ok=True)
            (host_root / name).write_text(text)
        for tool in tools:
            path = bin_dir / tool
            path.write_text(STUB.replace("{python}", sys.executable))
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        answers, log, shapes = tmp_path / "answers.json", tmp_path / "calls.jsonl", tmp_path / "shapes.json"
        answers.write_text(json.dumps(self.answers))
        shapes.write_text(json.dumps(COMMAND_SHAPES))
        env = {"PATH": str(bin_dir), "FAKE_TOOLS": str(answers), "FAKE_LOG": str(log), "FAKE_SHAPES": str(shapes),
               "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "GPU_TENANCY_DOCTOR_HOST_ROOT": str(host_root), **self.env}
        return env, log


@contextlib.contextmanager
def _stubs_in_process(tmp_path: Path) -> Iterator[None]:
    """`subprocess.run` of a stub under tmp_path answers from ANSWER in this process, as the stub's own process
    would (same argv, exit code, output and log line), without starting Python a few dozen times per test; any
    other program is unmodelled (exit 127), and a call in another shape fails the test. The tool is still found on
    PATH by `shutil.which`, as doctor finds it."""
    namespace: dict[str, Any] = {}
    exec(ANSWER, namespace)  # the stubs' own source, run as they run it
    real_run = subprocess.run
    bin_dir = (tmp_path / "stub-bin").resolve()

    def run(argv: Any, *args: Any, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        # Only the calls doctor makes (`run`, `stack_outputs.read_outputs`): anything else is a change to model first.
        if args or set(kwargs) - {"capture_output", "text", "timeout", "input", "env"} or not kwargs.get("text") \
                or not kwargs.get("capture_output") or kwargs.get("input") is not None:
            raise AssertionError(f"doctor ran {argv!r} in a way the stubs do not model: {args!r} {kwargs!r}")
        env = os.environ if kwargs.get("env") is None else kwargs["env"]
        found = shutil.which(str(argv[0]), path=env.get("PATH"))
        if found is None or Path(found).resolve().parent != bin_dir:  # not a stub: no real program runs either
            return subprocess.CompletedProcess(list(argv), 127, "", f"stub: unmodelled program {argv[0]!r}\n")
        code, out, err = namespace["answer"](Path(found).name, [str(a) for a in argv[1:]], env)
        return subprocess.CompletedProcess(list(argv), code, out, err)

    subprocess.run = run  # type: ignore[assignment]
    try:
        yield
    finally:
        subprocess.run = real_run


def problems(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line.removeprefix("problem: ") for line in result.stdout.splitlines() if line.startswith("problem: ")]


def environ_without_proxy() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}


# What the docker CLI prints when the engine does not answer (docker/cli: the daemon's socket is not there).
ENGINE_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"


# --------------------------------------------------------------------------- a deployed lab, for test_doctor*.py


def kubeconfig_text(server: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": server}}],
                           "users": [{"name": "u", "user": {"token": "secret-token"}}]})


OUTPUTS = {
    "mode": "sim",
    "kindClusterName": "gpu-tenancy-dev",
    "managementKubeconfig": kubeconfig_text("https://127.0.0.1:40000"),
    "tenants": {
        "tenant-a": {"endpoint": "172.18.255.250:6443", "nodes": ["gpu-tenancy-dev-tenant-a-worker"]},
        "tenant-b": {"endpoint": "172.18.255.251:6443", "nodes": ["gpu-tenancy-dev-tenant-b-worker"]},
    },
    "tenantKubeconfigs": {"tenant-a": kubeconfig_text("https://172.18.255.250:6443"),
                          "tenant-b": kubeconfig_text("https://172.18.255.251:6443")},
}
NOW = datetime.datetime.now(datetime.UTC)


def kube_node(name: str, ready: bool = True, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    register = json.dumps([{"id": "GPU-0", "count": 10, "devmem": 81920, "type": "NVIDIA-A100", "health": True}])
    return {"metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": register, **(annotations or {})}},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "Unknown",
                                       "reason": "KubeletReady" if ready else "NodeStatusUnknown"}]}}


def kube_list(*items: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})


# What kubectl is asked, whole: without --all-namespaces it answers for the default namespace alone, and the Helm
# records are the Secrets labelled owner=helm (helm v3 pkg/storage/driver/secrets.go).
PODS = "get pods --all-namespaces -o json"
HELM_RECORDS = "get secrets --all-namespaces -l owner=helm -o json"


def lab_case(clusters: tuple[str, ...] = ("gpu-tenancy-dev",), export: dict[str, Any] | None = None) -> HostCase:
    case = HostCase().deployed(OUTPUTS, list(clusters), export)
    case.answer("docker", ["ps", "-a"], "gpu-tenancy-dev-tenant-a-worker\ngpu-tenancy-dev-tenant-b-worker\n")
    for cluster in ("management", "tenant-a", "tenant-b"):
        nodes = [] if cluster == "management" else [kube_node(f"gpu-tenancy-dev-{cluster}-worker")]
        case.answer("kubectl", [f"{cluster}.kubeconfig", "get nodes"], kube_list(*nodes))
        case.answer("kubectl", [f"{cluster}.kubeconfig", PODS], kube_list())
        case.answer("kubectl", [f"{cluster}.kubeconfig", HELM_RECORDS], kube_list())
    return case
