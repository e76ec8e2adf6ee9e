"""The pack's pod checks (policies/workload_lib.py `findings`) against the real PodSecurity admission of
kube-apiserver 1.36.3 at the baseline level: each pod below is created (dry run) in a namespace enforcing
`baseline`, and the API server refuses it exactly when the pack finds something baseline covers.

The pack is stricter than baseline in four documented ways (workload_lib's docstring, docs/policies.md): an added
capability baseline allows (it allows thirteen), `allowPrivilegeEscalation: true` (restricted's check), an unmasked
/proc in a user namespace (baseline allows it from 1.35 when `hostUsers: false`) and GPU access around HAMi. Those
cases must be admitted by the API server and found by the pack. A pod the API server's validation refuses
(HTTP 422) before admission is named in INVALID with the field it objects to.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import policy_support  # noqa: F401  (puts policies/ on the import path, as the engine runs the pack from there)
import pytest
from kubernetes import client
from resource_lib import Res
from test_workload_findings import BASELINE_SELINUX_TYPES, BASELINE_SYSCTLS

import workload_lib  # isort: skip
from tests.realcp import admission_support as adm

# k8s.io/pod-security-admission v0.36.3 policy/check_capabilities_baseline.go: what baseline lets a pod add.
BASELINE_CAPABILITIES = ["AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"]


def _stricter(key: str, pod: dict[str, Any]) -> bool:
    """A finding of the pack that baseline does not make for this pod."""
    if key.startswith("capability:"):
        return key.removeprefix("capability:") in BASELINE_CAPABILITIES
    if key == "procMount:Unmasked":  # policy/check_procMount_baseline.go procMount1_35baseline
        return pod["spec"].get("hostUsers") is False
    return key in ("allowPrivilegeEscalation", "gpuAccess")


def _container(**security: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": adm.IMAGE}
    if security:
        container["securityContext"] = security
    return container


def _pod(spec: dict[str, Any] | None = None, annotations: dict[str, str] | None = None,
         container: dict[str, Any] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {}, "spec": {"containers": [container or _container()], **(spec or {})}}
    if annotations:
        pod["metadata"]["annotations"] = annotations
    return pod


CASES: list[tuple[str, dict[str, Any]]] = [
    ("plain", _pod()),
    ("hostNetwork", _pod({"hostNetwork": True})),
    ("hostPID", _pod({"hostPID": True})),
    ("hostIPC", _pod({"hostIPC": True})),
    ("privileged", _pod(container=_container(privileged=True))),
    ("not privileged", _pod(container=_container(privileged=False))),
    ("privilege escalation", _pod(container=_container(allowPrivilegeEscalation=True))),
    ("capability SYS_ADMIN", _pod(container=_container(capabilities={"add": ["SYS_ADMIN"]}))),
    ("capability NET_RAW", _pod(container=_container(capabilities={"add": ["NET_RAW"]}))),
    *((f"capability {name}", _pod(container=_container(capabilities={"add": [name]})))
      for name in BASELINE_CAPABILITIES),
    ("capabilities dropped", _pod(container=_container(capabilities={"drop": ["ALL"]}))),
    ("hostPath volume", _pod({"volumes": [{"name": "h", "hostPath": {"path": "/etc"}}]})),
    ("emptyDir volume", _pod({"volumes": [{"name": "e", "emptyDir": {}}]})),
    ("hostPort", _pod(container={**_container(), "ports": [{"containerPort": 80, "hostPort": 8080}]})),
    ("containerPort only", _pod(container={**_container(), "ports": [{"containerPort": 80}]})),
    ("pod seccomp Unconfined", _pod({"securityContext": {"seccompProfile": {"type": "Unconfined"}}})),
    ("pod seccomp RuntimeDefault", _pod({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}})),
    ("container seccomp Unconfined", _pod(container=_container(seccompProfile={"type": "Unconfined"}))),
    ("pod AppArmor Unconfined", _pod({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}})),
    ("container AppArmor Unconfined", _pod(container=_container(appArmorProfile={"type": "Unconfined"}))),
    ("container AppArmor RuntimeDefault", _pod(container=_container(appArmorProfile={"type": "RuntimeDefault"}))),
    ("AppArmor annotation unconfined",
     _pod(annotations={"container.apparmor.security.beta.kubernetes.io/c": "unconfined"})),
    ("AppArmor annotation runtime/default",
     _pod(annotations={"container.apparmor.security.beta.kubernetes.io/c": "runtime/default"})),
    *((f"SELinux type {t!r}", _pod({"securityContext": {"seLinuxOptions": {"type": t}}})) for t in BASELINE_SELINUX_TYPES),
    ("SELinux type spc_t", _pod({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}})),
    ("SELinux user", _pod(container=_container(seLinuxOptions={"user": "system_u"}))),
    ("SELinux role", _pod(container=_container(seLinuxOptions={"role": "system_r"}))),
    ("SELinux level", _pod({"securityContext": {"seLinuxOptions": {"level": "s0:c1,c2"}}})),
    *((f"sysctl {name}", _pod({"securityContext": {"sysctls": [{"name": name, "value": "1"}]}}))
      for name in BASELINE_SYSCTLS),
    ("sysctl net.ipv4.tcp_max_syn_backlog",
     _pod({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_max_syn_backlog", "value": "1"}]}})),
    ("sysctl kernel.shmmax", _pod({"securityContext": {"sysctls": [{"name": "kernel.shmmax", "value": "1"}]}})),
    ("procMount Unmasked", _pod(container=_container(procMount="Unmasked"))),
    ("procMount Unmasked, user namespace", _pod({"hostUsers": False}, container=_container(procMount="Unmasked"))),
    ("procMount Default", _pod(container=_container(procMount="Default"))),
    ("GPU around HAMi", _pod(container={**_container(), "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]})),
]
# What the API server's validation refuses before any admission (k8s.io/kubernetes pkg/apis/core/validation).
INVALID = {"procMount Unmasked": "`hostUsers` must be false to use `Unmasked`"}


@pytest.fixture(scope="module")
def baseline_namespace(admin_api: client.ApiClient) -> Iterator[str]:
    # pod-security.kubernetes.io/enforce: the level; enforce-version: the pinned minor's checks, not `latest`'s.
    name = "realcp-psa-baseline"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {
        "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "v1.36"}}}
    adm.ok(adm.create(admin_api, body), "create namespace")
    yield name
    adm.delete(admin_api, body)


@pytest.mark.parametrize(("case", "pod"), CASES, ids=[c for c, _ in CASES])
def test_the_pack_refuses_what_pod_security_baseline_refuses(
        admin_api: client.ApiClient, baseline_namespace: str, case: str, pod: dict[str, Any]) -> None:
    found = workload_lib.findings(Res("kubernetes:core/v1:Pod", "p", "urn:p", copy.deepcopy(pod)))
    baseline_found = [key for key, _ in found if not _stricter(key, pod)]
    response = adm.create(admin_api, adm.as_pod(pod, adm.slug(case), baseline_namespace), dry_run=True)
    if case in INVALID:
        assert response.status == 422 and INVALID[case] in response.message, response.message
        return
    assert response.status in (201, 403), f"HTTP {response.status}: {response.message}"
    refused = response.status == 403
    if refused:
        assert 'violates PodSecurity "baseline:v1.36"' in response.message, response.message
    assert refused == bool(baseline_found), (case, response.message, found)
    if not refused and found:  # only the pack's stricter choices
        assert all(_stricter(key, pod) for key, _ in found), found
