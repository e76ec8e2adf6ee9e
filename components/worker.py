"""A tenant's worker: a kindest/node container on the kind network, joined with kubeadm."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.bootstrap_token import BootstrapToken, BootstrapTokenArgs
from gpu_tenancy import manifests

JOIN_SCRIPT = """set -eu
# Wait for systemd and containerd inside the node container, as kind does before kubeadm.
for _ in $(seq 1 120); do
  docker exec "$GPU_TENANCY_WORKER" systemctl is-active --quiet containerd && break
  sleep 1
done
docker exec "$GPU_TENANCY_WORKER" test -f /etc/kubernetes/kubelet.conf && exit 0
docker exec -i "$GPU_TENANCY_WORKER" sh -c 'cat > /kind/gpu-tenancy-join.yaml'
docker exec "$GPU_TENANCY_WORKER" sh -c 'modprobe br_netfilter 2>/dev/null || true; swapoff -a || true'
docker exec "$GPU_TENANCY_WORKER" kubeadm join --config /kind/gpu-tenancy-join.yaml
docker exec "$GPU_TENANCY_WORKER" rm -f /kind/gpu-tenancy-join.yaml
"""


@dataclass
class WorkerArgs:
    tenant: str
    container_name: str
    image: str
    network: str
    provider: k8s.Provider
    endpoint: pulumi.Input[str]
    ca_cert_hash: pulumi.Input[str]
    depends_on: list[pulumi.Resource]


class Worker(pulumi.ComponentResource):
    node_name: pulumi.Output[str]
    join: command.local.Command

    def __init__(self, name: str, args: WorkerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:worker:Worker", name, None, opts)
        tenant = args.tenant
        image = docker.RemoteImage(
            f"{name}-image", name=args.image, keep_locally=True, opts=pulumi.ResourceOptions(parent=self)
        )
        # The flags kind itself uses for node containers (kind pkg/cluster/internal/providers/docker/provision.go).
        self.container = docker.Container(
            f"{name}-container",
            name=args.container_name,
            hostname=args.container_name,
            image=image.image_id,
            privileged=True,
            security_opts=["seccomp=unconfined", "apparmor=unconfined"],
            tmpfs={"/tmp": "", "/run": ""},
            volumes=[
                docker.ContainerVolumeArgs(container_path="/var"),
                docker.ContainerVolumeArgs(host_path="/lib/modules", container_path="/lib/modules", read_only=True),
            ],
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=args.network)],
            restart="on-failure",
            max_retry_count=1,
            init=False,
            cgroupns_mode="private",
            labels=[
                docker.ContainerLabelArgs(label=manifests.TENANT_LABEL, value=tenant),
                docker.ContainerLabelArgs(label=manifests.COMPONENT_LABEL, value="worker"),
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
        )
        bootstrap = BootstrapToken(
            f"{name}-bootstrap-token",
            BootstrapTokenArgs(tenant=tenant, provider=args.provider),
            pulumi.ResourceOptions(parent=self),
        )
        join_configuration = bootstrap.join_configuration(args.endpoint, args.ca_cert_hash, args.container_name)
        self.join = command.local.Command(
            f"{name}-join",
            create=JOIN_SCRIPT,
            interpreter=["/bin/sh", "-c"],
            stdin=join_configuration,  # the token travels on stdin, never on a command line
            environment={
                "GPU_TENANCY_TENANT": tenant,
                "GPU_TENANCY_WORKER": args.container_name,
                "CONTROL_PLANE_TENANT": tenant,
                "CONTROL_PLANE_ENDPOINT": args.endpoint,
            },
            triggers=[self.container.id],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.container, bootstrap.secret]),
        )
        self.node_name = self.join.id.apply(lambda _: args.container_name)
        self.register_outputs({"containerName": args.container_name, "nodeName": self.node_name})
