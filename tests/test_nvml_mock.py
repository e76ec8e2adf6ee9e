"""The mock NVML configuration generated from a tenant's `gpus`, checked against NVIDIA/k8s-test-infra at the pinned commit.

- Shape: every key and value against the Go types the mock decodes it into (`engine/config_types.go`),
  recorded in tests/fixtures/nvml_mock/config_types.json by tests/go_structs.py; the recording is re-derived
  from the upstream file when a copy of it is at hand (GPU_TENANCY_NVML_MOCK_SOURCE: that file, or
  GPU_TENANCY_NVML_MOCK_GIT: a git directory of NVIDIA/k8s-test-infra holding the pinned commit).
- Semantics: `engine/config.go` `validateYAMLConfig` and `GetDeviceMinorNumber`/`GetDeviceUUID`, and what
  `deployments/nvml-mock/scripts/setup.sh` does to the file (its `sed` and `grep` lines, run here with the
  same expressions through the real tools).
- Result: what HAMi v2.10.0 then registers (register.go `getAPIDevices`) is the declaration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_tenancy.builders.mock_nvml import nvml_mock
from gpu_tenancy.contract import limits, versions
from gpu_tenancy.contract.config import load_config
from gpu_tenancy.contract.tenant_config import GpuConfig
from gpu_tenancy.hami import protocol as hami
from tests import hami_register
from tests.go_structs import struct_fields
from tests.harness import nvml_config

FIXTURE = Path(__file__).parent / "fixtures" / "nvml_mock" / "config_types.json"
UPSTREAM_FILE = "pkg/gpu/mocknvml/engine/config_types.go"
GO_INTS = {"int": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1), "uint": (0, 2**64 - 1)}


def _structs() -> dict[str, dict[str, str]]:
    return json.loads(FIXTURE.read_text())["structs"]


def _fields(structs: dict[str, dict[str, str]], name: str) -> dict[str, str]:
    """A struct's JSON fields with embedded structs' fields promoted (encoding/json typeFields)."""
    fields = dict(structs[name])
    embedded = fields.pop("...", None)
    if embedded:
        fields = {**_fields(structs, embedded), **fields}
    return fields


def _check(value: Any, go_type: str, structs: dict[str, dict[str, str]], path: str) -> list[str]:
    """Problems decoding `value` into `go_type` as encoding/json would, plus unknown keys (which the mock
    would silently ignore: a misspelt key is a setting that never takes effect)."""
    go_type = go_type.removeprefix("*")
    if go_type.startswith("[]"):
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list ({go_type})"]
        return [p for i, item in enumerate(value) for p in _check(item, go_type[2:], structs, f"{path}[{i}]")]
    if go_type == "string":
        return [] if isinstance(value, str) else [f"{path}: {value!r} is not a string"]
    if go_type in GO_INTS:
        low, high = GO_INTS[go_type]
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return [] if ok else [f"{path}: {value!r} does not fit {go_type}"]
    if go_type == "bool":
        return [] if isinstance(value, bool) else [f"{path}: {value!r} is not a bool"]
    if go_type == "float64":
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{path}: not a number"]
    if go_type in structs:
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not an object ({go_type})"]
        fields = _fields(structs, go_type)
        problems = [f"{path}.{key}: not a field of {go_type}" for key in value if key not in fields]
        for key, item in value.items():
            if key in fields:
                problems += _check(item, fields[key], structs, f"{path}.{key}")
        return problems
    return [f"{path}: type {go_type} is not modelled by this check"]


def _gpus(*groups: tuple[str, int, int]) -> list[GpuConfig]:
    return [GpuConfig(model=model, memoryMiB=memory, count=count) for model, memory, count in groups]


CASES = {
    "one A100": _gpus(("NVIDIA A100-SXM4-80GB", 81920, 1)),
    "two L4": _gpus(("NVIDIA L4", 23034, 2)),
    "mixed, eight": _gpus(("NVIDIA H100 80GB HBM3", 81559, 4), ("Tesla T4", 15360, 3), ("NVIDIA Unlisted X", 1024, 1)),
}


def test_the_recorded_types_are_upstreams() -> None:
    """The fixture is what tests/go_structs.py reads from config_types.go at the pinned commit."""
    recorded = json.loads(FIXTURE.read_text())
    assert recorded["commit"] == versions.NVML_MOCK_COMMIT
    source_path, git_dir = os.environ.get("GPU_TENANCY_NVML_MOCK_SOURCE"), os.environ.get("GPU_TENANCY_NVML_MOCK_GIT")
    if source_path:
        source = Path(source_path).read_text()
    elif git_dir and shutil.which("git"):
        source = subprocess.run(
            ["git", "-C", git_dir, "show", f"{versions.NVML_MOCK_COMMIT}:{UPSTREAM_FILE}"],
            check=True, capture_output=True, text=True,
        ).stdout
    else:
        pytest.skip(
            f"no copy of NVIDIA/k8s-test-infra {UPSTREAM_FILE} here "
            "(set GPU_TENANCY_NVML_MOCK_SOURCE or GPU_TENANCY_NVML_MOCK_GIT)"
        )
    assert struct_fields(source) == recorded["structs"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_configuration_decodes_into_the_mocks_go_types(case: str) -> None:
    config = nvml_mock.mock_config("tenant-a", CASES[case])
    # What the file holds is YAML; the mock reads it back through YAML -> JSON.
    decoded = yaml.safe_load(nvml_mock.config_yaml(config))
    assert decoded == config
    assert _check(decoded, "YAMLConfig", _structs(), "config") == []


def test_the_shape_check_catches_what_the_mock_would_ignore_or_refuse() -> None:
    """The check itself: a misspelt key, a string for a number, a negative byte count."""
    config = nvml_mock.mock_config("tenant-a", CASES["one A100"])
    config["devices"][0]["memory"]["total_byte"] = 1
    config["devices"][0]["minor_number"] = "0"
    config["devices"][0]["memory"]["free_bytes"] = -1
    problems = _check(config, "YAMLConfig", _structs(), "config")
    assert "config.devices[0].memory.total_byte: not a field of MemoryConfig" in problems
    assert "config.devices[0].minor_number: '0' does not fit int" in problems
    assert "config.devices[0].memory.free_bytes: -1 does not fit uint64" in problems


@pytest.mark.parametrize("case", sorted(CASES))
def test_configuration_passes_the_mocks_own_validation(case: str) -> None:
    """engine/config.go validateYAMLConfig, GetDeviceMinorNumber (0 when absent), GetDeviceUUID ("" when absent)."""
    config = nvml_mock.mock_config("tenant-b", CASES[case])
    assert config["version"] and config["system"]["driver_version"] == versions.NVML_MOCK_DRIVER_VERSION
    indices = [device["index"] for device in config["devices"]]
    assert indices == list(range(len(indices)))
    assert all(device["minor_number"] == device["index"] for device in config["devices"])
    assert all(re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", d["uuid"]) for d in config["devices"])
    assert len({device["uuid"] for device in config["devices"]}) == len(indices)
    assert len(indices) <= limits.MAX_GPUS_PER_NODE


@pytest.mark.skipif(not (shutil.which("sed") and shutil.which("grep")), reason="needs GNU sed and grep")
@pytest.mark.parametrize("case", sorted(CASES))
def test_setup_sh_counts_the_devices_and_adds_num_devices_once(case: str, tmp_path: Path) -> None:
    """setup.sh caps GPU_COUNT at `grep -c "^[[:space:]]*- index:"` and then runs
    `sed -i "/^system:/a\\  num_devices: $GPU_COUNT"`: the program's file must give the full count and
    hold no num_devices of its own (a duplicate key)."""
    config = nvml_mock.mock_config("tenant-a", CASES[case])
    count = len(config["devices"])
    path = tmp_path / "config.yaml"
    path.write_text(nvml_mock.config_yaml(config))
    counted = subprocess.run(["grep", "-c", "^[[:space:]]*- index:", str(path)], capture_output=True, text=True)
    assert int(counted.stdout) == count
    subprocess.run(["sed", "-i", f"/^system:/a\\  num_devices: {count}", str(path)], check=True)
    text = path.read_text()
    assert text.count("num_devices:") == 1
    assert yaml.safe_load(text)["system"]["num_devices"] == count


def test_hami_registers_exactly_the_declaration() -> None:
    """Through the register.go double: the type is NVML's name ("NVIDIA-" added to "Tesla T4"), the MiB NVML's
    total, so the mock's devices register as the same cards on a real host would."""
    config = nvml_mock.mock_config("tenant-a", CASES["mixed, eight"])
    registered = hami_register.register(hami_register.mock_nvml_devices(config))
    assert [(d["type"], d["devmem"]) for d in registered] == [
        ("NVIDIA H100 80GB HBM3", 81559), ("NVIDIA H100 80GB HBM3", 81559), ("NVIDIA H100 80GB HBM3", 81559),
        ("NVIDIA H100 80GB HBM3", 81559), ("NVIDIA-Tesla T4", 15360), ("NVIDIA-Tesla T4", 15360),
        ("NVIDIA-Tesla T4", 15360), ("NVIDIA Unlisted X", 1024),
    ]


