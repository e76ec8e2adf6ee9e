"""GPUs reachable only through HAMi (gpu_tenancy/builders/gpu_access/gpu_access.py), layer by layer:

* the host: the preparation registers the NVIDIA runtime without making it containerd's default, and fails
  on a containerd that still runs every pod under it (checked against `containerd config dump` text in the
  layout nvidia-ctk v1.19.0 writes: pkg/config/engine/containerd/config.go, CRI plugin
  `io.containerd.cri.v1.runtime` for config version 3, `io.containerd.grpc.v1.cri` for 2);
* HAMi: what its chart (v2.10.0) renders for the program's real-mode values, recorded from Helm's own SDK:
  RuntimeClass `nvidia`, the device plugin and vGPU monitor under it, the webhook told to inject it and to
  set NVIDIA_VISIBLE_DEVICES=none on containers without a GPU (recorded with helm-python-sdk 0.2.2).
  Re-render with (never committed):

    python -m venv /tmp/helmvenv && /tmp/helmvenv/bin/pip install helm-python-sdk pyyaml
    git -C <HAMi clone> archive v2.10.0 charts/hami | tar -x -C /tmp/hami-chart
    GPU_TENANCY_HELM_PYTHON=/tmp/helmvenv/bin/python GPU_TENANCY_HAMI_CHART=/tmp/hami-chart/charts/hami \\
        pytest tests/test_gpu_access.py

* admission: the ValidatingAdmissionPolicy every tenant gets, evaluated with a real CEL runtime as the API
  server evaluates it (tests/admission_cel.py), agreeing with the policy pack's rule.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from admission_cel import Request, binding_denials, denials
from harness import gpu_config, record_stack, registered_gpus, unwrap
from policy_support import shared_recording

from gpu_tenancy.builders.gpu_access import gpu_access
from gpu_tenancy.builders.hami import hami_chart
from gpu_tenancy.builders.host_worker import hostprep

FIXTURES = Path(__file__).parent / "fixtures" / "hami_real"
VALUES = FIXTURES / "hami-values.gpu.json"
RENDERED = FIXTURES / "hami-rendered.gpu.yaml"

# --------------------------------------------------------------------------- the host


def _dump(default: str, plugin: str = "'io.containerd.cri.v1.runtime'", handler: bool = True) -> str:
    """`containerd config dump` of a prepared host: the default config, the systemd cgroup driver and
    nvidia-ctk's drop-in merged (go-toml v2 quotes dotted keys with single quotes)."""
    nvidia = (
        f"\n[plugins.{plugin}.containerd.runtimes.nvidia]\n  runtime_type = 'io.containerd.runc.v2'\n"
        f"\n[plugins.{plugin}.containerd.runtimes.nvidia.options]\n"
        "  BinaryName = '/usr/bin/nvidia-container-runtime'\n  SystemdCgroup = true\n"
        if handler else ""
    )
    return (
        "version = 3\nimports = ['/etc/containerd/conf.d/*.toml']\n"
        f"\n[plugins.{plugin}.containerd]\n  default_runtime_name = \"{default}\"\n"
        f"\n[plugins.{plugin}.containerd.runtimes.runc]\n  runtime_type = 'io.containerd.runc.v2'\n"
        f"\n[plugins.{plugin}.containerd.runtimes.runc.options]\n  SystemdCgroup = true\n" + nvidia
    )


def _check(tmp_path: Path, dump: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "dump.toml").write_text(dump)
    fake = bin_dir / "containerd"
    fake.write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'config dump' ] && exec cat {tmp_path / 'dump.toml'}\nexit 2\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    script = "set -euo pipefail\n" + hostprep.runtime_check_script()
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("plugin", ["'io.containerd.cri.v1.runtime'", '"io.containerd.grpc.v1.cri"'], ids=["v3", "v2"])
def test_a_host_with_runc_as_default_and_the_nvidia_handler_passes(tmp_path: Path, plugin: str) -> None:
    assert _check(tmp_path, _dump("runc", plugin)).returncode == 0


def test_a_host_running_every_pod_under_the_nvidia_runtime_fails_its_preparation(tmp_path: Path) -> None:
    """What `nvidia-ctk runtime configure --set-as-default` produced: NVIDIA_VISIBLE_DEVICES=all was enough."""
    done = _check(tmp_path, _dump("nvidia"))
    assert done.returncode == 1
    assert "runs every pod under the NVIDIA runtime (default_runtime_name = nvidia)" in done.stderr


