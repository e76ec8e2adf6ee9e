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
from gpu_tenancy.hami.planner.model import ContainerRequest, Workload


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


def small_pod_on_the_a100_split(slots: int) -> Unplaced:
    """sim tenant-a's A100 (4 pods on it, as recorded) split `slots` ways, and a pod asking 1024 MiB, 10 % waiting."""
    data = tenant("sim", "tenant-a")
    annotations = data["nodes"][0]["metadata"]["annotations"]
    annotations[hami.NODE_REGISTER_ANNOTATION] = annotations[hami.NODE_REGISTER_ANNOTATION].replace(
        '"count":10', f'"count":{slots}')
    waiting_pod(data, data["pods"][0], limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024",
                                               "nvidia.com/gpucores": "10"})
    (waiting,) = unplaced("tenant-a", data)
    return waiting


def test_every_slot_of_the_card_taken() -> None:
    waiting = small_pod_on_the_a100_split(4)
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
    # only periods are stripped from the end, not the letters before them
    ("0/1 nodes are available: 1 Insufficient example.com/NPU-X.", "0/1 nodes are available: 1 Insufficient "
     "example.com/NPU-X"),
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


# --------------------------------------------------------------------------- every reason in words
# Tenants of mixed cards, registered as the device plugin writes them. MiB as NVML reports them: an L4
# 23034, a T4 15360, an A100-SXM4-80GB 81920. Go's encoding/json leaves a zero field out (`omitempty`):
# a card without "health" is unhealthy, without "count" has no slots, without "devcore" no cores.

CARD_MIB = {"NVIDIA L4": L4_MIB, "NVIDIA T4": 15360, "NVIDIA A100-SXM4-80GB": 81920}


def cards_tenant(layout: dict[str, list[str]], held: dict[tuple[str, int], list[tuple[int, int]]] | None = None, *,
                 count: int = 10, omit: dict[tuple[str, int], tuple[str, ...]] | None = None) -> pending.TenantGpus:
    """`layout`: node -> card models (the index is the position); `held`: (node, index) -> the slices pods hold
    there (MiB, % cores); `omit`: (node, index) -> register keys left out. The live view reads a left-out key as
    Go's zero, as `status` does."""
    registered: dict[str, list[dict[str, Any]]] = {}
    gpus = []
    for node, models in layout.items():
        registered[node] = []
        for index, model in enumerate(models):
            uuid = f"GPU-{node}-{index}"
            device = {"id": uuid, "index": index, "count": count, "devmem": CARD_MIB[model], "devcore": 100,
                      "type": model, "health": True}
            for key in (omit or {}).get((node, index), ()):
                del device[key]
            registered[node].append(device)
            slices = tuple(Slice("holder", f"holder-{node}-{index}-{i}", mib, cores)
                           for i, (mib, cores) in enumerate((held or {}).get((node, index), ())))
            gpus.append(GpuView(node, model, index, uuid, int(device.get("devmem", 0)), int(device.get("devcore", 0)),
                                int(device.get("count", 0)), slices))
    return pending.TenantGpus("tenant-m", registered, gpus)


MIXED = {"n1": ["NVIDIA L4", "NVIDIA L4"], "n2": ["NVIDIA A100-SXM4-80GB", "NVIDIA T4"]}


def test_a_type_filter_that_leaves_some_cards_names_their_models() -> None:
    explainer = pending.Explainer(cards_tenant(MIXED), {})
    pod = gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"}, annotations={"nvidia.com/use-gputype": "l4,t4"})
    # HAMi compares types case-insensitively: the L4s and the T4 pass, and none has 30000 MiB.
    assert explainer.explain(pod) == (
        "never fits: asks 30000 MiB, 0 % cores; type filter l4 or t4 leaves 3 of 4 cards (NVIDIA L4, NVIDIA T4); "
        "asks 30000 MiB; the largest card has 23034 MiB (n1 / NVIDIA L4 #0)")


