"""`destroy` completes when a worker is already dead, and says what it skipped when the whole lab is gone.

A dead worker (its container removed, its host off) runs no kubelet: its pods are marked for deletion and
never finish until their Node is removed, which `destroy` does only after the tenant's workloads (the worker's
leave comes after everything on the node). Anything `destroy` waits for in between hangs it until the
provider's 10-minute timeout and fails it. tests/deletion_model.py runs the engine's delete order over each
example stack with every worker dead, with pulumi-kubernetes' and Kubernetes' deletion rules.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from deletion_model import dead_workers, destroy, lab_world, terminating_at_the_end
from policy_support import EXAMPLE_STACKS, Recorded, dev_stack, find
from worker_fakes import FakeHost

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.worker import worker_join

KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: tenant-admin-secret}}]\n"


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_destroy_waits_for_nothing_on_a_dead_worker(stack: str) -> None:
    resources = EXAMPLE_STACKS[stack]()
    nodes = dead_workers(resources)
    assert len(nodes) == 2
    world = lab_world(resources, nodes)
    assert any(pod.namespace == "workloads" for pod in world.pods), "the stack runs workload pods"
    assert [(b.name, b.waits_for) for b in destroy(resources, world)] == []
    assert terminating_at_the_end(resources, world) == []


def _without_annotation(resources: list[Recorded], typ: str, name: str, annotation: str) -> list[Recorded]:
    changed = copy.deepcopy(resources)
    target = find(changed, typ, name)
    target.inputs["metadata"]["annotations"].pop(annotation)
    return changed


def test_a_foreground_deployment_would_hold_destroy_on_its_pods() -> None:
    resources = _without_annotation(
        dev_stack(), "kubernetes:apps/v1:Deployment", "tenant-a-workloads-a-infer", "pulumi.com/deletionPropagationPolicy"
    )
    blocked = destroy(resources, lab_world(resources, dead_workers(resources)))
    assert [b.name for b in blocked] == ["tenant-a-workloads-a-infer"]


def test_an_awaited_namespace_would_hold_destroy_until_its_pods_node_is_removed() -> None:
    resources = _without_annotation(
        dev_stack(), "kubernetes:core/v1:Namespace", "tenant-b-workloads-namespace", "pulumi.com/skipAwait"
    )
    blocked = destroy(resources, lab_world(resources, dead_workers(resources)))
    assert [b.name for b in blocked] == ["tenant-b-workloads-namespace"]


def test_with_live_workers_nothing_waits_on_pods_either() -> None:
    resources = dev_stack()
    assert destroy(resources, lab_world(resources, set())) == []


def test_everything_that_runs_pods_on_a_tenant_worker_is_deleted_in_the_background() -> None:
    for stack in EXAMPLE_STACKS.values():
        for resource in stack():
            if resource.type in ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet") and not resource.read:
                annotations = resource.inputs["metadata"].get("annotations") or {}
                assert annotations.get("pulumi.com/deletionPropagationPolicy") == "background", resource.name


# --------------------------------------------------------------------------- the worker's leave


def test_a_leave_whose_container_is_gone_still_removes_the_node(tmp_path: Path) -> None:
    """What frees the dead worker's pods (PodGC) and with them its tenant's Namespace."""
    host = FakeHost(tmp_path)
    env = {"GPU_TENANCY_JOIN_CONFIGURATION": worker_join.join_configuration_template(
        "10.0.0.5:6443", "sha256:abc", "lab-tenant-a-worker", kube_objects.gpu_node_labels("tenant-a"))}
    assert host.run(worker_join.join_script("tenant-a"), KUBECONFIG, env).returncode == 0
    import shutil

    shutil.rmtree(host.root)
    result = host.run(worker_join.leave_script(), KUBECONFIG)
    assert result.returncode == 0, result.stderr
    assert host.objects("nodes") == {}


def _unreachable_kubectl(host: FakeHost) -> None:
    (host.bin / "kubectl").write_text(
        "#!/bin/sh\necho 'Unable to connect to the server: dial tcp 172.18.255.200:6443: connect: no route to host' >&2\n"
        "exit 1\n"
    )


def test_a_leave_against_a_tenant_that_does_not_answer_fails(tmp_path: Path) -> None:
    """Fail closed: an API that does not answer may only be down for a moment, and a Node left behind
    blocks the next join under that name."""
    host = FakeHost(tmp_path)
    _unreachable_kubectl(host)
    result = host.run(worker_join.leave_script(), KUBECONFIG)
    assert result.returncode == 1 and "Unable to connect" in result.stderr


def test_a_leave_after_the_lab_is_gone_skips_the_node_and_says_so(tmp_path: Path) -> None:
    """`make destroy` sets GPU_TENANCY_LAB_GONE=1 only once it has seen the kind cluster gone: the tenant's
    control plane went with it, so there is no Node left to remove."""
    host = FakeHost(tmp_path)
    _unreachable_kubectl(host)
    result = host.run(worker_join.leave_script(), KUBECONFIG, {"GPU_TENANCY_LAB_GONE": "1"})
    assert result.returncode == 0
    assert "skipped removing Node lab-tenant-a-worker" in result.stderr
