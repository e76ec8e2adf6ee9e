"""`make doctor`: one pass over this host and, when deployed, the lab; every problem on its own line with its fix.

    gpu-tenancy doctor --stack dev               # host, Pulumi state and the deployed lab
    gpu-tenancy doctor --stack dev --before-up   # what `make up` runs first: host, state, lost cluster

Exit 0 when nothing is wrong, 1 when anything is (each problem printed as `problem: <what>. Fix: <fix>`), 2 on
bad usage. The checks are pure functions in gpu_tenancy/cli/doctor/host.py and gpu_tenancy/cli/doctor/lab.py; this
module only asks the tools (`docker`, `kind`, `kubectl`, `pulumi`, `sysctl`, `df`, `free`) and reads the stack
file, the stack outputs (`pulumi stack output --show-secrets`, as `make kubeconfig` does: kubeconfigs go to
0600 files in a private temporary directory, removed at the end, never to the terminal) and the file backend's
lock files.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpu_tenancy.cli import stack_outputs
from gpu_tenancy.cli.base_command import UsageError, command_parser
from gpu_tenancy.cli.doctor.deployment import (
    built_images,
    image_loads,
    pending_operations,
    state_resources,
    urn_name,
)
from gpu_tenancy.cli.doctor.host import (
    HostFacts,
    LabShape,
    Problem,
    host_problems,
    parse_df_available,
    parse_free_available,
    parse_network_subnets,
)
from gpu_tenancy.cli.doctor.known_issues import (
    KnownIssueFacts,
    bridge_name,
    known_issue_problems,
    parse_firewalld_backend,
    parse_proc_net_route,
)
from gpu_tenancy.cli.doctor.lab import ClusterFacts, LabFacts, lab_problems
from gpu_tenancy.cli.status_codes import FAILURE, SUCCESS, USAGE
from gpu_tenancy.contract.config import ConfigError
from gpu_tenancy.contract.device_layers import find_layer
from gpu_tenancy.contract.stack_file import load_stack_file

NAMESPACE = "gpu-tenancy"
HOST_ROOT_ENV = "GPU_TENANCY_DOCTOR_HOST_ROOT"
TIMEOUT_SECONDS = 30
WORKER_LABEL = "gpu-tenancy.io/component=worker"


def run(argv: Sequence[str], timeout: float = TIMEOUT_SECONDS, stdin: str | None = None) -> tuple[int, str, str] | None:
    """(exit code, stdout, stderr) of a tool; None when it is not on PATH. In the C locale: the parsers read the
    English output (`free`'s `Mem:` line, `df`'s columns), which a translated one would hide."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, input=stdin,
                              env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        return 124, "", f"no answer in {timeout:.0f} s"
    except OSError as error:
        return 126, "", str(error)
    return done.returncode, done.stdout, done.stderr


def read_shape(stack: str, stack_file: Path) -> LabShape:
    """The lab the stack file describes, validated as the program and the planner validate it (one line if not)."""
    if not stack_file.is_file():
        raise UsageError(f"{stack_file} not found: STACK={stack} names no stack file")
    try:
        config = load_stack_file(stack_file)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    return LabShape(
        stack=stack,
        mode=config.mode,
        cluster_name=config.cluster_name(stack),
        network=config.kind_network,
        tenants=tuple(t.name for t in config.tenants),
    )


# --------------------------------------------------------------------------- the host


def _first_line(result: tuple[int, str, str] | None) -> str | None:
    if result is None:
        return None
    return (result[1].strip().splitlines() or [""])[0] if result[0] == 0 else ""


def _int(result: tuple[int, str, str] | None) -> int | None:
    try:
        return int(result[1].strip()) if result and result[0] == 0 else None
    except ValueError:
        return None


def kind_clusters() -> list[str] | None:
    """The kind clusters there are; None when kind cannot say (not on PATH, failing): not known, not none."""
    result = run(["kind", "get", "clusters"])
    return result[1].split() if result and result[0] == 0 else None


