"""Pulumi component that runs the mock GPU agent DaemonSet inside a tenant cluster."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components import options
from components.cluster_role_account import cluster_role_account
from gpu_tenancy.builders import image_load, kube_objects
from gpu_tenancy.builders.mock_gpu_agent import agent_admission

REPO_ROOT = Path(__file__).resolve().parent.parent
AGENT_DIR = REPO_ROOT / "gpu_tenancy" / "hami" / "agent"
AGENT_SOURCES = [
    REPO_ROOT / "gpu_tenancy" / "__init__.py",
    REPO_ROOT / "gpu_tenancy" / "hami" / "__init__.py",
    REPO_ROOT / "gpu_tenancy" / "hami" / "protocol.py",
    *sorted(AGENT_DIR.glob("*.py")),
    AGENT_DIR / "Dockerfile",
    AGENT_DIR / "requirements.txt",
]
IMAGE_REPOSITORY = "gpu-tenancy/mock-gpu-agent"
NAMESPACE = "kube-system"
AGENT_UID = 10001  # the numeric USER of gpu_tenancy/hami/agent/Dockerfile


def agent_rbac_rules(node_name: pulumi.Input[str]) -> list[k8s.rbac.v1.PolicyRuleArgs]:
    """Least privilege: read/patch only its own Node (list/watch carry a metadata.name field selector,
    which the API server maps to the resource name), patch its status, and list/watch/patch pods; the pod
    patches are narrowed to the bind phase of pods on its node by an admission policy (agent_admission)."""
    return [
        k8s.rbac.v1.PolicyRuleArgs(
            api_groups=[""], resources=["nodes"], resource_names=[node_name], verbs=["get", "list", "watch", "patch"]
        ),
        k8s.rbac.v1.PolicyRuleArgs(
            api_groups=[""], resources=["nodes/status"], resource_names=[node_name], verbs=["patch"]
        ),
        k8s.rbac.v1.PolicyRuleArgs(api_groups=[""], resources=["pods"], verbs=["list", "watch", "patch"]),
    ]


def agent_source_digest() -> str:
    digest = hashlib.sha256()
    for path in AGENT_SOURCES:
        digest.update(str(path.relative_to(REPO_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@dataclass
class MockGpuAgentArgs:
    """The mock-GPU agent on one sim worker. Its provider (the tenant's) and what it waits for (the worker's join,
    the network) come in `opts`.

    Attributes:
        tenant (str): the tenant, for labels and the agent's TENANT.
        gpus (list[dict[str, Any]]): the tenant's GPUs as the stack declares them (by alias), the agent's inventory.
        worker_container (pulumi.Input[str]): the worker's container, whose containerd gets the image.
        node_name (pulumi.Input[str]): the worker's Node, the only one the agent may read and patch.
        image_tag (str | None): the agent image's tag. Default: None (the digest of its sources).
        split_count (int): how many pods may share one card (HAMi's device split count). Default: 10.
        worker_id (pulumi.Input[str] | None): the worker container's id: a replaced worker (same name, empty
            containerd) gets the image again. Default: None.
    """

    tenant: str
    gpus: list[dict[str, Any]]
    worker_container: pulumi.Input[str]
    node_name: pulumi.Input[str]
    image_tag: str | None = None
    split_count: int = 10
    worker_id: pulumi.Input[str] | None = None


class MockGpuAgent(pulumi.ComponentResource):
    def __init__(self, name: str, args: MockGpuAgentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:mock_gpu_agent:MockGpuAgent", name, None, opts)
        labels = {"gpu-tenancy.io/tenant": args.tenant, "gpu-tenancy.io/component": "mock-gpu-agent"}
        image_name = f"{IMAGE_REPOSITORY}:{args.image_tag or agent_source_digest()}"
        options.require_provider(self)
        after = options.dependencies(opts)
        # Kubernetes children inherit the tenant's provider; the image and its load use the default Docker and
        # command providers.
        child_opts = pulumi.ResourceOptions(parent=self, depends_on=after)

        self.image = docker.Image(
            f"{name}-image",
            image_name=image_name,
            build=docker.DockerBuildArgs(
                context=str(REPO_ROOT),
                dockerfile=str(AGENT_DIR / "Dockerfile"),
            ),
            skip_push=True,
            opts=child_opts,
        )
        self.image_load = command.local.Command(
            f"{name}-image-load",
            create=image_load.load_script(),
            interpreter=["/bin/sh", "-c"],
            environment={"IMAGE": image_name, "NODE_CONTAINER": args.worker_container},
            triggers=[self.image.id, *([args.worker_id] if args.worker_id is not None else [])],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.image, *after]),
        )

        metadata = k8s.meta.v1.ObjectMetaArgs(name=f"{name}", namespace=NAMESPACE, labels=labels)
        account = cluster_role_account(name, NAMESPACE, labels, agent_rbac_rules(args.node_name), child_opts)
        self.service_account = account.service_account
        self.cluster_role = account.cluster_role
        self.cluster_role_binding = account.binding
        # Before the agent runs: its pod patches only ever set the bind phase of pods on its node.
        username = agent_admission.service_account_user(NAMESPACE, name)
        pod_policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-pod-policy",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels=labels),
            spec=pulumi.Output.from_input(args.node_name).apply(
                lambda node: agent_admission.policy_spec(username, node)
            ),
            opts=child_opts,
        )
        self.pod_policy_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-pod-policy-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels=labels),
            spec=agent_admission.binding_spec(name),
            opts=pulumi.ResourceOptions.merge(child_opts, pulumi.ResourceOptions(depends_on=[pod_policy])),
        )
        inventory_json = json.dumps(args.gpus, sort_keys=True)
        self.inventory = k8s.core.v1.ConfigMap(
            f"{name}-inventory",
            metadata=metadata,
            data={"inventory.json": inventory_json},
            opts=child_opts,
        )
        # The agent reads its inventory once at start: a changed inventory must roll the pod.
        inventory_sha = hashlib.sha256(inventory_json.encode()).hexdigest()[:16]
        self.daemon_set = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=name, namespace=NAMESPACE, labels=labels, annotations=dict(kube_objects.BACKGROUND_DELETION)
            ),
            spec=k8s.apps.v1.DaemonSetSpecArgs(
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels=labels),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        labels=labels, annotations={"gpu-tenancy.io/inventory-sha256": inventory_sha}
                    ),
                    spec=k8s.core.v1.PodSpecArgs(
                        service_account_name=self.service_account.metadata.name,
                        security_context=k8s.core.v1.PodSecurityContextArgs(
                            run_as_non_root=True,
                            run_as_user=AGENT_UID,
                            run_as_group=AGENT_UID,
                            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                        ),
                        node_selector={kube_objects.GPU_NODE_LABEL: "true"},
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name="agent",
                                image=image_name,
                                image_pull_policy="Never",
                                env=[
                                    k8s.core.v1.EnvVarArgs(
                                        name="NODE_NAME",
                                        value_from=k8s.core.v1.EnvVarSourceArgs(
                                            field_ref=k8s.core.v1.ObjectFieldSelectorArgs(field_path="spec.nodeName")
                                        ),
                                    ),
                                    k8s.core.v1.EnvVarArgs(name="TENANT", value=args.tenant),
                                    k8s.core.v1.EnvVarArgs(
                                        name="INVENTORY_JSON", value="/etc/mock-gpu-agent/inventory.json"
                                    ),
                                    k8s.core.v1.EnvVarArgs(name="SPLIT_COUNT", value=str(args.split_count)),
                                    k8s.core.v1.EnvVarArgs(name="RESYNC_SECONDS", value="30"),
                                ],
                                resources=k8s.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "10m", "memory": "48Mi"}, limits={"memory": "128Mi"}
                                ),
                                security_context=k8s.core.v1.SecurityContextArgs(
                                    privileged=False,
                                    allow_privilege_escalation=False,
                                    run_as_non_root=True,
                                    run_as_user=AGENT_UID,
                                    run_as_group=AGENT_UID,
                                    read_only_root_filesystem=True,
                                    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                                ),
                                volume_mounts=[
                                    k8s.core.v1.VolumeMountArgs(
                                        name="inventory", mount_path="/etc/mock-gpu-agent", read_only=True
                                    )
                                ],
                            )
                        ],
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name="inventory",
                                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=self.inventory.metadata.name),
                            )
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.image_load, self.cluster_role_binding, self.pod_policy_binding, *after],
            ),
        )
        self.register_outputs({"imageName": image_name, "daemonSetName": self.daemon_set.metadata.name})
