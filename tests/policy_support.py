"""Shared helpers for the policy-pack tests: the dev stack as the policy engine would hand it over.

`record_engine_view` runs the program under tests/harness.py's mocks and additionally records what the
mocks' `new_resource` does not see but the engine gives analyzers: each resource's URN, parent,
dependencies, property dependencies, provider reference and, for components, what they passed to
`register_outputs`. From that it builds the two shapes the engine sends:

* resource policies (`Analyze`): a resource's *inputs* and its provider;
* stack policies (`AnalyzeStack`): every resource's *outputs* (custom resources: the mock's state, which
  echoes the inputs as pulumi-kubernetes' preview does; components: their `register_outputs` dict only,
  exactly as the engine's step executor overwrites them; the root stack: its exports), parent and
  dependencies.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import pickle
import re
import sys
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from harness import charts_pulled, dev_config, gpu_config, nvml_config, record_mocks, registered_gpus, wrapped_monitor
from import_scan import imported_names
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pulumi_policy import (
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

REPO = Path(__file__).resolve().parents[1]
POLICIES = REPO / "policies"
if str(POLICIES) not in sys.path:
    sys.path.insert(0, str(POLICIES))


@dataclass
class Recorded:
    """One registered resource with what the engine keeps about it."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    provider: str  # "<provider urn>::<provider id>" or ""
    inputs: dict[str, Any]
    state: dict[str, Any]
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    registered_outputs: dict[str, Any] | None = None
    # Resource options as sent in the RegisterResourceRequest (pulumi/pulumi `proto/pulumi/resource.proto`);
    # delete_before_replace is None when the program left it to the provider (deleteBeforeReplaceDefined).
    delete_before_replace: bool | None = None
    replace_on_changes: list[str] = field(default_factory=list)
    ignore_changes: list[str] = field(default_factory=list)
    protect: bool = False
    retain_on_delete: bool = False
    deleted_with: str = ""
    additional_secret_outputs: list[str] = field(default_factory=list)
    # A `.get`: the engine sends it to AnalyzeStack only, never to Analyze (pulumi/pulumi step_generator.go:
    # generateSteps calls analyzeAll, GenerateReadSteps does not).
    read: bool = False

    @property
    def outputs(self) -> dict[str, Any]:
        """What AnalyzeStack sees: a component's register_outputs, a custom resource's state."""
        if self.custom:
            return self.state
        return self.registered_outputs or {}


def _wire(value: Any) -> Any:
    """Plain JSON as on the engine's wire: unknowns become the unknown-string sentinel."""
    if isinstance(value, Unknown):
        return rpc.UNKNOWN
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_wire(v) for v in value]
    return value


def _properties(struct: Any) -> dict[str, Any]:
    return _wire(rpc.deserialize_properties(struct, keep_unknowns=True))


@contextmanager
def _capturing_monitor(into: dict[str, Recorded]) -> Iterator[None]:
    def register(original: Any, self: Any, request: Any) -> Any:
        response = original(self, request)
        urn = self.make_urn(request.parent, request.type, request.name)
        registration = self.resources.get(urn)
        into[urn] = Recorded(
            urn=urn,
            type=request.type,
            name=request.name,
            custom=bool(request.custom),
            parent=request.parent,
            provider=request.provider,
            inputs=_properties(request.object),
            state=_wire(dict(registration.state)) if registration else {},
            dependencies=list(request.dependencies),
            property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
            delete_before_replace=request.deleteBeforeReplace if request.deleteBeforeReplaceDefined else None,
            replace_on_changes=list(request.replaceOnChanges),
            ignore_changes=list(request.ignoreChanges),
            protect=bool(request.protect),
            retain_on_delete=bool(request.retainOnDelete),
            deleted_with=request.deletedWith,
            additional_secret_outputs=list(request.additionalSecretOutputs),
        )
        return response

    def read(original: Any, self: Any, request: Any) -> Any:
        response = original(self, request)
        urn = self.make_urn(request.parent, request.type, request.name)
        registration = self.resources.get(urn)
        # The engine keeps what the read step yielded as the outputs: the provider's live object, or `{}`
        # for a read it skipped (unknown id) or sent to an unconfigured provider (tests/harness.LabMocks).
        # Its inputs are the request's properties (pulumi/pulumi step_generator.go GenerateReadSteps).
        into[urn] = Recorded(
            urn=urn,
            type=request.type,
            name=request.name,
            custom=True,
            parent=request.parent,
            provider=request.provider,
            inputs=_properties(request.properties),
            state=_wire(dict(registration.state)) if registration else {},
            dependencies=list(request.dependencies),
            read=True,
        )
        return response

    def register_outputs(original: Any, self: Any, request: Any) -> Any:
        outputs = _properties(request.outputs) if request.outputs else {}
        if request.urn in into:
            into[request.urn].registered_outputs = outputs
        else:  # the root stack registers only its outputs
            into[request.urn] = Recorded(
                request.urn, "pulumi:pulumi:Stack", request.urn.rsplit("::", 1)[-1], False, "", "", {}, {},
                registered_outputs=outputs,
            )
        return original(self, request)

    with wrapped_monitor(RegisterResource=register, ReadResource=read, RegisterResourceOutputs=register_outputs):
        yield


