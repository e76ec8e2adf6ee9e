"""`known-types` (policies/allowlist_policies.py KNOWN_TYPES): exactly the types the program registers in some
configuration, each example stack and one with every optional part on (a dedicated etcd, user access, the
ServiceMonitors), plus the default providers the engine registers for a package used without an explicit one.
An entry missing refuses the program's own resources; an entry too many lets a type no policy reads through."""

from __future__ import annotations

import policy_support
from harness import dev_config
from policy_support import EXAMPLE_STACKS, Recorded, record_engine_view

import allowlist_policies  # isort: skip


def _everything_on() -> list[Recorded]:
    config = dev_config()
    config["tenants"][0]["userAccess"] = True
    config["tenants"][1]["dataStore"] = "dedicated"
    config["datastore"] = {"volumeMiB": 4096}
    config["metrics"] = {"serviceMonitors": True, "labels": {"release": "kube-prometheus-stack"}}
    return policy_support._once(("every optional part",), lambda: record_engine_view(config))


def _default_providers(resources: list[Recorded]) -> set[str]:
    # A custom resource registered with no provider gets the engine's default provider for its package, of type
    # pulumi:providers:<package> (pulumi/pulumi pkg/resource/deploy/providers/registry.go, default providers).
    return {f"pulumi:providers:{r.type.split(':', 1)[0]}" for r in resources
            if r.custom and not r.provider and not r.type.startswith("pulumi:providers:")}


def test_the_known_types_are_the_types_the_program_registers() -> None:
    stacks = [_everything_on()] + [record(unknowns) for record in EXAMPLE_STACKS.values() for unknowns in (False, True)]
    registered = {r.type for resources in stacks for r in resources}
    defaults = set().union(*(_default_providers(resources) for resources in stacks))
    assert registered | defaults == allowlist_policies.KNOWN_TYPES
    # What each optional part adds, so that a configuration losing one is noticed here rather than as a shorter set.
    assert {"gpu-tenancy:tenant_access:TenantAccess", "gpu-tenancy:tenant_datastore:TenantDataStore",
            "kubernetes:cert-manager.io/v1:ClusterIssuer", "kubernetes:monitoring.coreos.com/v1:ServiceMonitor",
            "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"} <= {r.type for r in _everything_on()}
    assert defaults == {"pulumi:providers:command", "pulumi:providers:docker"}