def gather_host(shape: LabShape, environ: Mapping[str, str]) -> HostFacts:
    facts = HostFacts(environ=dict(environ))
    facts.tool_versions["pulumi"] = _first_line(run(["pulumi", "version"]))
    kubectl = run(["kubectl", "version", "--client", "-o", "json"])
    if kubectl is None:
        facts.tool_versions["kubectl"] = None
    else:
        facts.tool_versions["kubectl"] = kubectl[1] if kubectl[0] == 0 else ""
    if not shape.simulated:
        return facts
    facts.tool_versions["kind"] = _first_line(run(["kind", "version"]))
    # Limits of this host first: they hold whether the Docker engine answers or not.
    facts.inotify_instances = _int(run(["sysctl", "-n", "fs.inotify.max_user_instances"]))
    facts.inotify_watches = _int(run(["sysctl", "-n", "fs.inotify.max_user_watches"]))
    memory = run(["free", "-b"])
    facts.memory_available_bytes = parse_free_available(memory[1]) if memory and memory[0] == 0 else None
    info = run(["docker", "info", "--format", "{{json .}}"])
    if info is None:
        facts.tool_versions["docker"] = None  # named by tool_problems alone
    elif info[0] != 0:
        facts.docker_error = info[2]
    else:
        try:
            facts.docker_info = json.loads(info[1])
        except ValueError:
            facts.docker_error = "`docker info` printed no JSON"
    root = str((facts.docker_info or {}).get("DockerRootDir") or "/")
    disk = run(["df", "-Pk", root])
    disk = disk if disk is None or disk[0] == 0 or root == "/" else run(["df", "-Pk", "/"])  # root not there (yet)
    facts.disk_free_bytes = parse_df_available(disk[1]) if disk and disk[0] == 0 else None
    if facts.docker_info is None:
        return facts
    network = run(["docker", "network", "inspect", shape.network])
    if network and network[0] == 0:
        facts.network_subnets = parse_network_subnets(network[1])
        facts.network_bridge = bridge_name(network[1])
    facts.kind_clusters = kind_clusters()
    for cluster in facts.kind_clusters or []:
        if cluster == shape.cluster_name or not cluster.startswith("gpu-tenancy-"):
            continue
        node = f"{cluster}-control-plane"
        inspect = run(["docker", "inspect", "--format", "{{json .NetworkSettings.Networks}}", node])
        try:
            networks = sorted(json.loads(inspect[1])) if inspect and inspect[0] == 0 else []
        except ValueError:
            networks = []
        facts.cluster_networks[cluster] = networks
    workers = run(["docker", "ps", "-a", "--filter", f"label={WORKER_LABEL}", "--filter", f"network={shape.network}",
                   "--format", "{{.Names}}"])
    facts.workers_on_network = workers[1].split() if workers and workers[0] == 0 else []
    return facts


def _host_file(path: str) -> str:
    """A file of this host by its path under / (GPU_TENANCY_DOCTOR_HOST_ROOT re-roots /proc and /etc for the tests);
    "" if unreadable."""
    try:
        return (Path(os.environ.get(HOST_ROOT_ENV, "/")) / path).read_text()
    except OSError:
        return ""


def gather_known_issues(host: HostFacts) -> KnownIssueFacts:
    docker = shutil.which("docker")
    facts = KnownIssueFacts(docker_cli=os.path.realpath(docker) if docker else None,
                            docker_info=dict(host.docker_info or {}))
    state = run(["firewall-cmd", "--state"])
    facts.firewalld_running = bool(state and state[0] == 0 and state[1].strip() == "running")
    facts.firewalld_backend = parse_firewalld_backend(_host_file("etc/firewalld/firewalld.conf"))
    if host.docker_info is None:
        return facts
    facts.routes = parse_proc_net_route(_host_file("proc/net/route"))
    facts.network_bridge = host.network_bridge
    facts.network_subnets = list(host.network_subnets or [])
    source = run(["findmnt", "-n", "-o", "SOURCE", "--target", str(host.docker_info.get("DockerRootDir") or "/")])
    facts.data_root_source = source[1].strip() if source and source[0] == 0 else None
    return facts


# --------------------------------------------------------------------------- Pulumi state and the lab


