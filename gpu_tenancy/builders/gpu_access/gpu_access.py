"""GPUs reachable only through HAMi: who may put a container under the NVIDIA runtime, and which
environment a pod may not set, as one rule for the admission policy in every tenant and the policy pack.

How a container gets GPUs on a real host (mode real):

* containerd's default runtime stays runc; the NVIDIA runtime is only a named handler (`nvidia`). HAMi's
  chart creates RuntimeClass `nvidia` (templates/device-plugin/runtime-class.yaml, values
  `devicePlugin.createRuntimeClass`/`runtimeClassName`), runs its device plugin and vGPU monitor under it
  (templates/device-plugin/daemonsetnvidia.yaml) and its webhook sets `runtimeClassName` on every pod that
  asks for a GPU resource (pkg/device/nvidia/device.go `MutateAdmission`). A pod under runc sees no GPU
  whatever its environment says.
* Under the NVIDIA runtime the devices a container sees come from `NVIDIA_VISIBLE_DEVICES`, which HAMi's
  device plugin sets in its Allocate response (deviceListStrategy `envvar`), together with HAMi-core's
  limits (`CUDA_DEVICE_MEMORY_LIMIT_<i>`, `CUDA_DEVICE_SM_LIMIT`; pkg/device-plugin/nvidiadevice/nvinternal/
  plugin/server.go `Allocate`). The kubelet puts the pod spec's own env after the device plugin's, so a
  value in the spec wins; and `CUDA_DISABLE_CONTROL=true` in the spec makes the plugin leave out
  `/etc/ld.so.preload`, i.e. HAMi-core and every limit (same function). The toolkit's
  `accept-nvidia-visible-devices-envvar-when-unprivileged` stays at its default (true): HAMi's vGPU monitor
  is unprivileged and sees the GPUs through `NVIDIA_VISIBLE_DEVICES=all` only.
* So, outside kube-system (HAMi's own pods, admin only): no container sets those variables (only
  `NVIDIA_VISIBLE_DEVICES` to a value that selects no GPU: `none`/`void`, which HAMi's webhook itself adds
  to non-GPU containers with `scheduler.overwriteEnv`), `envFrom` only with a prefix that cannot produce
  them, and a pod under the GPU runtime class has every container either request `nvidia.com/gpu` or set
  `NVIDIA_VISIBLE_DEVICES` to `none`/`void` (ephemeral containers cannot request resources: the latter).

The same admission policy runs in every mode, so sim and sim-nvml refuse exactly what real refuses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.hami.protocol import NVIDIA

GPU_RUNTIME_CLASS = NVIDIA.runtime_handler  # HAMi chart's RuntimeClass handler; nvidia-ctk's default runtime name
DEVICE_ENV = "NVIDIA_VISIBLE_DEVICES"
NO_DEVICE_VALUES = ("none", "void")  # nvidia-container-toolkit: no GPU injected
GPU_RESOURCE = NVIDIA.resource_count
# What makes HAMi's webhook treat a container as a GPU container (pkg/device/nvidia/device.go
# `mutateContainerResource`): the count, or memory, percentage or cores with a default count.
GPU_REQUEST_RESOURCES = NVIDIA.request_resources
# Prefixes and names the device plugin and HAMi-core own (HAMi v2.10.0 server.go Allocate, pkg/util/types.go).
CONTROLLED_PREFIXES = ("NVIDIA_", "CUDA_DEVICE_")
CONTROLLED_NAMES = ("CUDA_OVERSUBSCRIBE", "CUDA_DISABLE_CONTROL", "CUDA_TASK_PRIORITY", "GPU_CORE_UTILIZATION_POLICY")
# NVIDIA_* variables that select driver features or version checks, not devices.
ALLOWED_NAMES = ("NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_DISABLE_REQUIRE")
ALLOWED_PREFIXES = ("NVIDIA_REQUIRE_",)
EXEMPT_NAMESPACES = ("kube-system",)
# HAMi's scheduler (chart values `schedulerName`, v2.10.0 default; the program keeps it). HAMi's webhook lets a pod
# that names another scheduler through untouched (pkg/scheduler/webhook.go `Handle`: "Pod already has different
# scheduler assigned"), and then nothing counts its GPU memory and cores against the quota.
HAMI_SCHEDULER = "hami-scheduler"
# HAMi's pod annotations are its scheduler's and device plugin's record of an allocation; the device plugin
# allocates from them (server.go `Allocate` via util.GetPendingPod, device.DecodePodDevices). Only these two
# are a user's to set (pkg/util/types.go NodeSchedulerPolicyAnnotationKey, GPUSchedulerPolicyAnnotationKey).
HAMI_ANNOTATION_PREFIX = "hami.io/"
USER_HAMI_ANNOTATIONS = ("hami.io/node-scheduler-policy", "hami.io/gpu-scheduler-policy")
# Who may change HAMi's annotations on a pod: HAMi's scheduler and device plugin, and the mock-GPU agent, all
# service accounts in kube-system, where only a tenant's admin creates anything.
HAMI_WRITERS_PREFIX = "system:serviceaccount:kube-system:"
# The kubelet creates mirror pods with spec.nodeName set; nobody else places a pod without a scheduler.
NODE_USER_PREFIX = "system:node:"
POLICY_NAME = "gpu-tenancy-gpu-access"
# sim-nvml's CUDA_DISABLE_CONTROL value (gpu_tenancy.builders.mock_nvml.cuda_control), '' in every other mode, is a
# CEL literal in the policy's first variable, not a ConfigMap parameter: a paramKind policy's parameter watch stops
# when its binding is deleted and is not restarted (kubernetes/kubernetes#130887), so a re-created binding would
# decide on stale or missing parameters until the API server restarts.
MARKER_VARIABLE = "cudaControlMarker"
_MARKER_CHARS = re.compile(r"[A-Za-z0-9_.-]*")


def controlled(name: str) -> bool:
    """Whether a pod may not set this variable itself (NVIDIA_VISIBLE_DEVICES aside, see env_allowed)."""
    if name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES):
        return False
    return name.startswith(CONTROLLED_PREFIXES) or name in CONTROLLED_NAMES


def env_allowed(entry: Mapping[str, Any]) -> bool:
    name = str(entry.get("name", ""))
    if name == DEVICE_ENV:
        return entry.get("value") in NO_DEVICE_VALUES
    return not controlled(name)


def env_from_allowed(entry: Mapping[str, Any]) -> bool:
    """`envFrom` copies keys the admission policy cannot see: only under a prefix that cannot form a
    controlled name (no controlled root starts with it, and it starts with none)."""
    prefix = str(entry.get("prefix") or "")
    roots = (*CONTROLLED_PREFIXES, *CONTROLLED_NAMES)
    return bool(prefix) and not any(root.startswith(prefix) or prefix.startswith(root) for root in roots)


def no_devices(container: Mapping[str, Any]) -> bool:
    return any(
        isinstance(e, Mapping) and e.get("name") == DEVICE_ENV and e.get("value") in NO_DEVICE_VALUES
        for e in container.get("env") or []
    )


def requests_gpu(container: Mapping[str, Any]) -> bool:
    limits = (container.get("resources") or {}).get("limits") or {}
    return isinstance(limits, Mapping) and GPU_RESOURCE in limits


def asks_hami(container: Mapping[str, Any]) -> bool:
    """Whether HAMi's webhook treats a container as a GPU container (a GPU resource in its limits or requests)."""
    resources = container.get("resources") or {}
    return any(
        isinstance(section, Mapping) and any(r in section for r in GPU_REQUEST_RESOURCES)
        for section in (resources.get("limits"), resources.get("requests"))
    )


