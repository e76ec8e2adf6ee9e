import hashlib
import json
from typing import Any

import pulumi
import pytest
from recording_mocks import RecordingMocks

from gpu_tenancy.builders import image_load

K8S_TYPES = {
    "kubernetes:core/v1:ServiceAccount",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "kubernetes:core/v1:ConfigMap",
    "kubernetes:apps/v1:DaemonSet",
}


@pytest.fixture
def mocks() -> RecordingMocks:
    recording = RecordingMocks()
    pulumi.runtime.set_mocks(recording, preview=False)
    return recording


@pulumi.runtime.test
def test_component_wires_provider_rbac_and_labels(mocks: RecordingMocks) -> Any:
    import pulumi_kubernetes as k8s

    from components.mock_gpu_agent import MockGpuAgent, MockGpuAgentArgs

    provider = k8s.Provider("tenant-a-k8s", kubeconfig="{}")
    agent = MockGpuAgent(
        "tenant-a-gpu",
        MockGpuAgentArgs(
            tenant="tenant-a",
            gpus=[{"model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920, "count": 1}],
            worker_container="tenant-a-worker",
            node_name="tenant-a-worker",
            worker_id="worker-container-id",
        ),
        # The provider as Pulumi's components take it: in opts, inherited by every Kubernetes child.
        pulumi.ResourceOptions(provider=provider),
    )

    def check(provider_urn: str) -> None:
        k8s_resources = [r for r in mocks.resources if r.typ in K8S_TYPES]
        assert {r.typ for r in k8s_resources} == K8S_TYPES
        for resource in k8s_resources:
            assert resource.name.startswith("tenant-a-gpu-")
            assert provider_urn in (resource.provider or "")
            labels = resource.inputs["metadata"]["labels"]
            assert labels == {"gpu-tenancy.io/tenant": "tenant-a", "gpu-tenancy.io/component": "mock-gpu-agent"}
        role = next(r for r in k8s_resources if r.typ.endswith(":ClusterRole"))
        rules = {
            tuple(rule["resources"]): (sorted(rule["verbs"]), rule.get("resourceNames")) for rule in role.inputs["rules"]
        }
        # Least privilege: its own node only; pods cluster-wide (any namespace can run on the node).
        assert rules == {
            ("nodes",): (["get", "list", "patch", "watch"], ["tenant-a-worker"]),
            ("nodes/status",): (["patch"], ["tenant-a-worker"]),
            ("pods",): (["list", "patch", "watch"], None),
        }
        assert all(rule["apiGroups"] == [""] for rule in role.inputs["rules"])
        daemon_set = next(r for r in k8s_resources if r.typ.endswith(":DaemonSet"))
        pod_spec = daemon_set.inputs["spec"]["template"]["spec"]
        inventory = next(r for r in k8s_resources if r.typ.endswith(":ConfigMap")).inputs["data"]["inventory.json"]
        assert json.loads(inventory) == [{"count": 1, "memoryMiB": 81920, "model": "NVIDIA-A100-SXM4-80GB"}]
        template_annotations = daemon_set.inputs["spec"]["template"]["metadata"]["annotations"]
        assert template_annotations == {
            "gpu-tenancy.io/inventory-sha256": hashlib.sha256(inventory.encode()).hexdigest()[:16]
        }, "a changed inventory must roll the agent pod"
        assert pod_spec["nodeSelector"] == {"gpu-tenancy.io/gpu-node": "true"}
        container = pod_spec["containers"][0]
        assert container["imagePullPolicy"] == "Never"
        assert container["image"].startswith("gpu-tenancy/mock-gpu-agent:")
        security = container["securityContext"]
        assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
        assert security["runAsNonRoot"] is True and security["runAsUser"] == 10001
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert pod_spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod_spec["securityContext"]["runAsNonRoot"] is True
        assert not pod_spec.get("hostNetwork") and not pod_spec.get("hostPID")
        assert all("hostPath" not in volume for volume in pod_spec["volumes"])
        image = next(r for r in mocks.resources if r.typ == "docker:index/image:Image")
        assert image.inputs["skipPush"] is True
        load = next(r for r in mocks.resources if r.typ == "command:local:Command")
        assert load.inputs["create"] == image_load.load_script()
        assert load.inputs["environment"]["NODE_CONTAINER"] == "tenant-a-worker"
        assert load.inputs["environment"]["IMAGE"] == image.inputs["imageName"]
        assert load.inputs["triggers"] == ["tenant-a-gpu-image-id", "worker-container-id"]

    return pulumi.Output.all(provider.urn, agent.daemon_set.id).apply(lambda values: check(values[0]))
