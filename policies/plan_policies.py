"""Plans that fit: every replica of a tenant's declared workloads fits its GPUs and quota whatever order
Kubernetes and HAMi take (`gpu-plan-fits`), and the replicas whose fit depends on that order (`gpu-plan-order`).

Part of the gpu-tenancy policy pack (tenant_policies.ALL_POLICIES lists every policy).
"""

from __future__ import annotations

from typing import Any

from gpu_lib import planner_inputs, stack_config, stack_device_layer
from pod_lib import containers, pod_spec
from policy_common import ADVISORY, MANDATORY
from pulumi_policy import ReportViolation, StackValidationArgs, StackValidationPolicy
from resource_lib import HELM_RELEASE_TYPE, TENANT_TYPE, Res, from_policy_resources
from tenancy_lib import ancestor_tenant, tenant_component_name
from value_lib import as_dict, as_list, contains_unknown, dig, quantity

DEFAULT_SPLIT_COUNT = 10


def _declaration(tenant_res: Res) -> dict[str, Any] | None:
    """A tenant's gpus by node, workloads and quota, from its Tenant outputs or else the stack config; None when
    neither has them.

    `nodes` is [(node name, GPU groups, each card's NUMA node or None, pods left for workloads)] as the cluster
    will name its GPU nodes (gpu_tenancy.builders.gpu_nodes)."""
    props = tenant_res.props
    if isinstance(props.get("gpuNodes"), list) and not contains_unknown(
        [props.get("gpuNodes"), props.get("workloads"), props.get("quota")]
    ):
        return {
            "nodes": [
                (str(n["name"]), as_list(n.get("gpus")), n.get("numa"), n.get("maxPods"))
                for n in props["gpuNodes"] if isinstance(n, dict)
            ],
            "workloads": as_list(props.get("workloads")),
            "quota": as_dict(props.get("quota")),
            "ordered": props.get("orderedWorkloads") is True,
        }
    # The engine's stack view of a component is what it passed to register_outputs; until the Tenant
    # registers its declaration there, fall back to the stack config the engine hands to the pack.
    name = tenant_component_name(tenant_res)
    for tenant in as_list(stack_config("tenants")):
        if isinstance(tenant, dict) and tenant.get("name") == name and isinstance(tenant.get("gpus"), list):
            return {
                "nodes": _stack_config_nodes(tenant),
                "workloads": as_list(tenant.get("workloads")),
                "quota": as_dict(tenant.get("quota")),
                "ordered": stack_config("orderedWorkloads") is True,
            }
    return None


def _stack_config_nodes(tenant: dict[str, Any]) -> list[tuple[str, list[Any], Any, int | None]]:
    """A tenant's GPU nodes from its stack config: a host each (real; a tenant's only host has its gpus), or
    its one worker container (sim, sim-nvml). A tenant's only node is named in no verdict (`planner_inputs`
    keys its cards by the tenant), so the worker container's name is left out of the fallback. NUMA nodes
    are known where the mock-GPU agent registers the cards (NUMA 0) or a host declares them."""
    from gpu_tenancy.builders.gpu_nodes import workload_pods_per_node

    layer = stack_device_layer()
    max_pods = workload_pods_per_node(layer.registrar) if layer else None
    workers = [w for w in as_list(tenant.get("workers")) if isinstance(w, dict)]
    if len(workers) == 1:
        return [(str(workers[0].get("name")), as_list(workers[0].get("gpus") or tenant["gpus"]),
                 workers[0].get("numa"), max_pods)]
    if workers:
        return [(str(w.get("name")), as_list(w.get("gpus")), w.get("numa"), max_pods) for w in workers]
    cards = sum(int(g.get("count") or 0) for g in as_list(tenant["gpus"]) if isinstance(g, dict))
    numa = [0] * cards if layer and layer.numa == "zero" else None
    return [(f"{tenant['name']}-worker", tenant["gpus"], numa, max_pods)]


def _split_count(resources: list[Res], tenant: str) -> int:
    for res in resources:
        if res.kind == "DaemonSet" and res.is_kubernetes and ancestor_tenant(res) == tenant:
            for container in containers(pod_spec(res) or {}):
                for env in as_list(container.get("env")):
                    if isinstance(env, dict) and env.get("name") == "SPLIT_COUNT":
                        count = quantity(env.get("value"))
                        if count:
                            return count
        if res.type == HELM_RELEASE_TYPE and ancestor_tenant(res) == tenant:
            count = quantity(dig(res.props, "values", "devicePlugin", "deviceSplitCount"))
            if count:
                return count
    return DEFAULT_SPLIT_COUNT




