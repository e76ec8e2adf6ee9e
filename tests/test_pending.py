"""Why a pending pod waits, in the tenant's terms (gpu_tenancy.cli.status.pending), on the recorded tenants.

The recorded objects (tests/fixtures/status/, HAMi v2.10.0 annotations) are changed the way a user's
cluster would be: a pod asking for more, a card whose slots are all taken, another namespace. Expected
texts are written out by hand from the recorded numbers (an L4 registers 23034 MiB in real mode, the A100
81920 MiB with 4 × 10240 MiB and 4 × 20 % held, tenant-a's quota 61440 MiB / 100 %).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fake_apiserver import recorded
from test_status import registered_model

from gpu_tenancy.cli.status import pending
from gpu_tenancy.cli.status import report as status
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.allocation import GpuView, Slice, Unplaced
from gpu_tenancy.hami.kubelet import KUBELET_MAX_PODS


def tenant(mode: str, name: str) -> dict[str, Any]:
    return copy.deepcopy(recorded(mode)[name])


def waiting_pod(data: dict[str, Any], template: dict[str, Any], namespace: str = "workloads", *,
                limits: dict[str, str], use: str | None = None, name: str = "x-train-0") -> dict[str, Any]:
    pod = copy.deepcopy(template)
    pod["metadata"].update(name=name, namespace=namespace)
    annotations = {k: v for k, v in pod["metadata"]["annotations"].items() if not k.startswith("hami.io/")}
    annotations.pop("nvidia.com/use-gputype", None)
    if use:
        annotations["nvidia.com/use-gputype"] = use
    pod["metadata"]["annotations"] = annotations
    pod["spec"].pop("nodeName", None)
    pod["spec"]["containers"][0]["resources"] = {"limits": limits, "requests": dict(limits)}
    pod["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 1/1 CardInsufficientMemory. preemption: 0/1 nodes are available: "
                   "1 No preemption victims found for incoming pod.."}]}
    data["pods"].append(pod)
    return pod


def unplaced(name: str, data: dict[str, Any]) -> list[Unplaced]:
    return list(status.tenant_view(name, status.TenantObjects(data["nodes"], data["pods"], data["resourcequotas"]))
                .unplaced)


@pytest.mark.parametrize("mode", ["sim", "real"])
def test_type_filter_no_card_of_the_tenant_matches(mode: str) -> None:
    l4 = registered_model(mode, "tenant-b")  # both of its cards are L4s, as recorded
    (waiting,) = unplaced("tenant-b", tenant(mode, "tenant-b"))
    assert waiting.explanation == f"never fits: asks 1 × A100 (type filter); tenant-b has 2 × {l4}"
    assert waiting.reason == "0/1 nodes are available: 1 2/2 CardTypeMismatch"


def test_more_memory_than_any_card_of_the_tenant_has() -> None:
    data = tenant("real", "tenant-b")
    data["pods"].pop(2)
    waiting_pod(data, data["pods"][0], limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"})
    (waiting,) = unplaced("tenant-b", data)
    assert waiting.explanation == "never fits: asks 30000 MiB; the largest card has 23034 MiB (gpu-l4-01 / NVIDIA L4 #0)"


def test_memory_that_would_fit_once_others_leave() -> None:
    data = tenant("real", "tenant-a")
    waiting_pod(data, data["pods"][0], "team-x", limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "50000",
                                                         "nvidia.com/gpucores": "10"})
    (waiting,) = unplaced("tenant-a", data)
    assert waiting.explanation == (
        "waits for capacity: asks 50000 MiB; largest free slice 40960 MiB on gpu-a100-01 / NVIDIA A100-SXM4-80GB #0")
    assert waiting.pod == "team-x/x-train-0"


def test_a_quota_smaller_than_the_pod_never_fits() -> None:
    data = tenant("real", "tenant-a")
    waiting_pod(data, data["pods"][0], limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "70000",
                                               "nvidia.com/gpucores": "10"})
    (waiting,) = unplaced("tenant-a", data)
    assert waiting.explanation == "never fits: asks 70000 MiB, 10 % cores; quota: gpumem 0 used + 70000 > 61440 MiB, gpucores 0/100 %"


def test_the_namespace_quota_hami_enforces() -> None:
    data = tenant("real", "tenant-a")
    waiting_pod(data, data["pods"][0], limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000",
                                               "nvidia.com/gpucores": "10"})
    (waiting,) = unplaced("tenant-a", data)
    assert waiting.explanation == (
        "waits for quota: asks 30000 MiB, 10 % cores; quota: gpumem 40960 used + 30000 > 61440 MiB, gpucores 80/100 %")


def test_slices_of_other_namespaces_do_not_count_against_this_namespaces_quota() -> None:
    data = tenant("real", "tenant-a")
    data["pods"][0]["metadata"]["namespace"] = "team-x"  # 10240 MiB, 20 % of the card, outside `workloads`
    waiting_pod(data, data["pods"][1], limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000",
                                               "nvidia.com/gpucores": "10"})
    (waiting,) = unplaced("tenant-a", data)
    # quota: 30720 used + 30000 <= 61440; card: 40960 MiB and 20 % free
    assert waiting.explanation.startswith("asks 30000 MiB, 10 % cores; fits now on gpu-a100-01")


def test_every_slot_of_the_card_taken() -> None:
    data = tenant("sim", "tenant-a")
    annotations = data["nodes"][0]["metadata"]["annotations"]
    annotations[hami.NODE_REGISTER_ANNOTATION] = annotations[hami.NODE_REGISTER_ANNOTATION].replace(
        '"count":10', '"count":4')
    waiting_pod(data, data["pods"][0], limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024",
                                               "nvidia.com/gpucores": "10"})
    (waiting,) = unplaced("tenant-a", data)
    a100 = registered_model("sim", "tenant-a")
    assert waiting.explanation == (
        f"waits for capacity: asks 1024 MiB, 10 % cores; every slot taken on 1 card(s): "
        f"gpu-tenancy-dev-tenant-a-worker / {a100} #0 4/4")


def test_a_pod_that_fits_now_says_so() -> None:
    data = tenant("real", "tenant-b")
    data["pods"].pop(2)
    waiting_pod(data, data["pods"][0], limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096",
                                               "nvidia.com/gpucores": "10"})
    (waiting,) = unplaced("tenant-b", data)
    assert waiting.explanation.startswith(
        "asks 4096 MiB, 10 % cores; fits now on gpu-l4-01 / NVIDIA L4 #0 by HAMi's rules: the scheduler has not "
        "retried yet")


def test_no_gpu_registered() -> None:
    data = tenant("sim", "tenant-b")
    data["nodes"][0]["metadata"]["annotations"][hami.NODE_REGISTER_ANNOTATION] = "[]"
    (waiting,) = unplaced("tenant-b", data)
    assert waiting.explanation.startswith("tenant-b has no GPU registered")


def test_pods_asking_alike_are_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_plan = pending.plan

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(pending, "plan", counting)
    data = tenant("real", "tenant-b")
    for i in range(20):
        waiting_pod(data, data["pods"][2], limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"}, use="A100",
                    name=f"b-train-{i}")
    waiting = unplaced("tenant-b", data)
    assert len(waiting) == 21 and len({u.explanation for u in waiting}) == 1
    assert len(calls) == 2 * 2  # now and on idle cards, for each of the two distinct requests


@pytest.mark.parametrize(("message", "cleaned"), [
    ("0/1 nodes are available: 1 2/2 CardTypeMismatch. preemption: 0/1 nodes are available: 1 No preemption "
     "victims found for incoming pod..", "0/1 nodes are available: 1 2/2 CardTypeMismatch"),
    ("0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 "
     "1/1 CardInsufficientMemory. preemption: 0/3 nodes are available: 3 Preemption is not helpful for "
     "scheduling..", "0/3 nodes are available: 1 node(s) had untolerated taint "
     "{node-role.kubernetes.io/control-plane: }, 2 1/1 CardInsufficientMemory"),
    ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.\n preemption: 0/2 nodes are available: 2 No "
     "preemption victims found for incoming pod.", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu"),
    ("node(s) didn't match Pod's node affinity/selector", "node(s) didn't match Pod's node affinity/selector"),
    # a plugin message ending in a period gets another from SeparatorFormat, mid-message too
    ("0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.. preemption: not eligible due to "
     "preemptionPolicy=Never..", "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
     "preemption: not eligible due to preemptionPolicy=Never"),
])
def test_scheduler_message_cleaned(message: str, cleaned: str) -> None:
    assert pending.clean_scheduler_message(message) == cleaned


# --------------------------------------------------------------------------- cards built by hand
# Two-node tenants of NVIDIA L4s (23034 MiB as NVML reports it, 100 % cores, 10 slots), registered as the
# device plugin writes `hami.io/node-nvidia-register` (DeviceInfo: id, index, count, devmem, devcore, type,
# health) and holding what the live view read.

L4_MIB = 23034


def l4_tenant(held: dict[tuple[str, int], tuple[int, int]]) -> pending.TenantGpus:
    """Nodes n1 (L4 #0, #1) and n2 (L4 #0); `held`: (node, index) -> (MiB, % cores) one pod holds there."""
    registered: dict[str, list[dict[str, Any]]] = {"n1": [], "n2": []}
    gpus = []
    for node, index in (("n1", 0), ("n1", 1), ("n2", 0)):
        uuid = f"GPU-{node}-{index}"
        registered[node].append({"id": uuid, "index": index, "count": 10, "devmem": L4_MIB, "devcore": 100,
                                 "type": "NVIDIA L4", "health": True})
        mib, cores = held.get((node, index), (0, 0))
        slices = (Slice("holder", f"holder-{node}-{index}", mib, cores),) if mib else ()
        gpus.append(GpuView(node, "NVIDIA L4", index, uuid, L4_MIB, 100, 10, slices))
    return pending.TenantGpus("tenant-l", registered, gpus)


def gpu_pod(limits: dict[str, str], requests: dict[str, str] | None = None, namespace: str = "workloads",
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    resources = {"limits": limits, "requests": dict(limits) if requests is None else requests}
    return {"metadata": {"name": "p", "namespace": namespace, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "main", "resources": resources}]}}