def stack_locks(state_dir: Path, stack: str) -> list[dict[str, Any]]:
    """The file backend's lock files for `stack`, each with whether the process that took it still runs here."""
    locks = []
    root = state_dir / ".pulumi" / "locks"
    for path in sorted(root.glob(f"*/*/{stack}/*.json")) + sorted(root.glob(f"{stack}/*.json")):
        try:
            lock = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        pid, host = lock.get("pid"), lock.get("hostname")
        alive = True
        if host == socket.gethostname() and isinstance(pid, int):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                alive = False
            except PermissionError:
                alive = True
        locks.append({"path": str(path), "pid": pid, "hostname": host, "alive": alive})
    return locks


def stack_deployment(stack: str) -> dict[str, Any]:
    """`pulumi stack export`'s deployment (resources, pending operations); {} when it cannot be read."""
    result = run(["pulumi", "stack", "export", "--stack", stack], timeout=120)
    if not result or result[0] != 0:
        return {}
    try:
        deployment = json.loads(result[1]).get("deployment") or {}
    except (ValueError, AttributeError):
        return {}
    return deployment if isinstance(deployment, dict) else {}


def missing_images(stack: str) -> list[tuple[str, str]]:
    """(URN, image) of each image the stack built that Docker no longer has (`docker image prune -a`). Neither
    pulumi-docker's Image (its Read returns the stored state) nor a build command (no Read) sees that, so only
    replacing them builds the images again. Nothing when Docker does not answer: doctor names that."""
    gone = []
    for urn, image in sorted(built_images(stack_deployment(stack)).items()):
        inspected = run(["docker", "image", "inspect", "--format", "{{.Id}}", image])
        if inspected is not None and inspected[0] != 0 and "no such image" in inspected[2].lower():
            gone.append((urn, image))
    return gone


REMOTE_COMMAND = "command:remote:Command"


def host_deletes(stack: str, stack_file: Path, hosts: Sequence[str]) -> list[str]:
    """URNs of the remote commands whose delete runs on one of ``hosts`` (worker names of the stack file): the
    only deletes that need the host itself (pulumi-command v1.2.1 remote `Command.Delete` connects only when
    there is a `delete`), so the ones a powered-off host fails. UsageError for a name no tenant declares."""
    config = load_stack_file(stack_file)
    owners: dict[str, list[str]] = {}
    for tenant in config.tenants:
        for worker in tenant.workers:
            owners.setdefault(worker.name, []).append(tenant.name)
    unknown = [h for h in hosts if h not in owners]
    if unknown:
        raise UsageError(f"{', '.join(unknown)}: no such worker in {stack_file} (workers: {', '.join(sorted(owners))})")
    prefixes = {f"{owner}-{host}-" for host in hosts for owner in owners[host]}
    return sorted(urn for urn, kind, inputs in state_resources(stack_deployment(stack))
                  if kind == REMOTE_COMMAND and inputs.get("delete") and urn_name(urn).startswith(tuple(prefixes)))


def _kubectl_json(kubeconfig: Path, *args: str) -> tuple[Any, str]:
    result = run(["kubectl", "--kubeconfig", str(kubeconfig), "--request-timeout=10s", *args, "-o", "json"])
    if result is None:
        return None, "kubectl not on PATH"
    if result[0] != 0:
        lines = [line for line in result[2].strip().splitlines() if line.strip()]
        return None, (lines or ["no answer"])[-1]
    try:
        answer = json.loads(result[1])
    except ValueError:
        answer = None
    if not isinstance(answer, dict):  # `null` or a list is no answer to `get ... -o json` (a List object) either
        return None, "kubectl printed no JSON object"
    return answer, ""


def read_cluster(name: str, kubeconfig_text: str, directory: Path, hint: str, registration: bool) -> ClusterFacts:
    path = directory / f"{name}.kubeconfig"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(kubeconfig_text)
    facts = ClusterFacts(name=name, kubeconfig_hint=hint, expects_registration=registration)
    nodes, error = _kubectl_json(path, "get", "nodes")
    if nodes is None:
        facts.error = error
        return facts
    facts.nodes = nodes.get("items") or []
    pods, _ = _kubectl_json(path, "get", "pods", "--all-namespaces")
    facts.pods = (pods or {}).get("items") or []
    secrets, _ = _kubectl_json(path, "get", "secrets", "--all-namespaces", "-l", "owner=helm")
    facts.helm_secrets = (secrets or {}).get("items") or []
    return facts