def _depends_refused() -> bool:
    """Stack setting orderDependentPlan: "refuse" makes a plan that depends on the order fail the preview."""
    return stack_config("orderDependentPlan") == "refuse"


# The planner's inputs (repr of frozen dataclasses) -> (order verdicts, declared plan), for this process.
_PLANNED: dict[str, tuple[Any, Any]] = {}


def _tenant_verdicts(args: StackValidationArgs, report: ReportViolation) -> list[tuple[Res, str, Any, Any]]:
    """(Tenant, name, the plan's order verdicts, the declared plan) per tenant that can be planned; reports
    the ones that cannot."""
    from gpu_tenancy.hami.planner.orders import verdicts
    from gpu_tenancy.hami.planner.schedule import plan

    resources = from_policy_resources(args.resources)
    out = []
    for res in resources:
        if res.type != TENANT_TYPE:
            continue
        tenant = tenant_component_name(res)
        declaration = _declaration(res)
        if declaration is None:
            report(
                f"tenant {tenant!r}: cannot check its GPU plan, the Tenant component exposes no gpus/workloads/"
                "quota and the stack config has none for it; register them as Tenant outputs.",
                res.urn,
            )
            continue
        try:
            nodes, workloads, quota = planner_inputs(
                tenant, declaration["nodes"], declaration["workloads"], declaration["quota"],
                _split_count(resources, tenant),
            )
            ordered = frozenset({tenant}) if declaration["ordered"] else frozenset()
            # Both plan policies ask for the same tenant in one preview: plan and explore it once.
            key = repr((nodes, workloads, quota, ordered))
            if key not in _PLANNED:
                # A verdict, not a card-by-card prediction: large nodes are planned with ties in registration
                # order.
                declared = plan(nodes, workloads, quota, exact_device_order=False)
                _PLANNED[key] = (verdicts(nodes, workloads, quota, ordered=ordered, declared=declared), declared)
            found, declared = _PLANNED[key]
        except ValueError as error:
            report(f"tenant {tenant!r}: its GPU declaration cannot be planned: {error}.", res.urn)
            continue
        out.append((res, tenant, found, declared))
    return out


def validate_gpu_plan_fits(args: StackValidationArgs, report: ReportViolation) -> None:
    refuse_depends = _depends_refused()
    for res, tenant, found, _ in _tenant_verdicts(args, report):
        for r in found.replicas:
            if r.verdict == "never":
                report(
                    f"tenant {tenant!r}: workload {r.workload!r} replica {r.replica} cannot be placed on its "
                    f"declared GPUs in any order: {r.because}.",
                    res.urn,
                )
            elif r.verdict == "depends" and refuse_depends:
                report(
                    f"tenant {tenant!r}: workload {r.workload!r} replica {r.replica} fits only in some orders "
                    f"(orderDependentPlan: refuse): it depends on {r.because}.",
                    res.urn,
                )


def validate_gpu_plan_order(args: StackValidationArgs, report: ReportViolation) -> None:
    if _depends_refused():
        return  # gpu-plan-fits refuses these already
    for res, tenant, found, _ in _tenant_verdicts(args, lambda *_: None):
        for r in found.replicas:
            if r.verdict == "depends":
                report(
                    f"tenant {tenant!r}: workload {r.workload!r} replica {r.replica} fits in some orders only: "
                    f"it depends on {r.because}.",
                    res.urn,
                )


gpu_plan_fits = StackValidationPolicy(
    name="gpu-plan-fits",
    description=(
        "Every replica of a tenant's declared workloads fits its declared GPU inventory and quota in some order "
        "HAMi and Kubernetes may take (gpu_tenancy.hami.planner); reasons are HAMi's own. With the stack setting "
        "orderDependentPlan: refuse, in every order. Add GPUs, lower requests or raise the quota."
    ),
    validate=validate_gpu_plan_fits,
    enforcement_level=MANDATORY,
)

gpu_plan_order = StackValidationPolicy(
    name="gpu-plan-order",
    description=(
        "Names each replica whose fit depends on the order Kubernetes creates and schedules pods or on how HAMi "
        "breaks a tie (gpu_tenancy.hami.planner.orders). Set orderedWorkloads, declare NUMA nodes, or leave room."
    ),
    validate=validate_gpu_plan_order,
    enforcement_level=ADVISORY,
)