@pytest.mark.parametrize(("annotations", "said"), [
    ({"nvidia.com/use-gputype": "H100, B200"}, "H100 or B200"),
    ({"nvidia.com/nouse-gputype": "L4,T4,A100"}, "not L4 or T4 or A100"),
    ({"nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gputype": "SXM4"}, "A100, not SXM4"),
])
def test_a_type_filter_no_card_passes_lists_what_the_tenant_has(annotations: dict[str, str], said: str) -> None:
    explainer = pending.Explainer(cards_tenant(MIXED), {})
    pod = gpu_pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"}, annotations=annotations)
    assert explainer.explain(pod) == (
        f"never fits: asks 2 × {said} (type filter); tenant-m has 1 × NVIDIA A100-SXM4-80GB, 2 × NVIDIA L4, "
        "1 × NVIDIA T4")


def test_a_percentage_of_the_card_is_the_memory_it_needs() -> None:
    # 50 % of an L4 is 23034 * 50 // 100 = 11517 MiB; the cards have 8034, 7034 and 6034 MiB free.
    explainer = pending.Explainer(l4_tenant({("n1", 0): (15000, 0), ("n1", 1): (16000, 0), ("n2", 0): (17000, 0)}),
                                  {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"})) == (
        "waits for capacity: asks 11517 MiB; largest free slice 8034 MiB on n1 / NVIDIA L4 #0")


def test_on_free_cards_the_largest_card_is_named_not_the_one_with_most_free_now() -> None:
    # n1 #0 holds 20000 MiB now; on free cards all three have 23034 MiB and the first is named.
    explainer = pending.Explainer(l4_tenant({("n1", 0): (20000, 10)}), {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"})) == (
        "never fits: asks 30000 MiB; the largest card has 23034 MiB (n1 / NVIDIA L4 #0)")


def test_every_slot_taken_on_three_cards_and_one_unhealthy() -> None:
    # Two slots a card: #0-#2 hold two pods each; #3 (no "health") has a slot left but is unhealthy.
    full = [(1000, 0), (1000, 0)]
    tenant_gpus = cards_tenant({"n1": ["NVIDIA L4"] * 4}, {("n1", 0): full, ("n1", 1): full, ("n1", 2): full,
                                                          ("n1", 3): [(1000, 0)]}, count=2, omit={("n1", 3): ("health",)})
    explainer = pending.Explainer(tenant_gpus, {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})) == (
        "waits for capacity: asks 1000 MiB, 0 % cores; every slot taken on 3 card(s): n1 / NVIDIA L4 #0 2/2, "
        "n1 / NVIDIA L4 #1 2/2, n1 / NVIDIA L4 #2 2/2; 1 card(s) unhealthy")


def test_every_slot_taken_on_more_than_three_cards_names_three() -> None:
    full = [(1000, 0), (1000, 0)]
    explainer = pending.Explainer(cards_tenant({"n1": ["NVIDIA L4"] * 4}, {("n1", i): full for i in range(4)},
                                               count=2), {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})) == (
        "waits for capacity: asks 1000 MiB, 0 % cores; every slot taken on 4 card(s): n1 / NVIDIA L4 #0 2/2, "
        "n1 / NVIDIA L4 #1 2/2, n1 / NVIDIA L4 #2 2/2 …")


def test_a_card_with_one_slot_left_takes_the_pod() -> None:
    # The recorded A100 holds 4 pods; with 5 slots one is left, and 1024 MiB / 10 % fit beside them.
    waiting = small_pod_on_the_a100_split(5)
    a100 = registered_model("sim", "tenant-a")
    assert waiting.explanation.startswith(
        f"asks 1024 MiB, 10 % cores; fits now on gpu-tenancy-dev-tenant-a-worker / {a100} #0 by HAMi's rules")


