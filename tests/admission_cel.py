"""Evaluate a ValidatingAdmissionPolicy the way the API server does, with a real CEL runtime.

Follows kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating (`validator.go`
`Validate`) and .../policy/matching (`matching.go`): a request is in scope when its resource and operation
match `matchConstraints.resourceRules` and its namespace's labels match `namespaceSelector`; then
`matchConditions` must all be true, `variables` are computed in order (each sees the earlier ones as
`variables.<name>`), and every `validations[].expression` must be true, else the request is denied with
that validation's message. CEL itself is cel-expr-python (the cel-cpp runtime); the expressions use only
standard CEL, which the API server's cel-go evaluates the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel

_ENV = cel.NewEnv(
    variables={
        name: cel.Type.DYN for name in ("object", "oldObject", "request", "variables", "namespaceObject", "params")
    }
)


def evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    """The expression's value; an evaluation error comes back as its text (check with `evaluation_error`)."""
    keys = ("object", "oldObject", "request", "variables", "namespaceObject", "params")
    return _ENV.compile(expression).eval(data={key: activation.get(key) for key in keys}).plain_value()


def evaluation_error(expression: str, activation: Mapping[str, Any]) -> str | None:
    """The error evaluating the expression fails with (a missing key, a type mismatch), None if it has a value."""
    keys = ("object", "oldObject", "request", "variables", "namespaceObject", "params")
    value = _ENV.compile(expression).eval(data={key: activation.get(key) for key in keys})
    return str(value.plain_value()) if value.type() == cel.Type.ERROR else None


# The API group each resource the tests send is served in (kubectl api-resources); a resource not listed here
# must name its group.
RESOURCE_GROUPS = {"pods": "", "services": "", "nodes": "", "namespaces": "", "configmaps": "", "secrets": "",
                   "networkpolicies": "networking.k8s.io", "runtimeclasses": "node.k8s.io",
                   "deployments": "apps", "daemonsets": "apps"}


@dataclass
class Request:
    """An admission request: the resource (`pods`, `pods/ephemeralcontainers`), operation, objects; the group
    and version the request names (the group by default the one RESOURCE_GROUPS serves the resource in)."""

    resource: str
    operation: str
    namespace: str
    obj: dict[str, Any] | None
    old: dict[str, Any] | None = None
    username: str = "kubernetes-admin"
    extra: dict[str, list[str]] = field(default_factory=dict)
    namespace_labels: dict[str, str] | None = None
    # The binding's parameter object (`paramRef`), e.g. a ConfigMap; None when the policy takes none.
    params: dict[str, Any] | None = None
    group: str | None = None
    version: str = "v1"

    @property
    def api_group(self) -> str:
        if self.group is not None:
            return self.group
        return RESOURCE_GROUPS[self.resource.split("/")[0]]


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _exact_or_wildcard(items: list[str], requested: str) -> bool:
    return "*" in items or requested in items


def rule_matches(rule: Mapping[str, Any], request: Request) -> bool:
    """kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go `Matcher`:
    the operation, group and version each listed or `*`; the resource (with its subresource) listed."""
    return (_exact_or_wildcard(rule.get("operations") or [], request.operation)
            and _exact_or_wildcard(rule.get("apiGroups") or [], request.api_group)
            and _exact_or_wildcard(rule.get("apiVersions") or [], request.version)
            and request.resource in (rule.get("resources") or []))


def in_scope(spec: Mapping[str, Any], request: Request) -> bool:
    constraints = spec.get("matchConstraints") or {}
    if not any(rule_matches(rule, request) for rule in constraints.get("resourceRules") or []):
        return False
    labels = request.namespace_labels or {"kubernetes.io/metadata.name": request.namespace}
    return _selector_matches(constraints.get("namespaceSelector") or {}, labels)


def denials(spec: Mapping[str, Any], request: Request) -> list[str]:
    """The messages of every validation that fails (empty: admitted, or not in the policy's scope)."""
    return [v["message"] for v in failed_validations(spec, request)]


