"""The mock-GPU agent's pod rights, narrowed by its admission policy (gpu_tenancy/builders/mock_gpu_agent/agent_admission.py) to what
gpu_tenancy/hami/agent/kube.py does: set HAMi's bind phase on pods bound to its node. Evaluated with a real CEL
runtime as the API server evaluates a ValidatingAdmissionPolicy (tests/admission_cel.py)."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
from admission_cel import Request, denials
from harness import record_stack, unwrap

from gpu_tenancy.builders.mock_gpu_agent import agent_admission
from gpu_tenancy.hami.agent import decisions

AGENT = "system:serviceaccount:kube-system:tenant-a-mock-gpu-agent"
NODE = "gpu-tenancy-dev-tenant-a-worker"


def pod(node: str = NODE, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "a-infer-1", "namespace": "tenant-a", "labels": {"app": "a-infer"},
                     "annotations": {"hami.io/vgpu-node": node, **annotations}},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10.1"}]},
    }


def merge(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386), as the API server applies the agent's patch."""
    out = copy.deepcopy(obj)

    def apply(target: dict[str, Any], change: dict[str, Any]) -> None:
        for key, value in change.items():
            if value is None:
                target.pop(key, None)
            elif isinstance(value, dict) and isinstance(target.get(key), dict):
                apply(target[key], value)
            else:
                target[key] = copy.deepcopy(value)

    apply(out, patch)
    return out


def update(old: dict[str, Any], new: dict[str, Any], user: str = AGENT) -> list[str]:
    return denials(agent_admission.policy_spec(AGENT, NODE), Request("pods", "UPDATE", "tenant-a", new, old=old, username=user))


def test_the_agents_own_patch_is_admitted() -> None:
    old = pod(**{"hami.io/bind-phase": "allocating"})
    assert update(old, merge(old, decisions.success_patch())) == []


# (case, merge patch, why it is refused); tests/realcp/test_admission_identities.py sends the same patches to a
# real API server as the agent.
REFUSED_PATCHES: list[tuple[str, dict[str, Any], str]] = [
    ("another annotation", {"metadata": {"annotations": {"hami.io/vgpu-devices-allocated": "GPU-x,NVIDIA,81920,100:;"}}},
     "changes no annotation but hami.io/bind-phase"),
    ("an annotation removed", {"metadata": {"annotations": {"hami.io/vgpu-node": None}}}, "changes no annotation but"),
    ("a label", {"metadata": {"labels": {"app": "other"}}}, "changes no pod spec or label"),
    ("the spec", {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10.1",
                                           "env": [{"name": "X", "value": "1"}]}]}}, "changes no pod spec or label"),
    # One of the few spec fields a pod update may change at all (the API server refuses an env change itself).
    ("a deadline", {"spec": {"activeDeadlineSeconds": 60}}, "changes no pod spec or label"),
]


@pytest.mark.parametrize(("case", "change", "why"), REFUSED_PATCHES, ids=[c[0] for c in REFUSED_PATCHES])
def test_anything_else_it_would_patch_is_refused(case: str, change: dict[str, Any], why: str) -> None:
    old = pod()
    assert any(why in message for message in update(old, merge(old, change)))


def test_a_pod_on_another_node_is_refused() -> None:
    old = pod(node="gpu-tenancy-dev-tenant-b-worker")
    assert update(old, merge(old, decisions.success_patch())) == [
        f"the mock-GPU agent only updates pods bound to its node {NODE}"
    ]


def test_other_users_are_out_of_scope() -> None:
    old = pod()
    assert update(old, merge(old, {"metadata": {"labels": {"app": "x"}}}), user="kubernetes-admin") == []


def test_the_program_installs_it_before_the_agent_runs() -> None:
    resources = record_stack()
    policies = {r.name: unwrap(r.inputs) for r in resources if r.typ.endswith("v1:ValidatingAdmissionPolicy")}
    spec = policies["tenant-a-mock-gpu-agent-pod-policy"]["spec"]
    assert spec == agent_admission.policy_spec(AGENT, NODE)
    kubernetes_validate.validate({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                                  "metadata": {"name": "x"}, "spec": spec}, "1.35.0", strict=True)


def test_a_node_write_beyond_its_registration_is_refused_in_words_naming_what_it_may_write() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "annotations": {}},
            "spec": {}, "status": {"capacity": {"nvidia.com/gpu": "10"}}}
    changed = merge(node, {"metadata": {"labels": {"gpu": "yes"}}})
    message = ("the mock-GPU agent changes only its node gpu-tenancy-dev-tenant-a-worker's hami.io/node-nvidia-register, "
               "hami.io/mutex.lock annotations and nvidia.com/gpu capacity")
    assert denials(agent_admission.policy_spec(AGENT, NODE), Request("nodes", "UPDATE", "", changed, old=node,
                                                                      username=AGENT)) == [message]
