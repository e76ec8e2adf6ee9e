"""mode real (the gpu example stack) under Pulumi mocks: hosts over SSH, device plugin, inventory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from policy_support import shared_recording
from pulumi.runtime import MockResourceArgs

from gpu_tenancy.builders.host_worker import fence as host_fence
from gpu_tenancy.builders.host_worker import hostprep
from gpu_tenancy.contract.chart_lock import chart_name
from gpu_tenancy.hami import inventory
from tests import harness
from tests.harness import TEST_SECRETS, by_type, gpu_config, is_secret, record_mocks, record_stack, registered_gpus

TENANTS = ("tenant-a", "tenant-b")
REMOTE = "command:remote:Command"


@pytest.fixture
@shared_recording
def resources() -> list[MockResourceArgs]:
    config = gpu_config()
    return record_stack(config, stack="gpu", node_register=registered_gpus(config))


def test_real_stack_has_no_kind_docker_or_mock_gpus(resources: list[MockResourceArgs]) -> None:
    types = Counter(r.typ for r in resources)
    for absent in ("gpu-tenancy:kind_cluster:KindCluster", "gpu-tenancy:worker:Worker",
                   "gpu-tenancy:mock_gpu_agent:MockGpuAgent", "docker:index/container:Container",
                   "docker:index/image:Image", "docker:index/remoteImage:RemoteImage"):
        assert types[absent] == 0, absent
    assert not [r for r in by_type(resources, "command:local:Command") if "kind " in str(r.inputs.get("create"))]
    assert types["gpu-tenancy:host_worker:HostWorker"] == len(TENANTS)
    assert types["gpu-tenancy:inventory_check:InventoryCheck"] == len(TENANTS)
    assert types["kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"] == len(TENANTS)


def test_management_provider_uses_the_secret_kubeconfig(resources: list[MockResourceArgs]) -> None:
    (management,) = [r for r in by_type(resources, "pulumi:providers:kubernetes") if r.name == "management"]
    assert is_secret(management.inputs["kubeconfig"])
    assert management.inputs["kubeconfig"]["value"] == TEST_SECRETS["managementKubeconfig"]


def test_hosts_are_prepared_and_joined_over_ssh_with_secret_key_and_token(resources: list[MockResourceArgs]) -> None:
    commands = {r.name: r.inputs for r in by_type(resources, REMOTE)}
    assert set(commands) == {
        "tenant-a-gpu-a100-01-prepare", "tenant-a-gpu-a100-01-join",
        "tenant-b-gpu-l4-01-prepare", "tenant-b-gpu-l4-01-join",
        # Each host's firewall against the other tenants (tests/test_host_fence.py).
        "host-fences-tenant-a-gpu-a100-01", "host-fences-tenant-b-gpu-l4-01",
        # Each host's machine id, read before any is prepared (tests/test_host_identity.py).
        "hosts-tenant-a-gpu-a100-01", "hosts-tenant-b-gpu-l4-01",
    }
    host_keys = {w["address"]: w["hostKey"] for t in gpu_config()["tenants"] for w in t["workers"]}
    for name, inputs in commands.items():
        connection = inputs["connection"]
        assert is_secret(connection) or is_secret(connection["privateKey"]), name
        host = connection["value"] if is_secret(connection) else connection
        assert host["user"] == "ubuntu" and host["host"].startswith("10.20.0.")
        # Every SSH connection pins the host's key (pulumi-command ignores host keys without it).
        assert host["hostKey"] == host_keys[host["host"]], name
    join = commands["tenant-a-gpu-a100-01-join"]
    assert is_secret(join["stdin"]), "the join configuration carries the bootstrap token"
    assert "token" not in join["create"] and join["delete"] == hostprep.reset_command()
    assert "v1.35" in commands["tenant-a-gpu-a100-01-prepare"]["stdin"]


def test_each_host_is_fenced_off_from_the_other_tenant(resources: list[MockResourceArgs]) -> None:
    """Tenant-a's host rejects tenant-b's control plane and host, and the other way round; its own stay open."""
    commands = {r.name: r.inputs for r in by_type(resources, REMOTE)}
    endpoints = {r.name: r.inputs["controlPlaneEndpoint"]
                 for r in by_type(resources, "gpu-tenancy:host_worker:HostWorker")}
    own_a, own_b = endpoints["tenant-a-gpu-a100-01"], endpoints["tenant-b-gpu-l4-01"]
    assert own_a.split(":")[0] != own_b.split(":")[0], "LoadBalancer: an address per tenant"
    for host, own, other, other_host in (("tenant-a-gpu-a100-01", own_a, own_b, "10.20.0.12"),
                                         ("tenant-b-gpu-l4-01", own_b, own_a, "10.20.0.11")):
        fence = commands["host-fences-" + host]
        rules = fence["stdin"]
        assert f"ip daddr {{ {other.split(':')[0]} }} reject" in rules, rules
        assert f"ip daddr {{ {other_host} }} reject" in rules and f"ip saddr {{ {other_host} }}" in rules
        assert own.split(":")[0] not in rules
        assert (fence["create"], fence["delete"]) == (host_fence.fence_command(), host_fence.unfence_command())


def test_each_host_is_fenced_after_its_tenant_is_up() -> None:
    """The fence script may install nftables: not while the host's preparation runs apt (dpkg's lock). Depending on
    a component is depending on every resource in it (the SDK expands it), the prepares included."""
    from policy_support import EXAMPLE_STACKS

    stack = EXAMPLE_STACKS["gpu"]()
    prepares = {r.urn for r in stack if r.type == REMOTE and r.name.endswith("-prepare")}
    fences = [r for r in stack if r.type == REMOTE and r.name.startswith("host-fences-")]
    assert len(fences) == 2 and len(prepares) == 2
    for fence_command in fences:
        assert prepares <= set(fence_command.dependencies), fence_command.name


def test_each_host_joins_its_own_tenant(resources: list[MockResourceArgs]) -> None:
    hosts = {r.name: r.inputs for r in by_type(resources, "gpu-tenancy:host_worker:HostWorker")}
    assert {n: (i["tenant"], i["nodeName"]) for n, i in hosts.items()} == {
        "tenant-a-gpu-a100-01": ("tenant-a", "gpu-a100-01"),
        "tenant-b-gpu-l4-01": ("tenant-b", "gpu-l4-01"),
    }
    endpoints = {i["tenant"]: i["controlPlaneEndpoint"] for i in hosts.values()}
    assert endpoints["tenant-a"] != endpoints["tenant-b"]


def test_hami_runs_its_device_plugin_and_kubelet_keeps_host_defaults(resources: list[MockResourceArgs]) -> None:
    hami = [r for r in by_type(resources, "kubernetes:helm.sh/v3:Release") if chart_name(r.inputs["chart"]) == "hami"]
    assert len(hami) == len(TENANTS)
    assert all(r.inputs["values"]["devicePlugin"]["enabled"] is True for r in hami)
    for tcp in by_type(resources, "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        patches = tcp.inputs["spec"]["kubernetes"]["kubelet"]["configurationJSONPatches"]
        assert patches == [{"op": "add", "path": "/cgroupDriver", "value": "systemd"}]


def test_load_balancer_control_planes_get_no_node_ports_in_real(resources: list[MockResourceArgs]) -> None:
    """A LoadBalancer Service allocates NodePorts by default, served on every management node at ports the API
    server picks, which no host firewall can know: the real stack turns them off."""
    for tcp in by_type(resources, "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        assert tcp.inputs["spec"]["controlPlane"]["service"] == {
            "serviceType": "LoadBalancer", "allocateLoadBalancerNodePorts": False}


def test_kamajis_crd_carries_the_node_port_switch_for_load_balancers_only(shared: Path) -> None:
    crd = yaml.safe_load((shared / "schemas" / "kamaji.clastix.io_tenantcontrolplanes.yaml").read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    spec = served["schema"]["openAPIV3Schema"]["properties"]["spec"]
    service = spec["properties"]["controlPlane"]["properties"]["service"]["properties"]
    assert service["allocateLoadBalancerNodePorts"]["type"] == "boolean"
    # Kamaji refuses the field with any other serviceType (the NodePort test below sets none).
    assert ("!has(self.controlPlane.service.allocateLoadBalancerNodePorts) || self.controlPlane.service.serviceType == "
            "'LoadBalancer'") in [rule["rule"] for rule in spec["x-kubernetes-validations"]]


def test_metallb_pool_comes_from_config_in_real(resources: list[MockResourceArgs]) -> None:
    (pool,) = by_type(resources, "kubernetes:metallb.io/v1beta1:IPAddressPool")
    assert pool.inputs["spec"]["addresses"] == ["10.20.0.240-10.20.0.250"]


def test_nodeport_control_planes_get_distinct_ports_and_no_metallb() -> None:
    config = gpu_config()
    config["metallb"] = {"enabled": False}
    config["controlPlane"] = {"serviceType": "NodePort", "nodePortBase": 31400}
    for index, tenant in enumerate(config["tenants"]):
        tenant["controlPlaneAddress"] = f"10.20.0.{2 + index}"
    resources = record_stack(config, stack="gpu", node_register=registered_gpus(config))
    assert not by_type(resources, "gpu-tenancy:metallb:MetalLB")
    profiles = {
        tcp.inputs["metadata"]["name"]: (
            tcp.inputs["spec"]["controlPlane"]["service"],
            tcp.inputs["spec"]["networkProfile"]["address"],
            tcp.inputs["spec"]["networkProfile"]["port"],
            tcp.inputs["spec"]["addons"]["konnectivity"]["server"]["port"],
        )
        for tcp in by_type(resources, "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane")
    }
    assert profiles == {
        # Derived from each tenant's name (gpu_tenancy.contract.addressing), literal so a change is noticed.
        "tenant-a": ({"serviceType": "NodePort"}, "10.20.0.2", 32378, 32379),
        "tenant-b": ({"serviceType": "NodePort"}, "10.20.0.3", 32260, 32261),
    }


def test_nodeport_hosts_close_the_other_tenants_ports_on_every_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each host's firewall closes the other tenant's NodePort pair whatever the address (kube-proxy serves it on
    every management node), the other tenant's address whole, and leaves its own pair open."""
    config = gpu_config()
    config["metallb"] = {"enabled": False}
    config["controlPlane"] = {"serviceType": "NodePort", "nodePortBase": 31400}
    for index, tenant in enumerate(config["tenants"]):
        tenant["controlPlaneAddress"] = f"10.20.0.{2 + index}"
    # Kamaji's admin kubeconfig names status.controlPlaneEndpoint, `address:networkProfile.port` (kamaji
    # internal/resources/k8s_service_resource.go UpdateTenantControlPlaneStatus); the ports as the test above has them.
    served = {"tenant-a": "10.20.0.2:32378", "tenant-b": "10.20.0.3:32260"}
    original = harness.tenant_kubeconfig

    def kubeconfig(tenant: str) -> str:
        document = yaml.safe_load(original(tenant))
        document["clusters"][0]["cluster"]["server"] = f"https://{served[tenant]}"
        return str(yaml.safe_dump(document))

    monkeypatch.setattr(harness, "tenant_kubeconfig", kubeconfig)
    resources = record_stack(config, stack="gpu", node_register=registered_gpus(config))
    fences = {r.name: r.inputs["stdin"] for r in by_type(resources, REMOTE) if r.name.startswith("host-fences-")}
    for host, other_address, other_ports, own_ports in (
        ("tenant-a-gpu-a100-01", "10.20.0.3", "32260, 32261", ("32378", "32379")),
        ("tenant-b-gpu-l4-01", "10.20.0.2", "32378, 32379", ("32260", "32261")),
    ):
        rules = fences["host-fences-" + host]
        assert f"tcp dport {{ {other_ports} }} reject" in rules and f"ip daddr {{ {other_address} }} reject" in rules
        assert not any(port in rules for port in own_ports), rules


