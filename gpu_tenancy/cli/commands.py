"""The registry of `gpu-tenancy` commands: name -> the module whose `main(argv) -> int` runs it, and one line.

Modules are imported only when their command runs, so `gpu-tenancy --help` and `gpu-tenancy tools` (run by the
system Python before the venv exists) import neither Pulumi nor the Kubernetes client. A new command is one
module with a `main` and one line here (tests/test_cli_main.py checks both ways).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CommandInfo:
    module: str
    summary: str


COMMANDS: dict[str, CommandInfo] = {
    "plan": CommandInfo(
        "gpu_tenancy.cli.plan.command",
        "Will a stack's workloads fit its GPUs as HAMi places them? (subcommands plan, report)",
    ),
    "status": CommandInfo(
        "gpu_tenancy.cli.status.command", "Live GPU allocation per tenant and GPU, why pods wait, quota used"
    ),
    "tenants": CommandInfo(
        "gpu_tenancy.cli.tenants.command",
        "One row per tenant: version, control plane, nodes, GPUs, pods; exit 1 if any is unhealthy",
    ),
    "doctor": CommandInfo(
        "gpu_tenancy.cli.doctor.command",
        "Check this host and, when deployed, the lab: one line per problem with its fix",
    ),
    "kubeconfig": CommandInfo(
        "gpu_tenancy.cli.kubeconfig",
        "Write a tenant's or the management cluster's admin kubeconfig (mode 0600); print its path",
    ),
    "charts": CommandInfo(
        "gpu_tenancy.cli.charts.command", "Pull a stack's Helm charts once into .charts/, verified and locked"
    ),
    "tools": CommandInfo(
        "gpu_tenancy.cli.tools", "Install the pinned kind, kubectl and Pulumi CLI, checksum-verified"
    ),
    "promotion": CommandInfo(
        "gpu_tenancy.cli.promotion.command",
        "Does the plan hold when one stack file's tenants run on the nodes another declares?",
    ),
    "pull-requests": CommandInfo(
        "gpu_tenancy.cli.pull_requests.report",
        "CI: publish a pull request's capacity plan and policy preview as comments",
    ),
    "config-reference": CommandInfo(
        "gpu_tenancy.cli.config_reference.command",
        "Print (or --write) docs/configuration.md from the stack config's models",
    ),
}
