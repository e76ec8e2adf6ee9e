"""MetalLB in L2 mode: the pool comes from the kind network's IPv4 subnet (sim) or from config (real).

The pool and its advertisement wait for MetalLB's admission webhook to accept them (see
gpu_tenancy/builders/metallb/admission_gate.py for why the chart's readiness is not enough).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components import options
from components.charts import cached_chart
from gpu_tenancy.builders.metallb import admission_gate, metallb_objects, netpool

NAMESPACE = "metallb-system"
CONTROLLER = "metallb-controller"  # the chart's `{{ metallb.fullname }}-controller` for release "metallb"


@dataclass
class MetalLBArgs:
    """MetalLB with its address pool. Its provider (the management cluster's) and what it waits for (the kind
    cluster) come in `opts`.

    Attributes:
        kubeconfig (pulumi.Input[str]): the management cluster's kubeconfig (secret), for the webhook gate's
            kubectl.
        chart_version (str): the MetalLB chart's version.
        network (str | None): a Docker network to take the pool from (sim). Default: None.
        addresses_needed (int): how many addresses the pool taken from `network` must hold. Default: 0.
        addresses (list[str] | None): the pool's addresses as given, when there is no `network`. Default: None.
    """

    kubeconfig: pulumi.Input[str]
    chart_version: str
    network: str | None = None
    addresses_needed: int = 0
    addresses: list[str] | None = None


class MetalLB(pulumi.ComponentResource):
    address_range: pulumi.Output[str]
    subnet: pulumi.Output[str]

    def __init__(self, name: str, args: MetalLBArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "gpu-tenancy:metallb:MetalLB", name, {"network": args.network, "subnet": None}, opts
        )
        options.require_provider(self)
        after = options.dependencies(opts)
        on_cluster = pulumi.ResourceOptions(parent=self)
        release = k8s.helm.v3.Release(
            f"{name}-chart",
            name="metallb",
            chart=cached_chart("metallb", args.chart_version),
            version=args.chart_version,
            namespace=NAMESPACE,
            create_namespace=True,
            values=metallb_objects.metallb_values(),
            opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=after)),
        )
        if args.network is not None:
            network_name = args.network
            network = docker.get_network_output(
                name=network_name,
                opts=pulumi.InvokeOutputOptions(parent=self, depends_on=after),
            )
            pool = network.ipam_configs.apply(
                lambda configs: netpool.select_pool(
                    network_name,
                    [{"subnet": c.subnet, "gateway": c.gateway} for c in configs or []],
                    args.addresses_needed,
                )
            )
            addresses: pulumi.Output[list[str]] = pool.apply(lambda p: [p.range])
            self.subnet = pool.apply(lambda p: p.subnet)
        else:
            addresses = pulumi.Output.from_input(list(args.addresses or []))
            self.subnet = pulumi.Output.from_input("")
        self.address_range = addresses.apply(",".join)
        pool_name = "kind-ipv4" if args.network is not None else "control-planes"
        pool_object = addresses.apply(lambda a: metallb_objects.metallb_ip_address_pool(NAMESPACE, pool_name, a))
        advertisement = metallb_objects.metallb_l2_advertisement(NAMESPACE, pool_name)
        # The gate dry-runs exactly the objects created below, so it also waits for their webhooks.
        self.webhook_ready = command.local.Command(
            f"{name}-webhook-ready",
            create=admission_gate.wait_until_admitted_script(CONTROLLER, NAMESPACE),
            interpreter=["/bin/sh", "-c"],
            stdin=pulumi.Output.secret(args.kubeconfig),
            environment={
                admission_gate.MANIFEST_ENV: pool_object.apply(
                    lambda o: metallb_objects.metallb_manifest([o, advertisement])
                )
            },
            logging=command.local.Logging.STDERR,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[release]),
        )
        after_webhook = pulumi.ResourceOptions.merge(
            on_cluster, pulumi.ResourceOptions(depends_on=[release, self.webhook_ready])
        )
        self.pool = k8s.apiextensions.CustomResource(
            f"{name}-pool",
            api_version="metallb.io/v1beta1",
            kind="IPAddressPool",
            metadata={"name": pool_name, "namespace": NAMESPACE},
            spec=pool_object.apply(lambda o: o["spec"]),
            opts=after_webhook,
        )
        self.advertisement = k8s.apiextensions.CustomResource(
            f"{name}-l2",
            api_version=advertisement["apiVersion"],
            kind=advertisement["kind"],
            metadata=advertisement["metadata"],
            spec=advertisement["spec"],
            opts=after_webhook,
        )
        self.register_outputs({"addressRange": self.address_range, "subnet": self.subnet})
