"""The Kubernetes objects a recorded stack registers, sent to the real API server as pulumi-kubernetes sends them.

What pulumi-kubernetes does with an object (read at github.com/pulumi/pulumi-kubernetes, provider/pkg, the newest
stored snapshot, after v4.32.0; requirements.txt pins 4.34.2):
* `provider/provider.go` `fieldManagerName`: in Server-Side Apply mode (the v4 default) each resource gets its own
  manager, `pulumi-kubernetes-` and 8 random hex digits (`resource.NewUniqueName`), kept in its state as
  `__fieldManager` and used for every later apply of it;
* `await/await.go` `Creation`: since #4278 the first `up` creates with a plain POST (manager `pulumi-kubernetes`,
  operation Update) and `Update` moves that manager's fields to the SSA manager (`fixCSAFieldManagers`) before it
  applies (PATCH `application/apply-patch+yaml`, force only when asked, `fieldValidation=Warn`).
Here every object is applied as an update applies it. Field validation is Strict, not Warn: Warn would drop a field
the server does not know with only a warning, and a field the program sets but the cluster drops is a bug.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness import dev_config, unwrap
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError
from policy_support import Recorded, record_engine_view
from pulumi.runtime import rpc

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
# Applied first, as the engine's dependency order has them before what lives in them or is typed by them.
FIRST_KINDS = ("Namespace", "CustomResourceDefinition")
SETTLE_TIMEOUT = 60.0  # seconds for the controllers (quota, deployment, daemon set) to finish writing status
DELETE_TIMEOUT = 120.0  # seconds; a namespace waits for the namespace controller to empty it


class UnknownValue(AssertionError):
    """A recorded input is still a computed value: the object cannot be sent as it stands."""


def provider_name(resource: Recorded) -> str:
    """The name of the provider a resource goes through (its reference is `<provider urn>::<provider id>`)."""
    return resource.provider.rpartition("::")[0].rpartition("::")[2] if resource.provider else ""


def tenants(stack: list[Recorded]) -> list[str]:
    return sorted(r.name.removesuffix("-kubernetes") for r in stack
                  if r.type == "pulumi:providers:kubernetes" and r.name.startswith("tenant-"))


def tenant_layer(stack: list[Recorded], tenant: str) -> list[Recorded]:
    """Every Kubernetes object registered through `tenant`'s provider, in the order to apply it. Helm releases are
    left out: Helm renders and installs those, not a server-side apply of the registered inputs. Reads are not
    registrations of objects the program owns."""
    objects = [r for r in stack if r.type.startswith("kubernetes:") and r.type != HELM_RELEASE and not r.read
               and provider_name(r) == f"{tenant}-kubernetes"]
    return ordered(objects)


def ordered(objects: Iterable[Recorded]) -> list[Recorded]:
    """Namespaces and CRDs first, then registration order: a resource registers after everything it depends on,
    so that order is one the engine's dependency graph allows."""
    listed = list(objects)
    return sorted(listed, key=lambda r: (r.inputs.get("kind") not in FIRST_KINDS, listed.index(r)))


def _wire_numbers(value: Any) -> Any:
    """Pulumi numbers are float64; Go's encoder writes an integral one as `8132`, which is what the API server reads."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _wire_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire_numbers(v) for v in value]
    return value


def _unknown_paths(value: Any, path: str = "") -> list[str]:
    if value == rpc.UNKNOWN:
        return [path or "."]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _unknown_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unknown_paths(v, f"{path}[{i}]")]
    return []


def manifest(resource: Recorded) -> dict[str, Any]:
    """The object as the provider sends it: secrets unwrapped, numbers as Go writes them; refused if a value is
    still unknown (a computed output the recording could not resolve)."""
    unknown = _unknown_paths(resource.inputs)
    if unknown:
        raise UnknownValue(f"{resource.type} {resource.name}: unknown values at {', '.join(unknown)}")
    body = _wire_numbers(unwrap(resource.inputs))
    assert isinstance(body, dict)
    return body


def field_manager(resource: Recorded) -> str:
    """`pulumi-kubernetes-` and 8 hex digits, fixed per resource as the provider's seeded random name is."""
    return "pulumi-kubernetes-" + hashlib.sha256(resource.urn.encode()).hexdigest()[:8]


