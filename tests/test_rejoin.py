"""A kind worker whose join is replaced while its container stays (its tenant's control plane was replaced,
tests/test_lifecycle.py) joins again: the old join's delete must leave the node as a fresh one, and the new
join removes the old Node itself (the join's delete needs no kubeconfig).

Runs gpu_tenancy/builders/worker/worker_join.py's scripts in the order the engine runs a delete-first replacement
(old delete, then new create) against tests/worker_fakes.py.
"""

from __future__ import annotations

from pathlib import Path

from worker_fakes import FakeHost

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.builders.worker import worker_join

KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: tenant-admin-secret}}]\n"
TEMPLATE = worker_join.join_configuration_template(
    "10.0.0.5:6443", "sha256:abc", "lab-tenant-a-worker", kube_objects.gpu_node_labels("tenant-a")
)


def test_a_replaced_join_in_the_same_container_joins_again(tmp_path: Path) -> None:
    host = FakeHost(tmp_path)
    env = {"GPU_TENANCY_JOIN_CONFIGURATION": TEMPLATE}
    assert host.run(worker_join.join_script("tenant-a"), KUBECONFIG, env).returncode == 0
    left = host.run(worker_join.reset_script(), KUBECONFIG)
    assert left.returncode == 0, left.stderr
    assert host.resets() == 1 and not host.file(worker_join.KUBELET_CONF).exists()
    rejoined = host.run(worker_join.join_script("tenant-a"), KUBECONFIG, env)
    assert rejoined.returncode == 0, rejoined.stderr
    assert len(host.joins()) == 2, "the second join must run kubeadm join again"
    assert set(host.objects("nodes")) == {"lab-tenant-a-worker"}
