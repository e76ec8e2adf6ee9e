"""How `make status` reads one pod (gpu_tenancy/cli/status/report.py): whether it waits for a GPU, why, which
workload it belongs to, and which slices it holds, on pods shaped as the API server returns them."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_tenancy.cli.status import report as status
from gpu_tenancy.hami.allocation import GpuView, Slice

GPU_ASK = {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"}}


def _pod(name: str = "p", namespace: str = "workloads", **parts: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, **parts.pop("metadata", {})},
        "spec": {"containers": [{"name": "main", "resources": GPU_ASK}], **parts.pop("spec", {})},
        "status": {"phase": "Pending", **parts.pop("status", {})},
    }
    assert not parts
    return pod


@pytest.mark.parametrize(("pod", "pending"), [
    (_pod(), True),
    ({**_pod(), "status": None}, True),  # no status yet: the API server defaults the phase to Pending
    ({**_pod(), "status": {}}, True),
    (_pod(status={"phase": "Running"}), False),
    (_pod(spec={"nodeName": "n1"}), False),  # bound by the scheduler
    (_pod(metadata={"annotations": {"hami.io/vgpu-node": "n1"}}), False),  # HAMi chose its node
    (_pod(metadata={"deletionTimestamp": "2026-12-05T00:00:00Z"}), False),  # on its way out
    (_pod(spec={"containers": [{"name": "main", "resources": {"limits": {"cpu": "1"}}}]}), False),  # no GPU
])
def test_a_pod_waits_for_a_gpu_only_while_unbound_alive_and_asking_for_one(pod: dict[str, Any], pending: bool) -> None:
    assert status.is_pending(pod) is pending


@pytest.mark.parametrize(("resources", "asks"), [
    ({"limits": {"nvidia.com/gpucores": "20"}}, True),
    ({"requests": {"nvidia.com/gpumem-percentage": "50"}}, True),
    ({"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}, False),
    ({}, False),
])
def test_a_gpu_ask_is_any_hami_resource_in_limits_or_requests(resources: dict[str, Any], asks: bool) -> None:
    assert status.asks_for_gpu(_pod(spec={"containers": [{"name": "main", "resources": resources}]})) is asks


def test_an_init_container_asking_for_a_gpu_counts() -> None:
    pod = _pod(spec={"initContainers": [{"name": "warm", "resources": GPU_ASK}], "containers": [{"name": "main"}]})
    assert status.asks_for_gpu(pod)


@pytest.mark.parametrize(("conditions", "reason"), [
    ([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
       "message": "0/1 nodes are available:\n  1 NodeInsufficientDevice."}],
     "0/1 nodes are available: 1 NodeInsufficientDevice."),
    ([{"type": "PodScheduled", "status": "False", "reason": "SchedulerError"}], "SchedulerError"),
    ([{"type": "PodScheduled", "status": "False"}], "not scheduled yet (no PodScheduled condition)"),
    ([{"type": "Initialized", "status": "False", "message": "containers with incomplete status"}],
     "not scheduled yet (no PodScheduled condition)"),
    ([{"type": "PodScheduled", "status": "True", "message": "bound"}], "not scheduled yet (no PodScheduled condition)"),
])
def test_the_pending_reason_is_the_schedulers_on_one_line(conditions: list[dict[str, str]], reason: str) -> None:
    assert status.pending_reason(_pod(status={"conditions": conditions})) == reason


def test_a_pod_is_named_with_its_namespace_outside_the_workloads_namespace() -> None:
    assert status.pod_label(_pod("a-1")) == "a-1"
    assert status.pod_label(_pod("job-1", "team")) == "team/job-1"
    assert status.pod_label({"metadata": {"name": "bare"}}) == "default/bare"
    assert status.pod_label({"metadata": {"namespace": "workloads"}}) == "?"


@pytest.mark.parametrize(("metadata", "workload"), [
    ({"labels": {"gpu-tenancy.io/workload": "a-infer", "pod-template-hash": "6c9f7d8b5"},
      "ownerReferences": [{"kind": "ReplicaSet", "name": "other-6c9f7d8b5"}]}, "a-infer"),
    ({"labels": {"pod-template-hash": "6c9f7d8b5"}, "ownerReferences": [{"kind": "ReplicaSet", "name": "web-6c9f7d8b5"}]},
     "web"),
    ({"ownerReferences": [{"kind": "ReplicaSet", "name": "web-6c9f7d8b5"}]}, "web-6c9f7d8b5"),  # no hash label
    # Only a ReplicaSet's name carries the template hash.
    ({"labels": {"pod-template-hash": "abc12"}, "ownerReferences": [{"kind": "Job", "name": "train-abc12"}]},
     "train-abc12"),
    ({"ownerReferences": [{"kind": "StatefulSet"}, {"kind": "StatefulSet", "name": "db"}]}, "db"),
    ({"ownerReferences": [{"kind": "Job"}]}, "p"),  # an owner without a name names nothing
])
def test_a_pods_workload_is_its_label_else_its_owner(metadata: dict[str, Any], workload: str) -> None:
    assert status.workload_of(_pod(metadata=metadata)) == workload


NODE = {"metadata": {"name": "n1", "annotations": {"hami.io/node-nvidia-register": (
    '[{"id":"GPU-a","index":0,"count":10,"devmem":23034,"devcore":100,"type":"NVIDIA-L4","numa":0,"health":true},'
    '{"id":"GPU-b","index":1,"count":10,"devmem":23034,"devcore":100,"type":"NVIDIA-L4","numa":0,"health":true}]')}}}


def _running(name: str, allocated: str, **parts: Any) -> dict[str, Any]:
    annotations = {"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": allocated}
    return _pod(name, metadata={"annotations": annotations, **parts.pop("metadata", {})},
                status={"phase": "Running", **parts.pop("status", {})}, **parts)


def _slices(*pods: dict[str, Any]) -> dict[str, list[Slice]]:
    view = status.tenant_view("t", status.TenantObjects(nodes=[NODE], pods=pods))
    return {gpu.uuid: list(gpu.slices) for gpu in view.gpus}


def test_one_container_holding_two_cards_holds_a_slice_of_each() -> None:
    assert _slices(_running("p", "GPU-a,NVIDIA,1024,10:GPU-b,NVIDIA,2048,20:;")) == {
        "GPU-a": [Slice("p", "p", 1024, 10)], "GPU-b": [Slice("p", "p", 2048, 20)]}


def test_an_entry_with_a_fifth_field_reads_as_the_decoder_reads_it() -> None:
    assert _slices(_running("p", "GPU-a,NVIDIA,1024,10,x:;")) == {"GPU-a": [Slice("p", "p", 1024, 10)], "GPU-b": []}


def test_a_running_init_container_holds_its_slice_under_its_own_name() -> None:
    pod = _running("p", "GPU-a,NVIDIA,1024,10:;", spec={"initContainers": [{"name": "warm"}]},
                   status={"initContainerStatuses": [{"name": "warm", "state": {"running": {}}}]})
    assert _slices(pod) == {"GPU-a": [Slice("p", "p/init:warm", 1024, 10)], "GPU-b": []}


def test_a_pod_with_a_node_and_no_allocation_yet_holds_nothing() -> None:
    pod = _pod("p", metadata={"annotations": {"hami.io/vgpu-node": "n1"}}, status={"phase": "Running"})
    assert _slices(pod) == {"GPU-a": [], "GPU-b": []}


def test_a_node_without_a_register_has_no_gpus_and_a_device_without_fields_reads_as_go_zero_values() -> None:
    bare = {"metadata": {"name": "n0"}}
    sparse = {"metadata": {"name": "n1", "annotations": {"hami.io/node-nvidia-register": '[{"health":true}]'}}}
    view = status.tenant_view("t", status.TenantObjects(nodes=[bare, sparse]))
    # HAMi's DeviceInfo fields are `omitempty`: an absent number is 0; an absent id or type shows as "?".
    assert view.gpus == (GpuView(node="n1", model="?", index=0, uuid="?", memory_mib=0, cores=0, split_count=0),)


def test_several_containers_hold_their_slices_under_their_names_or_positions() -> None:
    # Three container chunks for two containers (the second unnamed): the third is named by its position.
    pod = _running("p", "GPU-a,NVIDIA,1,1:;GPU-b,NVIDIA,2,2:;GPU-b,NVIDIA,3,3:;",
                   spec={"containers": [{"name": "a"}, {}]})
    assert _slices(pod) == {"GPU-a": [Slice("p", "p/a", 1, 1)], "GPU-b": [Slice("p", "p/1", 2, 2), Slice("p", "p/#2", 3, 3)]}


def test_an_unnamed_running_init_container_is_named_by_its_position() -> None:
    pod = _running("p", "GPU-a,NVIDIA,1,1:;GPU-b,NVIDIA,2,2:;", spec={"initContainers": [{}]},
                   status={"initContainerStatuses": [{"state": {"running": {}}}]})
    assert _slices(pod) == {"GPU-a": [Slice("p", "p/init:0", 1, 1)], "GPU-b": [Slice("p", "p/main", 2, 2)]}


def test_quotas_outside_the_workloads_namespace_are_named_and_suffixed_limits_read() -> None:
    quotas = [
        {"metadata": {"name": "gpu", "namespace": "workloads"}, "spec": {"hard": {"limits.nvidia.com/gpu": "1k"}},
         "status": {"used": {"limits.nvidia.com/gpu": "2"}}},
        {"metadata": {"name": "team-gpu", "namespace": "team"}, "spec": {"hard": {"limits.nvidia.com/gpumem": "4096"}}},
    ]
    view = status.tenant_view("t", status.TenantObjects(nodes=[NODE], quotas=quotas))
    assert {(q.key, q.used, q.limit) for q in view.quota} == {
        ("limits.nvidia.com/gpu", 2, 1000), ("team/team-gpu: limits.nvidia.com/gpumem", 0, 4096)}


def _quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None) -> dict[str, Any]:
    quota: dict[str, Any] = {"metadata": {"name": name, "namespace": "workloads"}, "spec": {"hard": hard}}
    if used is not None:
        quota["status"] = {"used": used}
    return quota


@pytest.mark.parametrize("order", [1, -1])
def test_a_pending_pod_is_told_the_tightest_of_its_namespaces_quotas(order: int) -> None:
    pending = _pod("w", spec={"containers": [{"name": "m", "resources": {
        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "5000"}}}]})
    quotas = [_quota("wide", {"limits.nvidia.com/gpumem": "8192"}), _quota("tight", {"limits.nvidia.com/gpumem": "4096"})]
    view = status.tenant_view("t", status.TenantObjects(nodes=[NODE], pods=[pending], quotas=quotas[::order]))
    assert [u.explanation for u in view.unplaced] == [
        "never fits: asks 5000 MiB, 0 % cores; quota: gpumem 0 used + 5000 > 4096 MiB"]


def test_a_quotas_other_keys_are_skipped_and_an_unreported_use_is_zero() -> None:
    quotas = [_quota("q", {"cpu": "4", "limits.nvidia.com/gpu": "2", "requests.nvidia.com/gpu": "3"},
                     {"requests.nvidia.com/gpu": "1"})]
    view = status.tenant_view("t", status.TenantObjects(nodes=[NODE], quotas=quotas))
    assert {(q.key, q.used, q.limit) for q in view.quota} == {
        ("limits.nvidia.com/gpu", 0, 2), ("requests.nvidia.com/gpu", 1, 3)}


def test_slices_and_waiting_pods_come_in_name_order_whatever_order_they_were_listed_in() -> None:
    team = _running("c", "GPU-a,NVIDIA,3,3:;")
    team["metadata"]["namespace"] = "team"
    pods = [_running("b", "GPU-a,NVIDIA,2,2:;"), _pod("z"), _running("a", "GPU-a,NVIDIA,1,1:;"), _pod("y"), team]
    view = status.tenant_view("t", status.TenantObjects(nodes=[NODE], pods=pods))
    assert [s.pod for s in view.gpus[0].slices] == ["team/c", "a", "b"]  # by namespace, then name
    assert [u.pod for u in view.unplaced] == ["y", "z"]


def test_an_unreadable_allocation_names_its_pod_and_annotation() -> None:
    with pytest.raises(ValueError, match=r"^pod team/p: unreadable hami.io/vgpu-devices-allocated: "
                                         r"allocated device entry needs 4 fields: 'GPU-a,NVIDIA'$"):
        status.tenant_view("t", status.TenantObjects(nodes=[NODE], pods=[_running("p", "GPU-a,NVIDIA:;", metadata={
            "namespace": "team"})]))


def test_a_slice_on_a_card_the_node_no_longer_registers_keeps_its_uuid() -> None:
    view = status.tenant_view("t", status.TenantObjects(nodes=[NODE], pods=[_running("p", "GPU-gone,NVIDIA,5,5:;")]))
    assert view.gpus[0] == GpuView(node="n1", model="(not registered)", index=-1, uuid="GPU-gone", memory_mib=0,
                                   cores=0, split_count=0, slices=(Slice("p", "p", 5, 5),))


def test_a_node_without_a_name_is_shown_as_unknown() -> None:
    nameless = {"metadata": {"annotations": NODE["metadata"]["annotations"]}}
    assert {gpu.node for gpu in status.tenant_view("t", status.TenantObjects(nodes=[nameless])).gpus} == {"?"}


def test_cards_are_listed_by_node_then_index_then_uuid() -> None:
    # No "index" is Go's zero value, 0; two cards a node no longer registers (index -1) by their uuid.
    node = {"metadata": {"name": "n1", "annotations": {"hami.io/node-nvidia-register": (
        '[{"id":"GPU-b","index":1,"count":10,"devmem":1,"devcore":100,"type":"T","health":true},'
        '{"id":"GPU-c","count":10,"devmem":1,"devcore":100,"type":"T","health":true}]')}}}
    pods = [_running("p", "GPU-z,NVIDIA,1,1:;"), _running("q", "GPU-y,NVIDIA,1,1:;")]
    view = status.tenant_view("t", status.TenantObjects(nodes=[node], pods=pods))
    assert [(gpu.uuid, gpu.index) for gpu in view.gpus] == [("GPU-y", -1), ("GPU-z", -1), ("GPU-c", 0), ("GPU-b", 1)]
