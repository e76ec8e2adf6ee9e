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
   `add` on an object member creates or replaces it.

Only the defaulted fields are listed (what `SetDefaults_KubeletConfiguration` fills in, feature-gated ones
left out); that is the shape the patch paths are resolved against.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch

DNS_SERVICE_IP = "10.96.0.10"  # Kamaji's default spec.networkProfile.dnsServiceIPs


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
    every `kubeadm join`).
    """
    kubelet = tcp_spec["kubernetes"]["kubelet"]
    document = kamaji_kubelet_configuration(kubelet.get("cgroupfs", ""))
    patches = kubelet.get("configurationJSONPatches") or []
    # Round-trip through JSON as Kamaji does (ConfigurationJSONPatches.ToJSON + DecodePatch).
    patch = jsonpatch.JsonPatch(json.loads(json.dumps(patches)))
    return patch.apply(document)
