"""The provider-state doubles (tests/provider_state.py) against upstream's own cases, and what they find in
the program: quantities, the agent image's build context, the Docker daemon's security options.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from harness import dev_config
from policy_support import Recorded, dev_stack, find, record_engine_view
from provider_state import (
    CONTAINER,
    DockerDaemon,
    apiserver_object,
    canonical_quantity,
    changes_against_state,
    context_digest,
    context_files,
    daemon_host_config,
    provider_diff,
    stored_state,
)

from gpu_tenancy.builders.workloads.quantity import decimal_si

REPO = Path(__file__).resolve().parents[1]

# k8s.io/apimachinery v0.35.7 pkg/api/resource/quantity_test.go: TestQuantityString (each `alternate` parses to
# `expect`) and TestQuantityParseEmit (its sub-nano BinarySI row left out, see canonical_quantity).
UPSTREAM_CANONICAL = [
    ("1024Mi", "1Gi"), ("307200Ki", "300Mi"), ("1025024Mi", "1001Gi"), ("1024Gi", "1Ti"), ("5000m", "5"),
    ("0.5", "500m"), ("1000M", "1G"), ("0.001T", "1G"), ("1000u", "1m"), ("1.08", "1080m"),
    ("1080000000n", "1080m"), (".001e12", "1e9"), ("0.001e0", "1e-3"), ("1000e-12", "1e-9"), ("00", "0"),
    ("1Ki", "1Ki"), ("1Mi", "1Mi"), ("1Gi", "1Gi"), (".001Ki", "1024m"), (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"), ("6Ki", "6Ki"), ("1025", "1025"), ("3k", "3k"), ("80m", "80m"), ("1234567M", "1234567M"),
]


@pytest.mark.parametrize(("text", "canonical"), UPSTREAM_CANONICAL)
def test_the_quantity_double_canonicalises_as_apimachinery(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical


@pytest.mark.parametrize("amount", [0, 1, 6, 100, 999, 1000, 10240, 20000, 30000, 36864, 61440, 81920, 2_000_000, 5_000_000_000])
def test_the_program_sends_integer_quantities_as_the_api_server_stores_them(amount: int) -> None:
    assert decimal_si(amount) == canonical_quantity(str(amount))


def test_integer_quantities_keep_their_largest_si_suffix() -> None:
    # apimachinery's own cases: decQuantity(3, 3, DecimalSI) is "3k", 1e9 is "1G".
    assert [decimal_si(3000), decimal_si(1_000_000_000), decimal_si(1025)] == ["3k", "1G", "1025"]


def test_a_quota_or_limit_the_api_server_rewrites_changes_nothing_on_the_next_up() -> None:
    """30000 MiB is stored as `30k`: sent as "30000", pulumi-kubernetes would update the quota and every
    Deployment on each `up` (its Diff compares the stored live object with the inputs)."""
    config = dev_config()
    tenant = config["tenants"][0]
    tenant["quota"]["limits.nvidia.com/gpumem"] = 30000
    tenant["workloads"][0]["containers"][0]["gpumemMiB"] = 20000
    tenant["workloads"][0]["replicas"] = 1
    resources = record_engine_view(config)
    quota = find(resources, "kubernetes:core/v1:ResourceQuota", "tenant-a-workloads-quota")
    assert quota.inputs["spec"]["hard"]["limits.nvidia.com/gpumem"] == "30k"
    assert changes_against_state(resources, resources) == {}


def test_the_kubernetes_double_finds_what_the_api_server_rewrites() -> None:
    """The double itself: a non-canonical quantity and an empty optional string are updates every run."""
    sent = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "n"},
            "spec": {"hard": {"limits.nvidia.com/gpumem": "30000"}}}
    assert apiserver_object(sent)["spec"]["hard"] == {"limits.nvidia.com/gpumem": "30k"}
    quota = Recorded("urn:q", "kubernetes:core/v1:ResourceQuota", "q", True, "", "", sent, sent)
    assert provider_diff(quota, stored_state(quota), sent).updates == ["spec"]
    env = {"metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"name": "EMPTY", "value": ""}]}]}}}}
    deployment = Recorded("urn:d", "kubernetes:apps/v1:Deployment", "d", True, "", "", env, env)
    assert provider_diff(deployment, stored_state(deployment), env).updates == ["spec"]


# --------------------------------------------------------------------------- the Docker daemon and provider


def test_docker_stores_label_disable_for_a_privileged_container_unless_a_label_option_is_given() -> None:
    privileged = daemon_host_config({"Privileged": True, "SecurityOpt": ["seccomp=unconfined"]})
    assert privileged["SecurityOpt"] == ["seccomp=unconfined", "label=disable"]
    given = daemon_host_config({"Privileged": True, "SecurityOpt": ["label=disable"]})
    assert given["SecurityOpt"] == ["label=disable"]
    other_label = daemon_host_config({"Privileged": True, "SecurityOpt": ["label=type:spc_t"]})
    assert other_label["SecurityOpt"] == ["label=type:spc_t"]
    unprivileged = daemon_host_config({"Privileged": False, "SecurityOpt": []})
    assert unprivileged["SecurityOpt"] == []
    host_ipc = daemon_host_config({"Privileged": False, "IpcMode": "host"})
    assert host_ipc["SecurityOpt"] == ["label=disable"]
    assert privileged["ShmSize"] == DockerDaemon().default_shm_size and privileged["IpcMode"] == "private"


def _worker(security_opts: list[str]) -> Recorded:
    worker = find(dev_stack(), CONTAINER, "tenant-a-worker-container")
    inputs = {**worker.inputs, "securityOpts": security_opts}
    return Recorded(worker.urn, worker.type, worker.name, True, worker.parent, worker.provider, inputs, worker.state)


def test_kinds_two_security_options_alone_replace_the_worker_on_the_next_up() -> None:
    """What the worker sent before: state holds three options, the inputs two, and `security_opts` is a
    ForceNew set (resource_docker_container.go), so the provider replaces the container."""
    worker = _worker(["seccomp=unconfined", "apparmor=unconfined"])
    stored = stored_state(worker)
    assert set(stored.outputs["securityOpts"]) == {"seccomp=unconfined", "apparmor=unconfined", "label=disable"}
    assert provider_diff(worker, stored, worker.inputs).replaces == ["securityOpts"]


def test_the_workers_security_options_match_what_docker_stores_in_any_order() -> None:
    worker = _worker(["label=disable", "apparmor=unconfined", "seccomp=unconfined"])
    stored = stored_state(worker)
    assert provider_diff(worker, stored, worker.inputs).replaces == []
    assert provider_diff(worker, stored, worker.inputs).updates == []


def test_an_attribute_the_double_does_not_know_fails_loudly() -> None:
    worker = find(dev_stack(), CONTAINER, "tenant-a-worker-container")
    unknown = Recorded(worker.urn, worker.type, worker.name, True, "", "", {**worker.inputs, "gpus": "all"}, {})
    with pytest.raises(NotImplementedError, match="gpus"):
        stored_state(unknown)


# --------------------------------------------------------------------------- the agent image's build context


def _context_copy(tmp_path: Path) -> Path:
    context = tmp_path / "repo"
    shutil.copytree(REPO, context, ignore=shutil.ignore_patterns(".venv", ".git", "*.pyc", "__pycache__", ".*_cache"))
    return context


def test_the_agent_image_context_holds_only_the_agents_sources(tmp_path: Path) -> None:
    files = context_files(_context_copy(tmp_path))
    assert "gpu_tenancy/hami/agent/Dockerfile" in files and "gpu_tenancy/hami/protocol.py" in files
    image_files = {"gpu_tenancy/__init__.py", "gpu_tenancy/hami/__init__.py", "gpu_tenancy/hami/protocol.py"}
    assert all(f in image_files or f.startswith("gpu_tenancy/hami/agent/") for f in files), files


def test_what_an_up_writes_into_the_repository_does_not_rebuild_the_agent_image(tmp_path: Path) -> None:
    """`make up` keeps its state in ./state and the live suite its reports in ./reports; Python writes
    __pycache__: none of it may enter the context digest, or every `up` rebuilds and reloads the agent."""
    context = _context_copy(tmp_path)
    dockerfile = context / "gpu_tenancy" / "hami" / "agent" / "Dockerfile"
    before = context_digest(context, dockerfile)
    for written in ("state/.pulumi/stacks/gpu-tenancy/dev.json", "reports/e2e/dev/pulumi.log",
                    "gpu_tenancy/hami/agent/__pycache__/kube.cpython-311.pyc", "state/kubeconfigs/dev-tenant-a.kubeconfig"):
        (context / written).parent.mkdir(parents=True, exist_ok=True)
        (context / written).write_text("changed by an up")
    assert context_digest(context, dockerfile) == before
    (context / "gpu_tenancy" / "hami" / "agent" / "decisions.py").write_text("# changed\n")
    assert context_digest(context, dockerfile) != before
