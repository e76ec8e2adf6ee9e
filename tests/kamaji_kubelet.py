"""The tenant's kubelet configuration as Kamaji 26.8.2-edge serialises it, before it applies the TCP's patches.

Follows clastix/kamaji@26.8.2-edge `internal/kubeadm/uploadconfig.go` `getKubeletConfigmapContent`:

1. `kubeletv1beta1.SetDefaults_KubeletConfiguration(&kc)` (kubernetes v1.36.3,
   `pkg/kubelet/apis/config/v1beta1/defaults.go`), which sets `cgroupDriver: cgroupfs` among the rest;
2. then overrides: `authentication.x509.clientCAFile`, **`cgroupDriver` = the TCP's deprecated
   `spec.kubernetes.kubelet.cgroupfs`** (empty unless set; `internal/resources/kubeadm_utils.go`),
   `clusterDNS`, `clusterDomain`, `rotateCertificates`, `staticPodPath`, and `resolvConf` = nil;
3. `utilities.EncodeToJSON` (apimachinery's json serializer, i.e. `encoding/json`): every field tagged
   `omitempty` (`k8s.io/kubelet@v0.36.1 config/v1beta1/types.go`) is absent when empty, so with no `cgroupfs`
   there is no `cgroupDriver` key at all;
4. `jsonpatchv5.Patch.Apply` (evanphx/json-patch v5.9.11, RFC 6902): `replace` on a missing key is an error,
   `add` on an object member creates or replaces it;
5. `utilities.DecodeFromJSON` into a fresh `KubeletConfiguration` (apimachinery's json serializer with
   `Strict: false`, i.e. sigs.k8s.io/json's case-sensitive decoding that drops what the type does not have),
   then `utilities.EncodeToYaml`: a patch that adds a misspelt key (`/cgroupdriver`, `/evictionhard`) succeeds
   and is then silently lost, and a field emptied by a patch disappears where its tag says omitempty. The
   typed shape is k8s.io/kubelet v0.36.1 `config/v1beta1/types.go`, recorded in
   tests/fixtures/kubelet/kubelet-configuration-v1beta1.json; fields of types from other packages
   (metav1.Duration, logsapi.LoggingConfiguration, v1.Taint, ...) are kept as they are. A value of the wrong
   JSON kind for its Go type (a string for a bool) fails the decode, as encoding/json does.

Only the defaulted fields are listed (what `SetDefaults_KubeletConfiguration` fills in, feature-gated ones
left out); that is the shape the patch paths are resolved against.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonpatch

DNS_SERVICE_IP = "10.96.0.10"  # Kamaji's default spec.networkProfile.dnsServiceIPs
KUBELET_TYPES: dict[str, dict[str, dict[str, Any]]] = json.loads(
    (Path(__file__).parent / "fixtures" / "kubelet" / "kubelet-configuration-v1beta1.json").read_text()
)["structs"]
_GO_KINDS = {"bool": bool, "string": str, "int32": int, "int64": int, "float64": (int, float)}


class KubeletDecodeError(ValueError):
    """DecodeFromJSON failed: Kamaji's upload fails with "unable to decode JSON to KubeletConfiguration"."""