def test_the_card_with_the_largest_free_slice_is_named_lowest_index_first() -> None:
    # n1 #1 and n2 #0 both have 13034 MiB free; of two cards equally free the one with the lower index is named.
    explainer = pending.Explainer(l4_tenant({("n1", 0): (20000, 10), ("n1", 1): (10000, 10), ("n2", 0): (10000, 10)}),
                                  {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "15000"})) == (
        "waits for capacity: asks 15000 MiB; largest free slice 13034 MiB on n2 / NVIDIA L4 #0")


def test_the_card_with_the_most_free_cores_is_named_lowest_index_first() -> None:
    explainer = pending.Explainer(l4_tenant({("n1", 0): (1000, 80), ("n1", 1): (1000, 60), ("n2", 0): (1000, 60)}),
                                  {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000",
                                      "nvidia.com/gpucores": "50"})) == (
        "waits for capacity: asks 50 % cores; most free 40 % on n2 / NVIDIA L4 #0")


def test_limits_are_read_before_requests() -> None:
    # HAMi's webhook (device.go mutateContainerResource) adds nvidia.com/gpu to the limits of a container that
    # asks GPU memory: after the API server defaulted requests from limits, so the requests lack it.
    explainer = pending.Explainer(l4_tenant({}), {})
    pod = gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"}, {"nvidia.com/gpumem": "30000"})
    assert explainer.explain(pod) == "never fits: asks 30000 MiB; the largest card has 23034 MiB (n1 / NVIDIA L4 #0)"


