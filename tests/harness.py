"""Run the Pulumi program under mocks and record what it registers.

`record_stack(config)` evaluates `__main__.py` exactly as the engine would (fresh module namespace,
config set for project `gpu-tenancy`), with mocks that fail loudly on unknown invokes.
`unknowns=True` simulates a fresh-stack preview: command output, the Docker network lookup and every
computed output come back unknown, and reads answer as the engine does (see `LabMocks`).
"""

from __future__ import annotations

import base64
import datetime
import gc
import hashlib
import json
import os
import runpy
import tempfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pulumi
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pulumi.output import Unknown
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.rpc import UNKNOWN

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.host_worker import hostprep
from gpu_tenancy.builders.mock_nvml import nvml_mock
from gpu_tenancy.builders.worker import kind_node
from gpu_tenancy.contract import chart_lock
from gpu_tenancy.contract.config import load_config
from tests import hami_register
from tests.chart_repo import fill_cache

# The annotation HAMi v2.10.0's device plugin writes its register to (pkg/device/nvidia/device.go
# RegisterAnnos "hami.io/node-nvidia-register"): spelt out here, not taken from gpu_tenancy.hami.protocol.
HAMI_REGISTER_ANNOTATION = "hami.io/node-nvidia-register"
REPO = Path(__file__).resolve().parents[1]
PROJECT = "gpu-tenancy"
# `make` as a test runs it: every stamp of the venv counts as built (`-o`), so no test ever runs pip, not even when
# pyproject.toml is newer than the installed `gpu-tenancy`; a mutation copy links this venv and must not repoint it.
VENV_STAMPS = (".venv/bin/.runtime", ".venv/bin/gpu-tenancy", ".venv/bin/.installed")
MAKE = ["make", "-s", *(flag for stamp in VENV_STAMPS for flag in ("-o", stamp))]
DEV_STACK_FILE = REPO / "Pulumi.dev.yaml"
KIND_IPAM = [
    {"subnet": "fc00:f853:ccd:e793::/64", "gateway": "fc00:f853:ccd:e793::1"},
    {"subnet": "172.18.0.0/16", "gateway": "172.18.0.1"},
]


def stack_config(stack: str) -> dict[str, Any]:
    """A stack file's config, keyed without the namespace."""
    raw = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {key.split(":", 1)[1]: value for key, value in raw.items()}


def dev_config() -> dict[str, Any]:
    """The dev stack's config, keyed without the namespace."""
    return stack_config("dev")


def nvml_config() -> dict[str, Any]:
    """The dev-nvml stack (mode sim-nvml: HAMi's device plugin on NVIDIA's mock NVML)."""
    return stack_config("dev-nvml")


# What `pulumi config set --secret` would hold for the gpu stack's credentials in these tests.
TEST_SECRETS = {
    "managementKubeconfig": "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: mgmt-secret}}]\n",
    "sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\ntest-ssh-key\n-----END OPENSSH PRIVATE KEY-----\n",
}


def gpu_config() -> dict[str, Any]:
    """The gpu (real) example stack with the credentials a user sets as secrets."""
    return {**stack_config("gpu"), **TEST_SECRETS}


def nodeport_gpu_config() -> dict[str, Any]:
    """The gpu stack with NodePort control planes and no MetalLB: the other real-mode TCP shape."""
    config = gpu_config()
    config["metallb"] = {"enabled": False}
    config["controlPlane"] = {"serviceType": "NodePort"}
    for index, tenant in enumerate(config["tenants"]):
        tenant["controlPlaneAddress"] = f"10.20.0.{2 + index}"
    return config


def registered_gpus(config: dict[str, Any]) -> dict[str, str]:
    """Node name -> the register annotation HAMi's device plugin writes on each real host (mode real): the
    recorded cards (tests/fixtures/nvidia_smi) through the register.go double (tests/hami_register.py)."""
    annotations: dict[str, str] = {}
    for tenant in config["tenants"]:
        workers = tenant.get("workers") or []
        for worker in workers:
            groups = worker.get("gpus") or (tenant["gpus"] if len(workers) == 1 else [])
            annotations[worker["name"]] = hami_register.annotation(
                hami_register.register(hami_register.real_host_nvml(worker["name"], groups))
            )
    return annotations