def reaches_gpu(spec: Mapping[str, Any]) -> bool:
    """A pod that reaches a GPU: by a GPU resource, the GPU runtime class, or an NVIDIA/HAMi-core variable."""
    containers = [c for key in ("initContainers", "containers", "ephemeralContainers")
                  for c in spec.get(key) or [] if isinstance(c, Mapping)]
    by_env = any(isinstance(e, Mapping) and (e.get("name") == DEVICE_ENV or controlled(str(e.get("name", ""))))
                 and not (e.get("name") == DEVICE_ENV and e.get("value") in NO_DEVICE_VALUES)
                 for c in containers for e in c.get("env") or [])
    return by_env or spec.get("runtimeClassName") == GPU_RUNTIME_CLASS or any(asks_hami(c) for c in containers)


def annotation_problems(annotations: Mapping[str, Any]) -> list[str]:
    """HAMi's own annotations on a pod being created: an allocation HAMi never made."""
    return [f"sets annotation {key}, which only HAMi's scheduler and device plugin write"
            for key in sorted(str(k) for k in annotations)
            if key.startswith(HAMI_ANNOTATION_PREFIX) and key not in USER_HAMI_ANNOTATIONS]


def pod_problems(spec: Mapping[str, Any]) -> list[str]:
    """Why a pod spec reaches GPUs around HAMi (empty when it does not); what the admission policy refuses."""
    problems: list[str] = []
    if spec.get("nodeName"):
        problems.append("sets spec.nodeName, which places the pod around every scheduler")
    if reaches_gpu(spec) and spec.get("schedulerName") != HAMI_SCHEDULER:
        problems.append(f"reaches a GPU but is not scheduled by {HAMI_SCHEDULER} (schedulerName "
                        f"{spec.get('schedulerName')!r}), so HAMi neither checks nor counts it")
    groups = {key: [c for c in spec.get(key) or [] if isinstance(c, Mapping)]
              for key in ("initContainers", "containers", "ephemeralContainers")}
    for container in (c for group in groups.values() for c in group):
        name = container.get("name")
        for entry in container.get("env") or []:
            if isinstance(entry, Mapping) and not env_allowed(entry):
                problems.append(f"container {name!r} sets {entry.get('name')}, which HAMi's device plugin owns")
        for entry in container.get("envFrom") or []:
            if isinstance(entry, Mapping) and not env_from_allowed(entry):
                problems.append(f"container {name!r} uses envFrom without a prefix that keeps out NVIDIA_/CUDA_ names")
    if spec.get("runtimeClassName") == GPU_RUNTIME_CLASS:
        for container in groups["initContainers"] + groups["containers"]:
            if not requests_gpu(container) and not no_devices(container):
                problems.append(
                    f"container {container.get('name')!r} runs under RuntimeClass {GPU_RUNTIME_CLASS!r} without "
                    f"requesting {GPU_RESOURCE} (set {DEVICE_ENV}=none)"
                )
        for container in groups["ephemeralContainers"]:
            if not no_devices(container):
                problems.append(f"ephemeral container {container.get('name')!r} needs {DEVICE_ENV}=none")
    return problems