def test_inventory_mismatch_fails_the_update_naming_the_tenant() -> None:
    config = gpu_config()
    register = registered_gpus(config)
    # The same L4s with ECC turned off: NVML reports 1/16 more memory than the plan counts.
    register["gpu-l4-01"] = register["gpu-l4-01"].replace('"devmem":23034', '"devmem":24564', 1)
    with pytest.raises(
        Exception,
        match=r"tenant tenant-b: HAMi registered other GPUs than the plan counts: node gpu-l4-01: NVIDIA L4 registers "
        r"24564 MiB where the plan counts 23034 MiB",
    ):
        record_stack(config, stack="gpu", node_register=register)
    config["inventoryMismatch"] = "warn"
    assert record_stack(config, stack="gpu", node_register=register)


def test_fresh_real_preview_registers_everything() -> None:
    config = gpu_config()
    known = record_stack(config, stack="gpu", node_register=registered_gpus(config))
    preview = record_stack(config, stack="gpu", unknowns=True)
    assert Counter(r.typ for r in preview) == Counter(r.typ for r in known)


def test_secrets_stay_secret_in_real_outputs() -> None:
    config = gpu_config()
    mocks = record_mocks(config, stack="gpu", node_register=registered_gpus(config))
    for provider in by_type(mocks.resources, "pulumi:providers:kubernetes"):
        assert is_secret(provider.inputs["kubeconfig"]), provider.name
    for check in [r for r in by_type(mocks.resources, "command:local:Command") if r.name.endswith("-registered")]:
        assert is_secret(check.inputs["stdin"]), "the tenant kubeconfig goes to kubectl on stdin, as a secret"