def _test_ca_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


CA_PEM = _test_ca_pem()


def tenant_kubeconfig(tenant: str) -> str:
    """A tenant's admin kubeconfig; its address depends on the tenant only (not on call order)."""
    digest = int(hashlib.sha256(tenant.encode()).hexdigest(), 16)
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": tenant,
                    "cluster": {
                        "server": f"https://10.{digest % 200}.{(digest >> 8) % 250}.{(digest >> 16) % 250 + 1}:6443",
                        "certificate-authority-data": base64.b64encode(CA_PEM).decode(),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": f"secret-token-{tenant}"}}],
        }
    )


def _contains_unknown(value: Any) -> bool:
    """True if a deserialized property value holds an unknown (preview) anywhere, secrets included."""
    if isinstance(value, Unknown):
        return True
    if isinstance(value, dict):
        return any(_contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_unknown(v) for v in value)
    return False


def _component(state: dict[str, Any]) -> str | None:
    metadata = state.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels.get(kube_objects.COMPONENT_LABEL) if isinstance(labels, dict) else None


def _kubernetes_id(metadata: Any) -> str | None:
    """pulumi-kubernetes' id for an object: "<namespace>/<name>", or "<name>" when cluster-scoped."""
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return None
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata['name']}" if isinstance(namespace, str) and namespace else metadata["name"]


def _join_configuration(stdin: Any) -> dict[str, Any] | None:
    """The kubeadm JoinConfiguration a command feeds `kubeadm join` on stdin, if it does."""
    value = unwrap(stdin)
    if not isinstance(value, str) or "JoinConfiguration" not in value:
        return None
    document = yaml.safe_load(value)
    return document if isinstance(document, dict) and document.get("kind") == "JoinConfiguration" else None


# The last line of a bootstrap-token mint script: it prints the token it created.
_PRINTS_A_TOKEN = 'printf \'%s.%s\\n\' "$token_id" "$token_secret"'


class ReadFailed(Exception):
    """A read step the engine fails (pulumi/pulumi pkg/resource/deploy/step.go, ReadStep.Apply)."""


def docker_info(options: list[str], driver: str = "overlay2", backing: str = "extfs") -> str:
    """What kind_node.DOCKER_INFO_COMMAND prints on a host: its `--format` template picks three fields of the
    daemon's `Info` (moby api/types/system/info.go: SecurityOptions []string, Driver string, DriverStatus
    [][2]string, where the overlay2 and btrfs drivers report their "Backing Filesystem")."""
    return json.dumps({
        "SecurityOptions": options,
        "Driver": driver,
        "DriverStatus": [["Backing Filesystem", backing], ["Supports d_type", "true"]],
    })


# A rootful Docker on Ubuntu (AppArmor, the default seccomp profile, cgroup namespaces, overlay2 on ext4).
TYPICAL_DOCKER_INFO = docker_info(["name=apparmor", "name=seccomp,profile=builtin", "name=cgroupns"])