STACK_TYPE = "pulumi:pulumi:Stack"
K8S_PROVIDER_TYPE = "pulumi:providers:kubernetes"
TENANT_TYPE = "gpu-tenancy:tenant:Tenant"


def _engine_urns(recorded: list[Recorded]) -> dict[str, str]:
    """The URN the engine gives each resource, keyed by the URN the SDK's mock monitor made up.

    The engine qualifies a resource's type with its parent's whole qualified type, leaving the root stack
    out (pulumi/pulumi pkg/resource/deploy/source_eval.go `RegisterResource`: `parentType =
    parent.QualifiedType()` unless it is the root stack; the SDK's own `pulumi.runtime.resource.create_urn`
    builds aliases the same way from `parent_urn[0:rfind("::")] + "$"`). The mock monitor
    (`pulumi.runtime.mocks.MockMonitor.make_urn`) keeps only the parent's last type and keeps the stack's,
    so `a$b$c` would reach the pack as `b$c`. Policies read component ancestry from URNs, so the recorded
    view is rewritten to the engine's form.
    """
    by_urn = {r.urn: r for r in recorded}
    engine: dict[str, str] = {}

    def qualified(urn: str) -> str:
        if urn in engine:
            return engine[urn]
        record = by_urn.get(urn)
        if record is None:
            return urn
        prefix, _, name = urn.rpartition("::")
        head = prefix.rsplit("::", 1)[0]  # urn:pulumi:<stack>::<project>
        parent = by_urn.get(record.parent) if record.parent else None
        if parent is None or parent.type == STACK_TYPE:
            qualified_type = record.type
        else:
            qualified_type = qualified(parent.urn).rpartition("::")[0].rsplit("::", 1)[1] + "$" + record.type
        engine[urn] = f"{head}::{qualified_type}::{name}"
        return engine[urn]

    for record in recorded:
        qualified(record.urn)
    return engine


def _with_engine_urns(recorded: list[Recorded]) -> list[Recorded]:
    engine = _engine_urns(recorded)

    def urn(value: str) -> str:
        return engine.get(value, value)

    def reference(value: str) -> str:  # "<provider urn>::<provider id>"
        if not value:
            return value
        provider, _, provider_id = value.rpartition("::")
        return f"{urn(provider)}::{provider_id}"

    return [
        replace(
            r,
            urn=urn(r.urn),
            parent=urn(r.parent) if r.parent else r.parent,
            provider=reference(r.provider),
            dependencies=[urn(d) for d in r.dependencies],
            property_dependencies={k: [urn(d) for d in v] for k, v in r.property_dependencies.items()},
            deleted_with=urn(r.deleted_with) if r.deleted_with else r.deleted_with,
        )
        for r in recorded
    ]


def record_engine_view(config: dict[str, Any] | None = None, **options: Any) -> list[Recorded]:
    """The dev stack (or `config`) registered under mocks, as the engine records it (URNs as it makes them).

    `options` go to tests/harness.record_mocks (unknowns, stack, node_register, ...).
    """
    recorded: dict[str, Recorded] = {}
    with _capturing_monitor(recorded):
        record_mocks(config, **options)
    return _with_engine_urns(list(recorded.values()))


T = TypeVar("T")
_CACHE: dict[Hashable, Any] = {}


def collecting_mutation_stats() -> bool:
    """Whether mutmut is learning which test reaches which function: its trampolines read the process-local
    mutant name (mutmut 3.8.1 `mutation/trampoline.py` `get_mutant_under_test`), which is "stats" then; the
    environment variable does not reach the processes its forkserver starts."""
    trampoline = sys.modules.get("mutmut.mutation.trampoline")
    return trampoline is not None and trampoline.get_mutant_under_test() == "stats"


# Where a stack recording starts: the program and the doubles that record it.
_RECORDING_ENTRY_POINTS = ("__main__.py", "tests/harness.py", "tests/policy_support.py")
_OWN_PACKAGES = ("gpu_tenancy", "components", "tests")


