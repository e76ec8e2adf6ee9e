"""sim-nvml: GPU containers start without a CUDA driver in them.

HAMi v2.10.0's device plugin answers every Allocate by mounting HAMi-core's libvgpu.so and, unless the
container spec sets CUDA_DISABLE_CONTROL to a value `strconv.ParseBool` reads as true, an /etc/ld.so.preload
that loads it into every process (pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go `Allocate`;
only a literal `value` counts, not `valueFrom`). libvgpu.so links libcuda.so.1 and libnvidia-ml.so.1
(HAMi-core src/CMakeLists.txt `target_link_libraries(vgpu PUBLIC -lcuda -lnvidia-ml)`), which no container
on a mock NVML has, so every dynamically linked process would exit 127 before `main` (HAMi #704). Rewriting
the node's ld.so.preload does not last: the plugin's vgpu-init.sh writes it again whenever it starts.

So in sim-nvml, and only there, a MutatingAdmissionPolicy on the tenant's API server sets CUDA_DISABLE_CONTROL=T
(`ParseBool` reads "T" as true) on every container that asks HAMi for a GPU and does not set the variable itself: the
preload is not mounted and libvgpu.so sits unused. Nothing enforces a slice on a mock GPU anyway; scheduling, quotas and
the allocation HAMi's device plugin writes back are unchanged. The tenant's workloads stay as they are in every mode
(the mutation happens in the API server, not in the program's manifests). The GPU-access admission policy
(gpu_tenancy.builders.gpu_access.gpu_access), which refuses the variable in every mode because it turns HAMi-core off,
lets exactly this value through on GPU containers in sim-nvml (its parameters say so); a pod that sets the variable
itself, to anything else, is refused as on real hosts.

MutatingAdmissionPolicy (KEP-3962) is beta from Kubernetes 1.34, off unless the API server runs with the
feature gate and the beta API enabled (kubernetes.io/docs/reference/access-authn-authz/
mutating-admission-policy), and GA (v1, on by default) from 1.36. Kamaji passes `extraArgs.apiServer`
through verbatim unless it manages the flag itself, which it does not for these two (kamaji 26.8.2-edge
internal/builders/controlplane/deployment.go `buildKubeAPIServerCommand`, `mergeAPIServerArgs`).
"""

from __future__ import annotations

from typing import Any

from gpu_tenancy.builders import kube_objects
from gpu_tenancy.contract.limits import mutating_admission_policy_api
from gpu_tenancy.hami import protocol as hami

ENV_NAME = "CUDA_DISABLE_CONTROL"
# What the mutation writes: true to HAMi (strconv.ParseBool), and a value people do not write by hand, so the
# GPU-access policy can tell the mutation's from a pod's own.
MARKER = "T"
POLICY_NAME = "gpu-tenancy-cuda-control-off"
# The resources that make HAMi's webhook treat a container as a GPU container (pkg/device/nvidia/device.go
# `mutateContainerResource`: nvidia.com/gpu, or any of memory, percentage or cores with a default count).
GPU_RESOURCES = (
    hami.RESOURCE_GPU,
    hami.RESOURCE_GPU_MEMORY,
    hami.RESOURCE_GPU_MEMORY_PERCENTAGE,
    hami.RESOURCE_GPU_CORES,
)

_NEEDS_THE_VARIABLE = (
    "has(c.resources) && has(c.resources.limits) && "
    + "[" + ", ".join(f"'{r}'" for r in GPU_RESOURCES) + "].exists(r, r in c.resources.limits) && "
    + f"!(has(c.env) && c.env.exists(e, e.name == '{ENV_NAME}'))"
)


def api_server_args(kubernetes_version: str) -> list[str]:
    """What the tenant's API server needs for the policy: nothing from 1.36, the beta API before."""
    if mutating_admission_policy_api(kubernetes_version).endswith("/v1"):
        return []
    return [
        "--feature-gates=MutatingAdmissionPolicy=true",
        "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
    ]


def policy_spec() -> dict[str, Any]:
    """The MutatingAdmissionPolicy: a GPU container of a new pod that does not set CUDA_DISABLE_CONTROL gets
    it, set to MARKER."""
    return {
        "failurePolicy": "Fail",
        "reinvocationPolicy": "IfNeeded",
        "matchConstraints": kube_objects.match_constraints(
            [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
        ),
        "matchConditions": [
            {
                "name": "a-gpu-container-without-the-variable",
                "expression": f"object.spec.containers.exists(c, {_NEEDS_THE_VARIABLE})",
            }
        ],
        "mutations": [
            {
                # Server-side apply: `containers` and their `env` are lists keyed by name, so this adds (or
                # sets) one env entry on each GPU container and leaves everything else as it is.
                "patchType": "ApplyConfiguration",
                "applyConfiguration": {
                    "expression": (
                        "Object{spec: Object.spec{containers: object.spec.containers.filter(c, "
                        f"{_NEEDS_THE_VARIABLE}).map(c, Object.spec.containers{{name: c.name, env: "
                        f'[Object.spec.containers.env{{name: "{ENV_NAME}", value: "{MARKER}"}}]}})}}}}'
                    )
                },
            }
        ],
    }


def binding_spec() -> dict[str, Any]:
    return {"policyName": POLICY_NAME}