def test_device_ids_are_the_agents_so_a_device_keeps_its_id_across_simulated_modes() -> None:
    config = nvml_mock.mock_config("tenant-b", CASES["two L4"])
    assert [d["uuid"] for d in config["devices"]] == [hami.device_id("tenant-b", 0), hami.device_id("tenant-b", 1)]
    assert nvml_mock.mock_config("tenant-b", CASES["two L4"]) == config  # nothing random


def test_known_cards_report_their_compute_capability_and_unknown_ones_keep_the_mocks() -> None:
    devices = nvml_mock.mock_config("t", CASES["mixed, eight"])["devices"]
    assert devices[0]["compute_capability"] == {"major": 9, "minor": 0} and devices[0]["architecture"] == "hopper"
    assert devices[4]["compute_capability"] == {"major": 7, "minor": 5}
    assert "compute_capability" not in devices[7]
    l4 = nvml_mock.mock_config("t", CASES["two L4"])["devices"][0]
    assert l4["compute_capability"] == {"major": 8, "minor": 9}


def test_more_than_eight_gpus_on_one_node_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 8"):
        nvml_mock.mock_config("t", _gpus(("NVIDIA L4", 23034, 9)))


def test_dev_nvml_stack_declares_the_dev_tenants() -> None:
    config = load_config(nvml_config())
    assert config.mode == "sim-nvml" and config.device_layer.registrar == "nvml-mock" and config.simulated
    dev = yaml.safe_load(Path("Pulumi.dev.yaml").read_text())["config"]
    nvml = yaml.safe_load(Path("Pulumi.dev-nvml.yaml").read_text())["config"]
    assert nvml["gpu-tenancy:tenants"] == dev["gpu-tenancy:tenants"]