def _module_file(repo: Path, module: str) -> Path | None:
    path = repo.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def program_modules() -> set[str]:
    """The modules a stack recording can run: what the entry points import, followed through this repository
    (static imports, and the one import by name: each device layer's wiring module, which its facts name in
    gpu_tenancy/contract/device_layers), with every package on the way."""
    return set(_program_modules_in(REPO))


def _wiring_modules(repo: Path) -> list[str]:
    """The modules the device layers' facts name as their wiring (`wiring="components.device_layers.sim"`)."""
    return [match for path in sorted((repo / "gpu_tenancy" / "contract" / "device_layers").glob("*.py"))
            for match in re.findall(r'wiring="([\w.]+)"', path.read_text())]


@functools.cache
def _program_modules_in(repo: Path) -> frozenset[str]:
    """`program_modules` of the checkout at `repo`, parsed once per process (a mutant's asks for each recording)."""
    found: set[str] = set()
    pending = [repo / entry for entry in _RECORDING_ENTRY_POINTS]
    for module in _wiring_modules(repo):
        if (path := _module_file(repo, module)) is not None:
            found.add(module)
            pending.append(path)
    while pending:
        for name in imported_names(pending.pop().read_text()):
            parts = name.split(".")
            helper = repo / "tests" / f"{parts[0]}.py"  # the tests' helpers import each other as top-level names
            if helper.is_file() and f"tests.{parts[0]}" not in found:
                found.add(f"tests.{parts[0]}")
                pending.append(helper)
            for depth in range(1, len(parts) + 1):
                module = ".".join(parts[:depth])
                path = _module_file(repo, module) if parts[0] in _OWN_PACKAGES else None
                if path is not None and module not in found:
                    found.add(module)
                    pending.append(path)
    return frozenset(found)


def mutant_outside_the_program() -> bool:
    """Whether mutmut runs a mutant in a module no stack recording can reach (`program_modules`): the policy
    pack, the planner, the day-two commands. Every such mutant's process would record the same stacks."""
    trampoline = sys.modules.get("mutmut.mutation.trampoline")
    mutant = trampoline.get_mutant_under_test() if trampoline is not None else ""
    if not mutant:
        return False
    return mutant.rpartition(".")[0] not in program_modules()


def _program_digest() -> str:
    """What a stack recording depends on: the program, its stacks and the test doubles that record it."""
    digest = hashlib.sha256()
    files = [REPO / "__main__.py", *sorted(REPO.glob("Pulumi*.yaml")), *sorted((REPO / "tests").glob("*.py"))]
    for folder in ("components", "gpu_tenancy"):
        files += sorted((REPO / folder).rglob("*.py"))
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _recorded_on_disk(key: Hashable, record: Callable[[], T]) -> T:
    """`record()` kept in a file for the other mutants of the same run: mutmut starts each mutant in a fresh
    process, where recording the three stacks again costs more than the tests of the mutated module."""
    name = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    path = REPO / ".mutation-recordings" / _program_digest() / f"{name}.pickle"
    if path.is_file():
        return cast(T, pickle.loads(path.read_bytes()))
    value = record()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}")
    partial.write_bytes(pickle.dumps(value))
    os.replace(partial, path)  # another mutant's process may write the same recording at the same time
    return value


def _once(key: Hashable, record: Callable[[], T]) -> T:
    """`record()` once per session, but every time while mutmut collects its stats: a recording cached by the
    first test would count the program's code as reached by that test only, and no mutant there would meet
    the other tests. A mutant the program cannot reach reads the recording from disk (`_recorded_on_disk`)."""
    if collecting_mutation_stats():
        return record()
    if key not in _CACHE:
        _CACHE[key] = _recorded_on_disk(key, record) if mutant_outside_the_program() else record()
    return cast(T, _CACHE[key])


def shared_recording(fixture: Callable[..., T]) -> Callable[..., T]:
    """For a fixture that records a stack: its value is made once per session and shared (see `_once`). The key
    is the fixture, its `request.param` and the identity of the fixtures it takes (themselves shared)."""

    @functools.wraps(fixture)
    def shared(*args: Any, **kwargs: Any) -> T:
        request = kwargs.get("request")
        others = tuple(sorted((k, id(v)) for k, v in kwargs.items() if k != "request"))
        key = (fixture.__module__, fixture.__qualname__, getattr(request, "param", None), others)
        return _once(key, lambda: fixture(*args, **kwargs))

    return shared


