"""Component Args as Pulumi's own components take them: every field documented, no provider, no dependencies.

A component's provider and what it waits for go in its `opts` (pulumi.ResourceOptions): the SDK puts `provider`
in the component's provider bag, which its children with `parent=self` inherit by package, and sends
`depends_on` with the component's own registration only (pulumi 3.272.0 sdk/python/lib/pulumi/resource.py
`Resource.__init__`, `_get_providers`; components/options.py hands it on to the children).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
import re
from types import ModuleType
from typing import Any

import pulumi
import pytest
from recording_mocks import RecordingMocks

import components
from components import options

ENTRY = re.compile(r"^ {8}(\w+) \((.+?)\): (.*)$")


def _args_classes() -> list[tuple[ModuleType, type]]:
    found = []
    for info in pkgutil.walk_packages(components.__path__, "components."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if dataclasses.is_dataclass(value) and isinstance(value, type) and value.__module__ == info.name \
                    and value.__name__.endswith("Args"):
                found.append((module, value))
    return sorted(found, key=lambda pair: pair[1].__name__)


ARGS = _args_classes()


def _attributes(cls: type) -> list[tuple[str, str, str]]:
    """(name, type, text) of each entry of the docstring's `Attributes:` section, continuation lines joined."""
    lines = (cls.__doc__ or "").splitlines()
    assert "    Attributes:" in lines, f"{cls.__name__} has no Attributes: section"
    entries: list[list[str]] = []
    for line in lines[lines.index("    Attributes:") + 1:]:
        match = ENTRY.match(line)
        if match:
            entries.append([match[1], match[2], match[3]])
        elif line.startswith(" " * 12) and entries:
            entries[-1][2] += " " + line.strip()
        elif line.strip():
            raise AssertionError(f"{cls.__name__}: not an attribute entry: {line!r}")
    return [(name, typ, text) for name, typ, text in entries]


def _documented_default(module: ModuleType, text: str) -> Any:
    """The value after `Default: `: a Python literal or a name of the component's module (`versions.X`)."""
    match = re.search(r"Default: (.+?)(?: \(|\.$|\. )", text)
    assert match, f"no default in {text!r}"
    token = match[1]
    try:
        return ast.literal_eval(token)
    except (ValueError, SyntaxError):
        value: Any = module
        for part in token.split("."):
            value = getattr(value, part)
        return value


@pytest.mark.parametrize(("module", "cls"), ARGS, ids=[cls.__name__ for _, cls in ARGS])
def test_every_args_field_is_documented_with_its_type_and_default(module: ModuleType, cls: type) -> None:
    fields = dataclasses.fields(cls)
    entries = _attributes(cls)
    assert [name for name, _, _ in entries] == [f.name for f in fields]
    for field, (_, typ, text) in zip(fields, entries, strict=True):
        # The annotation as written (every component module has `from __future__ import annotations`, which keeps
        # it as the unparsed expression: quotes normalised).
        assert ast.unparse(ast.parse(typ)) == field.type, f"{cls.__name__}.{field.name}: documented as {typ}"
        assert text and not text.startswith("Default:"), f"{cls.__name__}.{field.name}: no meaning"
        if field.default is not dataclasses.MISSING:
            assert _documented_default(module, text) == field.default, f"{cls.__name__}.{field.name}"
        elif field.default_factory is not dataclasses.MISSING:
            assert _documented_default(module, text) == field.default_factory(), f"{cls.__name__}.{field.name}"
        else:
            assert "Default:" not in text, f"{cls.__name__}.{field.name} is required: no default to document"


def test_the_args_found_are_the_components_args() -> None:
    # A rename or a move must not leave the checks above with nothing to check.
    assert {cls.__name__ for _, cls in ARGS} >= {
        "BootstrapTokenArgs", "GpuAccessPolicyArgs", "HamiArgs", "HostFencesArgs", "HostIdentitiesArgs",
        "HostWorkerArgs", "InventoryCheckArgs", "KamajiArgs", "KindClusterArgs", "MetalLBArgs", "MockGpuAgentArgs",
        "MockNvmlArgs", "NvmlMockImageArgs", "TenantAccessArgs", "TenantArgs", "TenantControlPlaneArgs",
        "TenantDataStoreArgs", "TenantNetworkArgs", "WorkerArgs", "WorkloadsArgs",
    }