class LabMocks(Mocks):
    """Pulumi mocks that answer as the engine and the providers do, for an `up` or a `preview`.

    Resources (RegisterResource): in an `up` every resource is created and its outputs are known. In a
    preview, a resource the stack does not have yet (all of them with `unknowns=True`, those missing from
    `existing` otherwise) is only planned: its id and every computed output are unknown, a Kubernetes
    object's outputs are its inputs (pulumi-kubernetes `Create` with preview: the checkpoint of the inputs,
    no `status`), a command's stdout is unknown.

    Reads (`<Resource>.get`, routed by pulumi's MockMonitor.ReadResource to `new_resource` with
    `resource_id` set) follow the engine:

    * an id unknown during preview: the read step calls no provider and its outputs are `{}`
      (pulumi/pulumi pkg/resource/deploy/step.go `ReadStep.Apply`, `id == plugin.UnknownStringValue`);
    * a provider whose configuration holds an unknown (e.g. a kubeconfig another resource produces): the
      engine leaves the plugin unconfigured and its Read answers an empty property bag, outputs `{}`
      (sdk/go/common/resource/plugin/provider_plugin.go `provider.Configure` / `provider.Read`, `!pcfg.known`);
    * a known id whose object does not exist: pulumi-kubernetes answers a 404 with an empty response
      (provider/pkg/provider/provider.go `kubeProvider.Read`, `deleteResponse`) and the engine fails the
      step with "resource '<id>' does not exist" (`ReadStep.Apply`, `result.Outputs == nil`), preview or
      not (pulumi/pulumi#16395);
    * otherwise the live object, as pulumi-kubernetes reads it.

    The objects that exist (`live`, keyed by type and pulumi-kubernetes id) are the Kubernetes objects the
    stack has created, plus what controllers make of them: Kamaji writes each TenantControlPlane's admin
    kubeconfig Secret `<tcp>-admin-kubeconfig` and names it in `status.kubeconfig.admin.secretName`
    (clastix/kamaji 26.8.2-edge internal/resources/kubeconfig.go `KubeconfigResource.Define` /
    `UpdateTenantControlPlaneStatus`, controllers/resources.go `getKubeconfigResources`); `kubeadm join`
    registers a Node named `nodeRegistration.name` with the `node-labels` of its JoinConfiguration, and
    HAMi's device plugin annotates it (`node_register`). In mode sim-nvml HAMi's device plugin registers
    what the mock NVML configuration on the tenant's node reports (`_hami_registers_mock_nvml`).
    """

    def __init__(
        self,
        unknowns: bool = False,
        ipam: list[dict[str, str]] | None = None,
        node_register: dict[str, str] | None = None,
        *,
        preview: bool = False,
        existing: Collection[tuple[str, str]] | None = None,
    ) -> None:
        self.unknowns = unknowns
        self.preview = preview or unknowns
        self.existing = None if existing is None else frozenset(existing)
        self.ipam = KIND_IPAM if ipam is None else ipam
        self.node_register = node_register or {}
        self.resources: list[MockResourceArgs] = []
        self.calls: list[MockCallArgs] = []
        self.live: dict[tuple[str, str], dict[str, Any]] = {}
        self.unconfigured_providers: set[tuple[str, str]] = set()
        self.provider_reads: list[MockResourceArgs] = []
        self.pending: set[tuple[str, str]] = set()  # custom resources a preview would create
        self.machine_ids: dict[str, str] = {}  # host address -> /etc/machine-id, where not one per address
        self.docker_info = TYPICAL_DOCKER_INFO  # what `docker info` prints on the host running the program

    def planned_only(self, args: MockResourceArgs) -> bool:
        """A preview that would create this resource: it does not exist yet, its outputs are not known."""
        if not self.preview:
            return False
        if self.unknowns:
            return True
        return self.existing is not None and (args.typ, args.name) not in self.existing

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.resources.append(args)
        if args.resource_id:
            return None, self._read(args)
        pending = self.planned_only(args)
        if pending and args.custom:
            self.pending.add((args.typ, args.name))
        outputs = dict(args.inputs)
        if args.typ.startswith("pulumi:providers:") and _contains_unknown(args.inputs):
            self.unconfigured_providers.add((args.typ, args.name))
        if args.typ in ("command:local:Command", "command:remote:Command"):
            outputs["stdout"] = UNKNOWN if pending else self._stdout(args)
        elif args.typ == "random:index/randomString:RandomString":
            outputs["result"] = UNKNOWN if pending else "a" * int(args.inputs["length"])
        elif args.typ == "docker:index/remoteImage:RemoteImage":
            outputs["imageId"] = UNKNOWN if pending else "sha256:0123"
        elif args.typ == "docker:index/image:Image":
            outputs["imageName"] = args.inputs.get("imageName")
            outputs["repoDigest"] = UNKNOWN if pending else "sha256:4567"
        if not pending:
            self._exists(args, outputs)
        # pulumi-command answers a create preview with a real id (v1.2.1 provider/pkg/provider/local/
        # commandController.go Create: resource.NewUniqueHex before `if preview`; pulumi-go-provider v1.3.0
        # infer/resource.go passes it through on DryRun) and the engine keeps it (step.go CreateStep.Apply),
        # so a command's id is known even while it is only planned. Other providers return none.
        id_known_in_preview = args.typ in ("command:local:Command", "command:remote:Command")
        resource_id = UNKNOWN if pending and args.custom and not id_known_in_preview else f"{args.name}-id"
        return (None if resource_id is UNKNOWN else resource_id), outputs

    def _stdout(self, args: MockResourceArgs) -> str:
        """What a command prints (pulumi-command v1.2.1 stores it as `stdout`, `BaseState.Stdout`: "the standard
        output of the command's process"): a host's /etc/machine-id (32 hex,
        systemd machine-id(5)), by default one per address (`machine_ids` overrides it); a bootstrap-token mint
        prints `<id>.<secret>` (kubeadm's token format `[a-z0-9]{6}.[a-z0-9]{16}`), here one per resource name;
        the worker's `docker info` the host's (`docker_info`); anything else a kubeconfig-shaped text."""
        if args.inputs.get("create") == kind_node.DOCKER_INFO_COMMAND:
            return self.docker_info + "\n"
        if args.inputs.get("create") == hostprep.MACHINE_ID_COMMAND:
            host = str(unwrap(args.inputs.get("connection") or {}).get("host"))
            return self.machine_ids.get(host, hashlib.md5(host.encode()).hexdigest()) + "\n"
        if _PRINTS_A_TOKEN in str(unwrap(args.inputs.get("create") or "")):
            digest = hashlib.sha256(args.name.encode()).hexdigest()
            return f"{digest[:6]}.{digest[6:22]}\n"
        return "apiVersion: v1\nkind: Config\n"

    def _exists(self, args: MockResourceArgs, outputs: dict[str, Any]) -> None:
        """Record a resource that exists (created by this `up` or by an earlier one) and its side effects."""
        if args.typ == "kubernetes:core/v1:Secret" and outputs.get("type") == "kubernetes.io/service-account-token":
            # The token controller fills a ServiceAccount token Secret in (kubernetes pkg/controller/
            # serviceaccount/tokens_controller.go): token, ca.crt and namespace under data.
            account = outputs["metadata"]["annotations"]["kubernetes.io/service-account.name"]
            token = base64.b64encode(f"sa-token-{account}".encode()).decode()
            outputs["data"] = {"token": token, "ca.crt": base64.b64encode(CA_PEM).decode(),
                               "namespace": base64.b64encode(outputs["metadata"]["namespace"].encode()).decode()}
        if args.typ.startswith("kubernetes:") and not args.typ.startswith("kubernetes:helm.sh/"):
            object_id = _kubernetes_id(outputs.get("metadata"))
            if object_id:
                self.live[(args.typ, object_id)] = outputs
        if args.typ == "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane":
            self._kamaji_reconciles(outputs)
        elif args.typ == "kubernetes:core/v1:ConfigMap" and _component(outputs) == nvml_mock.COMPONENT:
            self._hami_registers_mock_nvml(outputs)
        elif args.typ in ("command:local:Command", "command:remote:Command"):
            # A GPU host's join reads its JoinConfiguration on stdin; a kind worker's join gets the template
            # in GPU_TENANCY_JOIN_CONFIGURATION (gpu_tenancy/builders/worker/worker_join.py join_script).
            environment = unwrap(args.inputs.get("environment")) or {}
            join = _join_configuration(args.inputs.get("stdin")) or _join_configuration(
                environment.get("GPU_TENANCY_JOIN_CONFIGURATION") if isinstance(environment, dict) else None
            )
            if join is not None:
                self._node_registers(join)

    def _kamaji_reconciles(self, tcp: dict[str, Any]) -> None:
        name, namespace = tcp["metadata"]["name"], tcp["metadata"]["namespace"]
        secret_name = f"{name}-admin-kubeconfig"
        kubeconfig = base64.b64encode(tenant_kubeconfig(name).encode()).decode()
        tcp["status"] = {"kubeconfig": {"admin": {"secretName": secret_name, "checksum": "0" * 32}}}
        self.live[("kubernetes:core/v1:Secret", f"{namespace}/{secret_name}")] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret_name, "namespace": namespace},
            "type": "Opaque",
            "data": {"admin.conf": kubeconfig, "super-admin.conf": kubeconfig},
        }

    def _node_registers(self, join: dict[str, Any]) -> None:
        registration = join.get("nodeRegistration") or {}
        node = registration["name"]
        labels: dict[str, str] = {}
        for argument in registration.get("kubeletExtraArgs") or []:
            if argument.get("name") == "node-labels":
                labels.update(item.split("=", 1) for item in argument["value"].split(",") if "=" in item)
        annotations = {HAMI_REGISTER_ANNOTATION: self.node_register[node]} if node in self.node_register else {}
        self.live[("kubernetes:core/v1:Node", node)] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": labels, "annotations": annotations},
        }

    def _hami_registers_mock_nvml(self, config_map: dict[str, Any]) -> None:
        """HAMi v2.10.0's device plugin on the mock NVML of a tenant's node registers what the mock answers
        for its configuration (tests/hami_register.py follows register.go `getAPIDevices`)."""
        tenant = config_map["metadata"]["labels"][kube_objects.TENANT_LABEL]
        config = yaml.safe_load(config_map["data"]["config.yaml"])
        devices = hami_register.register(hami_register.mock_nvml_devices(config))
        for (typ, node), state in list(self.live.items()):
            metadata = state["metadata"]
            if typ == "kubernetes:core/v1:Node" and metadata["labels"].get(kube_objects.TENANT_LABEL) == tenant:
                registered = self.node_register.get(node, hami_register.annotation(devices))
                metadata["annotations"][HAMI_REGISTER_ANNOTATION] = registered

    def _read(self, args: MockResourceArgs) -> dict[str, Any]:
        """A `.get`: what the engine's read step yields (see the class docstring)."""
        if args.resource_id == UNKNOWN:
            return {}
        provider = _provider_key(args.provider)
        if self.preview and provider in self.unconfigured_providers:
            return {}
        self.provider_reads.append(args)
        state = self.live.get((args.typ, str(args.resource_id)))
        if state is None:
            raise ReadFailed(f"resource '{args.resource_id}' does not exist")
        return json.loads(json.dumps(state))

    def call(self, args: MockCallArgs) -> dict[str, Any]:  # type: ignore[override]  # Mocks.call accepts a plain dict too
        self.calls.append(args)
        if args.token == "docker:index/getNetwork:getNetwork":
            # Reached only once the network's creators exist: the engine's gate answers earlier invokes.
            return {"name": args.args["name"], "id": "net-1", "driver": "bridge", "ipamConfigs": self.ipam}
        raise NotImplementedError(f"mock not implemented for invoke {args.token}")


