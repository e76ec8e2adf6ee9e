"""A tenant's default addresses depend on that tenant alone (issue: removing one re-addressed the others)."""

from __future__ import annotations

import copy
import ipaddress
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_tenancy.contract import addressing
from gpu_tenancy.contract.config import ConfigError, load_config
from gpu_tenancy.contract.config_fields import DNS1123_LABEL
from tests import addressing_reference
from tests.harness import by_type, dev_config, gpu_config, nodeport_gpu_config, record_stack, registered_gpus

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
KIND_RESERVED = [ipaddress.ip_network("10.244.0.0/16"), ipaddress.ip_network("10.96.0.0/16")]
names = st.from_regex(DNS1123_LABEL, fullmatch=True).filter(lambda n: len(n) <= 40)


def _colliding_names(kind: str, base: int = 31000) -> tuple[str, str]:
    """Two tenant names whose derived CIDRs (or NodePorts) land on the same slot, found by search."""
    seen: dict[Any, str] = {}
    for index in itertools.count():
        name = f"team-{index}"
        key = addressing.default_cidrs(name) if kind == "cidr" else addressing.default_node_ports(name, base)
        if key in seen:
            return seen[key], name
        seen[key] = name
    raise AssertionError("unreachable")


def _tcp_profiles(resources: list[Any]) -> dict[str, dict[str, Any]]:
    return {
        tcp.inputs["metadata"]["name"]: {
            "network": tcp.inputs["spec"]["networkProfile"],
            "konnectivity": tcp.inputs["spec"]["addons"]["konnectivity"]["server"]["port"],
        }
        for tcp in by_type(resources, TCP)
    }


@given(names)
def test_defaults_are_inside_their_supernets_and_clear_of_kind(name: str) -> None:
    pod, service = (ipaddress.ip_network(c) for c in addressing.default_cidrs(name))
    assert pod.subnet_of(addressing.POD_SUPERNET) and pod.prefixlen == addressing.POD_PREFIX
    assert service.subnet_of(addressing.SERVICE_SUPERNET) and service.prefixlen == addressing.SERVICE_PREFIX
    assert not any(pod.overlaps(r) or service.overlaps(r) for r in KIND_RESERVED)
    assert not pod.overlaps(ipaddress.ip_network("172.16.0.0/12"))


@given(names, st.integers(min_value=30000, max_value=32766))
def test_default_node_ports_stay_in_the_node_port_range(name: str, base: int) -> None:
    api, konnectivity = addressing.default_node_ports(name, base)
    assert base <= api and konnectivity == api + 1 <= addressing.NODE_PORT_MAX


def test_removing_or_reordering_a_tenant_changes_nothing_of_another() -> None:
    full = dev_config()
    before = _tcp_profiles(record_stack(full))
    without_a = copy.deepcopy(full)
    without_a["tenants"] = [t for t in full["tenants"] if t["name"] != "tenant-a"]
    reordered = copy.deepcopy(full)
    reordered["tenants"] = list(reversed(full["tenants"]))
    assert _tcp_profiles(record_stack(without_a))["tenant-b"] == before["tenant-b"]
    assert _tcp_profiles(record_stack(reordered)) == before


def test_removing_a_tenant_keeps_the_metallb_pool() -> None:
    # MetalLB hands out the lowest free address first (metallb internal/allocator/allocator.go), so the
    # first tenant holds the pool's lowest one; a pool that shrank from below would take it away.
    def pool(config: dict[str, Any]) -> list[str]:
        (resource,) = by_type(record_stack(config), "kubernetes:metallb.io/v1beta1:IPAddressPool")
        return resource.inputs["spec"]["addresses"]

    full = dev_config()
    fewer = copy.deepcopy(full)
    fewer["tenants"] = fewer["tenants"][1:]
    assert pool(fewer) == pool(full)


def test_removing_a_tenant_keeps_the_others_node_ports() -> None:
    config = nodeport_gpu_config()
    before = _tcp_profiles(record_stack(config, stack="gpu", node_register=registered_gpus(config)))
    config["tenants"] = config["tenants"][1:]
    after = _tcp_profiles(record_stack(config, stack="gpu", node_register=registered_gpus(config)))
    (kept,) = after
    assert after[kept] == before[kept]


def test_colliding_derived_cidrs_are_refused_naming_the_key() -> None:
    first, second = _colliding_names("cidr")
    config = dev_config()
    config["tenants"] = [{**config["tenants"][0], "name": first}, {**config["tenants"][1], "name": second}]
    with pytest.raises(ConfigError) as error:
        load_config(config)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("gpu-tenancy:tenants[1].podCidr: ")
    assert f"of tenant {second!r} collides with" in message and f"tenant {first!r}" in message
    assert "set tenants[1].podCidr explicitly" in message
    # Setting both ranges for the second tenant resolves it.
    config["tenants"][1] = {**config["tenants"][1], "podCidr": "10.60.0.0/16", "serviceCidr": "10.61.0.0/16"}
    load_config(config)


def test_a_derived_range_inside_another_tenants_explicit_one_is_refused() -> None:
    config = dev_config()
    pod_b, _ = addressing.default_cidrs("tenant-b")
    config["tenants"][0] = {**config["tenants"][0], "podCidr": str(ipaddress.ip_network(pod_b).supernet(4))}
    with pytest.raises(ConfigError, match=r"^gpu-tenancy:tenants\[1\]\.podCidr: .*\(derived from its name\)"):
        load_config(config)


