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
from gpu_tenancy.hami.allocation import Unplaced


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