def _device(device_type: str, devmem: int, health: bool = True) -> dict[str, Any]:
    return {"id": f"GPU-{device_type}-{devmem}", "type": device_type, "devmem": devmem, "health": health}


TWO_L4 = {"n1": [_device("NVIDIA L4", 23034)] * 2}


def test_inventory_matches_cards_by_exact_type_and_memory() -> None:
    assert inventory.inventory_mismatches(TWO_L4, {"n1": [_device("NVIDIA L4", 23034)] * 2}) == []


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ({"n1": [_device("NVIDIA L4", 23034)]}, ["node n1: declares 2 x NVIDIA L4 (23034 MiB), HAMi registered 1"]),
        (
            {"n1": [_device("NVIDIA L4", 23034)] * 2 + [_device("NVIDIA-Tesla T4", 15360)]},
            ["node n1: 1 x NVIDIA-Tesla T4 (15360 MiB) registered but not declared on this node"],
        ),
        (
            {"n1": [_device("NVIDIA L4", 23034), _device("NVIDIA L4", 23034, health=False)]},
            [
                "node n1: GPU GPU-NVIDIA L4-23034 (NVIDIA L4) is unhealthy",
                "node n1: declares 2 x NVIDIA L4 (23034 MiB), HAMi registered 1",
            ],
        ),
        (
            # An old driver, or ECC off, reports another total: the plan's numbers would not hold.
            {"n1": [_device("NVIDIA L4", 22731)] * 2},
            ["node n1: NVIDIA L4 registers 22731 MiB where the plan counts 23034 MiB (the memory NVML reports for "
             "it in the GPU catalogue)"],
        ),
        (
            # The prefix older HAMi releases wrote: another type, so the plan's type filters would not hold.
            {"n1": [_device("NVIDIA-NVIDIA L4", 23034)] * 2},
            [
                "node n1: declares 2 x NVIDIA L4 (23034 MiB), HAMi registered 0",
                "node n1: 2 x NVIDIA-NVIDIA L4 (23034 MiB) registered but not declared on this node",
            ],
        ),
        ({"n2": [_device("NVIDIA L4", 23034)] * 2}, [
            "node n1: declares 2 x NVIDIA L4 (23034 MiB), HAMi registered 0",
            "node n2: 2 x NVIDIA L4 (23034 MiB) registered but not declared on this node",
        ]),
    ],
    ids=["missing card", "extra card", "unhealthy card", "other memory", "other type", "cards on another node"],
)
def test_inventory_mismatches_are_one_line_each(reported: dict[str, list[dict[str, Any]]], expected: list[str]) -> None:
    assert inventory.inventory_mismatches(TWO_L4, reported) == expected


def test_kubernetes_packages_follow_the_tenant_version() -> None:
    assert hostprep.kubernetes_package_version("v1.35.5") == ("v1.35", "1.35.5-*")
    with pytest.raises(ValueError):
        hostprep.kubernetes_package_version("1.35")


def test_host_scripts_pass_shellcheck(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(shellcheck).exists():
        pytest.skip("shellcheck not installed (pip install -r requirements-dev.txt)")
    script = tmp_path / "prepare.sh"
    script.write_text(hostprep.prepare_script("v1.35.5"))
    commands = tmp_path / "commands.sh"
    commands.write_text("#!/bin/sh\n" + "\n".join([hostprep.join_command(), hostprep.reset_command()]) + "\n")
    result = subprocess.run([shellcheck, "--severity=warning", str(script), str(commands)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
