"""The mock-GPU agent's admission policy (gpu_tenancy/builders/mock_gpu_agent/agent_admission.py) keeps it to what
gpu_tenancy/hami/agent/kube.py writes, on pods and on its node, evaluated with a real CEL runtime
(tests/admission_cel.py): the patches it sends are admitted, every other change it could send is refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_cel import Request, denials
from test_agent_admission import AGENT, NODE, merge, pod

from gpu_tenancy.builders.mock_gpu_agent import agent_admission
from gpu_tenancy.hami.agent import decisions

DEVICES = [{"id": "GPU-0", "count": 10, "devmem": 24576, "devcore": 100, "type": "NVIDIA L4", "numa": 0,
            "health": True}]


def node(name: str = NODE) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"gpu-tenancy.io/gpu-node": "true"},
                     "annotations": {"hami.io/mutex.lock": "2026-12-06T03:00:00Z,workloads,a-infer-1",
                                     "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"podCIDR": "10.174.16.0/24"},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def node_update(old: dict[str, Any], new: dict[str, Any], subresource: str = "nodes") -> list[str]:
    return denials(agent_admission.policy_spec(AGENT, NODE), Request(subresource, "UPDATE", "", new, old=old, username=AGENT))


def pod_update(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return denials(agent_admission.policy_spec(AGENT, NODE), Request("pods", "UPDATE", "tenant-a", new, old=old, username=AGENT))


def test_the_agents_own_node_writes_are_admitted() -> None:
    old = node()
    annotation, status = decisions.node_patches(old, DEVICES)
    assert annotation is not None and status is not None
    assert node_update(old, merge(old, annotation)) == []
    assert node_update(old, merge(old, status), "nodes/status") == []
    # release_lock: a JSON patch that removes the lock (after testing its value).
    released = copy.deepcopy(old)
    del released["metadata"]["annotations"]["hami.io/mutex.lock"]
    assert node_update(old, released) == []


NODE_CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("a label", {"metadata": {"labels": {"gpu-tenancy.io/gpu-node": None}}}),
    ("a taint", {"spec": {"taints": [{"key": "x", "effect": "NoExecute"}]}}),
    ("unschedulable", {"spec": {"unschedulable": True}}),
    ("another annotation", {"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": "30"}}}),
    ("another capacity", {"status": {"capacity": {"cpu": "64"}}}),
    ("a condition", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    ("an owner", {"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
                                                    "uid": "00000000-0000-0000-0000-000000000000"}]}}),
    ("a finalizer", {"metadata": {"finalizers": ["example.com/keep"]}}),
]


@pytest.mark.parametrize(("case", "change"), NODE_CHANGES, ids=[c[0] for c in NODE_CHANGES])
def test_any_other_node_change_is_refused(case: str, change: dict[str, Any]) -> None:
    old = node()
    assert node_update(old, merge(old, change))
    assert node_update(old, merge(old, change), "nodes/status")


def test_another_node_is_refused() -> None:
    old = node("gpu-tenancy-dev-tenant-b-worker")
    annotation, _ = decisions.node_patches(old, DEVICES)
    assert annotation is not None and node_update(old, merge(old, annotation))


@pytest.mark.parametrize(
    "change",
    [{"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
                                        "uid": "00000000-0000-0000-0000-000000000000"}]}},
     {"metadata": {"finalizers": ["example.com/keep"]}}],
    ids=["owner-reference", "finalizer"],
)
def test_a_pod_gets_no_owner_or_finalizer(change: dict[str, Any]) -> None:
    """An owner that does not exist has the garbage collector delete the pod; a finalizer keeps it when deleted."""
    old = pod(**{"hami.io/bind-phase": "allocating"})
    new = merge(merge(old, decisions.success_patch()), change)
    assert pod_update(old, new) == ["the mock-GPU agent changes no ownerReferences or finalizers"]
