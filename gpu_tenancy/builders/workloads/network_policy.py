"""The workload namespace's NetworkPolicy: its pods talk to each other, resolve names through the tenant's DNS and
reach public addresses, but nothing else: not the other namespaces of their cluster, and no private address,
which is where every other tenant's nodes, API servers and services, the management cluster and the GPU hosts are
(kind's Docker network, MetalLB's pool, the lab network of real hosts, link-local metadata services).

Enforced by kindnetd, which every tenant runs (gpu_tenancy/builders/tenant_network; kindnetd at the pinned commit
evaluates NetworkPolicies with sigs.k8s.io/kube-network-policies, fail-open: images/kindnetd/cmd/kindnetd/main.go
`dataplane.Config{FailOpen: true}`).
"""

from __future__ import annotations

from typing import Any

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.workloads.workload_names import WORKLOAD_NAMESPACE

NAME = "workloads-isolation"
COMPONENT = "workloads-isolation"
# RFC 1918, RFC 6598 (carrier-grade NAT) and link-local (RFC 3927: cloud metadata services).
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
# kubeadm's CoreDNS labels, which Kamaji's coreDNS addon keeps.
DNS_PODS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}


def metadata(tenant: str) -> dict[str, Any]:
    return {"name": NAME, "namespace": WORKLOAD_NAMESPACE, "labels": kube_objects.labels(tenant, COMPONENT)}


def spec() -> dict[str, Any]:
    same_namespace: dict[str, Any] = {"podSelector": {}}
    return {
        "podSelector": {},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": [same_namespace]}],
        "egress": [
            {"to": [same_namespace]},
            {"to": [DNS_PODS], "ports": DNS_PORTS},
            {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(PRIVATE_RANGES)}}]},
        ],
    }
