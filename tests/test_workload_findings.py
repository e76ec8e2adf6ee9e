"""What the workload-safety policy finds in one resource (policies/workload_lib.py `findings`): every way a
Docker container, a Helm release, a PersistentVolume or a pod reaches into its node, each with its exemption key."""

from __future__ import annotations

from typing import Any

import policy_support  # noqa: F401  (puts policies/ on the import path, as the engine runs the pack from there)
import pytest
from resource_lib import Res
from value_lib import UNKNOWN
from workload_lib import findings


def _res(typ: str, props: dict[str, Any]) -> Res:
    return Res(typ, "r", "urn:r", props)


def test_a_docker_container_reaching_into_its_host() -> None:
    container = _res("docker:index/container:Container", {
        "privileged": True,
        "securityOpts": ["seccomp=unconfined", "apparmor:unconfined", "label=disable", "no-new-privileges"],
        "volumes": [{"hostPath": "/run//docker.sock", "containerPath": "/x"}, {"volumeName": "v", "containerPath": "/y"}],
        "devices": [{"hostPath": "/dev/nvidia0"}],
        "usernsMode": "host", "networkMode": "host", "pidMode": "container:other", "ipcMode": "host",
        "capabilities": {"adds": ["cap_sys_admin", "NET_ADMIN"]},
    })
    assert findings(container) == [
        ("privileged", "is a privileged Docker container"),
        ("seccomp:unconfined", "runs with security option seccomp=unconfined"),
        ("apparmor:unconfined", "runs with security option apparmor:unconfined"),
        ("label:unconfined", "runs with security option label=disable"),
        ("hostPath:/run/docker.sock", "mounts host path /run/docker.sock"),
        ("device:/dev/nvidia0", "is given host device /dev/nvidia0"),
        ("usernsMode:host", "shares the host's userns namespace"),
        ("networkMode:host", "shares the host's network namespace"),
        ("ipcMode:host", "shares the host's ipc namespace"),
        ("capability:SYS_ADMIN", "adds capability cap_sys_admin"),
        ("capability:NET_ADMIN", "adds capability NET_ADMIN"),
    ]
    assert findings(_res("docker:index/container:Container", {"privileged": False, "pidMode": "private"})) == []
    assert findings(_res("docker:index/container:Container", {"pidMode": "host"})) == [
        ("pidMode:host", "shares the host's pid namespace")]


def test_a_helm_release_and_a_persistent_volume() -> None:
    assert findings(_res("kubernetes:helm.sh/v3:Release", {"chart": "nvidia-device-plugin"})) == [
        ("helm:nvidia-device-plugin",
         "installs Helm chart 'nvidia-device-plugin', whose rendered objects the pack cannot inspect")]
    volume = _res("kubernetes:core/v1:PersistentVolume",
                  {"spec": {"hostPath": {"path": "/data/"}, "local": {"path": "/mnt/disk"}}})
    assert findings(volume) == [("hostPath:/data", "PersistentVolume on host path /data (hostPath)"),
                                ("hostPath:/mnt/disk", "PersistentVolume on host path /mnt/disk (local)")]
    assert findings(_res("kubernetes:core/v1:PersistentVolume", {"spec": {"nfs": {"path": "/export"}}})) == []


def test_a_pod_reaching_into_its_node() -> None:
    spec = {
        "hostNetwork": True, "hostPID": True, "hostIPC": False,
        "securityContext": {
            "seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"},
            "seLinuxOptions": {"type": "spc_t"}, "windowsOptions": {"hostProcess": True},
            "sysctls": [{"name": "kernel.shm_rmid_forced"}, {"name": "net.core.somaxconn"}],
        },
        "volumes": [{"name": "h", "hostPath": {"path": "/etc/"}}, {"name": "e", "emptyDir": {}}],
        "containers": [{
            "name": "c",
            "securityContext": {"privileged": True, "allowPrivilegeEscalation": True,
                                "capabilities": {"add": ["CAP_SYS_PTRACE"]}, "procMount": "Unmasked",
                                "seLinuxOptions": {"user": "u"}},
            # Numbers cross the analyzer protocol as doubles.
            "ports": [{"hostPort": 8888.0}, {"containerPort": 80}],
        }],
    }
    annotations = {"container.apparmor.security.beta.kubernetes.io/c": "unconfined", "other": "unconfined"}
    pod = _res("kubernetes:core/v1:Pod", {"metadata": {"annotations": annotations}, "spec": spec})
    assert findings(pod) == [
        ("hostNetwork", "sets hostNetwork: true"),
        ("hostPID", "sets hostPID: true"),
        ("seccomp:Unconfined", "the pod runs with seccomp Unconfined"),
        ("apparmor:Unconfined", "the pod runs with AppArmor unconfined"),
        ("seLinux", "the pod sets a custom SELinux user, role or type"),
        ("hostProcess", "the pod is a Windows HostProcess container"),
        ("sysctl:net.core.somaxconn", "sets unsafe sysctl net.core.somaxconn"),
        ("hostPath:/etc", "mounts hostPath /etc (volume 'h')"),
        ("privileged", "container 'c' is privileged"),
        ("allowPrivilegeEscalation", "container 'c' allows privilege escalation"),
        ("capability:SYS_PTRACE", "container 'c' adds capability SYS_PTRACE"),
        ("procMount:Unmasked", "container 'c' mounts an unmasked /proc"),
        ("seLinux", "container 'c' sets a custom SELinux user, role or type"),
        ("hostPort:8888", "container 'c' binds host port 8888"),
        ("apparmor:Unconfined", "annotation container.apparmor.security.beta.kubernetes.io/c is unconfined"),
    ]
    safe = {"securityContext": {"seLinuxOptions": {"type": "container_t"}, "sysctls": [{"name": "kernel.shm_rmid_forced"}]},
            "containers": [{"name": "c", "securityContext": {"privileged": False}}]}
    assert findings(_res("kubernetes:core/v1:Pod", {"spec": safe})) == []


