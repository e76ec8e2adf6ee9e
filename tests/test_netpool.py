from __future__ import annotations

import ipaddress

import pytest

from gpu_tenancy.builders.metallb.netpool import PoolError, select_pool

V4 = {"subnet": "172.18.0.0/16", "gateway": "172.18.0.1"}
V6 = {"subnet": "fc00:f853:ccd:e793::/64", "gateway": "fc00:f853:ccd:e793::1"}


@pytest.mark.parametrize("ipam", [[V4, V6], [V6, V4], [V4]], ids=["v4-first", "v6-first", "v4-only"])
def test_pool_is_built_from_the_ipv4_entry_in_any_order(ipam: list[dict[str, str]]) -> None:
    pool = select_pool("kind", ipam, 10)
    assert pool.range == "172.18.255.245-172.18.255.254"
    assert pool.size == 10
    for address in (pool.first, pool.last):
        assert ipaddress.ip_address(address) in ipaddress.ip_network("172.18.0.0/16")
    assert ":" not in pool.range


def test_ipv6_only_network_is_an_error_naming_the_network() -> None:
    with pytest.raises(PoolError, match="'kind' has no IPv4 subnet"):
        select_pool("kind", [V6], 10)


def test_slash_29_is_too_small() -> None:
    with pytest.raises(PoolError, match=r"'kind' subnet 172.18.0.0/29 is too small"):
        select_pool("kind", [{"subnet": "172.18.0.0/29", "gateway": "172.18.0.1"}], 10)


def test_pool_avoids_a_gateway_at_the_top() -> None:
    pool = select_pool("lab", [{"subnet": "10.5.0.0/24", "gateway": "10.5.0.254"}], 4)
    assert pool.range == "10.5.0.250-10.5.0.253"


def test_pool_stays_above_docker_low_addresses() -> None:
    pool = select_pool("lab", [{"subnet": "10.5.0.0/24"}], 100)
    assert int(ipaddress.ip_address(pool.first)) >= int(ipaddress.ip_address("10.5.0.128"))