def test_a_host_without_the_nvidia_handler_fails_its_preparation(tmp_path: Path) -> None:
    done = _check(tmp_path, _dump("runc", handler=False))
    assert done.returncode == 1 and "has no 'nvidia' runtime handler" in done.stderr


def test_the_preparation_registers_the_runtime_without_making_it_the_default() -> None:
    script = hostprep.prepare_script("v1.35.5")
    commands = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    assert not any("set-as-default" in line for line in commands)
    configure = "nvidia-ctk runtime configure --runtime=containerd --nvidia-runtime-name=nvidia\n"
    assert script.index(configure) < script.index("systemctl restart containerd") < script.index(
        hostprep.runtime_check_script()
    )


# --------------------------------------------------------------------------- HAMi


@pytest.fixture
@shared_recording
def program_values() -> dict[str, Any]:
    config = gpu_config()
    resources = record_stack(config, stack="gpu", node_register=registered_gpus(config))
    (release,) = [r for r in resources if r.name == "tenant-a-hami-chart"]
    return unwrap(release.inputs)["values"]


def _rendered() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(RENDERED.read_text()) if doc}


def test_the_recording_was_rendered_from_what_the_program_sends(program_values: dict[str, Any]) -> None:
    assert json.loads(VALUES.read_text()) == program_values, "values changed: re-render (see module docstring)"