def _urn_type_and_name(urn: str) -> tuple[str, str]:
    """(type, name) of `urn:pulumi:<stack>::<project>::<parent types>$<type>::<name>`."""
    _, _, qualified_type, name = urn.split("::", 3)
    return qualified_type.rsplit("$", 1)[-1], name


def _provider_key(reference: str | None) -> tuple[str, str] | None:
    """(type, name) of the provider in a reference "<provider urn>::<provider id>"."""
    return _urn_type_and_name(reference.rsplit("::", 1)[0]) if reference else None


@contextmanager
def wrapped_monitor(**wrappers: Callable[[Callable[[Any, Any], Any], Any, Any], Any]) -> Iterator[None]:
    """Wrap the SDK mock monitor's RPC methods for the duration: `Name=fn(original, monitor, request)`."""
    monitor = pulumi_mocks.MockMonitor
    originals = {name: getattr(monitor, name) for name in wrappers}
    for name, wrapper in wrappers.items():
        def method(self: Any, request: Any, _wrapper: Any = wrapper, _original: Any = originals[name]) -> Any:
            return _wrapper(_original, self, request)

        setattr(monitor, name, method)
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(monitor, name, original)


@contextmanager
def _engine_invoke_gate(mocks: LabMocks) -> Iterator[None]:
    """The engine's gate for invokes with dependencies, which the SDK's mock monitor leaves out.

    pulumi/pulumi `pkg/resource/deploy/source_eval.go` `resmon.Invoke`: when the request names `dependsOn`
    and any of those resources has not been created yet (`resourcetracker.Tracker.HasUnresolved`), the
    answer is `unknown` and the provider is not called. The engine advertises this as
    RESOURCE_MONITOR_FEATURE_INVOKE_DEPENDS_ON, so the SDK sends the expanded dependencies instead of
    checking ids client-side (`pulumi/runtime/invoke.py`); the SDK's check would be wrong here, since a
    planned pulumi-command resource already has a known id.
    """

    def info(original: Any, monitor: Any, request: Any) -> Any:
        deployment = original(monitor, request)
        deployment.supportedFeatures.append(resource_pb2.RESOURCE_MONITOR_FEATURE_INVOKE_DEPENDS_ON)
        return deployment

    def invoke(original: Any, monitor: Any, request: Any) -> Any:
        if any(_urn_type_and_name(urn) in mocks.pending for urn in request.dependsOn):
            return resource_pb2.ResourceInvokeResponse(unknown=True)
        return original(monitor, request)

    with wrapped_monitor(GetDeploymentInfo=info, Invoke=invoke):
        yield


