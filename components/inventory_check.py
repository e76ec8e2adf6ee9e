"""Compares what HAMi's device plugin registers on each of a tenant's nodes with the register the plan counts
there (modes sim-nvml and real)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components import options
from gpu_tenancy.builders import shell
from gpu_tenancy.builders.gpu_nodes import GpuNode
from gpu_tenancy.hami import inventory
from gpu_tenancy.hami import protocol as hami

# Polls until the device plugin has registered the node's GPUs (kubectl is a documented prerequisite). With
# GPU_TENANCY_EXPECTED_GPUS (the cards planned on the node) it keeps polling while the registration lists another
# number of GPUs, for at most SETTLE_SECONDS: a plugin restarted for new devices registers again at once, an
# unchanged one every 30 s (HAMi v2.10.0 plugin/register.go WatchAndRegister), so a registration left from
# before the change is not taken for the new one; after that the comparison below reports what differs.
SETTLE_SECONDS = 90
WAIT_SCRIPT = (
    "set -eu\n"
    + shell.STDIN_KUBECONFIG
    + f"""expected="${{GPU_TENANCY_EXPECTED_GPUS:-}}"
settled=0
for _ in $(seq 1 120); do
  value=$(kubectl --kubeconfig "$kubeconfig" get node "$NODE" \\
    -o jsonpath='{{.metadata.annotations.hami\\.io/node-nvidia-register}}' 2>/dev/null || true)
  if [ -n "$value" ]; then
    [ -z "$expected" ] && exit 0
    count=$(printf '%s' "$value" | grep -o '"id"' | wc -l | tr -d ' ')
    [ "$count" -eq "$expected" ] && exit 0
    settled=$((settled + 5))
    [ "$settled" -ge {SETTLE_SECONDS} ] && exit 0
  fi
  sleep 5
done
echo "gpu-tenancy: node $NODE registered no GPUs with HAMi in 10 minutes (check hami-device-plugin logs)" >&2
exit 1
"""
)


@dataclass
class InventoryCheckArgs:
    """What HAMi registers on a tenant's nodes against the plan. Its provider (the tenant's) and what it waits for
    (HAMi) come in `opts`.

    Attributes:
        tenant (str): the tenant, named in the mismatch message.
        nodes (list[GpuNode]): the tenant's GPU nodes as the plan counts them.
        kubeconfig (pulumi.Output[str]): the tenant's admin kubeconfig (secret), for the wait's kubectl.
        on_mismatch (Literal["error", "warn"]): gpu-tenancy:inventoryMismatch: fail the update or warn.
        node_joins (dict[str, pulumi.Input[str]]): node name -> the id of the join that registered it. A
            rejoined node is a fresh Node without HAMi's annotation, so the wait must run again;
            pulumi-command reruns a command only when its triggers change. Default: {}.
        devices (pulumi.Input[str] | None): what the node's devices come from (sim-nvml: the mock's
            configuration digest): new devices re-arm the wait. Default: None.
    """

    tenant: str
    nodes: list[GpuNode]
    kubeconfig: pulumi.Output[str]
    on_mismatch: Literal["error", "warn"]
    node_joins: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    devices: pulumi.Input[str] | None = None


class InventoryCheck(pulumi.ComponentResource):
    problems: pulumi.Output[list[str]]

    def __init__(self, name: str, args: InventoryCheckArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:inventory_check:InventoryCheck", name, {"tenant": args.tenant}, opts)
        options.require_provider(self)
        after = options.dependencies(opts)
        annotations: dict[str, pulumi.Output[Any]] = {}
        device_source = [args.devices] if args.devices is not None else []
        for gpu_node in args.nodes:
            node = gpu_node.name
            environment = {"NODE": node, "GPU_TENANCY_EXPECTED_GPUS": str(sum(gpu.count for gpu in gpu_node.gpus))}
            node_join = [args.node_joins[node]] if node in args.node_joins else []
            registered = command.local.Command(
                f"{name}-{node}-registered",
                create=WAIT_SCRIPT,
                interpreter=["/bin/sh", "-c"],
                stdin=args.kubeconfig,
                environment=environment,
                logging=command.local.Logging.STDERR,
                triggers=[*node_join, *device_source] or None,
                opts=pulumi.ResourceOptions(parent=self, depends_on=after),
            )
            # The id waits for the wait's stdout, unknown until the node joins, so a preview skips the read
            # (pulumi/pulumi#16395); the command's own id is known even in a create preview (pulumi-command
            # v1.2.1 local/commandController.go Create).
            read = k8s.core.v1.Node.get(
                f"{name}-{node}",
                pulumi.Output.unsecret(pulumi.Output.all(registered.stdout, node).apply(lambda v: str(v[1]))),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[registered]),
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