@pytest.mark.parametrize(("module", "cls"), ARGS, ids=[cls.__name__ for _, cls in ARGS])
def test_no_args_field_carries_a_provider_or_dependencies(module: ModuleType, cls: type) -> None:
    for field in dataclasses.fields(cls):
        assert field.name not in {"provider", "providers", "management_provider", "depends_on"}, field.name
        assert "Provider" not in str(field.type), f"{cls.__name__}.{field.name}: {field.type}"


# --------------------------------------------------------------------------- what components take from opts


@pytest.fixture
def mocks() -> RecordingMocks:
    recording = RecordingMocks()
    pulumi.runtime.set_mocks(recording, preview=False)
    return recording


@pulumi.runtime.test
def test_depends_on_is_handed_on_as_a_list_and_an_output_is_refused(mocks: RecordingMocks) -> None:
    first = pulumi.CustomResource("test:index:Thing", "first")
    second = pulumi.CustomResource("test:index:Thing", "second")
    assert options.dependencies(None) == []
    assert options.dependencies(pulumi.ResourceOptions()) == []
    assert options.dependencies(pulumi.ResourceOptions(depends_on=first)) == [first]
    assert options.dependencies(pulumi.ResourceOptions(depends_on=[first, second])) == [first, second]
    # An Output of resources is not known when the children are declared: refused, never dropped.
    with pytest.raises(TypeError, match="depends_on must be a resource or a list of resources"):
        options.dependencies(pulumi.ResourceOptions(depends_on=pulumi.Output.from_input([first])))


@pulumi.runtime.test
def test_a_component_without_a_kubernetes_provider_is_refused(mocks: RecordingMocks) -> None:
    from components.gpu_access import GpuAccessPolicy, GpuAccessPolicyArgs

    # Its children would otherwise go through the default provider: whatever cluster the ambient kubeconfig names.
    with pytest.raises(pulumi.RunError, match="tenant-a-gpu-access: no kubernetes provider"):
        GpuAccessPolicy("tenant-a-gpu-access", GpuAccessPolicyArgs(tenant="tenant-a"))
    assert not [r for r in mocks.resources if r.typ.startswith("kubernetes:")]


@pulumi.runtime.test
def test_a_provider_set_on_a_parent_reaches_the_kubernetes_children(mocks: RecordingMocks) -> Any:
    import pulumi_kubernetes as k8s

    from components.gpu_access import GpuAccessPolicy, GpuAccessPolicyArgs

    tenant_provider = k8s.Provider("tenant-a-kubernetes", kubeconfig="{}")
    parent = pulumi.ComponentResource("test:index:Parent", "tenant-a", None, pulumi.ResourceOptions(
        provider=tenant_provider
    ))
    policy = GpuAccessPolicy(
        "tenant-a-gpu-access", GpuAccessPolicyArgs(tenant="tenant-a"), pulumi.ResourceOptions(parent=parent)
    )

    def check(provider_urn: str) -> None:
        children = [r for r in mocks.resources if r.typ.startswith("kubernetes:admissionregistration")]
        assert len(children) == 2
        assert all((r.provider or "").startswith(provider_urn + "::") for r in children)

    # After the binding (the last child) is registered.
    return pulumi.Output.all(tenant_provider.urn, policy.binding.id).apply(lambda values: check(values[0]))


@pytest.mark.parametrize("stack", ["dev", "dev-nvml", "gpu"])
def test_what_the_tenant_is_given_to_wait_for_reaches_its_control_plane(stack: str) -> None:
    from policy_support import EXAMPLE_STACKS

    # __main__ gives each Tenant depends_on=[MetalLB's pool and advertisement, Kamaji's DataStore]; the Tenant hands
    # it to its control plane, which hands it to its namespace: the first object each tenant creates.
    resources = EXAMPLE_STACKS[stack]()
    urns = {r.name: r.urn for r in resources if r.name in {"kamaji-datastore", "metallb-pool", "metallb-l2"}}
    assert len(urns) == 3
    tenants = [r.name for r in resources if r.type == "gpu-tenancy:tenant:Tenant"]
    assert tenants
    for tenant in tenants:
        namespace = next(r for r in resources if r.name == f"{tenant}-control-plane-namespace")
        assert set(urns.values()) <= set(namespace.dependencies), tenant
