"""What the mock-GPU agent (mode sim) may write: HAMi's bind phase on the pods bound to its node, and its own
node's register annotation, node lock and GPU capacity.

RBAC cannot say "pods on this node" or "this annotation": the agent's ClusterRole has to grant `patch` on
every pod (components/mock_gpu_agent.py). A ValidatingAdmissionPolicy narrows it to what the agent does
(gpu_tenancy/hami/agent/kube.py `apply_pod_action`: a merge patch of `hami.io/bind-phase` on a pod it listed
with `spec.nodeName=<its node>`): for requests by its service account, an update must keep the pod's spec
and labels, change no annotation but the bind phase, and concern a pod on its node. On its node (`patch_node`,
`patch_node_status`, `release_lock`) it changes only the register annotation, the node lock and the GPU count in
the status capacity; on neither does it touch ownerReferences or finalizers.
"""

from __future__ import annotations

from typing import Any

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.hami import protocol as hami

BIND_PHASE = hami.BIND_PHASE_ANNOTATION


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def _unchanged_but(keys: tuple[str, ...]) -> str:
    """CEL: the annotations stay as they were, but for `keys`."""
    others = "variables.{side}.filter(k, !(k in [" + ", ".join(f"'{k}'" for k in keys) + "]))"
    return (others.format(side="new") + ".all(k, k in variables.old && variables.old[k] == variables.new[k]) && "
            + others.format(side="old") + ".all(k, k in variables.new)")


def _same(field: str) -> str:
    """CEL: a metadata list (ownerReferences, finalizers) stays as it was."""
    return (f"(has(object.metadata.{field}) ? object.metadata.{field} : []) == "
            f"(has(oldObject.metadata.{field}) ? oldObject.metadata.{field} : [])")


# What the agent writes on its node (decisions.node_patches, kube.py `release_lock`): the register annotation,
# the node lock's removal, and the GPU count in the node's status capacity.
NODE_ANNOTATIONS = (hami.NODE_REGISTER_ANNOTATION, hami.NODE_LOCK_ANNOTATION)


def policy_spec(username: str, node_name: str) -> dict[str, Any]:
    """admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy spec for one agent (one node)."""
    labels = ("(has(object.metadata.labels) ? object.metadata.labels : {}) == "
              "(has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})")
    status = ("(has(object.status) ? object.status : {}).filter(k, k != 'capacity').all(k, has(oldObject.status) && "
              "k in oldObject.status && oldObject.status[k] == object.status[k]) && "
              "(has(oldObject.status) ? oldObject.status : {}).filter(k, k != 'capacity').all(k, has(object.status) "
              "&& k in object.status) && "
              "(has(object.status.capacity) ? object.status.capacity : {}).filter(k, k != '" + hami.RESOURCE_GPU
              + "').all(k, has(oldObject.status.capacity) && k in oldObject.status.capacity && "
              "oldObject.status.capacity[k] == object.status.capacity[k])")
    return {
        "failurePolicy": "Fail",
        "matchConstraints": kube_objects.match_constraints(
            [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
              "resources": ["pods", "nodes", "nodes/status"]}]
        ),
        "matchConditions": [{"name": "the-agent", "expression": f"request.userInfo.username == '{username}'"}],
        "variables": [
            {"name": "pod", "expression": "object.kind == 'Pod'"},
            {"name": "new", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
            {"name": "old", "expression": "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
        ],
        "validations": [
            {
                "expression": f"!variables.pod || (has(object.spec.nodeName) && object.spec.nodeName == '{node_name}')",
                "message": f"the mock-GPU agent only updates pods bound to its node {node_name}",
                "reason": "Forbidden",
            },
            {
                "expression": f"!variables.pod || (object.spec == oldObject.spec && {labels})",
                "message": "the mock-GPU agent changes no pod spec or label",
                "reason": "Forbidden",
            },
            {
                "expression": f"!variables.pod || ({_unchanged_but((BIND_PHASE,))})",
                "message": f"the mock-GPU agent changes no annotation but {BIND_PHASE}",
                "reason": "Forbidden",
            },
            {
                # An owner reference to an object that does not exist has the garbage collector delete the pod;
                # a finalizer keeps a deleted one.
                "expression": f"{_same('ownerReferences')} && {_same('finalizers')}",
                "message": "the mock-GPU agent changes no ownerReferences or finalizers",
                "reason": "Forbidden",
            },
            {
                "expression": f"variables.pod || (object.metadata.name == '{node_name}' && "
                f"object.spec == oldObject.spec && {labels} && {_unchanged_but(NODE_ANNOTATIONS)} && {status})",
                "message": f"the mock-GPU agent changes only its node {node_name}'s "
                f"{', '.join(NODE_ANNOTATIONS)} annotations and {hami.RESOURCE_GPU} capacity",
                "reason": "Forbidden",
            },
        ],
    }


def binding_spec(policy_name: str) -> dict[str, Any]:
    return {"policyName": policy_name, "validationActions": ["Deny"]}
