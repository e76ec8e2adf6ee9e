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


def _rules(text: str, chain: str) -> list[str]:
    body = text.split(f"chain {chain} {{", 1)[1].split("}\n", 1)[0] + "}"
    return [line.strip() for line in body.splitlines() if line.strip().startswith("ip ")]


def test_load_balancer_control_planes_are_fenced_whole_and_the_own_one_stays_open() -> None:
    text = fence.fence_rules("10.20.0.240:6443", ["10.20.0.241:6443", "10.20.0.242:6443"], ["10.20.0.12"])
    outbound = _rules(text, "output")
    assert outbound == [
        "ip daddr { 10.20.0.241, 10.20.0.242 } reject comment \"other tenants' control planes\"",
        "ip daddr { 10.20.0.12 } reject comment \"other tenants' GPU hosts\"",
    ]
    assert "10.20.0.240" not in text
    # The host's pods are fenced as the host is: the forward chain carries the same rules.
    assert _rules(text, "forward") == outbound
    assert _rules(text, "input")[0].startswith("ip saddr { 10.20.0.12 } ct state new drop")


def test_node_port_control_planes_on_the_shared_address_are_fenced_by_port() -> None:
    """NodePort: every tenant on controlPlaneAddress, each on its port and konnectivity on the next one."""
    text = fence.fence_rules("192.0.2.10:31000", ["192.0.2.10:31004", "192.0.2.10:31010"], [])
    (rule,) = _rules(text, "output")
    assert rule.startswith("ip daddr . tcp dport { 192.0.2.10 . 31004, 192.0.2.10 . 31005, 192.0.2.10 . 31010, "
                           "192.0.2.10 . 31011 } reject")
    assert "31000" not in rule and "31001" not in rule
    assert "ip daddr {" not in text  # the shared address itself stays reachable (the own control plane is there)


def test_a_single_tenant_fences_nothing_but_still_loads_a_table() -> None:
    text = fence.fence_rules("10.20.0.240:6443", [], [])
    assert _rules(text, "output") == _rules(text, "forward") == _rules(text, "input") == []
    assert text.startswith("table inet gpu_tenancy_fence\ndelete table inet gpu_tenancy_fence\n")


@pytest.mark.parametrize(("own", "endpoints", "hosts", "fragment"), [
    ("cp.example.com:6443", [], [], "control-plane endpoint 'cp.example.com:6443'"),
    ("10.20.0.240:6443", ["[2001:db8::1]:6443"], [], "is not IPv4-address:port"),
    ("10.20.0.240:6443", [], ["gpu-b.lab"], "GPU host address 'gpu-b.lab'"),
])
def test_what_cannot_be_fenced_by_address_is_refused(own: str, endpoints: list[str], hosts: list[str],
                                                     fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace(".", r"\.")):
        fence.fence_rules(own, endpoints, hosts)


@pytest.mark.skipif(NFT is None, reason="nft is not installed here (apt-get install nftables)")
@pytest.mark.parametrize("inputs", [
    ("10.20.0.240:6443", ["10.20.0.241:6443"], ["10.20.0.12", "10.20.0.13"]),
    ("192.0.2.10:31000", ["192.0.2.10:31004"], []),
    ("10.20.0.240:6443", [], []),
])
def test_nftables_accepts_the_rules(tmp_path: Path, inputs: tuple[str, list[str], list[str]]) -> None:
    path = tmp_path / "fence.nft"
    path.write_text(fence.fence_rules(*inputs))
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
