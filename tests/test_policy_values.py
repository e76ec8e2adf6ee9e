"""The policy pack's value helpers on their own: the unknown sentinel (policies/value_lib.py) and the stack config
as the engine hands it to the pack (policies/gpu_lib.py)."""

from __future__ import annotations

import ipaddress

import policy_support  # noqa: F401  (puts policies/ on the import path, as the engine runs the pack from there)
import pytest
from gpu_lib import planner_inputs, stack_config
from pod_lib import chart_name, containers, exact_kubernetes_version, helm_value_image_problems
from pulumi.runtime.rpc import UNKNOWN as ENGINE_UNKNOWN
from pulumi_policy.proxy import unknown_checking_proxy
from value_lib import UNKNOWN, contains_unknown, dig, is_unknown, known_str, network, plain, quantity, range_networks


def test_an_unknown_is_falsy_one_object_and_says_so() -> None:
    # Policy code writes `if value:` and must skip an unknown as it skips an absent value.
    assert not UNKNOWN and bool(UNKNOWN) is False
    assert type(UNKNOWN)() is UNKNOWN
    assert repr(UNKNOWN) == "<unknown>" and f"{[UNKNOWN]}" == "[<unknown>]"
    assert is_unknown(plain("04da6b54-80e4-46f7-96ec-b56ff0331ba9")) and not is_unknown("")


@pytest.mark.parametrize(("raw", "value"), [
    (None, None),  # no PULUMI_CONFIG: the pack runs outside a stack
    ("{not json", None),
    ('["gpu-tenancy:mode"]', None),  # not the engine's object of keys
    ('{"gpu-tenancy:mode": "real"}', "real"),  # a plain string, not JSON
    ('{"gpu-tenancy:tenants": "[{\\"name\\": \\"tenant-a\\"}]"}', [{"name": "tenant-a"}]),  # structured: JSON in a string
    ('{"other:mode": "real"}', None),
])
def test_the_stack_config_is_read_as_the_engine_hands_it_over(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, value: object
) -> None:
    key = "tenants" if "tenants" in (raw or "") else "mode"
    if raw is None:
        monkeypatch.delenv("PULUMI_CONFIG", raising=False)
    else:
        monkeypatch.setenv("PULUMI_CONFIG", raw)
    assert stack_config(key) == value


@pytest.mark.parametrize(("entry", "networks"), [
    ("10.20.0.0/30", ["10.20.0.0/30"]),
    (" 10.20.0.5 ", ["10.20.0.5/32"]),
    ("10.20.0.240-10.20.0.250", ["10.20.0.240/29", "10.20.0.248/31", "10.20.0.250/32"]),
    ("10.20.0.250-10.20.0.240", []),  # a backwards range covers nothing
    ("not-an-address", []),
    ("not an address", []),
    (UNKNOWN, []),
    (5, []),
])
def test_a_metallb_address_entry_covers_its_cidr_or_range(entry: object, networks: list[str]) -> None:
    assert [str(n) for n in range_networks(entry)] == networks


def test_an_exact_kubernetes_version_is_the_whole_value() -> None:
    assert exact_kubernetes_version("v1.35.5")
    assert not any(exact_kubernetes_version(v) for v in ("v1.35.5\n", "1.35.5", "v1.35", "v1.35.5-rc.1", None))


def test_a_tenants_declaration_becomes_the_planners_nodes_workloads_and_quota() -> None:
    from gpu_tenancy.hami.planner.model import ContainerRequest, Quota, Workload

    nodes, workloads, quota = planner_inputs(
        "t",
        [("h1", [{"model": "NVIDIA L4", "count": 2}]), ("h2", [{"model": "Quadro Z", "memoryMiB": 4096, "count": 1}])],
        [{"name": "w", "containers": [{"gpus": None, "gpumemMiB": 1024}, {"gpus": 2, "gpumemPercentage": 50,
                                                                          "gpucores": 30}]},
         {"name": "v", "replicas": 3, "containers": [], "useGpuType": ["L4"], "noUseGpuType": ["A100"],
          "gpuSchedulerPolicy": "binpack", "nodeSchedulerPolicy": "spread"}],
        {"limits.nvidia.com/gpu": 4}, 5,
    )
    # Each host registers its own cards: memory from the GPU catalogue (an L4 registers 23034 MiB) or as declared.
    assert [(n.name, [(d.index, d.type, d.devmem, d.count) for d in n.devices]) for n in nodes] == [
        ("h1", [(0, "NVIDIA L4", 23034, 5), (1, "NVIDIA L4", 23034, 5)]), ("h2", [(0, "NVIDIA-Quadro Z", 4096, 5)])]
    assert len({d.id for n in nodes for d in n.devices}) == 3  # two hosts' first cards are not the same card
    assert workloads == [
        Workload(name="w", containers=(ContainerRequest(gpus=1, gpumem_mib=1024),
                                       ContainerRequest(gpus=2, gpumem_percentage=50, gpucores=30)), tenant="t"),
        Workload(name="v", containers=(), replicas=3, use_gpu_type=("L4",), nouse_gpu_type=("A100",),
                 gpu_scheduler_policy="binpack", node_scheduler_policy="spread", tenant="t"),
    ]
    assert quota == Quota(gpu=4)
    with pytest.raises(ValueError, match=r"^malformed declaration \(KeyError: 'count'\)$"):
        planner_inputs("t", [("h1", [{"model": "NVIDIA L4"}])], [], None, 10)