# The project directory the program reads its chart cache from (chart_lock.PROJECT_DIR): one of the tests' own,
# filled before each evaluation as `make charts` would fill the project's.
CHART_PROJECT = Path(tempfile.mkdtemp(prefix="gpu-tenancy-charts-"))
# The policy pack checks each Release's archive against the lock of the same project (policies/pod_lib.py
# chart_project); the analyzer processes the tests start inherit it.
os.environ["GPU_TENANCY_CHART_PROJECT"] = str(CHART_PROJECT)


def charts_pulled(config: dict[str, Any], secrets: tuple[str, ...] = tuple(TEST_SECRETS)) -> None:
    """What `make charts` does before an `up`: each chart the config installs is in the cache and the lock."""
    chart_lock.PROJECT_DIR = CHART_PROJECT
    try:
        wanted = chart_lock.stack_charts(load_config(config, frozenset(k for k in secrets if k in config)))
    except Exception:  # a config the program refuses installs no chart
        return
    lock = chart_lock.load_lock(CHART_PROJECT)
    for ref in wanted:
        if lock.find(ref) is None:
            fill_cache(CHART_PROJECT, ref.name, ref.version, ref.repo)


def _run(
    mocks: LabMocks, config: dict[str, Any], preview: bool, stack: str, secrets: tuple[str, ...] = tuple(TEST_SECRETS)
) -> None:
    """Evaluate the program; keys in `secrets` are stored as `pulumi config set --secret` would."""
    mocks.preview = mocks.preview or preview
    charts_pulled(config, secrets)
    with _engine_invoke_gate(mocks):
        _evaluate(mocks, config, preview, stack, secrets)