def _decode(value: Any, go_type: str, where: str) -> Any:
    """`value` decoded into `go_type` as encoding/json does, unknown object members dropped (non-strict)."""
    if value is None:
        return None  # null: a nil pointer, slice or map (the zero value otherwise)
    base = go_type.lstrip("*")
    if base.startswith("[]"):
        if not isinstance(value, list):
            raise KubeletDecodeError(f"{where}: cannot unmarshal {type(value).__name__} into {go_type}")
        return [_decode(item, base[2:], f"{where}[{i}]") for i, item in enumerate(value)]
    if base.startswith("map[string]"):
        if not isinstance(value, dict):
            raise KubeletDecodeError(f"{where}: cannot unmarshal {type(value).__name__} into {go_type}")
        return {key: _decode(item, base[len("map[string]"):], f"{where}.{key}") for key, item in value.items()}
    if base in KUBELET_TYPES:
        if not isinstance(value, dict):
            raise KubeletDecodeError(f"{where}: cannot unmarshal {type(value).__name__} into {go_type}")
        fields = KUBELET_TYPES[base]
        known = set(fields) - {"..."} | ({"kind", "apiVersion"} if "..." in fields else set())
        return {
            key: _decode(item, fields[key]["type"] if key in fields else "string", f"{where}.{key}")
            for key, item in value.items()
            if key in known  # case-sensitive; anything else is dropped without an error
        }
    if base in ("int32", "int64") and isinstance(value, float) and value.is_integer():
        value = int(value)  # the JSON text of a whole float64 (Pulumi's numbers) is an integer: `100`, not `100.0`
    kind = _GO_KINDS.get(base)
    if kind is None and base[:1].isupper() and "." not in base:
        kind = str  # this package's named string types (KubeletAuthorizationMode, ...)
    if kind is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
        raise KubeletDecodeError(f"{where}: cannot unmarshal {json.dumps(value)} into Go value of type {go_type}")
    return value  # scalars, and types of other packages as they are


def _is_empty(value: Any) -> bool:
    """encoding/json's isEmptyValue: false, 0, "", nil, and empty maps and slices."""
    return value is None or value is False or (not isinstance(value, bool) and value == 0) or value in ("", [], {})


def _encode(value: Any, go_type: str) -> Any:
    """encoding/json of a decoded value: members tagged omitempty left out when empty (a set pointer is kept)."""
    base = go_type.lstrip("*")
    if isinstance(value, list) and base.startswith("[]"):
        return [_encode(item, base[2:]) for item in value]
    if isinstance(value, dict) and base.startswith("map[string]"):
        return {key: _encode(item, base[len("map[string]"):]) for key, item in value.items()}
    if isinstance(value, dict) and base in KUBELET_TYPES:
        fields = KUBELET_TYPES[base]
        out = {}
        for key, item in value.items():
            field = fields.get(key, {"type": "string", "omitempty": True})  # TypeMeta's kind/apiVersion
            pointer = field["type"].startswith("*")
            if item is None or (field["omitempty"] and not pointer and _is_empty(item)):
                continue
            out[key] = _encode(item, field["type"])
        return out
    return value


def kamaji_round_trip(document: dict[str, Any]) -> dict[str, Any]:
    """The patched JSON decoded into KubeletConfiguration and encoded again, as Kamaji stores it."""
    return dict(_encode(_decode(document, "KubeletConfiguration", "KubeletConfiguration"), "KubeletConfiguration"))