# --------------------------------------------------------------------------- the admission policy (CEL)


def _cel_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _cel_starts(var: str, prefixes: tuple[str, ...]) -> str:
    return "(" + " || ".join(f"{var}.startsWith('{p}')" for p in prefixes) + ")"


NO_DEVICE_CEL = (
    f"(has(c.env) && c.env.exists(e, e.name == '{DEVICE_ENV}' && has(e.value) && "
    f"e.value in {_cel_list(NO_DEVICE_VALUES)}))"
)
ASKS_FOR_A_GPU_CEL = (
    "(has(c.resources) && has(c.resources.limits) && "
    f"{_cel_list(GPU_REQUEST_RESOURCES)}.exists(r, r in c.resources.limits))"
)
# sim-nvml only: the value its admission mutation writes, on a container that asks HAMi for a GPU.
MARKER_CEL = (
    f"(e.name == 'CUDA_DISABLE_CONTROL' && has(e.value) && variables.{MARKER_VARIABLE} != '' && "
    f"e.value == variables.{MARKER_VARIABLE} && {ASKS_FOR_A_GPU_CEL})"
)
ENV_CEL = (
    "variables.containers.all(c, !has(c.env) || c.env.all(e, "
    f"{MARKER_CEL} || "
    f"(e.name == '{DEVICE_ENV}' && has(e.value) && e.value in {_cel_list(NO_DEVICE_VALUES)}) || "
    f"(e.name != '{DEVICE_ENV}' && (e.name in {_cel_list(ALLOWED_NAMES)} || {_cel_starts('e.name', ALLOWED_PREFIXES)} "
    f"|| !({_cel_starts('e.name', CONTROLLED_PREFIXES)} || e.name in {_cel_list(CONTROLLED_NAMES)})))))"
)
ENV_FROM_CEL = (
    "variables.containers.all(c, !has(c.envFrom) || c.envFrom.all(f, has(f.prefix) && f.prefix != '' && "
    f"!{_cel_list((*CONTROLLED_PREFIXES, *CONTROLLED_NAMES))}.exists(r, r.startsWith(f.prefix) || "
    "f.prefix.startsWith(r))))"
)
RUNTIME_CLASS_CEL = (
    f"!has(object.spec.runtimeClassName) || object.spec.runtimeClassName != '{GPU_RUNTIME_CLASS}' || "
    "(variables.runnable.all(c, (has(c.resources) && has(c.resources.limits) && "
    f"'{GPU_RESOURCE}' in c.resources.limits) || {NO_DEVICE_CEL}) && "
    f"variables.ephemeral.all(c, {NO_DEVICE_CEL}))"
)
ASKS_HAMI_CEL = (
    "(has(c.resources) && ((has(c.resources.limits) && "
    f"{_cel_list(GPU_REQUEST_RESOURCES)}.exists(r, r in c.resources.limits)) || (has(c.resources.requests) && "
    f"{_cel_list(GPU_REQUEST_RESOURCES)}.exists(r, r in c.resources.requests))))"
)
GPU_ENV_CEL = (
    f"(has(c.env) && c.env.exists(e, (e.name == '{DEVICE_ENV}' && !(has(e.value) && "
    f"e.value in {_cel_list(NO_DEVICE_VALUES)})) || (e.name != '{DEVICE_ENV}' && "
    f"!(e.name in {_cel_list(ALLOWED_NAMES)} || {_cel_starts('e.name', ALLOWED_PREFIXES)}) && "
    f"({_cel_starts('e.name', CONTROLLED_PREFIXES)} || e.name in {_cel_list(CONTROLLED_NAMES)}))))"
)