def describe(body: dict[str, Any]) -> str:
    meta = body.get("metadata", {})
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{body.get('kind')} {where}{meta.get('name')}"


@dataclass
class Cluster:
    """One API client's view of the real API server, through the dynamic client's discovery."""

    api: client.ApiClient

    def __post_init__(self) -> None:
        self.dynamic = DynamicClient(self.api)

    def resource(self, body: dict[str, Any]) -> Any:
        try:
            return self.dynamic.resources.get(api_version=body["apiVersion"], kind=body["kind"])
        except Exception:  # a CRD served since the last discovery: look again once
            self.dynamic.resources.invalidate_cache()
            return self.dynamic.resources.get(api_version=body["apiVersion"], kind=body["kind"])

    def _where(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        resource = self.resource(body)
        return {"name": meta["name"], **({"namespace": meta.get("namespace")} if resource.namespaced else {})}

    def apply(self, body: dict[str, Any], manager: str) -> dict[str, Any]:
        response = self.resource(body).server_side_apply(
            body=body, field_manager=manager, force_conflicts=False,
            query_params=[("fieldValidation", "Strict")], **self._where(body))
        return dict(response.to_dict())

    def get(self, body: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return dict(self.resource(body).get(**self._where(body)).to_dict())
        except NotFoundError:
            return None

    def delete(self, body: dict[str, Any]) -> None:
        with contextlib.suppress(NotFoundError):
            self.resource(body).delete(propagation_policy="Background", **self._where(body))

    def wait_gone(self, bodies: list[dict[str, Any]], timeout: float = DELETE_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        left = bodies
        while left:
            left = [b for b in left if self.get(b) is not None]
            if left and time.monotonic() > deadline:
                raise AssertionError(f"still there after {timeout:.0f} s: {[describe(b) for b in left]}")
            if left:
                time.sleep(0.5)

    def settled(self, bodies: list[dict[str, Any]], timeout: float = SETTLE_TIMEOUT) -> list[dict[str, Any]]:
        """The objects once no controller has written any of them for a second and every controller that reports an
        observedGeneration has seen the current generation."""
        deadline = time.monotonic() + timeout
        before = [self.get(b) for b in bodies]
        while True:
            time.sleep(1.0)
            now = [self.get(b) for b in bodies]
            versions = [(o or {}).get("metadata", {}).get("resourceVersion") for o in now]
            if versions == [(o or {}).get("metadata", {}).get("resourceVersion") for o in before] and all(
                    o is not None and o.get("status", {}).get("observedGeneration",
                                                              o["metadata"].get("generation"))
                    == o["metadata"].get("generation") for o in now):
                return [o for o in now if o is not None]
            if any(o is None for o in now):
                gone = [describe(b) for b, o in zip(bodies, now, strict=True) if o is None]
                raise AssertionError(f"gone while settling: {gone}")
            if time.monotonic() > deadline:
                raise AssertionError(f"objects still changing after {timeout:.0f} s")
            before = now


def refusal(error: ApiException) -> str:
    return f"HTTP {error.status}: {error.body if isinstance(error.body, str) else error.reason}"


def present(cluster: Cluster, bodies: list[dict[str, Any]]) -> list[str]:
    """What is already there (another test's leftovers would make the first apply an update, not a creation)."""
    return [describe(b) for b in bodies if cluster.get(b) is not None]


def ensure_namespace(cluster: Cluster, name: str) -> None:
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, "realcp-prerequisites")


@functools.cache
def user_access_stack() -> list[Recorded]:
    """The dev stack with `tenants[].userAccess: true` on tenant-a: its non-admin identity's objects besides the
    rest (callers must not mutate it)."""
    config = dev_config()
    config["tenants"][0]["userAccess"] = True
    return record_engine_view(config)
