# mypy: disable-error-code="union-attr"
"""Who reaches whom on the network, measured from inside the deployed stack's pods (kind modes), as
docs/threat-model.md#per-mode states it:

* test_23: a pod in a tenant's `workloads` namespace (the NetworkPolicy of gpu_tenancy/builders/workloads)
  reaches neither the other tenant's API server, nor the other tenant's worker's kubelet, nor its own tenant's
  worker's kubelet: every one of them is a private address;
* test_24: a pod in the tenant's `kube-system` (a tenant admin's, no NetworkPolicy) does reach the other tenant's
  API server, which then authenticates it: the residual risk the threat model names, measured so that the docs
  change when it does.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlparse

import pytest
from kubernetes import client

from gpu_tenancy.builders.workloads import workloads
from tests.integration import checks
from tests.integration.conftest import DeployedLab
from tests.integration.support import wait_for
from tests.integration.test_lab import only_node, tenant_core

pytestmark = [pytest.mark.e2e, pytest.mark.e2e_mode("sim", "sim-nvml", reason="kind's network, not a lab's")]

BUSYBOX = "docker.io/library/busybox:1.37.0"  # as tests/integration/test_lab_gpu_access.py
KUBELET_PORT = 10250


def _node_address(lab: DeployedLab, tenant: str) -> str:
    node = tenant_core(lab, tenant).read_node(only_node(lab, tenant))
    (address,) = [a.address for a in node.status.addresses if a.type == "InternalIP"]
    return str(address)


def _api_address(lab: DeployedLab, tenant: str) -> str:
    url = urlparse(lab.tenant_client(tenant).configuration.host)
    return f"{url.hostname}:{url.port or 443}"


def probe(lab: DeployedLab, tenant: str, namespace: str, targets: dict[str, str]) -> dict[str, str]:
    """One pod per call, restricted as Pod Security `restricted` asks, that tries each `host:port` over HTTPS."""
    core = tenant_core(lab, tenant)
    name = f"e2e-reach-{uuid.uuid4().hex[:6]}"
    script = "; ".join(f"echo '== {label}'; wget -q -T 5 --no-check-certificate -O- https://{target}/version 2>&1"
                       for label, target in targets.items())
    container: Any = client.V1Container(
        name="main", image=BUSYBOX, command=["sh", "-c", script + "; true"],
        security_context=client.V1SecurityContext(
            run_as_non_root=True, run_as_user=65534, allow_privilege_escalation=False,
            capabilities=client.V1Capabilities(drop=["ALL"]),
            seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
        ),
    )
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name=name),
                       spec=client.V1PodSpec(containers=[container], restart_policy="Never",
                                             termination_grace_period_seconds=0))
    core.create_namespaced_pod(namespace, pod)
    try:
        wait_for(lambda: str(core.read_namespaced_pod(name, namespace).status.phase) in ("Succeeded", "Failed"),
                 timeout_s=180, message=f"probe pod {namespace}/{name} finished")
        log = core.read_namespaced_pod_log(name, namespace)
    finally:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    sections = {part.split("\n", 1)[0].strip(): part.split("\n", 1)[1] if "\n" in part else ""
                for part in log.split("== ")[1:]}
    return {label: checks.reach_verdict(sections.get(label, "")) for label in targets}


def test_23_workload_pods_reach_no_private_address_of_the_platform(lab: DeployedLab) -> None:
    targets = {
        "tenant-b API server": _api_address(lab, "tenant-b"),
        "tenant-b kubelet": f"{_node_address(lab, 'tenant-b')}:{KUBELET_PORT}",
        "own kubelet": f"{_node_address(lab, 'tenant-a')}:{KUBELET_PORT}",
    }
    seen = probe(lab, "tenant-a", workloads.WORKLOAD_NAMESPACE, targets)
    assert seen == dict.fromkeys(targets, checks.REACH_CLOSED), seen


def test_24_an_admins_pod_reaches_the_other_tenants_api_server_which_authenticates(lab: DeployedLab) -> None:
    target = {"tenant-b API server": _api_address(lab, "tenant-b")}
    assert probe(lab, "tenant-a", "kube-system", target) == dict.fromkeys(target, checks.REACH_OPEN)
