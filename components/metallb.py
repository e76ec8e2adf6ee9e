"""MetalLB in L2 mode: the pool comes from the kind network's IPv4 subnet (sim) or from config (real)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from gpu_tenancy import manifests, netpool, versions

NAMESPACE = "metallb-system"


@dataclass
class MetalLBArgs:
    provider: k8s.Provider
    chart_version: str
    depends_on: list[pulumi.Resource]
    network: str | None = None  # a Docker network to take the pool from...
    addresses_needed: int = 0
    addresses: list[str] | None = None  # ...or the pool's addresses as given


class MetalLB(pulumi.ComponentResource):
    address_range: pulumi.Output[str]
    subnet: pulumi.Output[str]

    def __init__(self, name: str, args: MetalLBArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "gpu-tenancy:metallb:MetalLB", name, {"network": args.network, "subnet": None}, opts
        )
        on_cluster = pulumi.ResourceOptions(parent=self, provider=args.provider)
        release = k8s.helm.v3.Release(
            f"{name}-chart",
            name="metallb",
            chart="metallb",
            version=args.chart_version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=versions.METALLB_CHART_REPO),
            namespace=NAMESPACE,
            create_namespace=True,
            values=manifests.metallb_values(),
            opts=pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=args.depends_on)),
        )
        if args.network is not None:
            network_name = args.network
            network = docker.get_network_output(
                name=network_name,
                opts=pulumi.InvokeOutputOptions(parent=self, depends_on=args.depends_on),
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
        after_chart = pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[release]))
        self.pool = k8s.apiextensions.CustomResource(
            f"{name}-pool",
            api_version="metallb.io/v1beta1",
            kind="IPAddressPool",
            metadata={"name": pool_name, "namespace": NAMESPACE},
            spec=addresses.apply(manifests.ip_address_pool),
            opts=after_chart,
        )
        self.advertisement = k8s.apiextensions.CustomResource(
            f"{name}-l2",
            api_version="metallb.io/v1beta1",
            kind="L2Advertisement",
            metadata={"name": pool_name, "namespace": NAMESPACE},
            spec={"ipAddressPools": [pool_name]},
            opts=after_chart,
        )
        self.register_outputs({"addressRange": self.address_range, "subnet": self.subnet})
