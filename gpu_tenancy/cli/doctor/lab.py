"""`make doctor`, a deployed lab: what is broken now, and what no provider can see on `pulumi refresh`.

Pure checks over what gpu_tenancy/cli/doctor/command.py gathers from the stack outputs, Docker and each cluster's API.
What each reads, and from where:

* the kind cluster (`kind get clusters`) and the node containers (`docker inspect`): a cluster deleted out of
  band is invisible to `pulumi refresh` (it is a pulumi-command `Command`, which has no Read); a worker removed
  or stopped by hand is seen by `make up`'s refresh (terraform-provider-docker `resourceDockerContainerRead`
  drops a missing container, and marks a stopped one `must_run: false`, which the update starts again).
* each cluster's Nodes and Pods (`kubectl get nodes,pods -o json`), with HAMi v2.10.0's annotations:
  `hami.io/node-nvidia-register` (plugin/register.go), the node lock `hami.io/mutex.lock`
  ("<RFC 3339>,<namespace>,<pod>", pkg/util/nodelock `NodeLockTimeout` 5 min), a pod's `hami.io/bind-phase`
  "allocating" since `hami.io/bind-time` (unix seconds, pkg/scheduler/scheduler.go Bind).
* Helm's release records: Secrets labelled `owner=helm` with `status` and `name` (helm v3
  `pkg/storage/driver/secrets.go`); an `up` interrupted during an install leaves `pending-install`, and
  Helm then refuses the name ("another operation (install/upgrade/rollback) is in progress").
* Pulumi's own state: lock files of the file backend (`.pulumi/locks/<org>/<project>/<stack>/<id>.json`
  with the pid and host that took it, pulumi/pulumi `pkg/backend/diy/lock.go`) and the deployment's
  `pending_operations` (`pulumi stack export`), both left by an interrupted `up`.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from gpu_tenancy.cli.doctor.host import Problem
from gpu_tenancy.hami import protocol as hami

REGISTER_ANNOTATION = hami.NODE_REGISTER_ANNOTATION
NODE_LOCK_ANNOTATION = hami.NODE_LOCK_ANNOTATION
BIND_PHASE_ANNOTATION = "hami.io/bind-phase"
BIND_TIME_ANNOTATION = "hami.io/bind-time"
NODE_LOCK_STALE = datetime.timedelta(minutes=5)  # HAMi's NodeLockTimeout; the scheduler's own is shorter
BINDING_STUCK = datetime.timedelta(minutes=5)
PENDING_HELM = ("pending-install", "pending-upgrade", "pending-rollback", "uninstalling")


@dataclass
class ClusterFacts:
    """One cluster's API as `kubectl` saw it; `error` set when it did not answer."""

    name: str  # "management" or the tenant's name
    kubeconfig_hint: str  # how the user gets a kubeconfig for it (make target)
    error: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    helm_secrets: list[dict[str, Any]] = field(default_factory=list)
    expects_registration: bool = True
    image_loads: dict[str, str] = field(default_factory=dict)  # name -> urn of the commands loading images


@dataclass
class LabFacts:
    stack: str
    cluster_name: str | None  # the kind cluster (sim modes)
    kind_clusters: list[str] | None  # None: not known (Docker or kind did not answer), so no cluster is seen gone
    containers: dict[str, str | None]  # container -> Docker state ("running", "exited", ...); None: missing
    clusters: list[ClusterFacts]
    locks: list[dict[str, Any]]  # {"path", "pid", "hostname", "alive"}
    pending_operations: list[dict[str, str]]  # name, type, op ("creating", ...), object, namespace
    now: datetime.datetime

    @property
    def cluster_gone(self) -> bool:
        """The stack's kind cluster is seen missing from the clusters kind lists (never when kind could not say)."""
        return (self.cluster_name is not None and self.kind_clusters is not None
                and self.cluster_name not in self.kind_clusters)


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _ready(node: dict[str, Any]) -> tuple[bool, str]:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            why = condition.get("reason") or condition.get("message") or "no reason given"
            return condition.get("status") == "True", str(why)
    return False, "no Ready condition"