def deployed_cluster(shape: LabShape, outputs: Mapping[str, Any]) -> str | None:
    """The kind cluster the stack was deployed on (its outputs say; the stack file's name for it may have changed
    since), None when nothing is deployed (no outputs) or the stack has none (real)."""
    return str(outputs.get("kindClusterName") or shape.cluster_name) if outputs and shape.simulated else None


def state_facts(shape: LabShape, cluster_name: str | None, kind_clusters: list[str] | None, state_dir: Path,
                deployment: Mapping[str, Any]) -> LabFacts:
    """The Pulumi state and the kind cluster alone: what `make up` checks first, and what is left to check when the
    outputs do not describe the lab."""
    return LabFacts(shape.stack, cluster_name, kind_clusters, {}, [], stack_locks(state_dir, shape.stack),
                    pending_operations(deployment), datetime.datetime.now(datetime.UTC))


def gather_lab(shape: LabShape, outputs: Mapping[str, Any], state: LabFacts, deployment: Mapping[str, Any]) -> LabFacts:
    """`state` with the lab's containers and clusters as Docker and each API server see them; nothing is read inside a
    kind cluster seen gone. OutputsError (state unchanged) for outputs that do not describe the lab."""
    if state.cluster_gone:
        return state
    tenants = stack_outputs.tenants(outputs, shape.stack) if "tenants" in outputs else {}
    containers: dict[str, str | None] = {}
    if shape.simulated:
        for name in [f"{state.cluster_name}-control-plane", *(node for t in tenants.values() for node in t.nodes)]:
            inspected = run(["docker", "inspect", "--format", "{{.State.Status}}", name])
            containers[name] = inspected[1].strip() if inspected and inspected[0] == 0 else None
    clusters = []
    with tempfile.TemporaryDirectory(prefix="gpu-tenancy-doctor-") as directory:  # mkdtemp: 0700
        if "managementKubeconfig" in outputs:
            clusters.append(read_cluster(
                "management", stack_outputs.management_kubeconfig(outputs, shape.stack), Path(directory),
                f"`make -s kubeconfig-management STACK={shape.stack}`", registration=False))
        for tenant in sorted(tenants):
            clusters.append(read_cluster(
                tenant, stack_outputs.tenant_kubeconfig(outputs, shape.stack, tenant), Path(directory),
                f"`make -s kubeconfig STACK={shape.stack} TENANT={tenant}`", registration=True))
            clusters[-1].image_loads = image_loads(deployment)
    return dataclasses.replace(state, containers=containers, clusters=clusters)


# --------------------------------------------------------------------------- the command


def parser() -> argparse.ArgumentParser:
    p = command_parser("doctor", description=__doc__.splitlines()[0])
    p.add_argument("--stack", default="dev", help="Pulumi stack (default: dev): Pulumi.<stack>.yaml")
    p.add_argument("--stack-file", type=Path, help="the stack file (default: Pulumi.<stack>.yaml)")
    p.add_argument("--state-dir", type=Path, default=Path("state"),
                   help="the file backend's directory (default: state)")
    p.add_argument("--before-up", action="store_true",
                   help="only what `make up` checks first: the host, the Pulumi state and a lost kind cluster")
    p.add_argument("--missing-images", action="store_true",
                   help="print `--replace <urn>` for each image the stack built that Docker no longer has")
    p.add_argument("--hosts-off", metavar="NAMES",
                   help="print the URN of each remote command whose delete needs one of these (space-separated) "
                   "workers, for `make destroy HOSTS_OFF=...`")
    p.add_argument("--lab-gone", action="store_true",
                   help="exit 0 only when the stack's lab was deployed (sim, sim-nvml) and its kind cluster is gone")
    return p


def lab_gone(args: argparse.Namespace) -> bool:
    """Deployed (the stack names its kind cluster in its outputs) and that cluster no longer exists. Any doubt
    (outputs unreadable, `kind` missing or failing) is `False`: only a cluster seen gone lets `destroy` drop
    objects from the state without deleting them."""
    try:
        outputs = stack_outputs.read_outputs(args.stack)
    except stack_outputs.OutputsError:
        return False
    cluster = outputs.get("kindClusterName")
    layer = find_layer(outputs.get("mode"))
    if not cluster or layer is None or not layer.simulated:
        return False
    listed = run(["kind", "get", "clusters"])
    return listed is not None and listed[0] == 0 and str(cluster) not in listed[1].split()


