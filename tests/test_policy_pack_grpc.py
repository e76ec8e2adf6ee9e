"""The policy pack as the engine sees it: `python __main__.py <engine-address>` started in policies/,
the port read from its first line of stdout, then driven over the analyzer gRPC protocol with the stubs
the pulumi SDK ships. Inputs are the dev stack's registrations (tests/policy_support.py)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, json_format, struct_pb2
from harness import dev_config
from policy_support import POLICIES, Recorded, copy_stack, dev_stack, find, set_both
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

import tenant_policies as tp  # isort: skip  (policies/ is put on sys.path by policy_support)

START_TIMEOUT = 30.0
RPC_TIMEOUT = 30.0
MANDATORY = analyzer_pb2.MANDATORY
ADVISORY = analyzer_pb2.ADVISORY


def _read_port(process: subprocess.Popen[bytes]) -> int:
    assert process.stdout is not None
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
    try:
        line = lines.get(timeout=START_TIMEOUT)
    except queue.Empty:
        raise AssertionError(f"policy pack printed no port within {START_TIMEOUT}s") from None
    if not line.strip():
        stderr = process.stderr.read().decode() if process.stderr and process.poll() is not None else ""
        raise AssertionError(f"policy pack exited before printing its port: {stderr}")
    return int(line)


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    with running_pack() as stub:
        yield stub


@contextmanager
def running_pack(extra_config: dict[str, Any] | None = None) -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """The pack's analyzer process for the dev stack's config plus `extra_config` (fully namespaced keys)."""
    env = dict(os.environ)
    # As the engine does: the stack's config reaches the pack in PULUMI_CONFIG, each value a string.
    config = {f"gpu-tenancy:{k}": v for k, v in dev_config().items()} | (extra_config or {})
    env["PULUMI_CONFIG"] = json.dumps({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})
    env.pop("PYTHONPATH", None)  # the pack must find the project's modules on its own
    process = subprocess.Popen(
        [sys.executable, "__main__.py", "127.0.0.1:1"],
        cwd=POLICIES,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    channel = None
    try:
        port = _read_port(process)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=START_TIMEOUT)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        if channel is not None:
            channel.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream:
                stream.close()


@pytest.fixture(autouse=True)
def default_configuration(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> Iterator[None]:
    """Every test starts (and leaves the shared process) with no per-stack overrides."""
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(), timeout=RPC_TIMEOUT)
    yield
    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(), timeout=RPC_TIMEOUT)


def struct(props: dict[str, Any]) -> struct_pb2.Struct:
    return json_format.ParseDict(json.loads(json.dumps(props)), struct_pb2.Struct())


def _provider(by_urn: dict[str, Recorded], reference: str) -> analyzer_pb2.AnalyzerProviderResource | None:
    provider = by_urn.get(reference.rsplit("::", 1)[0]) if reference else None
    if provider is None:
        return None
    return analyzer_pb2.AnalyzerProviderResource(
        type=provider.type, properties=struct(provider.inputs), urn=provider.urn, name=provider.name
    )


def analyze(stub: analyzer_pb2_grpc.AnalyzerStub, resources: list[Recorded]) -> list[Any]:
    """Analyze every registered resource's inputs, as the engine does before each step (reads are not analyzed)."""
    by_urn = {r.urn: r for r in resources}
    diagnostics: list[Any] = []
    for r in (r for r in resources if not r.read):
        request = analyzer_pb2.AnalyzeRequest(
            type=r.type, properties=struct(r.inputs), urn=r.urn, name=r.name,
            options=analyzer_pb2.AnalyzerResourceOptions(parent=r.parent),
        )
        provider = _provider(by_urn, r.provider)
        if provider is not None:
            request.provider.CopyFrom(provider)
        diagnostics.extend(stub.Analyze(request, timeout=RPC_TIMEOUT).diagnostics)
    return diagnostics


def analyze_stack(stub: analyzer_pb2_grpc.AnalyzerStub, resources: list[Recorded]) -> list[Any]:
    """AnalyzeStack over every resource's outputs, parents and dependencies, as after a deployment."""
    by_urn = {r.urn: r for r in resources}
    items = []
    for r in resources:
        item = analyzer_pb2.AnalyzerResource(
            type=r.type, properties=struct(r.outputs), urn=r.urn, name=r.name, parent=r.parent,
            dependencies=r.dependencies,
            propertyDependencies={
                k: analyzer_pb2.AnalyzerPropertyDependencies(urns=v) for k, v in r.property_dependencies.items()
            },
        )
        provider = _provider(by_urn, r.provider)
        if provider is not None:
            item.provider.CopyFrom(provider)
        items.append(item)
    request = analyzer_pb2.AnalyzeStackRequest(resources=items)
    return list(stub.AnalyzeStack(request, timeout=RPC_TIMEOUT).diagnostics)


def summary(diagnostics: list[Any]) -> list[tuple[str, int, str]]:
    return [(d.policyName, d.enforcementLevel, d.message) for d in diagnostics]