def _parse_time(text: str) -> datetime.datetime | None:
    """An RFC 3339 time (HAMi writes its node lock's so); None for anything else, a time without an offset too."""
    try:
        parsed = datetime.datetime.fromisoformat(text)  # a trailing "Z" too, since Python 3.11
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def kind_cluster_problems(facts: LabFacts) -> list[Problem]:
    if not facts.cluster_gone:
        return []
    return [Problem(
        "kind cluster", f"{facts.cluster_name} is gone (deleted outside Pulumi; `pulumi refresh` cannot see it, "
        "the kind cluster is a command): every control plane and tenant went with it",
        f"`make destroy STACK={facts.stack}` (it completes without the cluster and says what it skipped), then "
        f"`make up STACK={facts.stack}`")]


def container_problems(facts: LabFacts) -> list[Problem]:
    problems = []
    for name, state in sorted(facts.containers.items()):
        if state is None:
            fix = f"`make up STACK={facts.stack}`: its refresh sees it gone, creates it again and rejoins it"
            problems.append(Problem(f"container {name}", "removed outside Pulumi", fix))
        elif state != "running" and name == f"{facts.cluster_name}-control-plane":
            # kind's node belongs to a command with no Read: no refresh sees it stopped, so no `up` starts it.
            problems.append(Problem(f"container {name}", f"is {state}, not running: the kind cluster's node, which "
                                    "`make up` cannot see or start", f"`docker start {name}` (kind's nodes come "
                                    "back with their state), then `make doctor`"))
        elif state != "running":
            problems.append(Problem(f"container {name}", f"is {state}, not running",
                                    f"`make up STACK={facts.stack}` starts it again (or `docker start {name}`)"))
    return problems


