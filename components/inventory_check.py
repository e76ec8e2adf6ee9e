"""Compares what HAMi's device plugin registers on each of a tenant's nodes with the register the plan counts
there (modes sim-nvml and real)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from gpu_tenancy import hami, inventory, shell
from gpu_tenancy.gpu_nodes import GpuNode

# Polls until the device plugin has registered the node's GPUs (kubectl is a documented prerequisite).
WAIT_SCRIPT = (
    "set -eu\n"
    + shell.STDIN_KUBECONFIG
    + """for _ in $(seq 1 120); do
  value=$(kubectl --kubeconfig "$kubeconfig" get node "$NODE" \\
    -o jsonpath='{.metadata.annotations.hami\\.io/node-nvidia-register}' 2>/dev/null || true)
  [ -n "$value" ] && exit 0
  sleep 5
done
echo "gpu-tenancy: node $NODE registered no GPUs with HAMi in 10 minutes (check hami-device-plugin logs)" >&2
exit 1
"""
)


@dataclass
class InventoryCheckArgs:
    tenant: str
    nodes: list[GpuNode]
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    on_mismatch: Literal["error", "warn"]
    depends_on: list[pulumi.Resource]


class InventoryCheck(pulumi.ComponentResource):
    problems: pulumi.Output[list[str]]

    def __init__(self, name: str, args: InventoryCheckArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:inventory_check:InventoryCheck", name, {"tenant": args.tenant}, opts)
        annotations: dict[str, pulumi.Output[Any]] = {}
        for node in (gpu_node.name for gpu_node in args.nodes):
            registered = command.local.Command(
                f"{name}-{node}-registered",
                create=WAIT_SCRIPT,
                interpreter=["/bin/sh", "-c"],
                stdin=args.kubeconfig,
                environment={"NODE": node},
                logging=command.local.Logging.STDERR,
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
            )
            # The id waits for the wait command's stdout, so it stays unknown while the host is still to be
            # joined: the engine then skips the read instead of failing it with "resource ... does not exist"
            # (a read with a known id runs during previews; pulumi/pulumi#16395). Not the command's id:
            # pulumi-command returns a real id from a create preview (v1.2.1 local/commandController.go
            # Create: NewUniqueHex before its preview return), so an id-based key would be known. stdout is
            # secret (the stdin is); the node name is not.
            read = k8s.core.v1.Node.get(
                f"{name}-{node}",
                pulumi.Output.unsecret(pulumi.Output.all(registered.stdout, node).apply(lambda v: str(v[1]))),
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[registered]),
            )
            annotations[node] = read.metadata.apply(lambda m: (m.annotations or {}) if m else {})
        self.problems = pulumi.Output.all(**annotations).apply(lambda by_node: self._compare(args, by_node))
        self.register_outputs({"problems": self.problems})

    @staticmethod
    def _compare(args: InventoryCheckArgs, by_node: dict[str, dict[str, str]]) -> list[str]:
        reported = {
            node: hami.parse_register_annotation(values.get(hami.NODE_REGISTER_ANNOTATION, ""))
            for node, values in by_node.items()
        }
        expected = {node.name: node.register() for node in args.nodes}
        problems = inventory.inventory_mismatches(expected, reported)
        if problems:
            message = f"tenant {args.tenant}: HAMi registered other GPUs than the plan counts: " + "; ".join(
                problems
            )
            if args.on_mismatch == "error":
                raise pulumi.RunError(message + " (set gpu-tenancy:inventoryMismatch to 'warn' to go on)")
            pulumi.log.warn(message)
        return problems