def test_all_cores_asked_on_cards_that_hold_pods_and_an_unhealthy_card() -> None:
    # Fit refuses 100 % cores on a card holding any pod, even one holding no cores (ExclusiveDeviceAllocateConflict).
    tenant_gpus = cards_tenant({"n1": ["NVIDIA L4", "NVIDIA L4"], "n2": ["NVIDIA L4"]},
                               {("n1", 0): [(1000, 0)], ("n1", 1): [(1000, 0)]}, omit={("n2", 0): ("health",)})
    explainer = pending.Explainer(tenant_gpus, {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000",
                                      "nvidia.com/gpucores": "100"})) == (
        "waits for capacity: asks a whole card (100 % cores); 2 of 3 cards hold other pods; 1 card(s) unhealthy")


def test_no_cores_asked_on_cards_whose_cores_are_all_held() -> None:
    # n1's cards hold 100 % cores; n2 #0 holds 60 % in ten pods, every slot.
    tenant_gpus = cards_tenant({"n1": ["NVIDIA L4", "NVIDIA L4"], "n2": ["NVIDIA L4"]},
                               {("n1", 0): [(1000, 100)], ("n1", 1): [(1000, 100)], ("n2", 0): [(100, 6)] * 10})
    explainer = pending.Explainer(tenant_gpus, {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})) == (
        "waits for capacity: asks 1000 MiB, 0 % cores; every slot taken on 1 card(s): n2 / NVIDIA L4 #0 10/10; "
        "asks no cores share; cores fully allocated on 2 card(s)")


def test_more_cards_in_one_container_than_a_node_has() -> None:
    explainer = pending.Explainer(l4_tenant({}), {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "3", "nvidia.com/gpumem": "1000"})) == (
        "never fits: asks 3 cards in one container; the largest node has 2")


def test_more_cards_in_one_container_than_fit_on_a_node() -> None:
    explainer = pending.Explainer(cards_tenant({"n1": ["NVIDIA L4", "NVIDIA L4"]}, omit={("n1", 1): ("health",)}), {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "5000"})) == (
        "never fits: asks 2 × (5000 MiB, 0 % cores); 1 card(s) unhealthy; asks 2 cards in one container; not that "
        "many fit on one node")


def test_a_card_registered_with_zero_slots_and_cores_left_out() -> None:
    # No "count" is no slot at all: never fits, though the live view shows a pod (10 % cores) held there.
    tenant_gpus = cards_tenant({"n1": ["NVIDIA L4"]}, {("n1", 0): [(1000, 10)]}, omit={("n1", 0): ("count", "devcore")})
    explainer = pending.Explainer(tenant_gpus, {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})) == (
        "never fits: asks 1000 MiB, 0 % cores; every slot taken on 1 card(s): n1 / NVIDIA L4 #0 0/0")


def test_a_card_registered_without_memory_is_refused_by_name() -> None:
    tenant_gpus = cards_tenant({"n1": ["NVIDIA L4"]}, {("n1", 0): [(1000, 10)]}, omit={("n1", 0): ("devmem",)})
    with pytest.raises(ValueError, match="device #0 needs 'id' and 'devmem'"):
        pending.Explainer(tenant_gpus, {}).explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}))


# --------------------------------------------------------------------------- the namespace quota in words