def cluster_problems(cluster: ClusterFacts, now: datetime.datetime) -> list[Problem]:
    where = "management cluster" if cluster.name == "management" else f"tenant {cluster.name}"
    if cluster.error:
        return [Problem(where, f"its API server does not answer ({cluster.error})",
                        f"check its control plane and the kind network; {cluster.kubeconfig_hint}")]
    problems = []
    for node in cluster.nodes:
        name = node["metadata"]["name"]
        ready, reason = _ready(node)
        if not ready:
            problems.append(Problem(f"{where} node {name}", f"not Ready ({reason})",
                                    f"`kubectl describe node {name}` ({cluster.kubeconfig_hint}); a stopped worker "
                                    "comes back with `make up`"))
        annotations = _annotations(node)
        if cluster.expects_registration and not annotations.get(REGISTER_ANNOTATION):
            problems.append(Problem(f"{where} node {name}", "HAMi has no GPU registration for it",
                                    "check the mock-GPU agent (sim) or hami-device-plugin (sim-nvml, real) logs: "
                                    "`kubectl -n kube-system logs -l gpu-tenancy.io/component=mock-gpu-agent` or "
                                    "`-l app.kubernetes.io/component=hami-device-plugin`"))
        lock = annotations.get(NODE_LOCK_ANNOTATION)
        if lock:
            taken = _parse_time(lock.split(",", 1)[0])
            if taken is None or now - taken > NODE_LOCK_STALE:
                problems.append(Problem(f"{where} node {name}", f"HAMi's node lock is stale ({lock})",
                                        f"`kubectl annotate node {name} {NODE_LOCK_ANNOTATION}-`"))
    for pod in cluster.pods:
        problems += _image_gone(cluster, pod, where)
        annotations = _annotations(pod)
        if annotations.get(BIND_PHASE_ANNOTATION) != "allocating":
            continue
        try:
            since = datetime.datetime.fromtimestamp(int(annotations.get(BIND_TIME_ANNOTATION, "")), datetime.UTC)
        except ValueError:
            continue
        if now - since > BINDING_STUCK:
            metadata = pod["metadata"]
            minutes = int((now - since).total_seconds() // 60)
            problems.append(Problem(
                f"{where} pod {metadata.get('namespace')}/{metadata['name']}",
                f"stuck binding to a GPU for {minutes} min",
                f"`kubectl -n {metadata.get('namespace')} delete pod {metadata['name']}` (its controller makes a new "
                "one), then check the device plugin or agent on its node"))
    for secret in cluster.helm_secrets:
        labels = (secret.get("metadata") or {}).get("labels") or {}
        status = labels.get("status")
        if status in PENDING_HELM:
            namespace = secret["metadata"].get("namespace")
            release = labels.get("name")
            problems.append(Problem(
                f"{where} Helm release {namespace}/{release}", f"left {status} by an interrupted `up`: Helm refuses "
                "to install or upgrade it again",
                f"`kubectl -n {namespace} delete secret {secret['metadata']['name']}` ({cluster.kubeconfig_hint}; or "
                f"`helm uninstall -n {namespace} {release}`), then `make up`"))
    return problems


def _image_gone(cluster: ClusterFacts, pod: dict[str, Any], where: str) -> list[Problem]:
    """A pod of an image the program loads into the node's containerd (pull policy Never) that is no longer
    there: the kubelet reports `ErrImageNeverPull`. The load is a command, which no refresh reads."""
    problems = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") != "ErrImageNeverPull":
            continue
        node = (pod.get("spec") or {}).get("nodeName", "?")
        load = next((urn for name, urn in cluster.image_loads.items() if name.startswith(f"{cluster.name}-")), None)
        fix = f"`pulumi up --replace '{load}'` loads it again" if load else \
            "replace the tenant's `*-image-load` command (`pulumi up --replace <its urn>`) to load it again"
        problems.append(Problem(f"{where} pod {pod['metadata'].get('namespace')}/{pod['metadata']['name']}",
                                f"image {status.get('image')} is gone from node {node}'s containerd", fix))
    return problems


def state_problems(facts: LabFacts) -> list[Problem]:
    problems = []
    for lock in facts.locks:
        if lock.get("alive"):
            continue
        problems.append(Problem(
            f"stack {facts.stack}", f"locked by pid {lock.get('pid')} on {lock.get('hostname')}, which is no longer "
            f"running ({lock.get('path')})", f"`pulumi cancel --stack {facts.stack} --yes`"))
    for operation in facts.pending_operations:
        problems.append(Problem(
            f"stack {facts.stack}", f"an interrupted `up` left {operation['name']} ({operation['type']}) "
            f"{operation['op']}", f"`pulumi refresh --stack {facts.stack} --clear-pending-creates --yes`, then "
            + _after_cut_off(operation, facts.stack)))
    return problems


def _after_cut_off(operation: dict[str, str], stack: str) -> str:
    """What else a create that was cut off needs before the next `up` can make it again (an operation the state does
    not name may have been one)."""
    if operation["op"] not in ("creating", "?"):
        return f"`make up STACK={stack}`"
    kind, name, namespace = operation["type"], operation["object"], operation["namespace"]
    if kind == "docker:index/container:Container":
        # terraform-provider-docker creates with the fixed name: a container left by the cut-off create blocks it.
        if not name:
            return (f"remove the container it left (`docker ps -a` names it; `docker rm -f` it), then "
                    f"`make up STACK={stack}`")
        return f"`docker rm -f {name}` (if it exists), then `make up STACK={stack}`"
    if kind == "kubernetes:helm.sh/v3:Release" and not (name and namespace):
        return ("delete the release record the cut-off install left in the cluster it went to (`kubectl get secrets -A "
                f"-l owner=helm,status=pending-install` lists it), then `make up STACK={stack}`")
    if kind == "kubernetes:helm.sh/v3:Release":
        return (f"free the release name (`kubectl -n {namespace} delete secret -l owner=helm,name={name},"
                f"status=pending-install`, or `helm uninstall -n {namespace} {name}`), then `make up STACK={stack}`")
    if kind.startswith("kubernetes:"):
        # pulumi-kubernetes' server-side-apply create refuses an object that exists unless upsertExistingObjects.
        return (f"`PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true make up STACK={stack}` (the provider then adopts the "
                "object the cut-off create may have made)")
    if kind.startswith("command:"):
        return f"`make up STACK={stack}` (the command runs again and finds what it made)"
    return (f"`make up STACK={stack}` (if it finds what the cut-off create made in the way, remove that and run it "
            "again)")


def lab_problems(facts: LabFacts) -> list[Problem]:
    problems = [*state_problems(facts), *kind_cluster_problems(facts)]
    if problems and facts.cluster_gone:
        return problems  # nothing else can answer without the cluster
    problems += container_problems(facts)
    for cluster in facts.clusters:
        problems += cluster_problems(cluster, facts.now)
    return problems
