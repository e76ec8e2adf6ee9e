"""The gpu-tenancy policies: tenant isolation and safe GPU use, checked at `pulumi preview`.

Every policy has a stable name, a description that says what to change, a default enforcement level
(mandatory unless noted) and, where it has a tunable, a config schema. Per stack, any of them can be
overridden with `pulumi preview --policy-pack policies --policy-pack-config <file.json>`, e.g.
``{"gpu-plan-fits": "advisory", "tenant-cidrs-disjoint": {"reservedCidrs": []}}``.

Resource policies see a resource's inputs; stack policies see every resource's outputs (for a component:
what it passed to register_outputs), its provider and its parent chain. Values unknown during preview
are skipped, never touched raw (see value_lib.plain), so a first preview does not crash a policy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from allowlist_policies import field_allowlist, known_types, known_types_in_stack, type_allowances
from control_plane_policies import tcp_dedicated_namespace, tcp_konnectivity_enabled
from controls_policies import controls_present, installed_controls, rbac_contained
from data_plane_policies import tenant_cidrs_disjoint, worker_joins_own_tenant
from gpu_policies import gpu_requests_fractional, no_mock_gpus_in_real
from identity_policies import attributed_by_identity
from pinning_policies import charts_pinned, images_pinned, tcp_version_pinned
from plan_policies import gpu_plan_fits, gpu_plan_order
from provider_policies import DEFAULT_MANAGEMENT_COMPONENTS, tenant_provider_isolation
from pulumi_policy import Policy, ReportViolation
from resource_lib import TCP_TYPE, TENANT_TYPE
from tenancy_lib import COMPONENT_LABEL
from workload_policies import workload_safety

__all__ = [
    "ALL_POLICIES",
    "COMPONENT_LABEL",
    "DEFAULT_MANAGEMENT_COMPONENTS",
    "POLICIES_BY_NAME",
    "TCP_TYPE",
    "TENANT_TYPE",
    "attributed_by_identity",
    "charts_pinned",
    "controls_present",
    "field_allowlist",
    "gpu_plan_fits",
    "gpu_plan_order",
    "gpu_requests_fractional",
    "images_pinned",
    "installed_controls",
    "known_types",
    "known_types_in_stack",
    "no_mock_gpus_in_real",
    "rbac_contained",
    "tcp_dedicated_namespace",
    "tcp_konnectivity_enabled",
    "tcp_version_pinned",
    "tenant_cidrs_disjoint",
    "tenant_provider_isolation",
    "type_allowances",
    "worker_joins_own_tenant",
    "workload_safety",
]

ALL_POLICIES: list[Policy] = [
    known_types,
    known_types_in_stack,
    type_allowances,
    field_allowlist,
    attributed_by_identity,
    installed_controls,
    controls_present,
    rbac_contained,
    tenant_provider_isolation,
    tcp_konnectivity_enabled,
    tcp_dedicated_namespace,
    tcp_version_pinned,
    images_pinned,
    charts_pinned,
    gpu_requests_fractional,
    tenant_cidrs_disjoint,
    worker_joins_own_tenant,
    no_mock_gpus_in_real,
    workload_safety,
    gpu_plan_fits,
    gpu_plan_order,
]

POLICIES_BY_NAME: dict[str, Policy] = {p.name: p for p in ALL_POLICIES}

Validate = Callable[[Any, ReportViolation], None]
