"""Does the plan hold on promotion? The same tenants planned on the nodes of two stacks, compared.

`gpu-tenancy promotion Pulumi.dev.yaml Pulumi.gpu.yaml` plans both stack files as the
cluster of each will register its cards (gpu_tenancy.builders.gpu_nodes: one kind worker per tenant in sim and
sim-nvml, one node per GPU host in real) and prints every replica whose verdict changes, every tenant
whose GPU usage changes and every tenant whose cards differ. Exit 0 when the plan holds, 1 when something
changes, 2 on unusable input.

What is compared is what HAMi's scheduler decides: whether each replica fits (and HAMi's reason when it
does not) and how much memory, how many cores and slots each tenant's nodes hold. Which card among equal
cards a replica lands on is not: on sim-nvml and real hosts HAMi's device plugin registers cards in Go
map order, which changes from one registration to the next (register.go `getAPIDevices`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from gpu_tenancy.cli.base_command import command_parser
from gpu_tenancy.cli.plan import plan_input
from gpu_tenancy.cli.status_codes import FAILURE, SUCCESS
from gpu_tenancy.hami.planner.model import Node, Workload
from gpu_tenancy.hami.planner.report import PlanResult
from gpu_tenancy.hami.planner.schedule import plan

Verdicts = dict[tuple[str, str, int], str]


def _verdicts(workloads: Sequence[Workload], result: PlanResult) -> Verdicts:
    tenant_of = {w.name: w.tenant or plan_input.UNASSIGNED for w in workloads}
    verdicts: Verdicts = {}
    for placement in result.placements:
        verdicts[(tenant_of[placement.workload], placement.workload, placement.replica)] = "fits"
    for failure in result.failures:
        verdicts[(tenant_of[failure.workload], failure.workload, failure.replica)] = failure.reason
    return verdicts


def _usage(nodes: Sequence[Node], result: PlanResult) -> dict[str, tuple[int, int, int]]:
    """Per tenant: (MiB, cores, slots) its replicas hold."""
    tenant_of = {n.name: n.tenant or plan_input.UNASSIGNED for n in nodes}
    usage: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for placement in result.placements:
        held = usage[tenant_of[placement.node]]
        held[0] += placement.mem_mib
        held[1] += placement.cores
        held[2] += 1
    return {tenant: (mem, cores, slots) for tenant, (mem, cores, slots) in usage.items()}


def _node_cards(node: Node) -> str:
    counts = Counter((d.type, d.devmem) for d in node.devices)
    return " + ".join(f"{n} x {t} ({m} MiB)" for (t, m), n in sorted(counts.items()))


def _cards(nodes: Sequence[Node]) -> dict[str, str]:
    """Per tenant: its cards by node, as text ('1 node: 2 x NVIDIA L4 (23034 MiB)')."""
    by_tenant: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        by_tenant[node.tenant or plan_input.UNASSIGNED].append(node)
    described = {}
    for tenant, tenant_nodes in by_tenant.items():
        shapes = sorted(_node_cards(node) for node in tenant_nodes)
        described[tenant] = "; ".join(f"node {i + 1}: {shape}" for i, shape in enumerate(shapes))
    return described


def plan_changes(source: str, target: str) -> list[str]:
    """What changes, one line each, when the tenants of stack file `source` run as stack file `target`
    declares them; raises plan_input.InputError on unusable input."""
    before_nodes, before_workloads, before_quota = plan_input.load(source)
    after_nodes, after_workloads, after_quota = plan_input.load(target)
    before = plan(before_nodes, before_workloads, before_quota, exact_device_order=False)
    after = plan(after_nodes, after_workloads, after_quota, exact_device_order=False)
    lines = []
    before_cards, after_cards = _cards(before_nodes), _cards(after_nodes)
    for tenant in sorted(set(before_cards) | set(after_cards)):
        if before_cards.get(tenant) != after_cards.get(tenant):
            lines.append(
                f"tenant {tenant}: cards {before_cards.get(tenant, 'none')} -> {after_cards.get(tenant, 'none')}"
            )
    was, now = _verdicts(before_workloads, before), _verdicts(after_workloads, after)
    for key in sorted(set(was) | set(now)):
        if was.get(key) != now.get(key):
            tenant, workload, replica = key
            lines.append(
                f"tenant {tenant}: {workload} replica {replica}: {was.get(key, 'not declared')} -> "
                f"{now.get(key, 'not declared')}"
            )
    used_before, used_after = _usage(before_nodes, before), _usage(after_nodes, after)
    for tenant in sorted(set(used_before) | set(used_after)):
        old, new = used_before.get(tenant, (0, 0, 0)), used_after.get(tenant, (0, 0, 0))
        if old != new:
            lines.append(
                f"tenant {tenant}: holds {old[0]} MiB, {old[1]} % cores, {old[2]} slots -> "
                f"{new[0]} MiB, {new[1]} % cores, {new[2]} slots"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("promotion", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the stack file promoted from, e.g. Pulumi.dev.yaml")
    parser.add_argument("target", help="the stack file promoted to, e.g. Pulumi.gpu.yaml")
    args = parser.parse_args(argv)
    lines = plan_changes(args.source, args.target)  # plan_input.InputError: a usage error, exit 2
    print(f"plan {args.source} -> {args.target}: " + ("holds" if not lines else f"{len(lines)} change(s)"))
    for line in lines:
        print(f"  - {line}")
    return FAILURE if lines else SUCCESS