def kamaji_kubelet_configuration(cgroupfs: str = "") -> dict[str, Any]:
    """KubeletConfiguration JSON as Kamaji encodes it, `cgroupfs` being the TCP's kubelet.cgroupfs."""
    configuration: dict[str, Any] = {
        "kind": "KubeletConfiguration",
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "enableServer": True,
        "staticPodPath": "/etc/kubernetes/manifests",
        "podLogsDir": "/var/log/pods",
        "syncFrequency": "1m0s",
        "fileCheckFrequency": "20s",
        "httpCheckFrequency": "20s",
        "address": "0.0.0.0",
        "port": 10250,
        "rotateCertificates": True,
        "authentication": {
            "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
            "webhook": {"enabled": True, "cacheTTL": "2m0s"},
            "anonymous": {"enabled": False},
        },
        "authorization": {
            "mode": "Webhook",
            "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"},
        },
        "registryPullQPS": 5,
        "registryBurst": 10,
        "eventRecordQPS": 50,
        "eventBurst": 100,
        "enableDebuggingHandlers": True,
        "healthzPort": 10248,
        "healthzBindAddress": "127.0.0.1",
        "oomScoreAdj": -999,
        "clusterDomain": "cluster.local",
        "clusterDNS": [DNS_SERVICE_IP],
        "streamingConnectionIdleTimeout": "4h0m0s",
        "nodeStatusUpdateFrequency": "10s",
        "nodeStatusReportFrequency": "5m0s",
        "nodeLeaseDurationSeconds": 40,
        "imageMinimumGCAge": "2m0s",
        "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80,
        "volumeStatsAggPeriod": "1m0s",
        "cgroupsPerQOS": True,
        "cpuManagerPolicy": "none",
        "cpuManagerReconcilePeriod": "10s",
        "memoryManagerPolicy": "None",
        "topologyManagerPolicy": "none",
        "topologyManagerScope": "container",
        "runtimeRequestTimeout": "2m0s",
        "hairpinMode": "promiscuous-bridge",
        "maxPods": 110,
        "podPidsLimit": -1,
        "cpuCFSQuota": True,
        "cpuCFSQuotaPeriod": "100ms",
        "nodeStatusMaxImages": 50,
        "maxOpenFiles": 1000000,
        "contentType": "application/vnd.kubernetes.protobuf",
        "kubeAPIQPS": 50,
        "kubeAPIBurst": 100,
        "serializeImagePulls": True,
        "evictionPressureTransitionPeriod": "5m0s",
        "mergeDefaultEvictionSettings": False,
        "enableControllerAttachDetach": True,
        "makeIPTablesUtilChains": True,
        "iptablesMasqueradeBit": 14,
        "iptablesDropBit": 15,
        "failSwapOn": True,
        "memorySwap": {},
        "containerLogMaxSize": "10Mi",
        "containerLogMaxFiles": 5,
        "containerLogMaxWorkers": 1,
        "containerLogMonitorInterval": "10s",
        "configMapAndSecretChangeDetectionStrategy": "Watch",
        "enforceNodeAllocatable": ["pods"],
        "volumePluginDir": "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
        "logging": {"format": "text", "flushFrequency": "5s", "verbosity": 0, "options": {"text": {}, "json": {}}},
        "enableSystemLogHandler": True,
        "enableProfilingHandler": True,
        "enableDebugFlagsHandler": True,
        "seccompDefault": False,
        # Defaulted to true since Kubernetes 1.35 (kubernetes/kubernetes#134298; k8s.io/kubelet v0.36.1
        # config/v1beta1/types.go "Default: true", pkg/kubelet/apis/config/v1beta1/defaults.go
        # `obj.FailCgroupV1 = ptr.To(true)`): such a kubelet refuses to start on a cgroup v1 host.
        "failCgroupV1": True,
        "memoryThrottlingFactor": 0.9,
        "registerNode": True,
        "localStorageCapacityIsolation": True,
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "crashLoopBackOff": {},
    }
    if cgroupfs:  # omitempty: an empty driver is not serialised at all
        configuration["cgroupDriver"] = cgroupfs
    return configuration


def apply_kubelet_patches(tcp_spec: dict[str, Any]) -> dict[str, Any]:
    """What Kamaji writes into the tenant's `kubelet-config` ConfigMap for this TCP spec.

    Raises `jsonpatch.JsonPatchException` where evanphx/json-patch would fail the upload (and with it
    every `kubeadm join`), `KubeletDecodeError` where the patched document does not decode; what the typed
    KubeletConfiguration has no field for is not there afterwards.
    """
    kubelet = tcp_spec["kubernetes"]["kubelet"]
    document = kamaji_kubelet_configuration(kubelet.get("cgroupfs", ""))
    patches = kubelet.get("configurationJSONPatches") or []
    # Round-trip through JSON as Kamaji does (ConfigurationJSONPatches.ToJSON + DecodePatch).
    patch = jsonpatch.JsonPatch(json.loads(json.dumps(patches)))
    if not patches:
        return document
    return kamaji_round_trip(patch.apply(document))
