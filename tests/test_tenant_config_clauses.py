"""Each clause of the tenant section's host and network checks (gpu_tenancy/contract/tenant_config.py) decides a
case: the value it refuses and the closest one it accepts. Expected values are written from the formats the
checks follow (an OpenSSH public key's wire encoding, RFC 4253 6.6; Python's ipaddress; HAMi's quota keys)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic import ValidationError

from gpu_tenancy.contract.tenant_config import TenantConfig, WorkerHostConfig

A100 = {"model": "NVIDIA A100-SXM4-80GB", "count": 1}


def key_line(key_type: str, body: bytes = b"\x00\x00\x00\x20" + bytes(32)) -> str:
    """`<type> <base64>`, the blob starting with the type as an SSH string (4-byte length, then the name)."""
    blob = len(key_type).to_bytes(4, "big") + key_type.encode() + body
    return f"{key_type} {base64.b64encode(blob).decode()}"


def host(**fields: Any) -> dict[str, Any]:
    return {"name": "gpu-01", "address": "10.20.0.11", "user": "ubuntu", "hostKey": key_line("ssh-ed25519"),
            **fields}


@pytest.mark.parametrize("key_type", [
    "ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
])
def test_every_host_key_type_pulumi_command_can_pin_is_accepted(key_type: str) -> None:
    line = key_line(key_type)
    assert WorkerHostConfig.model_validate(host(hostKey=line)).host_key == line
    # A whole `ssh-keyscan` line: the host in front is dropped, a comment after it too.
    assert WorkerHostConfig.model_validate(host(hostKey=f"10.20.0.11 {line} root@gpu-01")).host_key == line


@pytest.mark.parametrize(("key", "error"), [
    (key_line("ssh-dss"), "key type 'ssh-dss' is not one of"),
    (key_line("ssh-rsa"), "is an RSA key"),
    # The blob names another type than the line.
    ("ssh-ed25519 " + key_line("ecdsa-sha2-nistp256").split()[1], "its key data is not a ssh-ed25519 key"),
])
def test_other_host_keys_are_refused(key: str, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        WorkerHostConfig.model_validate(host(hostKey=key))


@pytest.mark.parametrize("key", ["limits.nvidia.com/gpu", "limits.nvidia.com/gpumem", "limits.nvidia.com/gpucores"])
def test_each_hami_quota_key_is_accepted_and_zero_is_a_limit(key: str) -> None:
    assert TenantConfig.model_validate({"name": "a", "gpus": [A100], "quota": {key: 0}}).quota == {key: 0}
    with pytest.raises(ValidationError, match="must be >= 0"):
        TenantConfig.model_validate({"name": "a", "gpus": [A100], "quota": {key: -1}})


@pytest.mark.parametrize(("cidr", "accepted"), [
    ("10.200.0.0/24", True), ("10.200.0.0/16", True),
    ("10.200.0.0/25", False),  # smaller than /24
    ("10.200.0.1/24", False),  # host bits set (strict)
    ("fd00::/64", False),
])
def test_pod_and_service_ranges_are_ipv4_of_24_or_larger(cidr: str, accepted: bool) -> None:
    for key in ("podCidr", "serviceCidr"):
        tenant = {"name": "a", "gpus": [A100], key: cidr}
        if accepted:
            TenantConfig.model_validate(tenant)
        else:
            with pytest.raises(ValidationError):
                TenantConfig.model_validate(tenant)


@pytest.mark.parametrize(("address", "accepted"), [
    ("10.20.0.5", True), ("10.20.0.256", False), ("fd00::5", False), ("cp.lab", False),
])
def test_the_control_plane_address_is_ipv4(address: str, accepted: bool) -> None:
    tenant = {"name": "a", "gpus": [A100], "controlPlaneAddress": address}
    if accepted:
        assert TenantConfig.model_validate(tenant).control_plane_address == address
    else:
        with pytest.raises(ValidationError, match="is not an IPv4 address"):
            TenantConfig.model_validate(tenant)


@pytest.mark.parametrize(("address", "accepted"), [
    ("10.20.0.11", True), ("fd00::11", True), ("gpu-01.lab.example", True),
    ("GPU-01.lab", False), ("gpu_01.lab", False), ("-gpu.lab", False), ("gpu01.", False),
])
def test_a_host_address_is_an_ip_or_a_dns_name(address: str, accepted: bool) -> None:
    if accepted:
        assert WorkerHostConfig.model_validate(host(address=address)).address == address
    else:
        with pytest.raises(ValidationError, match="is neither an IP address nor a host name"):
            WorkerHostConfig.model_validate(host(address=address))


def test_two_hosts_of_a_tenant_share_neither_name_nor_address() -> None:
    two = {"name": "a", "gpus": [{**A100, "count": 2}]}
    other = host(name="gpu-02", address="10.20.0.12")
    TenantConfig.model_validate({**two, "workers": [host(gpus=[A100]), {**other, "gpus": [A100]}]})
    with pytest.raises(ValidationError, match=r"duplicate worker name\(s\): gpu-01"):
        TenantConfig.model_validate({**two, "workers": [host(gpus=[A100]), {**other, "name": "gpu-01", "gpus": [A100]}]})
    with pytest.raises(ValidationError, match=r"duplicate worker address\(s\): 10.20.0.11"):
        TenantConfig.model_validate({**two, "workers": [host(gpus=[A100]),
                                                        {**other, "address": "10.20.0.11", "gpus": [A100]}]})


def test_a_single_host_takes_the_tenants_gpus() -> None:
    tenant = TenantConfig.model_validate({"name": "a", "gpus": [{**A100, "count": 2}], "workers": [host()]})
    assert [(g.model, g.count) for g in tenant.workers[0].gpus] == [("NVIDIA A100-SXM4-80GB", 2)]