def _hami_keys(side: str) -> str:
    """The HAMi annotation keys of `object` or `oldObject` a user may not set, as a list (empty when none)."""
    guard = f"{side} != null && has({side}.metadata.annotations)"
    return (f"{guard} ? {side}.metadata.annotations.filter(k, k.startsWith('{HAMI_ANNOTATION_PREFIX}') && "
            f"!(k in {_cel_list(USER_HAMI_ANNOTATIONS)})) : []")


SCHEDULER_CEL = (
    f"!variables.gpu || (has(object.spec.schedulerName) && object.spec.schedulerName == '{HAMI_SCHEDULER}')"
)
NODE_NAME_CEL = (
    "request.operation != 'CREATE' || !has(object.spec.nodeName) || object.spec.nodeName == '' || "
    f"request.userInfo.username.startsWith('{NODE_USER_PREFIX}')"
)
HAMI_ANNOTATIONS_CEL = (
    "request.operation == 'CREATE' ? size(variables.hamiNew) == 0 : "
    f"(request.userInfo.username.startsWith('{HAMI_WRITERS_PREFIX}') || "
    "(variables.hamiNew.all(k, k in variables.hamiOld && "
    "object.metadata.annotations[k] == oldObject.metadata.annotations[k]) && "
    "variables.hamiOld.all(k, k in variables.hamiNew)))"
)
# The GPU runtime only under its own name, so that a rule on a pod's runtimeClassName is a rule on the handler:
# RuntimeClass `gpu` with handler `nvidia` would be the NVIDIA runtime under a name the rules above never meet.
HANDLER_CEL = (
    f"object.kind != 'RuntimeClass' || object.handler != '{GPU_RUNTIME_CLASS}' || "
    f"object.metadata.name == '{GPU_RUNTIME_CLASS}'"
)
VARIABLES = {
    "pod": "object.kind == 'Pod'",
    "runnable": "variables.pod ? object.spec.containers + "
                "(has(object.spec.initContainers) ? object.spec.initContainers : []) : []",
    "ephemeral": "variables.pod && has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : []",
    "containers": "variables.runnable + variables.ephemeral",
    "gpu": f"variables.containers.exists(c, {ASKS_HAMI_CEL} || {GPU_ENV_CEL}) || (variables.pod && "
           f"has(object.spec.runtimeClassName) && object.spec.runtimeClassName == '{GPU_RUNTIME_CLASS}')",
    "hamiNew": _hami_keys("object"),
    "hamiOld": _hami_keys("oldObject"),
}
VALIDATIONS = (
    (ENV_CEL, f"only HAMi's device plugin sets NVIDIA_*/CUDA_DEVICE_* and HAMi-core's variables "
              f"({DEVICE_ENV} may only be none or void)"),
    (ENV_FROM_CEL, "envFrom needs a prefix that cannot form NVIDIA_/CUDA_ variable names (e.g. APP_)"),
    ("!variables.pod || " + RUNTIME_CLASS_CEL,
     f"under RuntimeClass {GPU_RUNTIME_CLASS} every container requests {GPU_RESOURCE} or sets {DEVICE_ENV}=none"),
    (SCHEDULER_CEL, f"a pod that reaches a GPU (a GPU resource, RuntimeClass {GPU_RUNTIME_CLASS} or an NVIDIA/HAMi "
                    f"variable) is scheduled by {HAMI_SCHEDULER}"),
    ("!variables.pod || " + NODE_NAME_CEL, "a pod is placed by a scheduler: no spec.nodeName when it is created"),
    (f"!variables.pod || ({HAMI_ANNOTATIONS_CEL})",
     f"only HAMi sets or changes {HAMI_ANNOTATION_PREFIX} annotations on a pod (a user may set "
     f"{', '.join(USER_HAMI_ANNOTATIONS)})"),
    (HANDLER_CEL, f"the {GPU_RUNTIME_CLASS!r} handler runs only under RuntimeClass {GPU_RUNTIME_CLASS!r}"),
)