def _evaluate(mocks: LabMocks, config: dict[str, Any], preview: bool, stack: str, secrets: tuple[str, ...]) -> None:
    # set_mocks keeps the root Stack of an earlier evaluation in this process (pulumi/runtime/mocks.py
    # `set_mocks` makes one only `if get_root_resource() is None`), so a dev stack recorded after a gpu one
    # would hang under `urn:pulumi:gpu::...`; each `pulumi up` has its own root, so each evaluation starts anew.
    pulumi.runtime.reset_options(project=PROJECT, stack=stack, preview=preview)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=preview)
    pulumi.runtime.set_all_config(
        {f"{PROJECT}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in config.items()},
        [f"{PROJECT}:{k}" for k in secrets if k in config],
    )

    @pulumi.runtime.test
    def program() -> None:
        runpy.run_path(str(REPO / "__main__.py"), run_name="__main__")

    # The program defers full garbage collections for the rest of its process (gpu_tenancy/gc_settings.py);
    # here that process is the test run, so the suite's own settings come back after each evaluation.
    gc_threshold = gc.get_threshold()
    try:
        program()
    except BaseException:
        # A failed program leaves futures whose exception nobody retrieved; their finalizer logs it with a
        # traceback, and 3.11's traceback module calls `ast.parse` for its carets. Run from a collection inside
        # another `ast.parse` (a later test's import under pytest's assertion rewriting), that nested parse
        # resets the conversion depth the two share (module state) and the outer one fails with "AST constructor
        # recursion depth mismatch" (CPython 3.11 Python/Python-ast.c `PyAST_mod2obj`).
        # Collected here, they are logged while nothing else is parsing.
        gc.collect()
        raise
    finally:
        gc.set_threshold(*gc_threshold)


def record_stack(
    config: dict[str, Any] | None = None,
    *,
    preview: bool = False,
    unknowns: bool = False,
    stack: str = "dev",
    ipam: list[dict[str, str]] | None = None,
    node_register: dict[str, str] | None = None,
    existing: Collection[tuple[str, str]] | None = None,
) -> list[MockResourceArgs]:
    return record_mocks(
        config, preview=preview, unknowns=unknowns, stack=stack, ipam=ipam, node_register=node_register,
        existing=existing,
    ).resources


def record_mocks(
    config: dict[str, Any] | None = None,
    *,
    preview: bool = False,
    unknowns: bool = False,
    stack: str = "dev",
    ipam: list[dict[str, str]] | None = None,
    node_register: dict[str, str] | None = None,
    existing: Collection[tuple[str, str]] | None = None,
    machine_ids: dict[str, str] | None = None,
    docker_info: str = TYPICAL_DOCKER_INFO,
) -> LabMocks:
    """Like `record_stack`, returning the mocks (resources and invokes).

    `unknowns=True` previews a fresh stack; `preview=True` with `existing` (the (type, name) of every
    resource an earlier `up` created, see `created`) previews a change to a deployed stack; `docker_info` is what
    `docker info` prints on the program's host (kind's host-dependent node flags follow it).
    """
    mocks = LabMocks(unknowns=unknowns, ipam=ipam, node_register=node_register, preview=preview, existing=existing)
    mocks.machine_ids = dict(machine_ids or {})
    mocks.docker_info = docker_info
    _run(mocks, dev_config() if config is None else config, preview or unknowns, stack)
    return mocks


def created(mocks: LabMocks) -> set[tuple[str, str]]:
    """(type, name) of every resource an `up` recorded in `mocks` created (reads excluded)."""
    return {(r.typ, r.name) for r in mocks.resources if not r.resource_id}


SECRET_SIG = "4dabf18193072939515e22adb298388d"


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and SECRET_SIG in value


def unwrap(value: Any) -> Any:
    """Inputs with secret wrappers removed (for schema validation)."""
    if is_secret(value):
        return unwrap(value.get("value"))
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def by_type(resources: list[MockResourceArgs], typ: str) -> list[MockResourceArgs]:
    return [r for r in resources if r.typ == typ]
