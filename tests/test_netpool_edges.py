"""MetalLB pool edges: the upper half's boundary, a gateway inside or just outside the pool, the size the
error asks for. Expected ranges are worked out by hand from the subnet (Docker hands addresses out from the
bottom; the pool ends below the broadcast address)."""

from __future__ import annotations

import pytest

from gpu_tenancy.builders.metallb.netpool import AddressPool, PoolError, ipv4_subnet, select_pool


def test_a_pool_that_exactly_fills_the_upper_half_is_taken() -> None:
    # 10.0.0.0/29: broadcast .7, upper half .4-.7, so .4-.6 is the largest pool.
    pool = select_pool("lab", [{"subnet": "10.0.0.0/29"}], 3)
    assert (pool.subnet, pool.first, pool.last, pool.size) == ("10.0.0.0/29", "10.0.0.4", "10.0.0.6", 3)


@pytest.mark.parametrize(("needed", "prefix"), [(4, 28), (7, 28), (8, 27), (15, 27), (16, 26)])
def test_one_address_past_the_upper_half_is_refused_naming_the_subnet_size_that_fits(needed: int, prefix: int) -> None:
    # A /p subnet's upper half holds 2**(32-p)/2 - 1 addresses below the broadcast address.
    with pytest.raises(PoolError) as error:
        select_pool("lab", [{"subnet": "10.0.0.0/29", "gateway": "10.0.0.1"}], needed)
    assert str(error.value) == (
        f"Docker network 'lab' subnet 10.0.0.0/29 is too small for {needed} load-balancer addresses in its upper "
        f"half; use a larger subnet (at least /{prefix})"
    )


def test_a_gateway_on_the_pools_first_address_moves_the_pool_below_it() -> None:
    pool = select_pool("lab", [{"subnet": "10.5.0.0/24", "gateway": "10.5.0.252"}], 3)
    assert pool.range == "10.5.0.249-10.5.0.251"


def test_a_gateway_just_below_the_pool_leaves_it_at_the_top() -> None:
    pool = select_pool("lab", [{"subnet": "10.5.0.0/24", "gateway": "10.5.0.251"}], 3)
    assert pool.range == "10.5.0.252-10.5.0.254"


def test_a_gateway_that_pushes_the_pool_out_of_the_upper_half_is_refused() -> None:
    # /29 with the gateway on .6: the pool of 3 would be .3-.5, below the upper half (.4).
    with pytest.raises(PoolError, match=r"^Docker network 'lab' subnet 10.0.0.0/29 is too small for 3 "):
        select_pool("lab", [{"subnet": "10.0.0.0/29", "gateway": "10.0.0.6"}], 3)


def test_one_address_is_the_top_usable_one() -> None:
    assert select_pool("kind", [{"subnet": "172.18.0.0/16", "gateway": "172.18.0.1"}], 1).range == (
        "172.18.255.254-172.18.255.254"
    )


@pytest.mark.parametrize("needed", [0, -1])
def test_no_addresses_is_a_programming_error(needed: int) -> None:
    with pytest.raises(ValueError, match=r"^addresses_needed must be at least 1$"):
        select_pool("lab", [{"subnet": "10.0.0.0/24"}], needed)


def test_the_ipv4_entry_comes_with_its_gateway_and_an_empty_one_is_none() -> None:
    subnet, gateway = ipv4_subnet("lab", [{"subnet": "", "gateway": "10.9.9.9"}, {"subnet": "10.1.0.0/16", "gateway": ""}])
    assert (str(subnet), gateway) == ("10.1.0.0/16", None)
    subnet, gateway = ipv4_subnet("lab", [{"subnet": "10.1.0.1/16", "gateway": "10.1.0.1"}])
    assert (str(subnet), gateway) == ("10.1.0.0/16", "10.1.0.1")  # a host address in the entry is its network


def test_a_network_without_subnets_says_it_has_none() -> None:
    with pytest.raises(PoolError) as error:
        ipv4_subnet("lab", [])
    assert str(error.value) == "Docker network 'lab' has no IPv4 subnet (IPAM subnets: none)"
    with pytest.raises(PoolError) as error:
        ipv4_subnet("lab", [{"subnet": "fd00::/64"}, {"subnet": None}])
    assert str(error.value) == "Docker network 'lab' has no IPv4 subnet (IPAM subnets: fd00::/64, None)"


def test_a_pools_range_and_size_count_both_ends() -> None:
    pool = AddressPool(subnet="10.0.0.0/24", first="10.0.0.250", last="10.0.0.254")
    assert (pool.range, pool.size) == ("10.0.0.250-10.0.0.254", 5)


@pytest.mark.parametrize(("needed", "prefix"), [(1, 30), (2**22 - 1, 9), (2**22, 8), (2**23, 8)])
def test_the_subnet_size_asked_for_is_the_smallest_that_holds_the_pool_and_never_beyond_a_slash_8(
    needed: int, prefix: int
) -> None:
    # /9: 2**23 / 2 - 1 = 4194303 addresses in its upper half; /8 is the largest subnet the message names.
    with pytest.raises(PoolError, match=rf"use a larger subnet \(at least /{prefix}\)$"):
        select_pool("lab", [{"subnet": "10.0.0.0/31"}], needed)