def dev_stack(unknowns: bool = False) -> list[Recorded]:
    """The dev stack's registrations, recorded once per session (callers must not mutate them)."""
    charts_pulled(dev_config())  # the pack's lock, also when the recording comes from disk (`_recorded_on_disk`)
    return _once(("dev", unknowns), lambda: record_engine_view(unknowns=unknowns))


def gpu_stack(unknowns: bool = False) -> list[Recorded]:
    """The real-GPU example stack (Pulumi.gpu.yaml, mode real), recorded once per session."""
    def record() -> list[Recorded]:
        config = gpu_config()
        register = None if unknowns else registered_gpus(config)
        return record_engine_view(config, stack="gpu", unknowns=unknowns, node_register=register)

    charts_pulled(gpu_config())
    return _once(("gpu", unknowns), record)


def nvml_stack(unknowns: bool = False) -> list[Recorded]:
    """The sim-nvml example stack (Pulumi.dev-nvml.yaml), recorded once per session."""
    charts_pulled(nvml_config())
    return _once(("dev-nvml", unknowns), lambda: record_engine_view(nvml_config(), stack="dev-nvml", unknowns=unknowns))


# The example stacks by their stack name (Pulumi.<name>.yaml).
EXAMPLE_STACKS = {"dev": dev_stack, "dev-nvml": nvml_stack, "gpu": gpu_stack}


# --------------------------------------------------------------------------- crafting variants


def copy_stack(resources: list[Recorded]) -> list[Recorded]:
    return [
        replace(
            r,
            inputs=json.loads(json.dumps(r.inputs)),
            state=json.loads(json.dumps(r.state)),
            registered_outputs=None if r.registered_outputs is None else json.loads(json.dumps(r.registered_outputs)),
            dependencies=list(r.dependencies),
            property_dependencies={k: list(v) for k, v in r.property_dependencies.items()},
        )
        for r in resources
    ]


def find(resources: list[Recorded], typ: str, name: str | None = None) -> Recorded:
    matches = [r for r in resources if r.type == typ and (name is None or r.name == name)]
    if not matches:
        raise LookupError(f"no {typ} {name or ''} registered")
    return matches[0]


def owned(resources: list[Recorded], typ: str, tenant: str, name_part: str = "") -> Recorded:
    for r in resources:
        if r.type == typ and r.name.startswith(tenant) and name_part in r.name:
            return r
    raise LookupError(f"no {typ} of {tenant} matching {name_part!r}")


def provider_ref(resources: list[Recorded], name: str) -> str:
    provider = find(resources, K8S_PROVIDER_TYPE, name)
    return f"{provider.urn}::{provider.name}-id"


def add_resource(
    resources: list[Recorded], parent: Recorded, typ: str, name: str, props: dict[str, Any], provider: str = "",
    outputs: dict[str, Any] | None = None,
) -> Recorded:
    """A fabricated registration under `parent` (a component when `outputs` is given), with the URN the engine
    gives it: its type qualified by the parent's qualified type, the root stack's left out (`_engine_urns`)."""
    stack, project, parent_type = parent.urn.split("::")[:3]
    qualified = typ if parent.type == STACK_TYPE else f"{parent_type}${typ}"
    custom = outputs is None
    resource = Recorded(
        f"{stack}::{project}::{qualified}::{name}", typ, name, custom, parent.urn, provider,
        json.loads(json.dumps(props)), json.loads(json.dumps(props)) if custom else {}, registered_outputs=outputs,
    )
    resources.append(resource)
    return resource


def stack_root(resources: list[Recorded]) -> Recorded:
    """The root stack as a parent to add resources under (the engine records it only when it has exports)."""
    urn = find(resources, TENANT_TYPE, "tenant-a").parent
    return Recorded(urn, STACK_TYPE, urn.rsplit("::", 1)[-1], False, "", "", {}, {})


def craft(
    resources: list[Recorded],
    typ: str,
    name: str,
    inputs: dict[str, Any],
    *,
    parent: Recorded | None = None,
    provider: Recorded | None = None,
    property_dependencies: dict[str, list[str]] | None = None,
) -> Recorded:
    """Add a resource as a pull request's code would register it: under `parent` (default: the stack), through
    `provider`, its URN qualified by its ancestors' types as the engine does (see `_engine_urns`)."""
    # The root stack registers itself only when it registers its outputs, which under mocks may come after
    # the recording; its URN is known regardless.
    head = resources[0].urn.rpartition("::")[0].rsplit("::", 1)[0]  # urn:pulumi:<stack>::<project>
    stack, project = head.removeprefix("urn:pulumi:").split("::")
    root = f"{head}::{STACK_TYPE}::{project}-{stack}"
    qualified = typ if parent is None else parent.urn.rpartition("::")[0].rsplit("::", 1)[1] + "$" + typ
    record = Recorded(
        urn=f"{head}::{qualified}::{name}",
        type=typ,
        name=name,
        custom=True,
        parent=parent.urn if parent else root,
        provider=f"{provider.urn}::{provider.name}-id" if provider else "",
        inputs=json.loads(json.dumps(inputs)),
        state=json.loads(json.dumps(inputs)),
        property_dependencies=property_dependencies or {},
        dependencies=sorted({u for urns in (property_dependencies or {}).values() for u in urns}),
    )
    resources.append(record)
    return record