def test_hami_runs_its_plugin_and_monitor_under_the_gpu_runtime_class() -> None:
    rendered = _rendered()
    assert rendered["RuntimeClass"]["metadata"]["name"] == "nvidia" and rendered["RuntimeClass"]["handler"] == "nvidia"
    pod = rendered["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == gpu_access.GPU_RUNTIME_CLASS
    # The monitor keeps seeing every GPU by env (the toolkit's envvar setting stays at its default).
    monitor = next(c for c in pod["containers"] if c["name"] == "vgpu-monitor")
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in monitor["env"]
    assert "privileged" not in monitor.get("securityContext", {})


def test_hamis_webhook_puts_gpu_pods_under_it_and_blinds_the_others() -> None:
    config_map = _rendered()["ConfigMap"]
    nvidia = yaml.safe_load(config_map["data"]["device-config.yaml"])["nvidia"]
    assert nvidia["runtimeClassName"] == gpu_access.GPU_RUNTIME_CLASS
    assert nvidia["overwriteEnv"] is True


def test_only_real_hosts_get_the_runtime_class() -> None:
    """kind nodes have no `nvidia` handler: a pod asking for it would never start there."""
    for layer in ("mock-agent", "nvml-mock"):
        plugin = hami_chart.hami_values("v1.35.5", "v2.10.0", layer)["devicePlugin"]  # type: ignore[arg-type]
        assert "runtimeClassName" not in plugin
    assert hami_chart.hami_values("v1.35.5", "v2.10.0", "nvidia")["scheduler"]["overwriteEnv"] == "true"


@pytest.mark.skipif(
    not (os.environ.get("GPU_TENANCY_HELM_PYTHON") and os.environ.get("GPU_TENANCY_HAMI_CHART")),
    reason="set GPU_TENANCY_HELM_PYTHON and GPU_TENANCY_HAMI_CHART to re-render (see module docstring)",
)
def test_the_recording_is_what_helm_renders(tmp_path: Path, program_values: dict[str, Any]) -> None:
    values = tmp_path / "values.json"
    values.write_text(json.dumps(program_values))
    render = (
        "import json, sys, helm_python as helm\nchart = helm.Chart.load(sys.argv[1])\n"
        "out = chart.render(json.load(open(sys.argv[2])), name='hami', namespace='kube-system', is_install=True)\n"
        "for k, m in out.items():\n"
        "    if k.endswith(('device-plugin/daemonsetnvidia.yaml', 'device-plugin/runtime-class.yaml',"
        " 'scheduler/device-configmap.yaml')):\n"
        "        sys.stdout.write(f'# Source: {k}\\n' + m + '\\n---\\n')\n"
    )
    done = subprocess.run(
        [os.environ["GPU_TENANCY_HELM_PYTHON"], "-c", render, os.environ["GPU_TENANCY_HAMI_CHART"], str(values)],
        capture_output=True, text=True, check=True,
    )
    assert done.stdout == RENDERED.read_text()


# --------------------------------------------------------------------------- admission


def pod(*containers: dict[str, Any], annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod as validating admission sees it: after HAMi's webhook, which names its scheduler on every pod whose
    scheduler is unset or the default (chart v2.10.0 `schedulerName: hami-scheduler`,
    `forceOverwriteDefaultScheduler: true`)."""
    metadata: dict[str, Any] = {"name": "p", "namespace": "team"}
    if annotations is not None:
        metadata["annotations"] = annotations
    merged = {"containers": list(containers), "schedulerName": "hami-scheduler", **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {k: v for k, v in merged.items() if v is not None}}  # None: a field left unset


def ctr(name: str = "main", env: list[dict[str, Any]] | None = None, gpu: bool = False, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "registry.k8s.io/pause:3.10.1", **extra}
    if env is not None:
        container["env"] = env
    if gpu:
        container["resources"] = {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024"}}
    return container


def nvd(value: str) -> list[dict[str, Any]]:
    return [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]


CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("plain pod", pod(ctr()), True),
    ("all GPUs by env", pod(ctr(env=nvd("all"))), False),
    ("GPU ids by env", pod(ctr(env=nvd("GPU-0"))), False),
    ("blinded by the webhook", pod(ctr(env=nvd("none"))), True),
    ("void", pod(ctr(env=nvd("void"))), True),
    ("HAMi-core off", pod(ctr(gpu=True, env=[{"name": "CUDA_DISABLE_CONTROL", "value": "true"}])), False),
    ("memory limit raised", pod(ctr(gpu=True, env=[{"name": "CUDA_DEVICE_MEMORY_LIMIT_0", "value": "80000m"}])), False),
    ("core limit off", pod(ctr(gpu=True, env=[{"name": "GPU_CORE_UTILIZATION_POLICY", "value": "disable"}])), False),
    ("env from a secret", pod(ctr(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])), False),
    ("driver capabilities", pod(ctr(env=[{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}])), True),
    ("envFrom without prefix", pod(ctr(envFrom=[{"configMapRef": {"name": "c"}}])), False),
    ("envFrom prefix NV", pod(ctr(envFrom=[{"prefix": "NV", "configMapRef": {"name": "c"}}])), False),
    ("envFrom prefix NVIDIA_X", pod(ctr(envFrom=[{"prefix": "NVIDIA_X", "configMapRef": {"name": "c"}}])), False),
    ("envFrom prefix APP_", pod(ctr(envFrom=[{"prefix": "APP_", "configMapRef": {"name": "c"}}])), True),
    ("GPU pod under the class", pod(ctr(gpu=True), runtimeClassName="nvidia"), True),
    ("sidecar under the class", pod(ctr(gpu=True), ctr("side"), runtimeClassName="nvidia"), False),
    ("blinded sidecar under the class", pod(ctr(gpu=True), ctr("side", env=nvd("none")), runtimeClassName="nvidia"), True),
    # Only NVIDIA_VISIBLE_DEVICES=none blinds a container (nvidia-container-toolkit): "none" in another variable does not.
    ("sidecar with another variable none, under the class",
     pod(ctr(gpu=True), ctr("side", env=[{"name": "MODE", "value": "none"}]), runtimeClassName="nvidia"), False),
    ("init container under the class", pod(ctr(gpu=True), runtimeClassName="nvidia", initContainers=[ctr("init")]), False),
    ("debug container under the class", pod(ctr(gpu=True), runtimeClassName="nvidia",
                                            ephemeralContainers=[ctr("dbg")]), False),
    ("other runtime class", pod(ctr(), runtimeClassName="gvisor"), True),
    # HAMi's webhook passes a pod naming another scheduler untouched (pkg/scheduler/webhook.go `Handle`).
    ("GPU pod, another scheduler", pod(ctr(gpu=True), schedulerName="my-scheduler"), False),
    ("GPU pod, no scheduler", pod(ctr(gpu=True), schedulerName=None), False),
    ("memory only, another scheduler", pod(ctr(resources={"limits": {"nvidia.com/gpumem": "1024"}}),
                                           schedulerName="default-scheduler"), False),
    ("GPU requests only, another scheduler", pod(ctr(resources={"requests": {"nvidia.com/gpu": "1"}}),
                                                 schedulerName="my-scheduler"), False),
    ("GPU class, another scheduler", pod(ctr(env=nvd("none")), runtimeClassName="nvidia", schedulerName="x"), False),
    ("plain pod, another scheduler", pod(ctr(), schedulerName="my-scheduler"), True),
    ("blinded pod, another scheduler", pod(ctr(env=nvd("none")), schedulerName="my-scheduler"), True),
    ("placed on a node", pod(ctr(gpu=True), nodeName="gpu-a100-01"), False),
    ("plain pod placed on a node", pod(ctr(), nodeName="gpu-a100-01"), False),
    ("forged allocation", pod(ctr(gpu=True), annotations={
        "hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,81920,100:;", "hami.io/vgpu-node": "gpu-a100-01",
        "hami.io/bind-phase": "allocating"}), False),
    ("a user's scheduler policies", pod(ctr(gpu=True), annotations={
        "hami.io/gpu-scheduler-policy": "binpack", "hami.io/node-scheduler-policy": "spread"}), True),
]


@pytest.mark.parametrize(("case", "obj", "admitted"), CASES, ids=[c[0] for c in CASES])
def test_the_admission_policy_and_the_pack_agree(case: str, obj: dict[str, Any], admitted: bool) -> None:
    spec = gpu_access.validating_admission_policy_spec()
    refused = denials(spec, Request("pods", "CREATE", "team", obj))
    assert (not refused) is admitted, refused
    problems = gpu_access.pod_problems(obj["spec"]) + gpu_access.annotation_problems(
        obj["metadata"].get("annotations") or {})
    assert (not problems) is admitted, problems


# What HAMi v2.10.0's device plugin puts in a GPU container's environment (pkg/device-plugin/nvidiadevice/nvinternal/
# plugin/server.go `Allocate`: the device list, HAMi-core's limits, its cache and switches) and what its webhook
# adds (pkg/device/nvidia/device.go `MutateAdmission`: util.TaskPriority); `CUDA_DISABLE_CONTROL=true` in the
# spec makes the plugin leave out /etc/ld.so.preload. A pod setting any of them itself overrides HAMi.
HAMI_CORE_VARIABLES = [
    ("NVIDIA_VISIBLE_DEVICES", "all"),
    ("CUDA_DEVICE_MEMORY_LIMIT_0", "80000m"),
    ("CUDA_DEVICE_SM_LIMIT", "100"),
    ("CUDA_DEVICE_MEMORY_SHARED_CACHE", "/tmp/mine.cache"),
    ("CUDA_OVERSUBSCRIBE", "true"),
    ("GPU_CORE_UTILIZATION_POLICY", "disable"),
    ("CUDA_DISABLE_CONTROL", "true"),
    ("CUDA_TASK_PRIORITY", "0"),
]


@pytest.mark.parametrize(("name", "value"), HAMI_CORE_VARIABLES, ids=[n for n, _ in HAMI_CORE_VARIABLES])
def test_every_variable_hami_sets_is_refused_from_a_pod(name: str, value: str) -> None:
    obj = pod(ctr(gpu=True, env=[{"name": name, "value": value}]))
    assert denials(gpu_access.validating_admission_policy_spec(), Request("pods", "CREATE", "team", obj))
    assert gpu_access.pod_problems(obj["spec"])


def _registered_gpu_access(stack_name: str = "dev") -> tuple[dict[str, Any], dict[str, Any]]:
    """The tenant's policy and binding as the program registers them in an example stack."""
    from policy_support import EXAMPLE_STACKS, find

    stack = EXAMPLE_STACKS[stack_name]()
    admission = "kubernetes:admissionregistration.k8s.io/v1:"
    policy = unwrap(find(stack, admission + "ValidatingAdmissionPolicy", "tenant-a-gpu-access-policy").inputs)
    binding = unwrap(find(stack, admission + "ValidatingAdmissionPolicyBinding", "tenant-a-gpu-access-binding").inputs)
    return policy, binding


def test_the_binding_denies_and_takes_no_parameters() -> None:
    """A binding that only warns or audits admits a pod with NVIDIA_VISIBLE_DEVICES=all; a policy with parameters
    decides on what its parameter watch last saw, which goes stale once its binding is re-created
    (kubernetes/kubernetes#130887), so the policy takes none."""
    policy, binding = _registered_gpu_access()
    spec, bound = policy["spec"], binding["spec"]
    assert bound == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert "paramKind" not in spec
    around = Request("pods", "CREATE", "team", pod(ctr(env=nvd("all"))))
    assert binding_denials(spec, bound, around)
    plain = Request("pods", "CREATE", "team", pod(ctr()))
    assert binding_denials(spec, bound, plain) == []


@pytest.mark.parametrize(("stack_name", "marker"), [("dev", "''"), ("dev-nvml", "'T'"), ("gpu", "''")])
def test_the_registered_policy_names_the_marker_only_in_sim_nvml(stack_name: str, marker: str) -> None:
    policy, _ = _registered_gpu_access(stack_name)
    assert policy["spec"]["variables"][0] == {"name": "cudaControlMarker", "expression": marker}
    marked = Request("pods", "CREATE", "team", pod(ctr(gpu=True,
                                                      env=[{"name": "CUDA_DISABLE_CONTROL", "value": "T"}])))
    assert bool(denials(policy["spec"], marked)) is (marker == "''")


def test_a_binding_left_with_parameters_is_ignored_by_the_policy_without_them() -> None:
    """A stack updated from a policy with parameters: its binding may still carry paramRef while the policy no
    longer has paramKind; the API server then ignores paramRef (policy_dispatcher.go, CollectParams), so the
    binding neither denies every pod nor lets one by."""
    policy, binding = _registered_gpu_access()
    old_binding = {**binding["spec"], "paramRef": {"name": "gpu-tenancy-gpu-access", "namespace": "kube-system",
                                                   "parameterNotFoundAction": "Deny"}}
    plain = Request("pods", "CREATE", "team", pod(ctr()))
    assert binding_denials(policy["spec"], old_binding, plain, params_found=False) == []
    around = Request("pods", "CREATE", "team", pod(ctr(env=nvd("all"))))
    assert binding_denials(policy["spec"], old_binding, around, params_found=False)


def test_the_marker_is_a_cel_literal_of_safe_characters() -> None:
    assert gpu_access.marker_variable("T") == {"name": "cudaControlMarker", "expression": "'T'"}
    for bad in ("T' || true || '", "a b", "\\"):
        with pytest.raises(ValueError, match="only letters"):
            gpu_access.marker_variable(bad)


def test_ephemeral_containers_are_checked_when_added() -> None:
    spec = gpu_access.validating_admission_policy_spec()
    obj = pod(ctr(gpu=True), runtimeClassName="nvidia", ephemeralContainers=[ctr("dbg")])
    assert denials(spec, Request("pods/ephemeralcontainers", "UPDATE", "team", obj, old=pod(ctr(gpu=True))))


def test_hamis_own_pods_in_kube_system_are_out_of_scope() -> None:
    """The vGPU monitor sets NVIDIA_VISIBLE_DEVICES=all; only an admin can create pods in kube-system."""
    spec = gpu_access.validating_admission_policy_spec()
    assert denials(spec, Request("pods", "CREATE", "kube-system", pod(ctr(env=nvd("all"))))) == []


def test_the_policy_objects_are_valid_kubernetes() -> None:
    metadata = {"name": gpu_access.POLICY_NAME}
    kubernetes_validate.validate(
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": metadata,
         "spec": gpu_access.validating_admission_policy_spec()}, "1.35.0", strict=True)
    kubernetes_validate.validate(
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": metadata, "spec": gpu_access.binding_spec()}, "1.35.0", strict=True)


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_every_tenant_gets_the_policy_in_every_mode(stack: str) -> None:
    config = gpu_config() if stack == "gpu" else None
    resources = record_stack(config, stack=stack, node_register=registered_gpus(config) if config else None)
    policies = [r for r in resources if r.typ.endswith("ValidatingAdmissionPolicy") and "gpu-access" in r.name]
    assert sorted(r.name for r in policies) == ["tenant-a-gpu-access-policy", "tenant-b-gpu-access-policy"]
    assert all(unwrap(r.inputs)["spec"] == gpu_access.validating_admission_policy_spec() for r in policies)


def test_no_workload_is_created_before_the_policy_binds() -> None:
    from policy_support import dev_stack, find

    stack = dev_stack()
    for tenant in ("tenant-a", "tenant-b"):
        binding = find(stack, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
                       f"{tenant}-gpu-access-binding")
        namespace = find(stack, "kubernetes:core/v1:Namespace", f"{tenant}-workloads-namespace")
        assert binding.urn in namespace.dependencies