def test_a_pod_sharing_the_hosts_ipc_or_setting_an_selinux_role() -> None:
    spec = {"hostIPC": True, "securityContext": {"seLinuxOptions": {"role": "system_r"}}, "containers": [{"name": "c"}]}
    assert findings(_res("kubernetes:core/v1:Pod", {"spec": spec})) == [
        ("hostIPC", "sets hostIPC: true"),
        ("seLinux", "the pod sets a custom SELinux user, role or type"),
    ]


def test_a_deployments_apparmor_annotation_is_read_from_its_pod_template() -> None:
    unconfined = {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}
    deployment = _res("kubernetes:apps/v1:Deployment", {
        "metadata": {"annotations": {}},
        "spec": {"template": {"metadata": {"annotations": unconfined}, "spec": {"containers": [{"name": "c"}]}}},
    })
    assert findings(deployment) == [
        ("apparmor:Unconfined", "annotation container.apparmor.security.beta.kubernetes.io/c is unconfined")]
    # On the Deployment itself the annotation takes no effect.
    deployment.props["metadata"]["annotations"], deployment.props["spec"]["template"]["metadata"] = unconfined, {}
    assert findings(deployment) == []


def test_a_path_or_chart_not_known_is_shown_as_a_question_mark() -> None:
    volume = _res("kubernetes:core/v1:PersistentVolume", {"spec": {"hostPath": {"path": UNKNOWN}}})
    assert findings(volume) == [("hostPath:?", "PersistentVolume on host path ? (hostPath)")]
    assert findings(_res("kubernetes:helm.sh/v3:Release", {})) == [
        ("helm:?", "installs Helm chart '?', whose rendered objects the pack cannot inspect")]


def test_a_pod_reaching_gpus_around_hami_is_found_once_its_spec_is_known() -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}
    assert findings(_res("kubernetes:core/v1:Pod", {"spec": spec})) == [
        ("gpuAccess", "reaches a GPU but is not scheduled by hami-scheduler (schedulerName None), so HAMi neither "
                      "checks nor counts it"),
        ("gpuAccess", "container 'c' sets NVIDIA_VISIBLE_DEVICES, which HAMi's device plugin owns")]
    spec["runtimeClassName"] = UNKNOWN  # a preview: the admission policy's verdict waits for the whole spec
    assert findings(_res("kubernetes:core/v1:Pod", {"spec": spec})) == []


# Pod Security Standards baseline at the pinned Kubernetes (k8s.io/pod-security-admission v0.36.3,
# policy/check_sysctls.go sysctlsAllowedV1Dot32): the sysctls a baseline pod may set.
BASELINE_SYSCTLS = [
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
]
# policy/check_seLinuxOptions.go selinuxAllowedTypes1_31: the SELinux types a baseline pod may set ("" = none).
BASELINE_SELINUX_TYPES = ["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"]


def _pod(spec: dict[str, Any]) -> Res:
    return _res("kubernetes:core/v1:Pod", {"spec": {"containers": [{"name": "c"}], **spec}})


@pytest.mark.parametrize("name", BASELINE_SYSCTLS)
def test_each_sysctl_baseline_allows_is_no_finding(name: str) -> None:
    assert findings(_pod({"securityContext": {"sysctls": [{"name": name, "value": "1"}]}})) == []