def failed_validations(spec: Mapping[str, Any], request: Request) -> list[Mapping[str, Any]]:
    """Every validation that fails, as written in the spec (empty: admitted, or not in the policy's scope).

    An expression that cannot be evaluated (a missing key, the CEL cost budget spent) is decided by the
    policy's failurePolicy (default Fail), as kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/
    policy/validating/validator.go `Validate` (`policyDecisionActionForError`) and .../policy/matchconditions/
    matcher.go `Match` decide it: Fail refuses (a validation's error in its place, worded
    `expression '<expr>' resulted in error: ...`, without a reason), Ignore admits."""
    if not in_scope(spec, request):
        return []
    activation: dict[str, Any] = {
        "object": request.obj,
        "oldObject": request.old,
        "request": {
            "operation": request.operation,
            "namespace": request.namespace,
            "userInfo": {"username": request.username, "extra": request.extra},
        },
        "variables": {},
        "params": request.params,
    }
    fail = spec.get("failurePolicy", "Fail") != "Ignore"
    for condition in spec.get("matchConditions") or []:
        error = evaluation_error(condition["expression"], activation)
        if error is not None:
            return [{"message": f"failed to evaluate match condition {condition['name']}: {error}"}] if fail else []
        if evaluate(condition["expression"], activation) is not True:
            return []
    for variable in spec.get("variables") or []:
        activation["variables"] = {**activation["variables"], variable["name"]: evaluate(variable["expression"], activation)}
    failed: list[Mapping[str, Any]] = []
    for validation in spec.get("validations") or []:
        error = evaluation_error(validation["expression"], activation)
        if error is not None:
            if fail:
                failed.append({"message": f"expression '{validation['expression']}' resulted in error: {error}"})
        elif evaluate(validation["expression"], activation) is not True:
            failed.append(validation)
    return failed


def binding_denials(
    spec: Mapping[str, Any], binding: Mapping[str, Any], request: Request, params_found: bool = True
) -> list[str]:
    """What a request meets through a binding: the messages that reject it (empty: admitted, warned or audited).

    Follows kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_dispatcher.go
    (`CollectParams`: a binding whose `paramRef` finds no object fails with `parameterNotFoundAction: Deny`, a
    configuration error the policy's failurePolicy turns into a rejection, worded as
    .../policy/validating/dispatcher.go `addConfigError` words it; with `Allow` there is nothing to evaluate) and
    .../policy/validating/dispatcher.go (a failed validation rejects only under `validationActions: [Deny]`;
    `Warn` and `Audit` admit the request). A real API server (tests/realcp/test_admission.py) agrees, at v0.36.3.
    """
    if not in_scope(spec, request):
        return []
    # A policy without paramKind ignores its binding's paramRef (the same file: "If definition has no paramKind,
    # paramRef set in binding will be ignored"), e.g. a binding from before its policy dropped parameters.
    param_ref = binding.get("paramRef") if spec.get("paramKind") is not None else None
    if param_ref is not None and not params_found:
        if param_ref.get("parameterNotFoundAction") == "Deny" and spec.get("failurePolicy", "Fail") == "Fail":
            return ["failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"]
        return []
    failed = denials(spec, request)
    return failed if "Deny" in (binding.get("validationActions") or []) else []


def reason_code(reason: str | None) -> int:
    """The HTTP status of a refusal by a validation with this `reason` (kubernetes staging/src/k8s.io/apiserver/
    pkg/admission/plugin/policy/validating/dispatcher.go `reasonToCode`; no reason: Invalid, 422)."""
    return {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}.get(reason or "Invalid", 422)


def denial_codes(spec: Mapping[str, Any], request: Request) -> list[int]:
    """The HTTP status of each validation that refuses the request (as `denials`, in order)."""
    return [reason_code(v.get("reason")) for v in failed_validations(spec, request)]


# What the API server accepts in these fields (kubernetes pkg/apis/admissionregistration/validation/validation.go:
# supportedFailurePolicies, supportedOperations, supportedReinvocationPolicies, supportedValidationPolicyReason,
# supportedValidationActions, the patch types of a mutation); anything else is refused when the object is created.
ACCEPTED = {
    "failurePolicy": {"Fail", "Ignore"},
    "reinvocationPolicy": {"Never", "IfNeeded"},
    "operations": {"*", "CREATE", "UPDATE", "DELETE", "CONNECT"},
    "reason": {"Forbidden", "Invalid", "RequestEntityTooLarge"},
    "validationActions": {"Deny", "Warn", "Audit"},
    "patchType": {"ApplyConfiguration", "JSONPatch"},
}


def spec_errors(spec: Mapping[str, Any], binding: Mapping[str, Any] | None = None) -> list[str]:
    """The values of a policy (and its binding) that the API server refuses; empty when it accepts them."""
    found: list[tuple[str, Any]] = [(key, spec[key]) for key in ("failurePolicy", "reinvocationPolicy") if key in spec]
    for rule in (spec.get("matchConstraints") or {}).get("resourceRules") or []:
        found += [("operations", op) for op in rule.get("operations") or []]
    found += [("reason", v["reason"]) for v in spec.get("validations") or [] if "reason" in v]
    found += [("patchType", m.get("patchType")) for m in spec.get("mutations") or []]
    if binding is not None:
        found += [("validationActions", a) for a in binding.get("validationActions") or []]
    return [f"{key}: {value!r}" for key, value in found if value not in ACCEPTED[key]]