def test_analyzer_info_lists_every_policy_with_its_level(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=RPC_TIMEOUT)
    assert info.name == "gpu-tenancy"
    levels = {p.name: p.enforcementLevel for p in info.policies}
    # Every policy fails a preview but the one that only prints what the stack allowed, and why, and the one
    # naming replicas whose fit depends on the order.
    advisory = ("type-allowances", "gpu-plan-order")
    assert levels == {p.name: ADVISORY if p.name in advisory else MANDATORY for p in tp.ALL_POLICIES}
    described = {p.name: p.description for p in info.policies}
    assert all(described[p.name] == p.description for p in tp.ALL_POLICIES)
    schema = {p.name: json_format.MessageToDict(p.configSchema) for p in info.policies}
    assert "reservedCidrs" in schema["tenant-cidrs-disjoint"]["properties"]
    assert "exemptions" in schema["workload-safety"]["properties"]


@pytest.mark.parametrize("unknowns", [False, True], ids=["deployed", "first-preview"])
def test_dev_stack_has_no_diagnostics(analyzer: analyzer_pb2_grpc.AnalyzerStub, unknowns: bool) -> None:
    resources = dev_stack(unknowns)
    assert summary(analyze(analyzer, resources)) == []
    assert summary(analyze_stack(analyzer, resources)) == []


def test_bad_resources_get_mandatory_and_advisory_diagnostics(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    stack = copy_stack(dev_stack())
    tcp = find(stack, tp.TCP_TYPE, "tenant-a-control-plane-tcp")
    for props in (tcp.inputs, tcp.state):
        del props["spec"]["addons"]["konnectivity"]
    kube_proxy = find(stack, "kubernetes:apps/v1:DaemonSet", "tenant-b-network-kube-proxy")
    set_both(kube_proxy, ["spec", "template", "spec", "containers", 0, "image"], "registry.k8s.io/kube-proxy:latest")
    workload = find(stack, "kubernetes:apps/v1:Deployment", "tenant-b-workloads-b-notebook")
    set_both(workload, ["spec", "template", "spec", "hostPID"], True)
    found = summary(analyze(analyzer, stack))
    by_policy = {name: level for name, level, _ in found}
    assert by_policy == {
        "tcp-konnectivity-enabled": MANDATORY,
        "images-pinned": MANDATORY,
        "workload-safety": MANDATORY,
        "field-allowlist": MANDATORY,  # hostPID is no field the program sets on a tenant's workload
    }
    konnectivity = next(m for n, _, m in found if n == "tcp-konnectivity-enabled")
    # The engine shows "<policy description>\n<reported message>".
    assert konnectivity.startswith(tp.tcp_konnectivity_enabled.description + "\n")
    assert "'tenant-a' has no spec.addons.konnectivity" in konnectivity


def test_bad_stack_gets_stack_diagnostics(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    stack = copy_stack(dev_stack())
    tcp_a = find(stack, tp.TCP_TYPE, "tenant-a-control-plane-tcp")
    tcp_b = find(stack, tp.TCP_TYPE, "tenant-b-control-plane-tcp")
    set_both(tcp_b, ["spec", "networkProfile", "serviceCidrs"], tcp_a.state["spec"]["networkProfile"]["serviceCidrs"])
    tenant_a = find(stack, tp.TENANT_TYPE, "tenant-a")
    tenant_a.registered_outputs = {
        **(tenant_a.registered_outputs or {}),
        **tenant_a.inputs,
        "quota": {"limits.nvidia.com/gpumem": 20480},
    }
    found = summary(analyze_stack(analyzer, stack))
    assert {(name, level) for name, level, _ in found} == {
        ("tenant-cidrs-disjoint", MANDATORY),
        ("gpu-plan-fits", MANDATORY),
    }
    plan = [m for name, _, m in found if name == "gpu-plan-fits"]
    assert len(plan) == 2 and all("workload 'a-infer'" in m and "ResourceQuotaNotFit" in m for m in plan)


def test_per_stack_configuration_overrides_level_and_settings(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    stack = copy_stack(dev_stack())
    tcp = find(stack, tp.TCP_TYPE, "tenant-a-control-plane-tcp")
    set_both(tcp, ["spec", "networkProfile", "podCidrs"], ["10.244.0.0/16"])
    assert {d.policyName for d in analyze_stack(analyzer, stack)} == {"tenant-cidrs-disjoint"}
    analyzer.Configure(
        analyzer_pb2.ConfigureAnalyzerRequest(
            policyConfig={
                "tenant-cidrs-disjoint": analyzer_pb2.PolicyConfig(
                    enforcementLevel=ADVISORY, properties=struct({"reservedCidrs": ["10.96.0.0/16"]})
                ),
                "gpu-plan-fits": analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.DISABLED),
            }
        ),
        timeout=RPC_TIMEOUT,
    )
    assert analyze_stack(analyzer, stack) == []
    set_both(tcp, ["spec", "networkProfile", "podCidrs"], ["10.96.0.0/12"])
    assert {(d.policyName, d.enforcementLevel) for d in analyze_stack(analyzer, stack)} == {
        ("tenant-cidrs-disjoint", ADVISORY)
    }