def test_the_daemonset_is_the_charts_with_the_program_s_image_and_config() -> None:
    """deployments/nvml-mock/helm/nvml-mock/templates/daemonset.yaml at the pinned commit, features off."""
    spec = nvml_mock.daemon_set_spec("tenant-a", nvml_mock.image_name(), "cm", "sa", 1, "abc")
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["/scripts/entrypoint.sh"]
    assert container["securityContext"] == {"privileged": True}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GPU_COUNT"] == "1" and env["DRIVER_VERSION"] == versions.NVML_MOCK_DRIVER_VERSION
    assert env["MOCK_NVML_CONFIG"] == "/etc/nvml-mock/config.yaml"
    mounts = {(m["name"], m["mountPath"]) for m in container["volumeMounts"]}
    assert {("host-nvml-mock", "/host/var/lib/nvml-mock"), ("host-nvml-mock", "/var/lib/nvml-mock"),
            ("gpu-config", "/etc/nvml-mock")} <= mounts
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["host-nvml-mock"]["hostPath"]["path"] == nvml_mock.HOST_ROOT
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["/scripts/cleanup.sh"]
    # Ready only after setup.sh's step 6, which the program's own file never satisfies.
    probe = container["readinessProbe"]["exec"]["command"]
    assert probe[-1] == f"{nvml_mock.DRIVER_ROOT}/config/config.yaml" and "num_devices:" in probe
    assert "num_devices" not in nvml_mock.config_yaml(nvml_mock.mock_config("tenant-a", CASES["one A100"]))
    assert spec["template"]["metadata"]["annotations"] == {"checksum/config": "abc"}
    # The tenant's own labels, which the pack reads the tenant from; the selector picks the template's pods.
    labels = {"gpu-tenancy.io/tenant": "tenant-a", "gpu-tenancy.io/component": "nvml-mock"}
    assert spec["selector"] == {"matchLabels": labels} and spec["template"]["metadata"]["labels"] == labels


def test_the_image_is_built_from_the_pinned_commit_and_named_after_it() -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", versions.NVML_MOCK_COMMIT)
    assert nvml_mock.image_name() == f"gpu-tenancy/nvml-mock:{versions.NVML_MOCK_COMMIT[:12]}"


