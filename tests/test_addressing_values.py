"""The derived addresses as values: a change to the hash, the supernets or the slot arithmetic re-addresses
(and so replaces) every existing tenant's control plane, so the values are pinned here, worked out from
SHA-256 by hand: slot = first 8 bytes of sha256(name), big-endian, mod 1024 (mod the NodePort pairs for ports).

tenant-a: 9270386808276352737, slot 737 -> pods 10.128.0.0 + 737 * 4096, services 10.192.0.0 + 737 * 1024.
tenant-b: 16099078249808569690, slot 346.
"""

from __future__ import annotations

import pytest

from gpu_tenancy.contract.addressing import (
    Claim,
    collisions,
    default_cidrs,
    default_node_ports,
    name_hash,
    node_port_pairs,
)


def test_the_name_hash_is_sha256s_first_eight_bytes() -> None:
    assert name_hash("tenant-a") == 9270386808276352737
    assert name_hash("tenant-b") == 16099078249808569690


@pytest.mark.parametrize(("name", "pods", "services"), [
    ("tenant-a", "10.174.16.0/20", "10.203.132.0/22"),
    ("tenant-b", "10.149.160.0/20", "10.197.104.0/22"),
])
def test_default_cidrs_of_the_example_tenants(name: str, pods: str, services: str) -> None:
    assert default_cidrs(name) == (pods, services)


def test_default_node_ports_of_the_example_tenants() -> None:
    # 1384 pairs from 30000 to 32767; tenant-a: 9270386808276352737 % 1384 = 753.
    assert default_node_ports("tenant-a", 30000) == (31506, 31507)
    assert default_node_ports("tenant-b", 30000) == (32500, 32501)


@pytest.mark.parametrize(("base", "pairs"), [(30000, 1384), (32765, 1), (32766, 1), (32767, 0), (31000, 884)])
def test_node_port_pairs_count_whole_pairs_up_to_32767(base: int, pairs: int) -> None:
    assert node_port_pairs(base) == pairs


def claim(index: int, tenant: str, value: str, explicit: bool, key: str = "podCidr") -> Claim:
    return Claim(index, tenant, key, value, explicit)


def test_two_derived_cidrs_on_one_slot_blame_the_later_tenant() -> None:
    assert collisions([claim(0, "a", "10.0.0.0/20", False), claim(1, "b", "10.0.0.0/20", False)]) == [
        ("tenants[1].podCidr",
         "10.0.0.0/20 (derived from its name) of tenant 'b' collides with 10.0.0.0/20 of tenant 'a'; "
         "set tenants[1].podCidr explicitly")]


def test_a_derived_cidr_inside_an_earlier_explicit_one_is_the_one_to_set() -> None:
    assert collisions([claim(0, "a", "10.0.0.0/16", True), claim(1, "b", "10.0.16.0/20", False)]) == [
        ("tenants[1].podCidr",
         "10.0.16.0/20 (derived from its name) of tenant 'b' collides with 10.0.0.0/16 of tenant 'a'; "
         "set tenants[1].podCidr explicitly")]


def test_an_explicit_cidr_over_an_earlier_derived_one_blames_the_derived_one() -> None:
    assert collisions([claim(0, "a", "10.0.16.0/20", False), claim(1, "b", "10.0.0.0/16", True)]) == [
        ("tenants[0].podCidr",
         "10.0.16.0/20 (derived from its name) of tenant 'a' collides with 10.0.0.0/16 of tenant 'b'; "
         "set tenants[0].podCidr explicitly")]


def test_two_explicit_node_ports_that_share_a_port_blame_the_later_tenant() -> None:
    ports = [claim(0, "a", "31000-31001", True, "nodePort"), claim(1, "b", "31001-31002", True, "nodePort")]
    assert collisions(ports) == [
        ("tenants[1].nodePort",
         "31001-31002 (set) of tenant 'b' collides with 31000-31001 of tenant 'a'; choose another tenants[1].nodePort")]


def test_what_does_not_collide() -> None:
    assert collisions([claim(0, "a", "10.0.0.0/16", True), claim(1, "b", "10.0.0.0/20", True)]) == []  # the pack's
    assert collisions([claim(0, "a", "10.0.0.0/20", False), claim(0, "a", "10.0.0.0/20", False, "serviceCidr")]) == []
    assert collisions([claim(0, "a", "31000-31001", False, "nodePort"),
                       claim(1, "b", "31002-31003", False, "nodePort")]) == []
    assert collisions([claim(0, "a", "10.0.0.0/20", False), claim(1, "b", "10.0.16.0/20", False)]) == []
    assert collisions([claim(0, "a", "10.0.0.0/20", False), claim(1, "b", "1-65535", False, "nodePort")]) == []


def test_a_claim_is_reported_once_even_when_it_overlaps_several() -> None:
    claims = [claim(0, "a", "10.0.0.0/20", True), claim(1, "b", "10.0.0.0/19", True, "serviceCidr"),
              claim(2, "c", "10.0.0.0/20", False)]
    assert [key for key, _ in collisions(claims)] == ["tenants[2].podCidr"]


def test_a_port_range_written_backwards_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^port range '31001-31000': first > last$"):
        collisions([claim(0, "a", "31001-31000", True, "nodePort")])
