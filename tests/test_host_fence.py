"""The host firewall of mode real (gpu_tenancy/builders/host_worker/fence.py): each GPU host and its pods reach no
other tenant's control plane or GPU host, and the rules are what nftables itself accepts (`nft -c`, where the
nft command is installed), installed by a script shellcheck accepts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_tenancy.builders.host_worker import fence

NFT = shutil.which("nft")


IPV6_OUT = "meta nfproto ipv6 oifname != \"lo\" meta l4proto != ipv6-icmp reject comment \"IPv6 other than ICMPv6\""
IPV6_IN = ("meta nfproto ipv6 iifname != \"lo\" meta l4proto != ipv6-icmp ct state new drop comment \"IPv6 other than "
           "ICMPv6\"")


def _rules(text: str, chain: str) -> list[str]:
    body = text.split(f"chain {chain} {{", 1)[1].split("}\n", 1)[0] + "}"
    return [line.strip() for line in body.splitlines() if line.strip().startswith(("ip ", "tcp ", "meta "))]


def test_load_balancer_control_planes_are_fenced_whole_and_the_own_one_stays_open() -> None:
    text = fence.fence_rules("10.20.0.240:6443", ["10.20.0.241:6443", "10.20.0.242:6443"], ["10.20.0.12"],
                             node_ports=False)
    outbound = _rules(text, "output")
    assert outbound == [
        IPV6_OUT,
        "ip daddr { 10.20.0.241, 10.20.0.242 } reject comment \"other tenants' control planes\"",
        "ip daddr { 10.20.0.12 } reject comment \"other tenants' GPU hosts\"",
    ]
    assert "10.20.0.240" not in text and "dport" not in text  # a LoadBalancer's ports are its address's
    # The host's pods are fenced as the host is: the forward chain carries the same rules.
    assert _rules(text, "forward") == outbound
    assert _rules(text, "input") == [IPV6_IN, "ip saddr { 10.20.0.12 } ct state new drop comment \"other tenants' GPU "
                                               "hosts\""]


def test_node_port_control_planes_are_fenced_by_port_on_every_address() -> None:
    """NodePort: each tenant on its port, konnectivity on the next one; kube-proxy serves every NodePort on every
    address of every management node, so the other tenants' ports are closed whatever the destination."""
    text = fence.fence_rules("192.0.2.10:31000", ["192.0.2.10:31004", "192.0.2.10:31010"], [], node_ports=True)
    assert _rules(text, "output") == [
        IPV6_OUT,
        "tcp dport { 31004, 31005, 31010, 31011 } reject comment \"other tenants' control planes (NodePorts, on every "
        "address)\"",
    ]
    assert "daddr" not in text  # the shared address itself stays reachable (the own control plane is there)


def test_node_port_control_planes_on_other_addresses_are_fenced_whole_and_by_port() -> None:
    """Tenants on different management nodes' addresses: the other node's address whole, and the other tenant's
    ports on the own node's address (and any other) too."""
    text = fence.fence_rules("192.0.2.10:32378", ["192.0.2.11:32260"], [], node_ports=True)
    assert _rules(text, "output")[1:] == [
        "ip daddr { 192.0.2.11 } reject comment \"other tenants' control planes\"",
        "tcp dport { 32260, 32261 } reject comment \"other tenants' control planes (NodePorts, on every address)\"",
    ]


def test_the_own_node_ports_stay_open_whatever_the_inputs_say() -> None:
    text = fence.fence_rules("192.0.2.10:31000", ["192.0.2.11:31000", "192.0.2.11:30999"], [], node_ports=True)
    assert "tcp dport { 30999 } reject" in text  # 31000 (own API) and 31001 (own konnectivity) are left out


def test_a_single_tenant_fences_only_ipv6_but_still_loads_a_table() -> None:
    text = fence.fence_rules("10.20.0.240:6443", [], [], node_ports=False)
    assert _rules(text, "output") == _rules(text, "forward") == [IPV6_OUT]
    assert _rules(text, "input") == [IPV6_IN]
    assert text.startswith("table inet gpu_tenancy_fence\ndelete table inet gpu_tenancy_fence\n")


@pytest.mark.parametrize(("own", "endpoints", "hosts", "fragment"), [
    ("cp.example.com:6443", [], [], "control-plane endpoint 'cp.example.com:6443'"),
    ("10.20.0.240:6443", ["[2001:db8::1]:6443"], [], "is not IPv4-address:port"),
    ("10.20.0.240:6443", [], ["gpu-b.lab"], "GPU host address 'gpu-b.lab'"),
])
def test_what_cannot_be_fenced_by_address_is_refused(own: str, endpoints: list[str], hosts: list[str],
                                                     fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace(".", r"\.")):
        fence.fence_rules(own, endpoints, hosts, node_ports=False)


@pytest.mark.skipif(NFT is None, reason="nft is not installed here (apt-get install nftables)")
@pytest.mark.parametrize("inputs", [
    ("10.20.0.240:6443", ["10.20.0.241:6443"], ["10.20.0.12", "10.20.0.13"], False),
    ("192.0.2.10:31000", ["192.0.2.10:31004", "192.0.2.11:31010"], ["10.20.0.12"], True),
    ("10.20.0.240:6443", [], [], False),
])
def test_nftables_accepts_the_rules(tmp_path: Path, inputs: tuple[str, list[str], list[str], bool]) -> None:
    path = tmp_path / "fence.nft"
    path.write_text(fence.fence_rules(*inputs[:3], node_ports=inputs[3]))
    checked = subprocess.run([str(NFT), "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("script", [fence.fence_script(), fence.unfence_script()])
def test_the_scripts_pass_shellcheck(script: str) -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    checked = subprocess.run([shellcheck, "-s", "bash", "-"], input=script, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout


def test_the_commands_run_the_scripts_as_root_with_the_rules_on_stdin() -> None:
    assert fence.fence_command().startswith("sudo -n bash -c ")
    assert 'cat > "$rules"' in fence.fence_script() and "nft -c -f" in fence.fence_script()
    assert "nft delete table inet gpu_tenancy_fence" in fence.unfence_script()