@pytest.mark.parametrize(("quota", "limits", "said"), [
    # gpucores only: 50 + 60 > 100
    (pending.NamespaceQuota(gpucores=(50, 100)), {"nvidia.com/gpumem": "1000", "nvidia.com/gpucores": "60"},
     "waits for quota: asks 1000 MiB, 60 % cores; quota: gpucores 50 used + 60 > 100 %"),
    # 10000 + 10000 == 20000 MiB is within the quota; 50 + 60 % is not
    (pending.NamespaceQuota(gpumem=(10000, 20000), gpucores=(50, 100)),
     {"nvidia.com/gpumem": "10000", "nvidia.com/gpucores": "60"},
     "waits for quota: asks 10000 MiB, 60 % cores; quota: gpumem 10000/20000 MiB, gpucores 50 used + 60 > 100 %"),
    # 15000 + 10000 > 20000 MiB; 50 + 50 == 100 % is within
    (pending.NamespaceQuota(gpumem=(15000, 20000), gpucores=(50, 100)),
     {"nvidia.com/gpumem": "10000", "nvidia.com/gpucores": "50"},
     "waits for quota: asks 10000 MiB, 50 % cores; quota: gpumem 15000 used + 10000 > 20000 MiB, gpucores 50/100 %"),
    # a percentage asks no MiB of the webhook; Fit needs 11517 MiB of a quota used up
    (pending.NamespaceQuota(gpumem=(20000, 20000)), {"nvidia.com/gpumem-percentage": "50"},
     "waits for quota: asks 50 % of a card's memory, 0 % cores; quota: gpumem 20000/20000 MiB"),
    # a namespace over its limit (the quota lowered since)
    (pending.NamespaceQuota(gpumem=(25000, 20000)), {"nvidia.com/gpumem-percentage": "50"},
     "waits for quota: asks 50 % of a card's memory, 0 % cores; quota: gpumem 25000 used + its share > 20000 MiB"),
    (pending.NamespaceQuota(gpumem=(2048, 1024)), {"nvidia.com/gpumem": "1"},
     "waits for quota: asks 1 MiB, 0 % cores; quota: gpumem 2048 used + 1 > 1024 MiB"),
])
def test_the_quota_clause(quota: pending.NamespaceQuota, limits: dict[str, str], said: str) -> None:
    explainer = pending.Explainer(l4_tenant({}), {"workloads": quota})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", **limits})) == said


def test_a_pod_holding_no_cores_leaves_the_cores_quota_as_it_is() -> None:
    explainer = pending.Explainer(l4_tenant({("n1", 0): (1000, 0)}),
                                  {"workloads": pending.NamespaceQuota(gpucores=(0, 50))})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000",
                                      "nvidia.com/gpucores": "51"})) == (
        "never fits: asks 1000 MiB, 51 % cores; quota: gpucores 0 used + 51 > 50 %")


def test_a_pod_without_namespace_meets_the_default_namespaces_quota() -> None:
    explainer = pending.Explainer(l4_tenant({}), {"default": pending.NamespaceQuota(gpumem=(0, 1024))})
    pod = gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2048"})
    del pod["metadata"]["namespace"]
    assert explainer.explain(pod) == "never fits: asks 2048 MiB, 0 % cores; quota: gpumem 0 used + 2048 > 1024 MiB"


# --------------------------------------------------------------------------- the request as HAMi reads it