def test_explicit_overlaps_are_left_to_the_policy_pack() -> None:
    config = dev_config()
    for tenant in config["tenants"]:
        tenant.update({"podCidr": "10.60.0.0/16", "serviceCidr": "10.61.0.0/16"})
    load_config(config)  # tenant-cidrs-disjoint reports it at preview, with its configurable level


def test_colliding_node_ports_are_refused_and_node_port_resolves_it() -> None:
    first, second = _colliding_names("ports")
    config = gpu_config()
    config["metallb"] = {"enabled": False}
    config["controlPlane"] = {"serviceType": "NodePort"}
    template_a, template_b = config["tenants"]
    config["tenants"] = [
        {**template_a, "name": first, "controlPlaneAddress": "10.20.0.2"},
        {**template_b, "name": second, "controlPlaneAddress": "10.20.0.3"},
    ]
    secrets = frozenset({"managementKubeconfig", "sshPrivateKey"})
    with pytest.raises(ConfigError, match=r"^gpu-tenancy:tenants\[1\]\.nodePort: .* set tenants\[1\]\.nodePort explicitly$"):
        load_config(config, secrets)
    config["tenants"][1]["nodePort"] = 30500
    parsed = load_config(config, secrets)
    assert parsed.control_plane_ports(parsed.tenants[1]) == (30500, 30501)
    # An explicit port that overlaps another tenant's pair is refused too: nothing else would catch it.
    config["tenants"][0]["nodePort"] = 30501
    with pytest.raises(ConfigError, match=r"tenants\[1\]\.nodePort: 30500-30501 \(set\) .* choose another tenants\[1\]\.nodePort$"):
        load_config(config, secrets)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c["tenants"][0].update(nodePort=30500), "tenants[0].nodePort: is only for mode 'real'"),
    ],
)
def test_node_port_belongs_to_real_node_port_stacks(mutate: Any, message: str) -> None:
    config = dev_config()
    mutate(config)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(config)


def test_node_port_needs_service_type_node_port() -> None:
    config = gpu_config()
    config["tenants"][0]["nodePort"] = 30500
    with pytest.raises(ConfigError, match=r"tenants\[0\]\.nodePort: is only used with controlPlane\.serviceType NodePort"):
        load_config(config, frozenset({"managementKubeconfig", "sshPrivateKey"}))


def _cidr(draw: st.DrawFn) -> str:
    """A block of 10.0.0.0/16 (or 2001:db8::/112): small spaces, so blocks often nest or coincide."""
    if draw(st.integers(0, 9)) == 0:
        prefix = draw(st.integers(112, 124))
        return str(ipaddress.ip_network((int(ipaddress.ip_address("2001:db8::")) + draw(st.integers(0, 0xFFFF)), prefix), strict=False))
    prefix = draw(st.integers(16, 26))
    return str(ipaddress.ip_network((int(ipaddress.ip_address("10.0.0.0")) + draw(st.integers(0, 0xFFFF)), prefix), strict=False))


@st.composite
def address_claims(draw: st.DrawFn) -> list[addressing.Claim]:
    claims = []
    for _ in range(draw(st.integers(0, 40))):
        tenant_index = draw(st.integers(0, 6))
        key = draw(st.sampled_from(["podCidr", "serviceCidr", "nodePort"]))
        if key == "nodePort":
            first = draw(st.integers(30000, 30030))
            value = f"{first}-{first + draw(st.integers(0, 3))}"
        else:
            value = _cidr(draw)
        claims.append(addressing.Claim(tenant_index, f"t{tenant_index}", key, value, draw(st.booleans())))
    return claims


@settings(max_examples=300)
@given(address_claims())
def test_collisions_match_the_pairwise_reference(claims: list[addressing.Claim]) -> None:
    """Same problems, same messages, same order as comparing every pair (tests/addressing_reference.py)."""
    assert addressing.collisions(claims) == addressing_reference.collisions(claims)


def test_a_collision_is_reported_against_the_earliest_claim_of_another_tenant() -> None:
    claims = [
        addressing.Claim(0, "a", "podCidr", "10.0.0.0/16", True),
        addressing.Claim(1, "b", "podCidr", "10.0.1.0/24", True),  # explicit inside explicit: the policy pack's
        addressing.Claim(2, "c", "podCidr", "10.0.0.0/8", False),
        addressing.Claim(2, "c", "nodePort", "30000-30001", False),
        addressing.Claim(3, "c", "serviceCidr", "10.0.1.128/25", False),  # tenant c again: a and b only
        addressing.Claim(4, "d", "nodePort", "30001-30002", True),
    ]
    assert addressing.collisions(claims) == [
        ("tenants[2].podCidr", "10.0.0.0/8 (derived from its name) of tenant 'c' collides with 10.0.0.0/16 of "
         "tenant 'a'; set tenants[2].podCidr explicitly"),
        ("tenants[3].serviceCidr", "10.0.1.128/25 (derived from its name) of tenant 'c' collides with "
         "10.0.0.0/16 of tenant 'a'; set tenants[3].serviceCidr explicitly"),
        ("tenants[2].nodePort", "30000-30001 (derived from its name) of tenant 'c' collides with 30001-30002 of "
         "tenant 'd'; set tenants[2].nodePort explicitly"),
    ]
