"""A local shell gate: wait until a validating admission webhook accepts the very objects we will create.

Why a gate at all (MetalLB v0.16.1): the controller's readiness probe is `healthz.Ping`
(`internal/k8s/k8s.go`, `AddReadyzCheck`), so the chart's Deployment is Ready at once; the validating
webhooks are registered only after the cert-rotator has mounted the certificate (`internal/k8s/k8s.go`:
`enableWebhook` waits on `startListeners`, which `internal/k8s/webhook.go` `enableCertRotation` hands to
the rotator as `IsReady`); the chart's `crds.validationFailurePolicy` is `Fail`; and pulumi-kubernetes
retries a create only on NotFound/NoMatch (`provider/pkg/await/await.go`, `Creation`:
`retrier.Do(apierrors.IsNotFound, meta.IsNoMatchError)`), while the API server answers a webhook it
cannot call with an InternalError (k8s.io/apiserver `pkg/util/webhook/error.go`, `ErrCallingWebhook`).

The script takes the kubeconfig on stdin (it is a secret: never on a command line) and the objects as
YAML in `$MANIFEST`, and retries a server-side dry-run apply of them, which runs the same admission
chain as the real create and persists nothing. A webhook's refusal ("admission webhook ... denied the
request", k8s.io/apiserver `pkg/admission/plugin/webhook/errors`, `ToStatusErr`) fails at once, since
the real create would fail the same way; anything else is retried until the deadline.
"""

from __future__ import annotations

import re

from gpu_tenancy.builders import shell

MANIFEST_ENV = "MANIFEST"  # the variable scripts/wait_until_admitted.sh reads
FIELD_MANAGER = "gpu-tenancy-admission-gate"
DENIED = "denied the request"

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def wait_until_admitted_script(
    deployment: str, namespace: str, timeout_seconds: int = 300, interval_seconds: int = 5
) -> str:
    """`sh` script: exit 0 once the dry-run apply of `$MANIFEST` is admitted; fail naming `deployment`."""
    for value in (deployment, namespace):
        if not _NAME.fullmatch(value):
            raise ValueError(f"not a Kubernetes name: {value!r}")
    if timeout_seconds < 1 or interval_seconds < 0:
        raise ValueError("timeout_seconds must be >= 1 and interval_seconds >= 0")
    return shell.script(
        __name__,
        "wait_until_admitted.sh",
        STDIN_KUBECONFIG=shell.STDIN_KUBECONFIG,
        TIMEOUT_SECONDS=str(timeout_seconds),
        INTERVAL_SECONDS=str(interval_seconds),
        FIELD_MANAGER=FIELD_MANAGER,
        DENIED=DENIED,
        OWNER=f"{namespace}/{deployment}",
        NAMESPACE=namespace,
        DEPLOYMENT=deployment,
    )