def set_both(resource: Recorded, path: list[str | int], value: Any) -> None:
    """Set a property in the inputs and the state (a custom resource's outputs echo its inputs)."""
    for props in (resource.inputs, resource.state):
        node: Any = props
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value


# --------------------------------------------------------------------------- policy arguments


def _options(parent: str = "") -> PolicyResourceOptions:
    from pulumi_policy import PolicyCustomTimeouts

    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], parent or None)


def _engine_props(props: dict[str, Any], preview: bool = True) -> Any:
    """What the pulumi_policy server does with a property map it receives."""
    deserialized = deserialize_properties(json.loads(json.dumps(props)))
    return unknown_checking_proxy(deserialized) if preview else deserialized


def _provider(resources: dict[str, Recorded], reference: str) -> PolicyProviderResource | None:
    if not reference:
        return None
    urn = reference.rsplit("::", 1)[0]
    provider = resources.get(urn)
    if provider is None:
        return None
    return PolicyProviderResource(provider.type, _engine_props(provider.inputs), provider.urn, provider.name)


def resource_args(
    resources: list[Recorded], resource: Recorded, config: dict[str, Any] | None = None
) -> ResourceValidationArgs:
    by_urn = {r.urn: r for r in resources}
    return ResourceValidationArgs(
        resource.type,
        _engine_props(resource.inputs),
        resource.urn,
        resource.name,
        _options(resource.parent),
        _provider(by_urn, resource.provider),
        config,
    )


def stack_args(resources: list[Recorded], config: dict[str, Any] | None = None) -> StackValidationArgs:
    by_urn = {r.urn: r for r in resources}
    views = {
        r.urn: PolicyResource(
            r.type, _engine_props(r.outputs), r.urn, r.name, _options(r.parent), _provider(by_urn, r.provider),
            None, [], {},
        )
        for r in resources
    }
    for r in resources:
        view = views[r.urn]
        view.parent = views.get(r.parent)
        view.dependencies = [views[d] for d in r.dependencies if d in views]
        view.property_dependencies = {k: [views[d] for d in v if d in views] for k, v in r.property_dependencies.items()}
    return StackValidationArgs(list(views.values()), config)


Violation = tuple[str, str | None]


def run_resource_policy(
    policy: Any, resources: list[Recorded], config: dict[str, Any] | None = None
) -> list[tuple[str, str, str | None]]:
    """(resource name, message, urn) for every violation `policy` reports over every resource."""
    out: list[tuple[str, str, str | None]] = []
    for resource in (r for r in resources if not r.read):
        def report(message: str, urn: str | None = None, _name: str = resource.name) -> None:
            out.append((_name, message, urn))

        policy.validate(resource_args(resources, resource, config), report)
    return out


def run_stack_policy(policy: Any, resources: list[Recorded], config: dict[str, Any] | None = None) -> list[Violation]:
    out: list[Violation] = []

    def report(message: str, urn: str | None = None) -> None:
        out.append((message, urn))

    policy.validate(stack_args(resources, config), report)
    return out


def kubeadm_ca_hash(kubeconfig: str) -> str:
    """kubeadm's --discovery-token-ca-cert-hash: sha256 of the CA's DER SubjectPublicKeyInfo
    (kubernetes cmd/kubeadm/app/util/pubkeypin `Hash`)."""
    cluster = yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(cluster["certificate-authority-data"]))
    spki = ca.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def tenant_api_servers(stack: list[Recorded]) -> dict[str, tuple[str, str]]:
    """Per tenant, the API endpoint (host:port) and CA hash a worker must join, read from the kubeconfig its
    Kubernetes provider was given, not from the code under test."""
    servers = {}
    for provider in stack:
        if provider.type == "pulumi:providers:kubernetes" and provider.name.startswith("tenant-"):
            kubeconfig = provider.state["kubeconfig"]["value"]
            server = yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"]
            servers[provider.name.removesuffix("-kubernetes")] = (server.removeprefix("https://"),
                                                                   kubeadm_ca_hash(kubeconfig))
    return servers