def marker_variable(cuda_control_marker: str) -> dict[str, str]:
    """The policy's first variable: the CUDA_DISABLE_CONTROL value sim-nvml's mutation writes, as a CEL literal."""
    if not _MARKER_CHARS.fullmatch(cuda_control_marker):
        raise ValueError(f"CUDA-control marker {cuda_control_marker!r}: only letters, digits, '_', '.', '-'")
    return {"name": MARKER_VARIABLE, "expression": f"'{cuda_control_marker}'"}


def validating_admission_policy_spec(cuda_control_marker: str = "") -> dict[str, Any]:
    """admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy spec (GA since Kubernetes 1.30); the marker only
    in sim-nvml (its mutation's value), '' elsewhere, where no pod may set CUDA_DISABLE_CONTROL at all."""
    return {
        "failurePolicy": "Fail",
        "matchConstraints": kube_objects.match_constraints(
            [
                {
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["pods", "pods/ephemeralcontainers"],
                },
                # Cluster-scoped: the namespace selector does not apply to it.
                {
                    "apiGroups": ["node.k8s.io"],
                    "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["runtimeclasses"],
                },
            ],
            namespace_selector={
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(EXEMPT_NAMESPACES)}
                ]
            },
        ),
        "variables": [marker_variable(cuda_control_marker),
                      *({"name": name, "expression": expression} for name, expression in VARIABLES.items())],
        "validations": [
            {"expression": expression, "message": message, "reason": "Forbidden"}
            for expression, message in VALIDATIONS
        ],
    }


def binding_spec(policy_name: str = POLICY_NAME) -> dict[str, Any]:
    return {"policyName": policy_name, "validationActions": ["Deny"]}