def test_helm_values_name_every_unpinned_image_and_tag_by_its_path() -> None:
    values = {"image": {"repository": "x", "tag": "latest"}, "global": {"imageTag": ""},
              "sidecars": [{"image": "busybox"}, {"image": "busybox:1.36.1"}], "tag": 5,
              "devicePlugin": {"image": "sha256:" + "a" * 64, "tag": ENGINE_UNKNOWN}}
    assert list(helm_value_image_problems(plain(values))) == [
        ("values.image.tag", "tag 'latest' is a moving tag"),
        ("values.global.imageTag", "tag is empty"),
        ("values.sidecars[0].image", "image 'busybox' has no tag"),
    ]


def test_gpu_requests_are_fractional_in_pods_and_in_declared_workloads() -> None:
    from gpu_policies import _container_gpu_problems, _declared_gpu_problems

    whole = ("asks for nvidia.com/gpu=1 without nvidia.com/gpumem or nvidia.com/gpumem-percentage, i.e. whole cards; "
             "state the memory share")
    # A request alone counts as much as a limit; 100 cores is a whole card, 101 is not a percentage.
    assert _container_gpu_problems({"resources": {"requests": {"nvidia.com/gpu": "1"}}}) == [whole]
    assert _container_gpu_problems({"resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024,
                                                             "nvidia.com/gpucores": 100}}}) == []
    assert _container_gpu_problems({"resources": {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50,
                                                             "nvidia.com/gpucores": 101}}}) == [
        "asks for nvidia.com/gpucores=101; HAMi's gpucores is a percentage of one card (<= 100)"]
    # As the engine hands it over: an unknown (preview) container is left for later.
    assert _declared_gpu_problems(plain({"containers": [
        "junk", {"gpucores": ENGINE_UNKNOWN}, {"gpus": 0}, {}, {"gpus": 2, "gpumemPercentage": 50, "gpucores": 101},
        {"gpumemMiB": 1, "gpucores": 100},
    ]})) == ["container #3 asks for GPUs without gpumemMiB or gpumemPercentage",
            "container #4 asks for gpucores=101 (> 100)"]


def test_a_cidr_is_read_as_gos_net_parsecidr_reads_it() -> None:
    """Host bits set are masked off, not refused (Go's `net.ParseCIDR`, which Kubernetes and Kamaji parse ranges
    with); anything that is not a CIDR string is no network."""
    assert network(" 10.244.1.0/16 ") == ipaddress.ip_network("10.244.0.0/16")
    assert network("fd00::1/64") == ipaddress.ip_network("fd00::/64")
    assert [network(value) for value in (42, None, ["10.0.0.0/8"], "10.0.0.0/33", ENGINE_UNKNOWN)] == [None] * 5


def test_a_pod_specs_containers_are_its_init_regular_and_ephemeral_ones_in_that_order() -> None:
    spec = {"ephemeralContainers": [{"name": "debug"}, "junk"], "containers": [{"name": "app"}],
            "initContainers": [{"name": "init"}]}
    assert [c["name"] for c in containers(spec)] == ["init", "app", "debug"]


@pytest.mark.parametrize(
    ("chart", "name"),
    [
        ("hami", "hami"),
        ("hami-charts/hami", "hami"),
        ("oci://ghcr.io/project-hami/charts/hami/", "hami"),
        ("https://example.test/charts/nvidia-device-plugin-0.17.1.tgz", "nvidia-device-plugin"),
        ("./charts/kamaji-etcd-v0.5.1-rc.1+build.7.tgz", "kamaji-etcd"),
        ("charts/hami.tgz", "hami"),
        ("charts/hami-tgz", "hami-tgz"),
        ("", None),
        (UNKNOWN, None),
        (None, None),
    ],
)
def test_a_charts_name_is_read_from_any_form_helm_takes(chart: object, name: str | None) -> None:
    """A packaged chart is `<name>-<version>.tgz`, as `helm package` writes it."""
    assert chart_name(chart) == name


def test_dig_steps_into_lists_by_index_from_either_end() -> None:
    value = {"a": [10, 20], "m": {"0": "not a list"}}
    assert [dig(value, "a", i, default="-") for i in (0, 1, -1, -2, 2, -3)] == [10, 20, 20, 10, "-", "-"]
    assert dig(value, "m", 0, default="-") == "-"
    assert dig(value, "a", "0", default="-") == "-"


def test_plain_keeps_what_follows_an_unknown_item() -> None:
    proxied = unknown_checking_proxy({"list": [ENGINE_UNKNOWN, 1, "x"]})
    assert plain(proxied) == {"list": [UNKNOWN, 1, "x"]}


def test_known_values_and_quantities_are_told_from_unknown_and_other_values() -> None:
    assert [known_str(v) for v in ("x", "", 5, None, UNKNOWN, ["x"])] == ["x", "", None, None, None, None]
    assert [contains_unknown(v) for v in ([1, UNKNOWN], {"a": [{"b": UNKNOWN}]}, [1, {"a": 2}], UNKNOWN, "x")] == [
        True, True, False, True, False]
    assert [quantity(v) for v in (True, False, None, UNKNOWN, "3", 4, 4.0, 4.5, " 5 ", "2e1", [1])] == [
        None, None, None, None, 3, 4, 4, None, 5, 20, None]
