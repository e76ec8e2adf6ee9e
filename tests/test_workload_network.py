"""The workload namespace's network: what its NetworkPolicy lets through (evaluated here by the rules of
networking.k8s.io/v1, written out below, not by the builder), that the program installs it before any pod, and
that a tenant user cannot change it (the user identity's admission policy, a real CEL runtime: tests/admission_cel.py).
"""

from __future__ import annotations

import ipaddress
from typing import Any

import kubernetes_validate
import pytest
from admission_cel import Request, denials
from harness import unwrap
from policy_support import dev_stack, find, gpu_stack, record_engine_view
from test_tenant_access import with_user_access

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
USER = "system:serviceaccount:workloads:tenant-user"


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_allows(peer: dict[str, Any], policy_namespace: str, peer_pod: dict[str, Any] | None, ip: str) -> bool:
    """NetworkPolicyPeer: podSelector alone = pods of the policy's namespace; with namespaceSelector = pods of the
    selected namespaces; ipBlock = addresses in cidr but not in except (and, per the API, not pods' own IPs)."""
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        address = ipaddress.ip_address(ip)
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(e) for e in block.get("except") or [])
    if peer_pod is None:
        return False
    if "namespaceSelector" in peer:
        in_namespace = _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": peer_pod["namespace"]})
    else:
        in_namespace = peer_pod["namespace"] == policy_namespace
    return in_namespace and _selects(peer.get("podSelector") or {}, peer_pod["labels"])


def _rule_allows(rule: dict[str, Any], key: str, namespace: str, peer: dict[str, Any] | None, ip: str,
                 port: tuple[str, int]) -> bool:
    ports = rule.get("ports")
    port_ok = not ports or any((p.get("protocol", "TCP"), p.get("port")) == port for p in ports)
    peers = rule.get(key)
    return port_ok and (not peers or any(_peer_allows(p, namespace, peer, ip) for p in peers))


def egress_allowed(policy: dict[str, Any], to_pod: dict[str, Any] | None, ip: str, port: tuple[str, int]) -> bool:
    spec, namespace = policy["spec"], policy["metadata"]["namespace"]
    return any(_rule_allows(r, "to", namespace, to_pod, ip, port) for r in spec.get("egress") or [])


def ingress_allowed(policy: dict[str, Any], from_pod: dict[str, Any] | None, ip: str) -> bool:
    spec, namespace = policy["spec"], policy["metadata"]["namespace"]
    return any(_rule_allows(r, "from", namespace, from_pod, ip, ("TCP", 8080)) for r in spec.get("ingress") or [])


@pytest.fixture(params=["dev", "gpu"])
def policy(request: pytest.FixtureRequest) -> dict[str, Any]:
    stack = dev_stack() if request.param == "dev" else gpu_stack()
    return unwrap(find(stack, NETWORK_POLICY, "tenant-a-workloads-isolation").inputs)


def test_it_covers_every_pod_of_the_namespace_both_ways(policy: dict[str, Any]) -> None:
    assert policy["metadata"]["namespace"] == "workloads"
    assert policy["spec"]["podSelector"] == {}
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]


WORKLOAD = {"namespace": "workloads", "labels": {"gpu-tenancy.io/workload": "a-infer"}}
KUBE_DNS = {"namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}}
HAMI = {"namespace": "kube-system", "labels": {"app.kubernetes.io/component": "hami-scheduler"}}


@pytest.mark.parametrize(
    ("what", "pod", "ip", "port", "allowed"),
    [
        ("a pod of the namespace", WORKLOAD, "10.174.16.9", ("TCP", 8080), True),
        ("the tenant's DNS", KUBE_DNS, "10.174.16.2", ("UDP", 53), True),
        ("the DNS pods on another port", KUBE_DNS, "10.174.16.2", ("TCP", 9153), False),
        ("HAMi's scheduler", HAMI, "10.174.16.3", ("TCP", 443), False),
        ("kind's Docker network (nodes, MetalLB's API servers)", None, "172.18.0.4", ("TCP", 6443), False),
        ("a lab network (GPU hosts, the management cluster)", None, "10.20.0.11", ("TCP", 10250), False),
        ("another tenant's pod range", None, "10.128.0.5", ("TCP", 80), False),
        ("a home-lab network", None, "192.168.1.10", ("TCP", 22), False),
        ("a cloud metadata service", None, "169.254.169.254", ("TCP", 80), False),
        ("carrier-grade NAT space", None, "100.64.0.1", ("TCP", 80), False),
        ("a public address", None, "140.82.112.3", ("TCP", 443), True),
    ],
)
def test_egress(policy: dict[str, Any], what: str, pod: dict[str, Any] | None, ip: str, port: tuple[str, int],
                allowed: bool) -> None:
    assert egress_allowed(policy, pod, ip, port) is allowed


@pytest.mark.parametrize(
    ("what", "pod", "ip", "allowed"),
    [("a pod of the namespace", WORKLOAD, "10.174.16.9", True),
     ("a pod of another namespace", {"namespace": "default", "labels": {}}, "10.174.16.10", False),
     ("an address outside the cluster", None, "172.18.0.9", False)],
)
def test_ingress(policy: dict[str, Any], what: str, pod: dict[str, Any] | None, ip: str, allowed: bool) -> None:
    assert ingress_allowed(policy, pod, ip) is allowed


def test_it_is_valid_and_in_place_before_any_pod() -> None:
    stack = dev_stack()
    policy = find(stack, NETWORK_POLICY, "tenant-a-workloads-isolation")
    kubernetes_validate.validate(unwrap(policy.inputs), "1.35.0", strict=True)
    deployment = find(stack, "kubernetes:apps/v1:Deployment", "tenant-a-workloads-a-infer")
    assert policy.urn in deployment.dependencies


def _user_policy() -> dict[str, Any]:
    stack = record_engine_view(with_user_access())
    return unwrap(find(stack, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
                       "tenant-a-user-access-services-policy").inputs)["spec"]


def network_policy(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "allow-all", "namespace": "workloads"},
            "spec": spec or {"podSelector": {}, "egress": [{}], "ingress": [{}]}}


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "DELETE"])
def test_a_tenant_user_cannot_touch_the_namespaces_network_policies(operation: str) -> None:
    spec = _user_policy()
    obj = None if operation == "DELETE" else network_policy()
    old = None if operation == "CREATE" else network_policy()
    request = Request("networkpolicies", operation, "workloads", obj, old=old, username=USER)
    assert denials(spec, request) == ["the namespace's NetworkPolicies are the platform's: tenant users write none"]
    admin = Request("networkpolicies", operation, "workloads", obj, old=old)
    assert denials(spec, admin) == []
