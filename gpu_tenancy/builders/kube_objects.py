"""Labels, YAML and Pulumi annotations every component's Kubernetes objects share."""

from __future__ import annotations

import json
from typing import Any

import yaml

TENANT_LABEL = "gpu-tenancy.io/tenant"


COMPONENT_LABEL = "gpu-tenancy.io/component"


GPU_NODE_LABEL = "gpu-tenancy.io/gpu-node"


# libyaml's dumper when PyYAML has it (the wheels do): same output, several times faster per tenant.
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def to_yaml(document: Any) -> str:
    return yaml.dump(document, Dumper=_YAML_DUMPER, sort_keys=False)


# pulumi-kubernetes deletes in the foreground by default and waits until the object is gone
# (provider/pkg/await/await.go Deletion, metadata.DeletionPropagation); pods on a node whose kubelet is
# already dead are never finalised, so a DaemonSet on the node would hold `destroy` until its timeout.
BACKGROUND_DELETION = {"pulumi.com/deletionPropagationPolicy": "background"}


# Not awaited, on create or delete (pulumi-kubernetes metadata/overrides.go: on delete only for Namespace,
# Pod, ReplicationController, DaemonSet, Deployment, StatefulSet and Job).
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


def labels(tenant: str, component: str) -> dict[str, str]:
    return {TENANT_LABEL: tenant, COMPONENT_LABEL: component}


def gpu_node_labels(tenant: str) -> dict[str, str]:
    """Labels every worker joins with: HAMi's device plugin selector, the agent's, the tenant."""
    return {"gpu": "on", GPU_NODE_LABEL: "true", TENANT_LABEL: tenant}


def wait_for(*conditions: str, timeout_seconds: int = 900) -> dict[str, str]:
    """pulumi-kubernetes await annotations (`pulumi.com/waitFor`, since v4.18)."""
    return {
        "pulumi.com/waitFor": json.dumps(list(conditions)),
        "pulumi.com/timeoutSeconds": str(timeout_seconds),
    }


def match_constraints(rules: list[dict[str, Any]], namespace_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    """An admission policy's `matchConstraints` with every field the API server defaults spelt out. The struct is
    atomic (k8s.io/api admissionregistration/v1 MatchResources `+structType=atomic`), so a default left out makes
    each server-side apply replace the stored struct and rewrite the object (kubernetes pkg/apis/
    admissionregistration/v1/defaults.go `SetDefaults_MatchResources`, `SetDefaults_Rule`)."""
    return {
        "namespaceSelector": namespace_selector or {},
        "objectSelector": {},
        "matchPolicy": "Equivalent",
        "resourceRules": [{**rule, "scope": "*"} for rule in rules],
    }
