"""NVIDIA's mock NVML on a tenant's worker (mode sim-nvml): its configuration and DaemonSet, as pure data.

Upstream: NVIDIA/k8s-test-infra at versions.NVML_MOCK_COMMIT (main after v0.3.0, see versions.py), read there:
- `pkg/gpu/mocknvml/engine/config_types.go` `YAMLConfig`: the configuration this module writes (JSON field
  names through sigs.k8s.io/yaml, unknown keys ignored). `engine/config.go` `LoadConfig` takes the device
  count from `system.num_devices`, which `deployments/nvml-mock/scripts/setup.sh` step 6 inserts with
  `sed '/^system:/a  num_devices: N'`: so the configuration must have a top-level `system:` line and must
  not carry `num_devices` itself (it would be a duplicate key). `GetDeviceMinorNumber` returns the
  device's `minor_number`, 0 when absent, so every device states it (= its index: /dev/nvidia<index>).
  A device without `uuid` keeps the random UUID of go-nvml's dgxa100 mock it is built on
  (`engine/device.go` `NewConfigurableDevice`), different in every process: every device gets a stable one.
- `engine/device.go` `MaxDevices = 8`: one node serves at most eight GPUs.
- `deployments/nvml-mock/helm/nvml-mock/templates/daemonset.yaml`: the DaemonSet the chart renders, which
  `daemon_set_spec` follows with the chart's InfiniBand, IMEX, fabric-manager, topology, NRI and
  allocation-watcher features off (none of them is used by HAMi). The chart is not published, so the
  program does not install it; what it renders is the contract.
- `scripts/setup.sh`: lays out DRIVER_ROOT on the node (`usr/lib64/libnvidia-ml.so.1`, `usr/bin/nvidia-smi`,
  `dev/nvidia<i>`, `config/config.yaml`); the library finds `config/config.yaml` next to itself through
  /proc/self/maps (`engine/config.go` `discoverConfigPath`). `scripts/cleanup.sh` (preStop) empties
  /var/lib/nvml-mock again.
HAMi v2.10.0 registers NVML's `GetName` as the device type, prefixed "NVIDIA-" unless it starts with
"NVIDIA", and `MemoryInfo.Total / 1024 / 1024` as its memory (`pkg/device-plugin/nvidiadevice/nvinternal/
plugin/register.go` `getAPIDevices`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from gpu_tenancy.builders import kube_objects, shell
from gpu_tenancy.contract import versions
from gpu_tenancy.contract.limits import MAX_GPUS_PER_NODE
from gpu_tenancy.hami import gpu_catalogue
from gpu_tenancy.hami import protocol as hami

HOST_ROOT = "/var/lib/nvml-mock"
DRIVER_ROOT = f"{HOST_ROOT}/driver"
COMPONENT = "nvml-mock"
CONFIG_PATH_IN_POD = "/etc/nvml-mock/config.yaml"
IMAGE_REPOSITORY = "gpu-tenancy/nvml-mock"
CONFIG_VERSION = "1.0"  # the `version` every upstream profile states; validateYAMLConfig requires one

MIB = 1024 * 1024


def device_uuid(tenant: str, index: int) -> str:
    """A stable NVML UUID ('GPU-' + 8-4-4-4-12 hex) for device `index` of `tenant`'s node: the same id the
    mock-GPU agent registers in mode sim, so a device keeps its id across the simulated modes."""
    return hami.device_id(tenant, index)


def _card_facts(model: str) -> dict[str, Any]:
    """Architecture and compute capability of a catalogued card; a model outside the catalogue keeps what
    the mock's dgxa100 base device reports (8.0, Ampere). HAMi schedules on neither."""
    known = gpu_catalogue.lookup(model)
    if known is None:
        return {}
    major, minor = known.compute_capability
    return {"architecture": known.architecture, "compute_capability": {"major": major, "minor": minor}}


