"""A tenant's worker: a kindest/node container on the kind network, joined with kubeadm."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from components import options
from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.worker import kind_node, node_proxy, worker_join


@dataclass
class WorkerArgs:
    """One sim worker. What its container waits for (the control plane) comes in `opts.depends_on`.

    Attributes:
        tenant (str): the tenant the worker joins.
        container_name (str): the container's name, also the Node's.
        image (str): the kindest/node image.
        network (str): kind's Docker network, which the container joins.
        endpoint (pulumi.Input[str]): the tenant's API server, `address:port`.
        ca_cert_hash (pulumi.Input[str]): the tenant CA's `sha256:<hex>`, which the join pins.
        kubeconfig (pulumi.Input[str]): the tenant's admin kubeconfig (secret): the join mints its bootstrap token
            with it, the node command removes the Node.
        control_plane_id (pulumi.Input[str]): the TenantControlPlane's id: the same text for ever, unknown only
            while it is replaced.
        pod_cidr (str): the tenant's pod network, kept out of the node's proxy. Default: "".
        service_cidr (str): the tenant's service network, kept out of the node's proxy. Default: "".
    """

    tenant: str
    container_name: str
    image: str
    network: str
    endpoint: pulumi.Input[str]
    ca_cert_hash: pulumi.Input[str]
    kubeconfig: pulumi.Input[str]
    control_plane_id: pulumi.Input[str]
    pod_cidr: str = ""
    service_cidr: str = ""


class Worker(pulumi.ComponentResource):
    node_name: pulumi.Output[str]
    join: command.local.Command
    node: command.local.Command
    proxy: command.local.Command | None

    def __init__(self, name: str, args: WorkerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-tenancy:worker:Worker", name, None, opts)
        tenant = args.tenant
        self._after = options.dependencies(opts)
        image = docker.RemoteImage(
            f"{name}-image", name=args.image, keep_locally=True, opts=pulumi.ResourceOptions(parent=self)
        )
        # kind decides some node flags from `docker info` on the host (gpu_tenancy/builders/worker/kind_node.py). Asked
        # once, when the worker is created, and kept in the state: a later `pulumi up` changes nothing.
        docker_info = command.local.Command(
            f"{name}-docker-info",
            create=kind_node.DOCKER_INFO_COMMAND,
            opts=pulumi.ResourceOptions(parent=self),
        )
        host = docker_info.stdout.apply(kind_node.host_flags)
        # Only what kind's entrypoint reads at start; the proxy goes to containerd in place (self.proxy below).
        node_env = kind_node.snapshotter_env(os.environ) or None
        # The flags kind itself uses for node containers (kind pkg/cluster/internal/providers/docker/provision.go
        # runArgsForNode and commonArgs).
        self.container = docker.Container(
            f"{name}-container",
            name=args.container_name,
            hostname=args.container_name,
            image=image.image_id,
            privileged=True,
            tty=True,
            # kind's two options, plus the one Docker stores for any privileged container anyway (moby
            # daemon/create.go generateSecurityOpt appends `label=disable` unless a `label=` option is given).
            # The Docker provider reads the stored list back into `security_opts`, a ForceNew set: sent
            # without it, every later `up` would see three stored options against two and replace the worker.
            security_opts=list(kind_node.SECURITY_OPTS),
            tmpfs={"/tmp": "", "/run": ""},
            volumes=host.apply(
                lambda flags: [
                    docker.ContainerVolumeArgs(container_path="/var"),
                    docker.ContainerVolumeArgs(
                        host_path="/lib/modules", container_path="/lib/modules", read_only=True
                    ),
                    *(
                        [docker.ContainerVolumeArgs(host_path="/dev/mapper", container_path="/dev/mapper")]
                        if flags.mount_dev_mapper
                        else []
                    ),
                ]
            ),
            # Absent rather than empty when not needed, exactly like kind's arguments.
            devices=host.apply(
                lambda flags: [docker.ContainerDeviceArgs(host_path="/dev/fuse")] if flags.mount_fuse else None
            ),
            userns_mode=host.apply(lambda flags: "host" if flags.userns_host else None),
            networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=args.network)],
            restart="on-failure",
            max_retry_count=1,
            init=False,
            cgroupns_mode="private",
            envs=node_env,
            labels=[
                docker.ContainerLabelArgs(label=kube_objects.TENANT_LABEL, value=tenant),
                docker.ContainerLabelArgs(label=kube_objects.COMPONENT_LABEL, value="worker"),
            ],
            # Its name is fixed: the old container must be gone before the new one can take it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=self._after, delete_before_replace=True),
        )
        self.proxy = self._proxy(name, args)
        # Removes the Node from the tenant on destroy (the join that follows a replaced container removes the
        # old one itself). Replaced only with its control plane, deleted first while that still answers; a
        # new kubeconfig is an update, which runs nothing and keeps it for that delete.
        self.node = command.local.Command(
            f"{name}-node",
            delete=worker_join.leave_script(),
            interpreter=["/bin/sh", "-c"],
            stdin=pulumi.Output.secret(args.kubeconfig),
            environment={"GPU_TENANCY_TENANT": tenant, "GPU_TENANCY_WORKER": args.container_name},
            triggers=[args.control_plane_id],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.container], delete_before_replace=True),
        )
        template = pulumi.Output.all(args.endpoint, args.ca_cert_hash).apply(
            lambda v: worker_join.join_configuration_template(
                v[0], v[1], args.container_name, kube_objects.gpu_node_labels(tenant)
            )
        )
        self.join = command.local.Command(
            f"{name}-join",
            create=worker_join.join_script(tenant),
            # Resets the node; needs no kubeconfig, so a stored one that no longer reaches the tenant cannot
            # fail it. Delete-first: the container name is fixed and the new join must find the node reset.
            delete=worker_join.reset_script(),
            interpreter=["/bin/sh", "-c"],
            stdin=pulumi.Output.secret(args.kubeconfig),  # credentials on stdin, never on a command line
            environment={
                "GPU_TENANCY_TENANT": tenant,
                "GPU_TENANCY_WORKER": args.container_name,
                "GPU_TENANCY_JOIN_CONFIGURATION": template,
                "CONTROL_PLANE_TENANT": tenant,
                "CONTROL_PLANE_ENDPOINT": args.endpoint,
            },
            # A new container or a replaced control plane replaces the join. A moved endpoint or a new CA of the
            # same control plane is an update: pulumi-command runs `create` with the new kubeconfig, which resets
            # and rejoins the node (as a trigger, the old delete would run first, with the stored kubeconfig).
            triggers=[self.container.id, args.control_plane_id],
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.container, self.node, *([self.proxy] if self.proxy else [])],
                delete_before_replace=True,
            ),
        )
        self.node_name = self.join.id.apply(lambda _: args.container_name)
        self.register_outputs({"containerName": args.container_name, "nodeName": self.node_name})

    def _proxy(self, name: str, args: WorkerArgs) -> command.local.Command | None:
        """The host's proxy settings in containerd's drop-in (gpu_tenancy/builders/worker/node_proxy.py); none
        without a proxy. In the container's `env` (as kind does) a change would replace the worker: `env` is
        ForceNew in the Docker provider; here it is an update of this command, which restarts containerd."""
        proxy = self._proxy_env(args, os.environ)
        if proxy is None:
            return None
        return command.local.Command(
            f"{name}-proxy",
            create=node_proxy.apply_script(),
            delete=node_proxy.remove_script(),
            interpreter=["/bin/sh", "-c"],
            stdin=proxy.apply(node_proxy.dropin),  # secret when the proxy URLs carry credentials
            environment={"GPU_TENANCY_WORKER": args.container_name},
            # A new container starts without the drop-in: written again for it.
            triggers=[self.container.id],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.container], delete_before_replace=True),
        )

    def _proxy_env(self, args: WorkerArgs, environ: Mapping[str, str]) -> pulumi.Output[list[str]] | None:
        """HTTP(S)_PROXY/NO_PROXY as kind gives its nodes (gpu_tenancy/builders/worker/kind_node.py `proxy_env`);
        none without a proxy."""
        if not kind_node.has_proxy(environ):
            return None
        network = docker.get_network_output(
            name=args.network, opts=pulumi.InvokeOutputOptions(parent=self, depends_on=self._after)
        )
        envs = network.ipam_configs.apply(
            lambda configs: [
                f"{key}={value}"
                for key, value in sorted(
                    kind_node.proxy_env(
                        environ,
                        args.service_cidr,
                        args.pod_cidr,
                        [c.subnet for c in configs or [] if c.subnet],
                        [args.container_name],
                    ).items()
                )
            ]
        )
        # Proxy credentials stay encrypted in the state (in the node they are in containerd's drop-in, where
        # anyone root on the node or the Docker host reads them, as in kind's nodes: docs/threat-model.md).
        return pulumi.Output.secret(envs) if kind_node.proxy_has_credentials(environ) else envs