@pytest.mark.parametrize("name", [
    # Namespaced, yet not on baseline's list: the kubelet's own safe list had it (v1.4), PSA never did.
    "net.ipv4.tcp_max_syn_backlog",
    # Siblings of allowed names: the match is by the whole name, not a prefix.
    "kernel.shm_rmid_forced_x", "kernel.shmmax", "net.ipv4.tcp_keepalive", "net.ipv4.tcp_mem",
])
def test_the_closest_sysctls_baseline_refuses_are_findings(name: str) -> None:
    assert findings(_pod({"securityContext": {"sysctls": [{"name": name, "value": "1"}]}})) == [
        (f"sysctl:{name}", f"sets unsafe sysctl {name}")]


@pytest.mark.parametrize("selinux_type", BASELINE_SELINUX_TYPES)
@pytest.mark.parametrize("where", ["pod", "container"])
def test_each_selinux_type_baseline_allows_is_no_finding(selinux_type: str, where: str) -> None:
    options = {"seLinuxOptions": {"type": selinux_type, "level": "s0:c123,c456"}}
    spec = {"securityContext": options} if where == "pod" else {"containers": [{"name": "c", "securityContext": options}]}
    assert findings(_pod(spec)) == []


def test_an_selinux_level_alone_is_no_finding() -> None:
    # Baseline restricts type, user and role; a level (MCS categories) is what isolates containers from each other.
    assert findings(_pod({"securityContext": {"seLinuxOptions": {"level": "s0:c1,c2"}}})) == []


@pytest.mark.parametrize("selinux_type", ["spc_t", "unconfined_t", "container_file_t", "container_tt"])
def test_the_closest_selinux_types_baseline_refuses_are_findings(selinux_type: str) -> None:
    assert findings(_pod({"securityContext": {"seLinuxOptions": {"type": selinux_type}}})) == [
        ("seLinux", "the pod sets a custom SELinux user, role or type")]


def test_an_allocation_annotation_hami_never_made_is_a_finding_and_a_scheduling_policy_is_not() -> None:
    # HAMi v2.10.0's device plugin reads hami.io/vgpu-devices-allocated as the devices it granted; a pod writing it
    # itself claims an allocation. The two scheduling-policy annotations are HAMi's documented user settings.
    forged = {"hami.io/vgpu-devices-allocated": "GPU-0,NVIDIA,24576,100:;", "hami.io/gpu-scheduler-policy": "binpack"}
    pod = _res("kubernetes:core/v1:Pod", {"metadata": {"annotations": forged}, "spec": {"containers": [{"name": "c"}]}})
    assert findings(pod) == [
        ("gpuAccess", "sets annotation hami.io/vgpu-devices-allocated, which only HAMi's scheduler and device plugin "
                      "write")]
    del forged["hami.io/vgpu-devices-allocated"]
    assert findings(pod) == []


def test_a_pod_placed_on_a_node_by_itself_is_found() -> None:
    # spec.nodeName skips every scheduler, HAMi's among them (kubernetes: the scheduler binds only unbound pods).
    spec = {"nodeName": "gpu-a100-01", "containers": [{"name": "c"}]}
    assert findings(_res("kubernetes:core/v1:Pod", {"spec": spec})) == [
        ("gpuAccess", "sets spec.nodeName, which places the pod around every scheduler")]
    del spec["nodeName"]
    assert findings(_res("kubernetes:core/v1:Pod", {"spec": spec})) == []


def test_the_ways_around_hami_a_container_has_are_found_in_its_words() -> None:
    nvd_none = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]
    gpu = {"limits": {"nvidia.com/gpu": "1"}}
    spec = {
        "schedulerName": "hami-scheduler", "runtimeClassName": "nvidia",
        "containers": [{"name": "main", "resources": gpu}, {"name": "side"},
                       {"name": "env", "resources": gpu, "envFrom": [{"configMapRef": {"name": "c"}}]}],
        "ephemeralContainers": [{"name": "dbg"}, {"name": "blind", "env": nvd_none}],
    }
    assert findings(_res("kubernetes:core/v1:Pod", {"spec": spec})) == [
        ("gpuAccess", "container 'env' uses envFrom without a prefix that keeps out NVIDIA_/CUDA_ names"),
        ("gpuAccess", "container 'side' runs under RuntimeClass 'nvidia' without requesting nvidia.com/gpu "
                      "(set NVIDIA_VISIBLE_DEVICES=none)"),
        ("gpuAccess", "ephemeral container 'dbg' needs NVIDIA_VISIBLE_DEVICES=none"),
    ]


def test_a_gpu_pod_of_another_scheduler_is_found_naming_that_scheduler() -> None:
    spec = {"schedulerName": "my-scheduler", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    assert findings(_res("kubernetes:core/v1:Pod", {"spec": spec})) == [
        ("gpuAccess", "reaches a GPU but is not scheduled by hami-scheduler (schedulerName 'my-scheduler'), so HAMi "
                      "neither checks nor counts it")]
