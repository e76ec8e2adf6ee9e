"""What in a resource hands it the node or the GPUs around HAMi: pure findings for `workload-safety`.

A finding is a stable key (what an exemption names) and a sentence. The pod-level checks follow Pod Security
baseline (pod-security-admission policy/check_*.go; held against the real one in tests/realcp/test_pod_security.py),
three choices stricter: every added capability (MTB-PL1-BC-CPI-3 "block add capabilities"; baseline allows 13),
`allowPrivilegeEscalation: true` (restricted's check), an unmasked /proc in a user namespace (baseline allows it
from 1.35 with `hostUsers: false`; without it the API refuses the pod). GPU access around HAMi is
gpu_tenancy.builders.gpu_access.gpu_access's rule, which the admission policy in every tenant enforces.
A PersistentVolume's hostPath/local path, Docker containers' host access
and Helm releases (whose rendered objects the pack never sees) are findings too.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from pod_lib import POD_SPEC_PATHS, chart_name, containers, pod_spec
from resource_lib import CONTAINER_TYPE, HELM_TYPES, K8S_COMPONENT_TYPES, PERSISTENT_VOLUME_TYPE, Res
from value_lib import as_dict, as_list, dig, is_unknown, known_str, quantity

from gpu_tenancy.builders.gpu_access import gpu_access

Finding = tuple[str, str]

# Pod Security Standards baseline: sysctls a pod may set (policy/check_sysctls.go, 1.32+ list).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
    }
)
# SELinux types baseline allows (policy/check_seLinuxOptions.go).
SAFE_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _path(value: Any) -> str:
    return posixpath.normpath(known_str(value) or "?")


def _security_context_findings(where: str, context: Mapping[str, Any]) -> Iterator[Finding]:
    seccomp = dig(context, "seccompProfile", "type")
    if seccomp == "Unconfined":
        yield "seccomp:Unconfined", f"{where} runs with seccomp Unconfined"
    apparmor = dig(context, "appArmorProfile", "type")
    if apparmor == "Unconfined":
        yield "apparmor:Unconfined", f"{where} runs with AppArmor unconfined"
    selinux = as_dict(context.get("seLinuxOptions"))
    if selinux.get("type", "") not in SAFE_SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        yield "seLinux", f"{where} sets a custom SELinux user, role or type"
    if dig(context, "windowsOptions", "hostProcess") is True:
        yield "hostProcess", f"{where} is a Windows HostProcess container"


def _container_findings(container: Mapping[str, Any]) -> Iterator[Finding]:
    where = f"container {container.get('name')!r}"
    context = as_dict(container.get("securityContext"))
    if context.get("privileged") is True:
        yield "privileged", f"{where} is privileged"
    if context.get("allowPrivilegeEscalation") is True:
        yield "allowPrivilegeEscalation", f"{where} allows privilege escalation"
    for capability in as_list(dig(context, "capabilities", "add")):
        name = known_str(capability)
        if name:
            name = name.upper().removeprefix("CAP_")
            yield f"capability:{name}", f"{where} adds capability {name}"
    if context.get("procMount") == "Unmasked":
        yield "procMount:Unmasked", f"{where} mounts an unmasked /proc"
    yield from _security_context_findings(where, context)
    for port in as_list(container.get("ports")):
        # Numbers cross the analyzer protocol as protobuf Struct doubles: 8888 arrives as 8888.0.
        host_port = quantity(dig(port, "hostPort"))
        if host_port:
            yield f"hostPort:{host_port}", f"{where} binds host port {host_port}"


def pod_findings(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> Iterator[Finding]:
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            yield key, f"sets {key}: true"
    context = as_dict(spec.get("securityContext"))
    yield from _security_context_findings("the pod", context)
    for sysctl in as_list(context.get("sysctls")):
        name = known_str(dig(sysctl, "name"))
        if name and name not in SAFE_SYSCTLS:
            yield f"sysctl:{name}", f"sets unsafe sysctl {name}"
    for volume in as_list(spec.get("volumes")):
        host_path = dig(volume, "hostPath")
        if isinstance(host_path, dict):
            path = _path(host_path.get("path"))
            yield f"hostPath:{path}", f"mounts hostPath {path} (volume {dig(volume, 'name')!r})"
    for container in containers(spec):
        yield from _container_findings(container)
    for key, value in annotations.items():
        if isinstance(key, str) and key.startswith(APPARMOR_ANNOTATION) and value == "unconfined":
            yield "apparmor:Unconfined", f"annotation {key} is unconfined"
    if not any(is_unknown(v) for v in spec.values()):
        for problem in gpu_access.pod_problems(spec):
            yield "gpuAccess", problem
    for problem in gpu_access.annotation_problems(annotations):
        yield "gpuAccess", problem


def _template_annotations(res: Res) -> dict[str, Any]:
    """The pod's annotations: a Pod's own, else its template's (where AppArmor annotations take effect)."""
    path = POD_SPEC_PATHS.get(res.kind.removesuffix("Patch"), ())
    return as_dict(dig(res.props, *path[:-1], "metadata", "annotations"))


def _docker_findings(props: Mapping[str, Any]) -> Iterator[Finding]:
    if props.get("privileged") is True:
        yield "privileged", "is a privileged Docker container"
    for option in as_list(props.get("securityOpts")):
        text = known_str(option) or ""
        key, _, value = text.replace(":", "=", 1).partition("=")
        if value == "unconfined" or text == "label=disable":
            yield f"{key}:unconfined", f"runs with security option {text}"
    for volume in as_list(props.get("volumes")):
        host = known_str(dig(volume, "hostPath"))
        if host:
            yield f"hostPath:{_path(host)}", f"mounts host path {_path(host)}"
    for device in as_list(props.get("devices")):
        host = known_str(dig(device, "hostPath"))
        if host:
            yield f"device:{host}", f"is given host device {host}"
    for key in ("usernsMode", "networkMode", "pidMode", "ipcMode"):
        if props.get(key) == "host":
            yield f"{key}:host", f"shares the host's {key.removesuffix('Mode')} namespace"
    for capability in as_list(dig(props, "capabilities", "adds")):
        name = known_str(capability)
        if name:
            yield f"capability:{name.upper().removeprefix('CAP_')}", f"adds capability {name}"


def findings(res: Res) -> list[Finding]:
    """Every finding of one resource (its inputs); empty for what cannot reach a node."""
    if res.type == CONTAINER_TYPE:
        return list(_docker_findings(res.props))
    if res.type in HELM_TYPES and res.type not in K8S_COMPONENT_TYPES:
        chart = chart_name(res.props.get("chart")) or "?"
        return [(f"helm:{chart}", f"installs Helm chart {chart!r}, whose rendered objects the pack cannot inspect")]
    if res.type == PERSISTENT_VOLUME_TYPE:
        out = []
        for key in ("hostPath", "local"):
            path = dig(res.props, "spec", key, "path")
            if path is not None:
                out.append((f"hostPath:{_path(path)}", f"PersistentVolume on host path {_path(path)} ({key})"))
        return out
    spec = pod_spec(res)
    if spec is None:
        return []
    return list(pod_findings(spec, _template_annotations(res)))
