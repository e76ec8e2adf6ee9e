"""Fake `docker` and `kubectl` executables for running gpu_tenancy/builders/worker/worker_join.py's scripts here.

`FakeHost(tmp_path)` lays out a node container's filesystem under `root/`, a tenant's API objects under
`api/` and puts both fakes first on PATH. Every invocation is logged with its argv, so a test can prove
no secret reached a command line. What each fake follows upstream:

* `docker exec [-i] NAME CMD...` (docker/cli `cli/command/container/exec.go` `RunExec`): runs CMD in
  the container, forwards stdin with `-i`, exits with CMD's status; a missing container prints
  "Error response from daemon: No such container: NAME" and exits 1. Only the commands the scripts use
  are modelled, on the container's files: `systemctl is-active --quiet containerd` (exit 3 while
  inactive, as systemctl(1) does for an inactive unit), `systemctl stop kubelet`, `test -f/-e`,
  `rm -f`, the scripts' `sh -c` snippets, `kubeadm reset --force` (removes /etc/kubernetes files and stops
  the kubelet: kubernetes `cmd/kubeadm/app/cmd/phases/reset/cleanupnode.go`) and `kubeadm join --config F`,
  whose preflight refuses an existing kubelet.conf, bootstrap-kubelet.conf or pki/ca.crt
  (`cmd/kubeadm/app/preflight/checks.go` `RunJoinNodeChecks`, FileAvailable). Its kubelet-start phase
  follows `cmd/kubeadm/app/cmd/phases/join/kubelet.go` `runKubeletStartJoinPhase` (kubernetes v1.35, without
  the ControlPlaneKubeletLocalMode gate): it writes bootstrap-kubelet.conf, then pki/ca.crt if absent, and
  removes bootstrap-kubelet.conf again on every return (its deferred `os.Remove`, failure or not). The failures
  it models, each as upstream returns it (the workflow runner prefixes "error execution phase kubelet-start"):
  `join="node-exists"` or a Node of that name in the tenant's API (a Ready Node of that name: refused before
  the kubelet is configured; the fake's Nodes never turn NotReady, as no lease runs out in a test),
  `join="kubelet-unhealthy"` (`WaitForKubelet` times out) and `join="tls-bootstrap-timeout"`
  (`waitForTLSBootstrappedClient` times out; the kubelet config and flags file are on disk by then).
  After any of them only pki/ca.crt is left of the join's credentials: that is what a retry finds.
* `kubectl --kubeconfig F ... create -f -` / `delete secret|node NAME [--ignore-not-found]`
  (kubectl `create`/`delete`): objects live as JSON files. A created object must be one the API takes:
  kubectl maps its apiVersion and kind to a resource before sending it (cli-runtime `pkg/resource/mapper.go`
  `infoForData`: no mapping, no request), the API server decodes it into the type registered for that kind
  (a kind it does not register, such as `secret`, which client-go's discovery mapper still maps, is refused
  there), and kubectl's default `--validate=strict` has the server refuse unknown fields (server-side field
  validation, kubectl `pkg/cmd/util/helpers.go` `AddValidateFlags`). The fake checks it against Kubernetes'
  own OpenAPI schema at the tenant's version (kubernetes-validate, strict) and fails, exit 1; its message is
  not kubectl's. It is stricter in one case: an object with no apiVersion at all, which apimachinery's
  unstructured decoding lets through (`pkg/apis/meta/v1/unstructured/helpers.go` `unstructuredJSONScheme.Decode`,
  TODO 109023) and the server may default from the request's path; the scripts always set it. Deleting a
  missing object without
  --ignore-not-found fails with `Error from server (NotFound)` and exit 1, as kubectl does. With
  `forbidden_creates=N` the first N creates are refused with `Error from server (Forbidden)`: a fresh
  tenant's admin group gets its rights only once Kamaji's tenant-side controllers have run
  (clastix/kamaji 26.8.2-edge controllers/soot/manager.go; e2e/worker_kubeadm_join_test.go retries).
* systemd in the node (systemd.exec(5), systemd-system.conf(5)): units are read at boot (the first `systemctl`)
  and on `systemctl daemon-reload`; `systemctl restart containerd` starts containerd with the environment read
  last (DefaultEnvironment= of system.conf.d, then the Environment= of containerd's drop-ins, which win),
  unquoted as systemd does (double quotes, backslash escapes, `%%` in unit files). `cat FILE`, `mkdir -p DIR`;
  `cat > FILE` under /etc/systemd fails when the directory is missing (kind's image has no
  containerd.service.d).
* kubectl with `behaviour(api={"server": ..., "ca": ...})`: the tenant's API server answers only at that
  address with that CA; a kubeconfig naming another address gets a refused connection, another CA the x509
  error, each after discovery's logged attempts, worded as kubectl `pkg/cmd/util/helpers.go`
  `StandardErrorMessage` words a *url.Error, exit 1. `forbidden_deletes=True`: every delete is refused with
  `Error from server (Forbidden)`, as RBAC refuses it.
* `sleep` returns at once (logged), so a wait loop that runs out is tested without waiting.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpu_tenancy.contract.versions import TENANT_KUBERNETES_VERSION

_DOCKER = r'''
import json, os, shutil, sys
from pathlib import Path
state = Path(os.environ["FAKE_STATE"])
with open(state / "calls.jsonl", "a") as log:
    log.write(json.dumps(["docker", *sys.argv[1:]]) + "\n")
args = sys.argv[1:]
assert args[0] == "exec", args
args = args[1:]
interactive = args[0] == "-i"
if interactive:
    args = args[1:]
name, cmd = args[0], args[1:]
root = state / "containers" / name
if not root.is_dir():
    sys.stderr.write(f"Error response from daemon: No such container: {name}\n")
    sys.exit(1)
def path(p):
    return root / p.lstrip("/")
def exists(*ps):
    return any(path(p).exists() for p in ps)
behaviour = json.loads((state / "behaviour.json").read_text())
SYSTEM_CONF = "etc/systemd/system.conf.d"
CONTAINERD_DROPINS = "etc/systemd/system/containerd.service.d"
def unquote_words(text, specifiers):
    # systemd extract_first_word(EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE) on an Environment= value; in unit files
    # `%%` is a literal percent and any other `%x` a specifier (none is written here: refused).
    words, word, quote, i, started = [], "", False, 0, False
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            word, i, started = word + text[i + 1], i + 2, True
            continue
        if c == "%" and specifiers:
            if text[i + 1:i + 2] != "%":
                raise SystemExit(f"fake systemd: unmodelled specifier in {text!r}")
            word, i, started = word + "%", i + 2, True
            continue
        if c == '"':
            quote, i, started = not quote, i + 1, True
            continue
        if c.isspace() and not quote:
            if started:
                words.append(word)
            word, started, i = "", False, i + 1
            continue
        word, i, started = word + c, i + 1, True
    if started:
        words.append(word)
    return dict(w.split("=", 1) for w in words)
def read_units():
    # What systemd loads (at boot and on daemon-reload): DefaultEnvironment= from system.conf.d, then the
    # Environment= lines of containerd's drop-ins in name order; a unit's Environment= wins (systemd.exec(5)).
    env = {}
    for conf in sorted((root / SYSTEM_CONF).glob("*.conf")):
        for line in conf.read_text().splitlines():
            if line.startswith("DefaultEnvironment="):
                env.update(unquote_words(line.split("=", 1)[1], specifiers=False))
    for conf in sorted((root / CONTAINERD_DROPINS).glob("*.conf")):
        for line in conf.read_text().splitlines():
            if line.startswith("Environment="):
                env.update(unquote_words(line.split("=", 1)[1], specifiers=True))
    return env
loaded, containerd_env = root / ".systemd-loaded.json", root / ".containerd-env.json"
if cmd[:1] == ["systemctl"] and not loaded.exists():  # systemd booted: units read, containerd started
    loaded.write_text(json.dumps(read_units()))
    containerd_env.write_text(loaded.read_text())
if cmd == ["systemctl", "daemon-reload"]:
    loaded.write_text(json.dumps(read_units()))
    sys.exit(0)
if cmd == ["systemctl", "restart", "containerd"]:
    containerd_env.write_text(loaded.read_text())  # the configuration loaded last, not what is on disk now
    restarts = root / ".containerd-restarts"
    restarts.write_text(str(int(restarts.read_text()) + 1 if restarts.exists() else 1))
    sys.exit(0)
if cmd[:2] == ["mkdir", "-p"]:
    path(cmd[2]).mkdir(parents=True, exist_ok=True)
    sys.exit(0)
if cmd[0] == "cat" and len(cmd) == 2:
    if not path(cmd[1]).is_file():
        sys.stderr.write(f"cat: {cmd[1]}: No such file or directory\n")
        sys.exit(1)
    sys.stdout.write(path(cmd[1]).read_text())
    sys.exit(0)
if cmd[:3] == ["systemctl", "is-active", "--quiet"] and cmd[3] == "containerd":
    counter = state / "containerd-polls"
    polls = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(polls))
    sys.exit(0 if polls > behaviour.get("containerd_after_polls", 0) else 3)
if cmd == ["systemctl", "stop", "kubelet"]:
    (root / ".kubelet-stopped").write_text("")
    sys.exit(0)
if cmd[0] == "test" and cmd[1] in ("-f", "-e"):
    sys.exit(0 if path(cmd[2]).exists() else 1)
if cmd[:2] == ["rm", "-f"]:
    path(cmd[2]).unlink(missing_ok=True)
    sys.exit(0)
if cmd[:2] == ["sh", "-c"]:
    snippet = cmd[2]
    if snippet.startswith(("umask 077; cat > ", "cat > ")):
        target = path(snippet.split("cat > ", 1)[1])
        if not target.parent.is_dir() and target.parent.is_relative_to(root / "etc" / "systemd"):
            sys.stderr.write(f"sh: 1: cannot create {snippet.split('cat > ', 1)[1]}: Directory nonexistent\n")
            sys.exit(2)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(sys.stdin.buffer.read())
        target.chmod(0o600 if snippet.startswith("umask 077;") else 0o644)
        sys.exit(0)
    if snippet.startswith("modprobe br_netfilter"):
        sys.exit(0)
    if snippet.startswith("test -e "):
        files = [part.split("test -e ", 1)[1].strip().strip("'") for part in snippet.split("||")]
        sys.exit(0 if exists(*files) else 1)
    sys.stderr.write(f"fake docker: unmodelled snippet {snippet!r}\n")
    sys.exit(127)
if cmd[:2] == ["kubeadm", "reset"]:
    assert "--force" in cmd
    shutil.rmtree(root / "etc" / "kubernetes", ignore_errors=True)
    (root / "etc" / "kubernetes" / "manifests").mkdir(parents=True)
    (root / ".kubelet-stopped").write_text("")
    (state / "resets").write_text(str(int((state / "resets").read_text() or 0) + 1) if (state / "resets").exists() else "1")
    sys.exit(0)
if cmd[:3] == ["kubeadm", "join", "--config"]:
    config = path(cmd[3])
    with open(state / "joins.jsonl", "a") as log:
        log.write(json.dumps(config.read_text()) + "\n")
    taken = [p for p in ("/etc/kubernetes/kubelet.conf", "/etc/kubernetes/bootstrap-kubelet.conf",
                         "/etc/kubernetes/pki/ca.crt") if path(p).exists()]
    if taken:
        for p in taken:
            sys.stderr.write(f"[ERROR FileAvailable-{p.replace('/', '-')}]: {p} already exists\n")
        sys.exit(1)
    # phases/join/kubelet.go runKubeletStartJoinPhase
    failure = behaviour.get("join")
    assert failure in (None, "node-exists", "kubelet-unhealthy", "tls-bootstrap-timeout"), failure
    (root / "etc" / "kubernetes" / "pki").mkdir(parents=True, exist_ok=True)
    bootstrap = path("/etc/kubernetes/bootstrap-kubelet.conf")
    bootstrap.write_text("bootstrap")  # kubeconfigutil.WriteToDisk(bootstrapKubeConfigFile, ...)
    if not path("/etc/kubernetes/pki/ca.crt").exists():
        path("/etc/kubernetes/pki/ca.crt").write_text("ca")  # certutil.WriteCert(caPath, ...)
    def phase_fails(message):
        bootstrap.unlink()  # defer os.Remove(bootstrapKubeConfigFile)
        sys.stderr.write(f"error execution phase kubelet-start: {message}\n")
        sys.exit(1)
    if failure == "node-exists" or (state / "api" / "nodes" / name).exists():
        phase_fails(f'a Node with name "{name}" and status "Ready" already exists in the cluster. '
                    "You must delete the existing Node or change the name of this new joining Node")
    (root / "var" / "lib" / "kubelet").mkdir(parents=True, exist_ok=True)
    path("/var/lib/kubelet/config.yaml").write_text("kind: KubeletConfiguration")  # WriteConfigToDisk
    path("/var/lib/kubelet/kubeadm-flags.env").write_text("KUBELET_KUBEADM_ARGS=")  # WriteKubeletDynamicEnvFile
    if failure == "kubelet-unhealthy":
        phase_fails("The HTTP call equal to 'curl -sSL http://127.0.0.1:10248/healthz' returned error")
    if failure == "tls-bootstrap-timeout":
        phase_fails("context deadline exceeded")
    path("/etc/kubernetes/kubelet.conf").write_text("kubelet")  # the kubelet's TLS bootstrap wrote it
    bootstrap.unlink()
    nodes = state / "api" / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    (nodes / name).write_text("{}")
    sys.exit(0)
sys.stderr.write(f"fake docker: unmodelled command {cmd!r}\n")
sys.exit(127)
'''

_KUBECTL = r'''
import json, os, sys
from pathlib import Path
state = Path(os.environ["FAKE_STATE"])
behaviour = json.loads((state / "behaviour.json").read_text())
with open(state / "calls.jsonl", "a") as log:
    log.write(json.dumps(["kubectl", *sys.argv[1:]]) + "\n")
args = sys.argv[1:]
options, words, i = {}, [], 0
while i < len(args):
    a = args[i]
    if a in ("--kubeconfig", "--namespace", "-f"):
        options[a] = args[i + 1]
        i += 2
    elif a.startswith("--"):
        key, _, value = a.partition("=")
        options[key] = value or True
        i += 1
    else:
        words.append(a)
        i += 1
kubeconfig = Path(options["--kubeconfig"])
with open(state / "kubeconfigs.jsonl", "a") as log:
    log.write(json.dumps([kubeconfig.read_text(), oct(kubeconfig.stat().st_mode & 0o777)]) + "\n")
if "api" in behaviour:
    import yaml
    cluster = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]
    server = cluster["server"]
    host = server.removeprefix("https://")
    # Discovery logs each failed attempt (client-go memcache.go), then kubectl prints the *url.Error as
    # StandardErrorMessage (kubectl pkg/cmd/util/helpers.go) words it: its own line for a refused connection.
    def unreachable(cause, last):
        get = f'Get \\"{server}/api?timeout=32s\\": {cause}'
        sys.stderr.write(f'E1206 06:00:00.000000 4242 memcache.go:265] "Unhandled Error" '
                         f'err="couldn\'t get current server API group list: {get}"\n' * 3 + last + "\n")
        sys.exit(1)
    if cluster["server"] != behaviour["api"]["server"]:
        unreachable(f"dial tcp {host}: connect: connection refused",
                    f"The connection to the server {host} was refused - did you specify the right host or port?")
    if cluster["certificate-authority-data"] != behaviour["api"]["ca"]:
        cause = ('tls: failed to verify certificate: x509: certificate signed by unknown authority (possibly '
                 'because of \\"crypto/rsa: verification error\\" while trying to verify candidate authority '
                 'certificate \\"kubernetes\\")')
        unreachable(cause, "Unable to connect to the server: " + cause.replace('\\"', '"'))
api = state / "api"
if words == ["create"] and options.get("-f") == "-":
    obj = json.loads(sys.stdin.read())
    import kubernetes_validate  # only a create needs it: ~0.1 s per call otherwise
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError, KeyError) as error:
        sys.stderr.write(f'error: error validating "STDIN": {error!r}\n')
        sys.exit(1)
    counter = state / "creates"
    creates = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(creates))
    if creates <= behaviour.get("forbidden_creates", 0):
        sys.stderr.write('Error from server (Forbidden): secrets is forbidden: User "kubernetes-admin" cannot '
                         'create resource "secrets" in API group "" in the namespace "kube-system"\n')
        sys.exit(1)
    kind = obj["kind"].lower() + "s"
    folder = api / kind
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / obj["metadata"]["name"]
    if target.exists():
        sys.stderr.write(f'Error from server (AlreadyExists): {kind} "{target.name}" already exists\n')
        sys.exit(1)
    target.write_text(json.dumps(obj))
    print(f"{obj['kind'].lower()}/{target.name} created")
    sys.exit(0)
if words[:1] == ["delete"] and len(words) == 3:
    kind, name = words[1] + "s", words[2]
    if behaviour.get("forbidden_deletes"):
        scope = f'in the namespace "{options["--namespace"]}"' if "--namespace" in options else "at the cluster scope"
        sys.stderr.write(f'Error from server (Forbidden): {kind} "{name}" is forbidden: User "kubernetes-admin" cannot '
                         f'delete resource "{kind}" in API group "" {scope}\n')
        sys.exit(1)
    target = api / kind / name
    if not target.exists():
        if options.get("--ignore-not-found"):
            sys.exit(0)
        sys.stderr.write(f'Error from server (NotFound): {kind} "{name}" not found\n')
        sys.exit(1)
    target.unlink()
    print(f'{words[1]} "{name}" deleted')
    sys.exit(0)
sys.stderr.write(f"fake kubectl: unmodelled {args!r}\n")
sys.exit(127)
'''

# sleep(1) without the wait: the scripts' retry loops run at full speed, each sleep is logged.
_SLEEP = r'''
import json, os, sys
with open(os.path.join(os.environ["FAKE_STATE"], "calls.jsonl"), "a") as log:
    log.write(json.dumps(["sleep", *sys.argv[1:]]) + "\n")
'''


class FakeHost:
    def __init__(self, tmp: Path, container: str = "lab-tenant-a-worker") -> None:
        self.state = tmp / "state"
        self.bin = tmp / "bin"
        self.container = container
        self.root = self.state / "containers" / container
        (self.root / "etc" / "kubernetes" / "manifests").mkdir(parents=True)
        (self.root / "run").mkdir()
        (self.state / "api").mkdir(parents=True)
        self.bin.mkdir()
        kubectl = f"KUBERNETES_VERSION = {TENANT_KUBERNETES_VERSION.lstrip('v')!r}\n{_KUBECTL}"
        for name, body in (("docker", _DOCKER), ("kubectl", kubectl), ("sleep", _SLEEP)):
            exe = self.bin / name
            exe.write_text(f"#!{sys.executable}\n{body}")
            exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
        self.behave()

    def behave(self, **behaviour: Any) -> None:
        (self.state / "behaviour.json").write_text(json.dumps(behaviour))

    def run(self, script: str, stdin: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        environment = {
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "FAKE_STATE": str(self.state),
            "GPU_TENANCY_WORKER": self.container,
            **(env or {}),
        }
        # pulumi-command's local Command: interpreter ["/bin/sh", "-c"], stdin from its `stdin` input.
        return subprocess.run(
            ["/bin/sh", "-c", script], input=stdin, env=environment, capture_output=True, text=True, timeout=60
        )

    def calls(self) -> list[list[str]]:
        path = self.state / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def joins(self) -> list[str]:
        path = self.state / "joins.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def kubeconfigs(self) -> list[tuple[str, str]]:
        path = self.state / "kubeconfigs.jsonl"
        return [tuple(json.loads(line)) for line in path.read_text().splitlines()] if path.exists() else []

    def objects(self, kind: str) -> dict[str, Any]:
        folder = self.state / "api" / kind
        return {p.name: json.loads(p.read_text()) for p in folder.iterdir()} if folder.is_dir() else {}

    def file(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def resets(self) -> int:
        path = self.state / "resets"
        return int(path.read_text()) if path.exists() else 0

    def kind_entrypoint(self) -> FakeHost:
        """What kind's entrypoint does in a node started without proxy variables (v0.32.0
        `images/base/files/usr/local/bin/entrypoint` `configure_proxy`): an empty DefaultEnvironment for them."""
        conf = self.file("/etc/systemd/system.conf.d/proxy-default-environment.conf")
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text('[Manager]\nDefaultEnvironment="HTTP_PROXY=" "HTTPS_PROXY=" "NO_PROXY="\n')
        (self.root / "etc" / "systemd" / "system").mkdir(parents=True, exist_ok=True)
        return self

    def containerd_environment(self) -> dict[str, str]:
        """The environment containerd runs with now (set at boot or by its last restart)."""
        path = self.root / ".containerd-env.json"
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def containerd_restarts(self) -> int:
        path = self.root / ".containerd-restarts"
        return int(path.read_text()) if path.exists() else 0