# Fake `docker`: `info --format ...` prints $FAKE_SECURITY_OPTIONS (docker/cli formats SecurityOptions as a JSON
# list, e.g. ["name=seccomp,profile=builtin","name=rootless"]); `image inspect` exits 1 for a missing image;
# `build` records its argv, the DOCKER_BUILDKIT and the proxy it ran with.
_DOCKER = r'''
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({"argv": args, "buildkit": os.environ.get("DOCKER_BUILDKIT"),
                          "https_proxy": os.environ.get("HTTPS_PROXY")}) + "\n")
if args[:1] == ["info"]:
    print(os.environ.get("FAKE_SECURITY_OPTIONS", '["name=seccomp,profile=builtin","name=cgroupns"]'))
    sys.exit(0)
if args[:2] == ["image", "inspect"]:
    sys.exit(0 if os.environ.get("FAKE_HAVE_IMAGE") == "1" else 1)
if args[:1] == ["build"]:
    sys.exit(int(os.environ.get("FAKE_FAIL", "0")))
sys.exit(127)
'''


def _run_script(script: str, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(f"#!{sys.executable}\n{_DOCKER}")
    docker.chmod(0o755)
    log = tmp_path / "docker.log"
    environ = {
        "PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOG": str(log), "IMAGE": nvml_mock.image_name(),
        "CONTEXT": f"{versions.NVML_MOCK_REPOSITORY}#{versions.NVML_MOCK_COMMIT}",
        "DOCKERFILE": versions.NVML_MOCK_DOCKERFILE, **env,
    }
    result = subprocess.run(["/bin/sh", "-c", script], env=environ, capture_output=True, text=True)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def test_build_runs_buildkit_on_the_pinned_git_context(tmp_path: Path) -> None:
    result, calls = _run_script(nvml_mock.build_script(), tmp_path)
    assert result.returncode == 0, result.stderr
    assert calls[-1]["argv"] == [
        "build", "--load", "--provenance=false", "--tag", nvml_mock.image_name(),
        "--file", "deployments/nvml-mock/Dockerfile",
        f"https://github.com/NVIDIA/k8s-test-infra.git#{versions.NVML_MOCK_COMMIT}",
    ]
    assert calls[-1]["buildkit"] == "1"


def test_build_hands_the_proxy_of_pulumi_up_to_the_build(tmp_path: Path) -> None:
    """buildx takes proxies from ~/.docker/config.json only; a valueless --build-arg passes the variable."""
    result, calls = _run_script(nvml_mock.build_script(), tmp_path, HTTPS_PROXY="http://proxy:3128", no_proxy=".lan")
    assert result.returncode == 0, result.stderr
    argv = calls[-1]["argv"]
    assert argv[3:5] == ["--build-arg", "HTTPS_PROXY"] and argv[5:7] == ["--build-arg", "no_proxy"], argv
    assert "HTTP_PROXY" not in argv and calls[-1]["https_proxy"] == "http://proxy:3128"


def test_build_is_skipped_when_the_image_is_there_and_fails_loudly_otherwise(tmp_path: Path) -> None:
    result, calls = _run_script(nvml_mock.build_script(), tmp_path, FAKE_HAVE_IMAGE="1")
    assert result.returncode == 0 and [c["argv"][0] for c in calls] == ["info", "image"]
    failing = tmp_path / "failing"
    failing.mkdir()
    result, _ = _run_script(nvml_mock.build_script(), failing, FAKE_FAIL="1")
    assert result.returncode != 0


@pytest.mark.parametrize(
    "options", ['["name=seccomp,profile=builtin","name=rootless","name=cgroupns"]', '["name=seccomp,name=rootless"]']
)
def test_rootless_docker_is_refused_before_building(tmp_path: Path, options: str) -> None:
    """kind `info()` reads rootless from a comma-separated field `name=rootless`; mknod cannot work there."""
    result, calls = _run_script(nvml_mock.build_script(), tmp_path, FAKE_SECURITY_OPTIONS=options)
    assert result.returncode == 1
    assert "needs a rootful Docker engine" in result.stderr
    assert [c["argv"][0] for c in calls] == ["info"]


def test_userns_remapping_is_not_rootless(tmp_path: Path) -> None:
    """With userns-remap kind runs its nodes with --userns=host: mknod works there."""
    result, _ = _run_script(nvml_mock.build_script(), tmp_path, FAKE_SECURITY_OPTIONS='["name=userns","name=seccomp"]')
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", ["build"])
def test_image_scripts_pass_shellcheck(script: str, tmp_path: Path) -> None:
    path = tmp_path / f"{script}.sh"
    path.write_text(getattr(nvml_mock, f"{script}_script")())
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    result = subprocess.run([shellcheck, "-s", "sh", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


CHART_RENDERING = Path(__file__).parent / "fixtures" / "nvml_mock" / "nvml-mock-daemonset.yaml"
CHART_VALUES = Path(__file__).parent / "fixtures" / "nvml_mock" / "nvml-mock-chart-values.json"
# What the program's DaemonSet does differently from the chart's, each for a reason:
# - the IB ping settings: they serve only MOCK_IB=full (setup.sh step 9), which is off;
# - readinessProbe: HAMi's device plugin waits for the driver root (the chart has none);
# - resources: the chart leaves them empty; the footprint here is sized;
# - nodeSelector: only the tenant's GPU worker (the chart: every node);
# - the ConfigMap, ServiceAccount and labels carry the program's names.
_NOT_FROM_THE_CHART = {"MOCK_IB_PING_FABRIC", "MOCK_IB_PING_PORT", "MOCK_IB_PING_SOCKET", "POD_IP",
                       "MOCK_IB_PING_SERVICE_HOST"}


def test_the_daemonset_matches_what_upstreams_chart_renders() -> None:
    chart = yaml.safe_load(CHART_RENDERING.read_text())
    values = json.loads(CHART_VALUES.read_text())
    config = load_config(nvml_config())
    # The recording was made with the program's own configuration of tenant-b.
    ours_config = nvml_mock.config_yaml(nvml_mock.mock_config("tenant-b", config.tenants[1].gpus))
    assert values["gpu"]["customConfig"] == ours_config
    image = f"{values['image']['repository']}:{values['image']['tag']}"
    assert image == nvml_mock.image_name()
    ours = nvml_mock.daemon_set_spec("tenant-b", image, "nvml-mock-config", "nvml-mock", 2, "x")
    chart_pod, our_pod = chart["spec"]["template"]["spec"], ours["template"]["spec"]
    (chart_container,), (our_container,) = chart_pod["containers"], our_pod["containers"]
    for key in ("command", "securityContext", "lifecycle", "volumeMounts", "image", "imagePullPolicy"):
        assert our_container[key] == chart_container[key], key
    chart_env = [e for e in chart_container["env"] if e["name"] not in _NOT_FROM_THE_CHART]
    assert our_container["env"] == chart_env
    assert our_pod["volumes"] == chart_pod["volumes"]
    for key in ("tolerations", "terminationGracePeriodSeconds"):
        assert our_pod[key] == chart_pod[key], key
    assert ours["updateStrategy"] == chart["spec"]["updateStrategy"]


def test_a_worker_that_sees_the_hosts_gpus_is_refused_before_the_image_is_loaded(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "open(os.environ['FAKE_LOG'], 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "sys.exit(0 if os.environ.get('FAKE_HOST_GPUS') == '1' else 1)\n"
    )
    (fake / "docker").chmod(0o755)
    log = tmp_path / "log"
    env = {"PATH": f"{fake}:/usr/bin:/bin", "FAKE_LOG": str(log), "NODE_CONTAINER": "lab-tenant-a-worker"}
    script = nvml_mock.no_host_gpus_script() + "echo loading\n"
    refused = subprocess.run(["/bin/sh", "-c", script], env={**env, "FAKE_HOST_GPUS": "1"}, capture_output=True, text=True)
    assert refused.returncode == 1 and "sees the Docker host's NVIDIA GPUs" in refused.stderr
    assert "loading" not in refused.stdout
    assert log.read_text().startswith("exec lab-tenant-a-worker sh -c ls /dev/nvidia[0-9]*")
    fine = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True)
    assert fine.returncode == 0 and fine.stdout == "loading\n"


def test_the_host_gpu_check_passes_shellcheck(tmp_path: Path) -> None:
    path = tmp_path / "check.sh"
    path.write_text(nvml_mock.no_host_gpus_script())
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    result = subprocess.run([shellcheck, "-s", "sh", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_the_daemonset_is_valid_kubernetes_and_runs_on_the_tenants_gpu_worker_within_its_footprint() -> None:
    import kubernetes_validate

    from gpu_tenancy.builders import kube_objects

    spec = nvml_mock.daemon_set_spec("tenant-a", nvml_mock.image_name(), "cm", "sa", 1, "abc")
    body = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "m", "namespace": "kube-system"},
            "spec": spec}
    kubernetes_validate.validate(body, "1.35.0", strict=True)  # a misspelt field fails
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "sa"
    # Only the tenant's GPU worker, by the label every worker joins with.
    assert pod["nodeSelector"].items() <= kube_objects.gpu_node_labels("tenant-a").items() and pod["nodeSelector"]
    (container,) = pod["containers"]
    # docs/live-suite.md "Footprint": the mock NVML requests 10m/32Mi and may use 128 MiB.
    assert container["resources"] == {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
    # HAMi's device plugin starts when this turns Ready: polled every 2 s, it waits at most that long after setup.
    assert container["readinessProbe"]["periodSeconds"] == 2