def outputs_fix(error: str, stack: str) -> str:
    if "passphrase" in error.lower():
        return ("set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) to the passphrase this stack was "
                "created with; a sim stack made by `make up` without one uses state/passphrase, which make passes on")
    return (f"see the whole error with `pulumi stack output --stack {stack}` (outside make: "
            "export PULUMI_BACKEND_URL=file://$PWD/state)")


def diagnose(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[list[Problem], list[str]]:
    shape = read_shape(args.stack, args.stack_file or Path(f"Pulumi.{args.stack}.yaml"))
    notes: list[str] = []
    host = gather_host(shape, environ)
    problems: list[Problem] = []
    outputs: dict[str, Any] = {}
    if host.tool_versions.get("pulumi") is not None:  # a missing CLI is named by the tool checks alone
        try:
            outputs = stack_outputs.read_outputs(args.stack)
        except stack_outputs.OutputsError as error:
            if "no stack named" not in str(error):
                problems.append(Problem("pulumi", f"cannot read the stack's outputs ({error})",
                                        outputs_fix(str(error), args.stack)))
    deployed = bool(outputs) or (shape.simulated and shape.cluster_name in (host.kind_clusters or []))
    problems = host_problems(host, shape, deployed) + problems
    if shape.simulated:
        problems += known_issue_problems(gather_known_issues(host), shape.network)
    passphrase = environ.get("PULUMI_CONFIG_PASSPHRASE") or environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if not shape.simulated and not passphrase:  # a sim stack's is generated by `make up`
        problems.append(Problem("passphrase", "neither PULUMI_CONFIG_PASSPHRASE nor PULUMI_CONFIG_PASSPHRASE_FILE is "
                                "set: a real stack's secrets are encrypted with a passphrase you choose",
                                "export PULUMI_CONFIG_PASSPHRASE=<yours> (the same every time for this stack)"))
    deployment = stack_deployment(args.stack)
    state = state_facts(shape, deployed_cluster(shape, outputs), host.kind_clusters, args.state_dir, deployment)
    if not outputs:
        notes.append(f"stack {args.stack}: nothing deployed")
    if not outputs or args.before_up:
        return problems + lab_problems(state), notes
    try:
        lab = gather_lab(shape, outputs, state, deployment)
    except stack_outputs.OutputsError as error:  # outputs a check needs are missing or malformed: say so, not crash
        unreadable = Problem("pulumi", f"the stack's outputs do not describe its lab ({error})",
                             f"`make up STACK={args.stack}` writes them again")
        return [*problems, *lab_problems(state), unreadable], notes
    return problems + lab_problems(lab), notes


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.lab_gone:
        return SUCCESS if lab_gone(args) else FAILURE
    if args.hosts_off is not None:  # what `make destroy HOSTS_OFF=...` drops from the state
        try:
            stack_file = args.stack_file or Path(f"Pulumi.{args.stack}.yaml")
            urns = host_deletes(args.stack, stack_file, args.hosts_off.split())
        except (UsageError, ConfigError) as error:
            print(f"doctor: {error}", file=sys.stderr)
            return USAGE
        for urn in urns:
            print(urn)
        return SUCCESS
    if args.missing_images:  # what `make up` adds to `pulumi up`
        for urn, image in missing_images(args.stack):
            print(f"make up: image {image} is gone from Docker (pruned?): building it again", file=sys.stderr)
            print(f"--replace {urn}")
        return SUCCESS
    try:
        problems, notes = diagnose(args, os.environ if environ is None else environ)
    except UsageError as error:
        print(f"doctor: {error}", file=sys.stderr)
        return USAGE
    for note in notes:
        print(f"note: {note}")
    for problem in problems:
        print(f"problem: {problem.line()}")
    scope = "host and Pulumi state" if args.before_up else "host, Pulumi state and lab"
    print(f"doctor: {len(problems)} problem(s) ({scope}, stack {args.stack})" if problems
          else f"doctor: no problems ({scope}, stack {args.stack})")
    return FAILURE if problems else SUCCESS