# Each annotation HAMi reads, set on a pod otherwise like one explained before: the explanation is its own.
@pytest.mark.parametrize(("annotation", "value", "said"), [
    ("nvidia.com/use-gputype", "A100", "never fits: asks 1 × A100 (type filter); tenant-l has 3 × NVIDIA L4"),
    ("nvidia.com/nouse-gputype", "L4", "never fits: asks 1 × not L4 (type filter); tenant-l has 3 × NVIDIA L4"),
    # binpack: the card already holding most (n1 #0); the default, spread, takes the emptiest (n1 #1)
    ("hami.io/gpu-scheduler-policy", "binpack", "asks 1000 MiB, 0 % cores; fits now on n1 / NVIDIA L4 #0"),
    # spread: the node holding least (n2); the default, binpack, takes the node holding most (n1)
    ("hami.io/node-scheduler-policy", "spread", "asks 1000 MiB, 0 % cores; fits now on n2 / NVIDIA L4 #0"),
])
def test_each_annotation_hami_reads_decides_the_explanation(annotation: str, value: str, said: str) -> None:
    explainer = pending.Explainer(l4_tenant({("n1", 0): (4096, 10)}), {})
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}
    plain = explainer.explain(gpu_pod(limits))
    assert plain.startswith("asks 1000 MiB, 0 % cores; fits now on n1 / NVIDIA L4 #1 by HAMi's rules")
    assert explainer.explain(gpu_pod(limits, annotations={annotation: value})).split(" by HAMi's rules")[0] == said


def test_the_same_request_in_another_namespace_meets_that_namespaces_quota() -> None:
    explainer = pending.Explainer(l4_tenant({}), {"team-x": pending.NamespaceQuota(gpumem=(0, 1024))})
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2048"}
    assert explainer.explain(gpu_pod(limits)).startswith("asks 2048 MiB, 0 % cores; fits now on n1 / NVIDIA L4 #")
    assert explainer.explain(gpu_pod(limits, namespace="team-x")) == (
        "never fits: asks 2048 MiB, 0 % cores; quota: gpumem 0 used + 2048 > 1024 MiB")


def test_a_reason_without_words_of_its_own_is_given_as_the_planner_says_it() -> None:
    # kube-scheduler's NodeResourcesFit ("Too many pods"): a node whose every pod slot (kubelet's maxPods)
    # is taken by pods holding its cards.
    cards = KUBELET_MAX_PODS + 1
    registered = {"big": [{"id": f"GPU-{i}", "index": i, "count": 10, "devmem": L4_MIB, "devcore": 100,
                           "type": "NVIDIA L4", "health": True} for i in range(cards)]}
    gpus = [GpuView("big", "NVIDIA L4", i, f"GPU-{i}", L4_MIB, 100, 10, (Slice("w", f"w-{i}", 1000, 0),))
            for i in range(cards)]
    explainer = pending.Explainer(pending.TenantGpus("tenant-l", registered, gpus), {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})) == (
        "waits for capacity: asks 1000 MiB, 0 % cores; Too many pods")