def test_the_request_as_hami_reads_it() -> None:
    pod = {"metadata": {"name": "x-train-0", "annotations": {
        "nvidia.com/use-gputype": "A100, H100", "nvidia.com/nouse-gputype": "MIG",
        "hami.io/gpu-scheduler-policy": "binpack", "hami.io/node-scheduler-policy": "fastest"}},
        "spec": {"containers": [
            {"name": "log-shipper"},  # no GPU, before the GPU containers
            {"name": "train", "resources": {"limits": {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "50",
                                                       "nvidia.com/gpucores": "30"}}},
            # requests only (no limits section): HAMi reads them; "2k" is 2000
            {"name": "eval", "resources": {"requests": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2k"}}},
        ]}}
    assert pending.pod_request(pod, "x-train", "tenant-l") == Workload(
        name="x-train", tenant="tenant-l",
        containers=(ContainerRequest(gpus=0), ContainerRequest(gpus=2, gpumem_percentage=50, gpucores=30),
                    ContainerRequest(gpus=1, gpumem_mib=2000)),
        use_gpu_type=("A100", "H100"), nouse_gpu_type=("MIG",),
        gpu_scheduler_policy="binpack", node_scheduler_policy="binpack",  # an unknown policy: HAMi's default
    )


@pytest.mark.parametrize(("containers", "asks"), [
    ((ContainerRequest(gpumem_percentage=50),), "50 % of a card's memory, 0 % cores"),
    # neither memory limit, or 100 %, without cores: the webhook gives the whole card
    ((ContainerRequest(),), "a whole card's memory, 100 % cores (whole card)"),
    ((ContainerRequest(gpumem_percentage=100),), "a whole card's memory, 100 % cores (whole card)"),
    ((ContainerRequest(gpumem_percentage=100, gpucores=30),), "a whole card's memory, 30 % cores"),
    ((ContainerRequest(gpus=2, gpumem_mib=1000, gpucores=10),), "2 × (1000 MiB, 10 % cores)"),
    ((ContainerRequest(gpus=0), ContainerRequest(gpumem_mib=1000),
      ContainerRequest(gpus=3, gpumem_percentage=25, gpucores=5)),
     "1000 MiB, 0 % cores + 3 × (25 % of a card's memory, 5 % cores)"),
])
def test_what_a_pod_asks_in_words(containers: tuple[ContainerRequest, ...], asks: str) -> None:
    assert pending._asks(Workload("w", containers)) == asks


def test_the_models_a_tenant_has() -> None:
    registered = {"n1": [{"id": "a", "type": "NVIDIA L4"}, {"id": "b"}, {"id": "c", "type": "NVIDIA T4"}],
                  "n2": [{"id": "d", "type": "NVIDIA L4"}]}
    assert pending.TenantGpus("t", registered, ()).model_counts() == "1 × ?, 2 × NVIDIA L4, 1 × NVIDIA T4"
    assert pending.TenantGpus("t", {"n1": []}, ()).model_counts() == "no GPU registered"


@pytest.mark.parametrize(("reason", "found"), [
    ("2/4 CardInsufficientMemory, 2/4 CardTypeMismatch", {"CardInsufficientMemory": 2, "CardTypeMismatch": 2}),
    ("n1: 2/2 CardTypeMismatch; n2: 1/2 CardNotHealth, 1/2 CardTypeMismatch",
     {"CardTypeMismatch": 3, "CardNotHealth": 1}),
    ('ResourceQuotaNotFit at admission: admission webhook "vgpu.hami.io" denied the request: exceeding resource '
     "quota (limits.nvidia.com/gpumem 0+2048 > 1024)", {"ResourceQuotaNotFit": 1}),
    ("Too many pods", {"Too many pods": 1}),
])
def test_the_reasons_in_a_planner_failure(reason: str, found: dict[str, int]) -> None:
    assert pending._reasons(reason) == found


@pytest.mark.parametrize(("limits", "said"), [
    ({"nvidia.com/gpu": "-1"}, "HAMi cannot read its request: gpus must be >= 0"),
    ({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "150"},
     "HAMi cannot read its request: gpumem_percentage must be between 0 and 100 (HAMi's webhook denies the pod "
     "otherwise)"),
])
def test_a_request_hami_cannot_read(limits: dict[str, str], said: str) -> None:
    assert pending.Explainer(l4_tenant({}), {}).explain(gpu_pod(limits)) == said


def test_a_pod_on_two_cards_names_both() -> None:
    # spread on free cards: the last card of the node first (Fit walks the sorted list from its end)
    explainer = pending.Explainer(l4_tenant({}), {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "1000"})).split(" by HAMi's")[0] == (
        "asks 2 × (1000 MiB, 0 % cores); fits now on n1 / NVIDIA L4 #1, n1 / NVIDIA L4 #0")


def test_a_card_the_live_view_lacks_is_named_by_its_id() -> None:
    registered = {"n1": [{"id": "GPU-n1-0", "index": 0, "count": 10, "devmem": L4_MIB, "devcore": 100,
                          "type": "NVIDIA L4", "health": True}]}
    explainer = pending.Explainer(pending.TenantGpus("tenant-l", registered, ()), {})
    assert explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"})).split(" by HAMi's")[0] == (
        "asks 1000 MiB, 0 % cores; fits now on GPU-n1-0")


def test_resources_in_another_key_order_are_planned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_plan = pending.plan

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(pending, "plan", counting)
    explainer = pending.Explainer(l4_tenant({}), {})
    first = explainer.explain(gpu_pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "30000"}))
    assert explainer.explain(gpu_pod({"nvidia.com/gpumem": "30000", "nvidia.com/gpu": "1"})) == first
    assert len(calls) == 2  # now and on idle cards, once