def mock_config(tenant: str, gpus: Sequence[Any]) -> dict[str, Any]:
    """The mock's `YAMLConfig` for one node with a tenant's declared `gpus` (GpuConfig: model, memory_mib,
    count), devices in declaration order: each named as NVML names the card, with the memory NVML reports
    for it (the catalogue's, not the marketed size upstream's profiles state)."""
    devices: list[dict[str, Any]] = []
    for gpu in gpus:
        for _ in range(gpu.count):
            index = len(devices)
            total = gpu.memory_mib * MIB
            devices.append(
                {
                    # `index` first: setup.sh counts the profile's devices by lines matching "- index:".
                    "index": index,
                    "uuid": device_uuid(tenant, index),
                    "minor_number": index,
                    "name": gpu.model,
                    "brand": "nvidia",
                    **_card_facts(gpu.model),
                    # An idle card: all of it free (FreeBytes defaults to 0, which no real idle card reports).
                    "memory": {"total_bytes": total, "free_bytes": total, "used_bytes": 0},
                }
            )
    if len(devices) > MAX_GPUS_PER_NODE:
        raise ValueError(f"{len(devices)} GPUs on one node; the mock NVML serves at most {MAX_GPUS_PER_NODE}")
    return {
        "version": CONFIG_VERSION,
        "system": {
            "driver_version": versions.NVML_MOCK_DRIVER_VERSION,
            "nvml_version": f"12.{versions.NVML_MOCK_DRIVER_VERSION}",
            "cuda_version": "12.4",
            "cuda_version_major": 12,
            "cuda_version_minor": 4,
        },
        "device_defaults": {},
        "devices": devices,
    }


def config_yaml(config: dict[str, Any]) -> str:
    return kube_objects.to_yaml(config)


def config_sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def image_name(commit: str = versions.NVML_MOCK_COMMIT) -> str:
    """The locally built image: named after the upstream commit it is built from, never pushed."""
    return f"{IMAGE_REPOSITORY}:{commit[:12]}"


def build_script() -> str:
    """`sh`: build $IMAGE from upstream's Dockerfile at $CONTEXT (git URL#commit) unless it exists already.

    - Rootless Docker is refused first: kind's nodes then run in a user namespace, where setup.sh's
      `mknod` of /dev/nvidia* fails (silenced upstream: `mknod ... || true`) and every GPU pod would then
      fail on the device specs HAMi hands the kubelet. Detected as kind does (provider.go `info()`): a
      comma-separated field `name=rootless` in `docker info`'s security options.
    - A git context is fetched by BuildKit (Docker's default builder since 23.0, through buildx), which also
      sets the TARGETARCH the Dockerfile needs. `--load` puts the result into the Docker image store even
      when the current buildx builder is not the `docker` driver (buildx build/build.go only warns
      otherwise); `--provenance=false` keeps attestation manifests out of what `docker save` hands to the
      node's containerd.
    - Proxy variables set for `pulumi up` are passed as build args (buildx reads proxies only from
      ~/.docker/config.json, not from the environment); the daemon fetches the git context with its own.
    """
    return shell.script(__name__, "build_image.sh")


def hami_device_plugin_values(config_digest: str) -> dict[str, Any]:
    """HAMi 2.10.0 chart `devicePlugin` values that point its plugin at this mock.

    The plugin loads NVML twice, through go-nvml with the library path resolved under the container's
    /driver-root (cmd/device-plugin/nvidia/main.go) and through the package-level `nvml.Init`, a plain
    dlopen (plugin/register.go, the vGPU monitor): `nvidiaDriverRoot` mounts the mock's driver root for the
    first, LD_LIBRARY_PATH serves the second (the monitor sees the host's /var at /hostvar, the chart's
    `hostvar` volume). `passDeviceSpecsEnabled` hands pods the mock's /dev/nvidia<i> (under the driver
    root, the default dev root) as runc has no NVIDIA hook to do it. The configuration digest restarts the
    plugin when the mock's devices change: it registers them once per process (the library caches its
    configuration).
    """
    return {
        "nvidiaDriverRoot": DRIVER_ROOT,
        "passDeviceSpecsEnabled": True,
        "extraEnvs": [
            {"name": "LD_LIBRARY_PATH", "value": "/driver-root/usr/lib64"},
            # The platform check dlopens NVML from "/" (go-nvlib info), and a model name go-nvlib takes for
            # Tegra would switch discovery off; NVIDIA's own e2e on this mock sets the same.
            {"name": "DEVICE_DISCOVERY_STRATEGY", "value": "nvml"},
        ],
        "podAnnotations": {"gpu-tenancy.io/nvml-mock-config": config_digest},
        "monitor": {
            "extraEnvs": [{"name": "LD_LIBRARY_PATH", "value": f"/hostvar{DRIVER_ROOT.removeprefix('/var')}/usr/lib64"}]
        },
    }


def no_host_gpus_script() -> str:
    """`sh`: fail when node container $NODE_CONTAINER sees NVIDIA device nodes of the Docker host.

    A privileged container gets the host's /dev; the mock then counts only the devices whose /dev/nvidia<i>
    exists in the calling container (k8s-test-infra engine/engine.go), so HAMi's privileged plugin would
    register as many GPUs as the host has, not the declared ones.
    """
    return shell.script(__name__, "no_host_gpus.sh")


