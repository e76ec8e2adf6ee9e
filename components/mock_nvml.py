"""NVIDIA's mock NVML on a tenant's worker (mode sim-nvml), for HAMi's own device plugin to find.

The image (components/nvml_mock_image.py) is loaded into the worker's containerd; a DaemonSet, the one
upstream's chart renders (gpu_tenancy/builders/mock_nvml/nvml_mock.py `daemon_set_spec`), runs upstream's
setup script, which lays out the mock driver root with the tenant's declared GPUs. Nothing of HAMi is replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components import options
from components.cluster_role_account import cluster_role_account
from gpu_tenancy.builders import image_load, kube_objects
from gpu_tenancy.builders.mock_nvml import cuda_control, nvml_mock
from gpu_tenancy.contract import limits

NAMESPACE = "kube-system"


@dataclass
class MockNvmlArgs:
    """NVIDIA's mock NVML on one sim-nvml worker. Its provider (the tenant's) and what it waits for (the worker's
    join, the network) come in `opts`.

    Attributes:
        tenant (str): the tenant, for labels and the mock's configuration.
        gpus (list[Any]): the tenant's GPUs (GpuConfig), which the mock's driver root holds.
        image_name (pulumi.Input[str]): the mock's image (NvmlMockImage.image_name).
        image_build (pulumi.Resource): the command that builds it (NvmlMockImage.build), which the load waits for.
        worker_container (pulumi.Input[str]): the worker's container, whose containerd gets the image.
        node_name (pulumi.Input[str]): the worker's Node, the only one the mock may label.
        worker_id (pulumi.Input[str]): the worker container's id: a replaced worker (same name, empty containerd)
            gets the image again.
        kubernetes_version (str): the tenant's Kubernetes version, which decides the admission policy's API.
    """

    tenant: str
    gpus: list[Any]
    image_name: pulumi.Input[str]
    image_build: pulumi.Resource
    worker_container: pulumi.Input[str]
    node_name: pulumi.Input[str]
    worker_id: pulumi.Input[str]
    kubernetes_version: str


class MockNvml(pulumi.ComponentResource):
    daemon_set: k8s.apps.v1.DaemonSet
    config_digest: str
    # What HAMi's device plugin needs to reach this mock (its chart's devicePlugin values).
    hami_device_plugin: dict[str, Any]

    def __init__(self, name: str, args: MockNvmlArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:mock_nvml:MockNvml", name, {"tenant": args.tenant}, opts)
        config = nvml_mock.mock_config(args.tenant, args.gpus)
        config_text = nvml_mock.config_yaml(config)
        self.config_digest = nvml_mock.config_sha(config_text)
        self.hami_device_plugin = nvml_mock.hami_device_plugin_values(self.config_digest)
        labels = kube_objects.labels(args.tenant, nvml_mock.COMPONENT)
        options.require_provider(self)
        after = options.dependencies(opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, depends_on=after)

        self.image_load = command.local.Command(
            f"{name}-image-load",
            # A host with NVIDIA GPUs is refused first (nvml_mock.no_host_gpus_script).
            create=nvml_mock.no_host_gpus_script() + image_load.load_script(),
            interpreter=["/bin/sh", "-c"],
            environment={"IMAGE": args.image_name, "NODE_CONTAINER": args.worker_container},
            triggers=[args.image_name, args.worker_id],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.image_build, *after]),
        )
        metadata = k8s.meta.v1.ObjectMetaArgs(name=name, namespace=NAMESPACE, labels=labels)
        rules = pulumi.Output.from_input(args.node_name).apply(nvml_mock.rbac_rules)
        account = cluster_role_account(name, NAMESPACE, labels, rules, k8s_opts)
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-config", metadata=metadata, data={"config.yaml": config_text}, opts=k8s_opts
        )
        spec = pulumi.Output.all(
            args.image_name, config_map.metadata.name, account.service_account.metadata.name
        ).apply(
            lambda v: nvml_mock.daemon_set_spec(
                args.tenant, str(v[0]), str(v[1]), str(v[2]), len(config["devices"]), self.config_digest
            )
        )
        self.daemon_set = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            # Background deletion: a node whose kubelet already died cannot hold `destroy` (kube_objects).
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=name, namespace=NAMESPACE, labels=labels, annotations=dict(kube_objects.BACKGROUND_DELETION)
            ),
            spec=spec,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.image_load, account.binding, *after],
            ),
        )
        # GPU containers start without a driver in them (gpu_tenancy.builders.mock_nvml.cuda_control).
        ga = limits.mutating_admission_policy_api(args.kubernetes_version).endswith("/v1")
        api = k8s.admissionregistration.v1 if ga else k8s.admissionregistration.v1beta1
        policy = api.MutatingAdmissionPolicy(
            f"{name}-cuda-control-policy",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=cuda_control.POLICY_NAME, labels=labels),
            spec=cuda_control.policy_spec(),
            opts=k8s_opts,
        )
        self.cuda_control = api.MutatingAdmissionPolicyBinding(
            f"{name}-cuda-control-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=cuda_control.POLICY_NAME, labels=labels),
            spec=cuda_control.binding_spec(),
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[policy])),
        )
        self.register_outputs(
            {
                "daemonSetName": self.daemon_set.metadata.name,
                "configDigest": self.config_digest,
                "gpus": len(config["devices"]),
                "hamiDevicePlugin": self.hami_device_plugin,
            }
        )
