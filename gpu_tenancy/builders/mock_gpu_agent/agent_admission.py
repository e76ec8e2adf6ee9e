"""What the mock-GPU agent (mode sim) may do to pods: set HAMi's bind phase on the pods bound to its node.

RBAC cannot say "pods on this node" or "this annotation": the agent's ClusterRole has to grant `patch` on
every pod (components/mock_gpu_agent.py). A ValidatingAdmissionPolicy narrows it to what the agent does
(gpu_tenancy/hami/agent/kube.py `apply_pod_action`: a merge patch of `hami.io/bind-phase` on a pod it listed
with `spec.nodeName=<its node>`): for requests by its service account, an update must keep the pod's spec
and labels, change no annotation but the bind phase, and concern a pod on its node.
"""

from __future__ import annotations

from typing import Any

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.hami import protocol as hami

BIND_PHASE = hami.BIND_PHASE_ANNOTATION


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def policy_spec(username: str, node_name: str) -> dict[str, Any]:
    """admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy spec for one agent (one node)."""
    others = "variables.{side}.filter(k, k != '" + BIND_PHASE + "')"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": kube_objects.match_constraints(
            [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}]
        ),
        "matchConditions": [{"name": "the-agent", "expression": f"request.userInfo.username == '{username}'"}],
        "variables": [
            {"name": "new", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
            {"name": "old", "expression": "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
        ],
        "validations": [
            {
                "expression": f"has(object.spec.nodeName) && object.spec.nodeName == '{node_name}'",
                "message": f"the mock-GPU agent only updates pods bound to its node {node_name}",
                "reason": "Forbidden",
            },
            {
                "expression": "object.spec == oldObject.spec && "
                "(has(object.metadata.labels) ? object.metadata.labels : {}) == "
                "(has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})",
                "message": "the mock-GPU agent changes no pod spec or label",
                "reason": "Forbidden",
            },
            {
                "expression": others.format(side="new") + ".all(k, k in variables.old && variables.old[k] == "
                "variables.new[k]) && " + others.format(side="old") + ".all(k, k in variables.new)",
                "message": f"the mock-GPU agent changes no annotation but {BIND_PHASE}",
                "reason": "Forbidden",
            },
        ],
    }


def binding_spec(policy_name: str) -> dict[str, Any]:
    return {"policyName": policy_name, "validationActions": ["Deny"]}