def rbac_rules(node_name: str) -> list[dict[str, Any]]:
    """setup.sh and cleanup.sh run `kubectl label node $NODE_NAME nvidia.com/gpu.present...` (get + patch,
    as the chart's rbac.yaml grants), restricted here to the one node."""
    return [{"apiGroups": [""], "resources": ["nodes"], "resourceNames": [node_name], "verbs": ["get", "patch"]}]


# The chart's LD_PRELOAD, in its order (umad before sys, so UMAD ioctls are caught before path rewriting).
_PRELOADED_SHIMS = ("libibmockumad", "libibmockverbs", "libibmocksys", "libpcimocksys")


def _host_path(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}}


def daemon_set_spec(
    tenant: str, image: str, config_map: str, service_account: str, gpu_count: int, config_digest: str
) -> dict[str, Any]:
    """The chart's DaemonSet (daemonset.yaml at the pinned commit) for one tenant's worker."""
    labels = kube_objects.labels(tenant, COMPONENT)
    env = [
        {"name": "GPU_COUNT", "value": str(gpu_count)},
        {"name": "DRIVER_VERSION", "value": versions.NVML_MOCK_DRIVER_VERSION},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        # No Node Feature Discovery in a tenant: no feature file for it.
        {"name": "MOCK_NFD_PCI_LABEL", "value": "off"},
        {"name": "MOCK_NVML_CONFIG", "value": CONFIG_PATH_IN_POD},
        {"name": "MOCK_NVML_OVERRIDES", "value": f"/host{DRIVER_ROOT}/config/overrides.yaml"},
        # InfiniBand mocking off (setup.sh step 9): no IB daemon is needed for GPUs, so neither are the
        # chart's IB ping settings. The preloaded shims stay as the chart sets them (they redirect /sys
        # paths for processes in this container, e.g. `kubectl exec ... nvidia-smi`, and no-op for IB off).
        {"name": "MOCK_IB", "value": "off"},
        {"name": "LD_PRELOAD", "value": ":".join(f"/usr/local/lib/{lib}.so.1" for lib in _PRELOADED_SHIMS)},
        {"name": "MOCK_IB_ROOT", "value": f"{HOST_ROOT}/ib"},
        {"name": "MOCK_PCI_ROOT", "value": HOST_ROOT},
    ]
    return {
        "selector": {"matchLabels": labels},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
        "template": {
            "metadata": {"labels": labels, "annotations": {"checksum/config": config_digest}},
            "spec": {
                "serviceAccountName": service_account,
                "terminationGracePeriodSeconds": 2,  # the chart's default: cleanup.sh is quick
                "nodeSelector": {kube_objects.GPU_NODE_LABEL: "true"},
                "tolerations": [{"operator": "Exists"}],
                "containers": [
                    {
                        "name": COMPONENT,
                        "image": image,
                        # Loaded into the node's containerd by the program; there is nothing to pull.
                        "imagePullPolicy": "Never",
                        "command": ["/scripts/entrypoint.sh"],
                        "env": env,
                        # Privileged as upstream: setup.sh mknods /dev/nvidia* and writes the host's driver root.
                        "securityContext": {"privileged": True},
                        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                        # Ready once setup.sh has written the configuration the library reads (its step 6
                        # adds num_devices, which the program's configuration never carries). HAMi's device
                        # plugin waits for this: started earlier, it finds no library and panics.
                        "readinessProbe": {
                            "exec": {"command": ["grep", "-q", "num_devices:", f"{DRIVER_ROOT}/config/config.yaml"]},
                            "periodSeconds": 2,
                        },
                        "lifecycle": {"preStop": {"exec": {"command": ["/scripts/cleanup.sh"]}}},
                        "volumeMounts": [
                            {"name": "host-nvml-mock", "mountPath": f"/host{HOST_ROOT}"},
                            {"name": "host-nvml-mock", "mountPath": HOST_ROOT},
                            {"name": "gpu-config", "mountPath": "/etc/nvml-mock"},
                            {"name": "host-cdi", "mountPath": "/host/var/run/cdi"},
                            {"name": "host-run-nvidia", "mountPath": "/host/run/nvidia"},
                            {
                                "name": "host-nfd-features",
                                "mountPath": "/host/etc/kubernetes/node-feature-discovery/features.d",
                            },
                        ],
                    }
                ],
                "volumes": [
                    _host_path("host-nvml-mock", HOST_ROOT),
                    {"name": "gpu-config", "configMap": {"name": config_map}},
                    _host_path("host-cdi", "/var/run/cdi"),
                    _host_path("host-run-nvidia", "/run/nvidia"),
                    _host_path("host-nfd-features", "/etc/kubernetes/node-feature-discovery/features.d"),
                ],
            },
        },
    }
