"""What each provider stores in the state after a create, and what its Diff makes of the next run's inputs.

The engine diffs a resource's new inputs against what the *provider* stored for it (pulumi/pulumi
v3.259.0 `pkg/resource/deploy/step_generator.go` `stepGenerator.diff`: `prov.Diff(urn, id, old.Inputs,
old.Outputs, new.Inputs, ...)`), and each provider decides from that what changes and what replaces. The
inputs the program sends are only half of it: a provider stores what its Create (and the Read that ends
it) found on the other side, daemon defaults and normalised values included. This module models, per
provider the program uses, that stored state (`stored_state`) and the provider's own Diff
(`provider_diff`), each with the upstream file and symbol it follows:

* pulumi-docker v5 `Container` (terraform-provider-docker v4.5.0, bridged):
  - the daemon first (moby v28.5.2): `daemon/daemon_unix.go` `adaptContainerSettings` appends what
    `daemon/create.go` `generateSecurityOpt` returns to `HostConfig.SecurityOpt`: for a privileged
    container (or one sharing the host's IPC/PID namespace) `label=disable` (go-selinux `DisableSecOpt`
    returns `["disable"]`, prefixed `label=` by `toHostConfigSelinuxLabels`), unless the caller already
    sent any `label=...` option ("Caller overrode SecurityOpts"); it also defaults `ShmSize` (64 MiB),
    `IpcMode` (the daemon's default-ipc-mode, "private") and `CgroupnsMode` when unset;
  - then the provider: `internal/provider/resource_docker_container_funcs.go`
    `resourceDockerContainerCreate` sends the inputs (`security_opts` minus `systempaths=unconfined`,
    `parseSystemPaths`; `network_mode` defaulted to "bridge", then `networks_advanced` connected) and ends
    with `resourceDockerContainerRead`, which writes back from `docker inspect` `security_opts`
    (`HostConfig.SecurityOpt`), `name`, `hostname`, `image`, `privileged`, `tty`, `tmpfs`, `restart`,
    `max_retry_count`, `init`, `userns_mode`, `network_mode`, `ipc_mode`, `shm_size`, `devices` (only when
    configured, `flattenDevices`), `mounts` (`HostConfig.Mounts`, empty for `volumes`), and never `env`,
    `labels`, `volumes`, `networks_advanced` (only when empty) or `cgroupns_mode`;
  - its Diff is Terraform SDKv2's over `internal/provider/resource_docker_container.go`'s schema: a
    configured attribute differing from the state is a change, a replacement when the attribute is
    `ForceNew`; an unconfigured attribute is no change when `Computed`, else compared with its `Default`
    (or the zero value). Sets compare as sets.
* pulumi-docker v5 `RemoteImage` (terraform-provider-docker v4.5.0 `resource_docker_image_funcs.go`
  `resourceDockerImageRead`: `image_id` and `repo_digest` computed, `name` kept; `name`, `pull_triggers`,
  `platform`, `triggers` are `ForceNew` in `resource_docker_image.go`).
* pulumi-docker v5 `Image` (native, pulumi-docker v5.1.0 `provider/provider.go`): `Check` adds
  `build.platform` (linux/<arch>) and `build.contextDigest` (`hashContext` over the build context minus
  `.dockerignore`); `Create` stores those checked inputs under `__inputs` (`checkpointObject`); `Diff`
  compares them with the new checked inputs (`oldInputs.Diff(news)`): any difference is an update (a
  rebuild), never a replacement.
* pulumi-command v1.2.1 `local`/`remote` `Command`: the state is the inputs plus `stdout`/`stderr`
  (`CommandOutputs` embeds `CommandInputs`); only `triggers` replace (`common/inputs.go`
  `replaceOnChanges`), any other changed input is an update that runs the command again.
* pulumi-kubernetes (v4.32.0 `provider/pkg/provider/provider.go`): a Kubernetes object's state is the live
  object the API server returned (server-side apply); `Diff` prunes that live object to the keys of the
  old inputs (`pruneLiveState`, `util.go` `pruneMap`/`pruneSlice`) and patches it toward the new inputs
  (`inputPatch`): what the API server normalised differs from what the program sends on every run. The
  API server's normalisation modelled here: quantities in their canonical form (k8s.io/apimachinery
  `pkg/api/resource/quantity.go` `Quantity.String`, `CanonicalizeBytes`) in container `resources` and in a
  ResourceQuota's `spec.hard`, and optional fields that encode as absent (`omitempty`): nulls, empty
  strings and empty lists (an approximation: a required field that is empty is kept by the API server, and
  an empty *map* field is dropped too; neither occurs in the program today). A new name or namespace
  replaces.
* pulumi-kubernetes `helm.sh/v3:Release` (`helm_release.go`): `Check` resolves `version` to the chart's
  own (`chart.Metadata.Version`) and defaults `namespace` and `timeout`; `Create` stores the release with
  `values` merged with what Helm kept (`setReleaseAttributes`: `helm.MergeMaps(release.Values,
  r.Config)`) and a computed `status`; `Diff` is a three-way merge of old inputs, new inputs and that state
  (`strategicpatch.CreateThreeWayMergePatch`), replacing on `name`/`namespace`. Inputs only: the archive
  behind a local `chart` path is not compared (the deprecated `checksum` input is dropped from the old inputs),
  so the program's cached chart paths carry the archive's sha256 (gpu_tenancy/contract/chart_lock.py).
* `pulumi:providers:kubernetes`: tests/replacement_model.py's rules (`DiffConfig`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from policy_support import Recorded

CONTAINER = "docker:index/container:Container"
REMOTE_IMAGE = "docker:index/remoteImage:RemoteImage"
IMAGE = "docker:index/image:Image"
COMMANDS = ("command:local:Command", "command:remote:Command")
RELEASE = "kubernetes:helm.sh/v3:Release"
K8S_PROVIDER = "pulumi:providers:kubernetes"


# --------------------------------------------------------------------------- the Docker daemon


@dataclass(frozen=True)
class DockerDaemon:
    """What a Docker Engine 28.5 on Linux with cgroup v2 and default daemon.json fills in on create."""

    default_ipc_mode: str = "private"  # daemon/config: DefaultIpcMode
    default_shm_size: int = 64 * 1024 * 1024  # daemon/config: DefaultShmSize
    default_cgroupns_mode: str = "private"  # cgroup v2 (daemon_unix.go, cgroups.Mode() == Unified)


def daemon_host_config(host_config: dict[str, Any], daemon: DockerDaemon = DockerDaemon()) -> dict[str, Any]:
    """`HostConfig` as moby v28.5.2 stores it (`adaptContainerSettings`, `generateSecurityOpt`)."""
    stored = dict(host_config)
    stored["SecurityOpt"] = list(host_config.get("SecurityOpt") or [])
    if not stored.get("ShmSize"):
        stored["ShmSize"] = daemon.default_shm_size
    if not stored.get("IpcMode"):
        stored["IpcMode"] = daemon.default_ipc_mode
    if not stored.get("CgroupnsMode"):
        stored["CgroupnsMode"] = daemon.default_cgroupns_mode
    overridden = any(option.split("=")[0] == "label" for option in stored["SecurityOpt"])
    host_namespaces = stored.get("IpcMode") == "host" or stored.get("PidMode") == "host"
    if not overridden and (stored.get("Privileged") or host_namespaces):
        stored["SecurityOpt"] = [*stored["SecurityOpt"], "label=disable"]
    if stored.get("OomKillDisable") is None:
        stored["OomKillDisable"] = False
    return stored


# --------------------------------------------------------------------------- terraform-provider-docker


@dataclass(frozen=True)
class Attribute:
    """One attribute of `docker_container`'s schema (resource_docker_container.go), by its Pulumi name."""

    force_new: bool = False
    computed: bool = False
    default: Any = None
    kind: str = "scalar"  # scalar | set | list | map


# Every attribute the program sends, and every one the provider's Read writes back with a non-zero value.
CONTAINER_SCHEMA: dict[str, Attribute] = {
    "name": Attribute(force_new=True),
    "image": Attribute(force_new=True),
    "hostname": Attribute(force_new=True, computed=True),
    "privileged": Attribute(force_new=True),
    "tty": Attribute(force_new=True, default=False),
    "securityOpts": Attribute(force_new=True, computed=True, kind="set"),
    "tmpfs": Attribute(kind="map"),
    "volumes": Attribute(force_new=True, kind="set"),
    "mounts": Attribute(force_new=True, kind="set"),
    "devices": Attribute(force_new=True, kind="set"),
    "usernsMode": Attribute(force_new=True),
    "networksAdvanced": Attribute(force_new=True, kind="set"),
    "networkMode": Attribute(force_new=True, default="bridge"),
    "restart": Attribute(default="no"),
    "maxRetryCount": Attribute(),
    "init": Attribute(computed=True),
    "cgroupnsMode": Attribute(force_new=True),
    "envs": Attribute(force_new=True, computed=True, kind="set"),
    "labels": Attribute(force_new=True, computed=True, kind="set"),
    "ipcMode": Attribute(force_new=True, computed=True),
    "shmSize": Attribute(force_new=True, computed=True),
    "runtime": Attribute(force_new=True, computed=True),
    "logDriver": Attribute(force_new=True, computed=True),
}


def _tf_device(device: dict[str, Any]) -> dict[str, Any]:
    return {"hostPath": device["hostPath"], "permissions": device.get("permissions") or "rwm",
            **({"containerPath": device["containerPath"]} if device.get("containerPath") else {})}


def _container_state(inputs: dict[str, Any], daemon: DockerDaemon) -> dict[str, Any]:
    unknown = sorted(set(inputs) - set(CONTAINER_SCHEMA))
    if unknown:
        raise NotImplementedError(f"docker_container attributes not modelled yet: {unknown}")
    config = {k: v for k, v in inputs.items() if v is not None}
    security = [o for o in config.get("securityOpts") or [] if o != "systempaths=unconfined"]  # parseSystemPaths
    sent = {
        "Privileged": bool(config.get("privileged")),
        "SecurityOpt": security,
        "Tmpfs": dict(config.get("tmpfs") or {}),
        "RestartPolicy": {"Name": config.get("restart", "no"), "MaximumRetryCount": int(config.get("maxRetryCount") or 0)},
        "Init": bool(config.get("init", False)),
        "UsernsMode": config.get("usernsMode") or "",
        "NetworkMode": config.get("networkMode") or "bridge",
        "CgroupnsMode": config.get("cgroupnsMode") or "",
        "Devices": [
            {"PathOnHost": d["hostPath"], "PathInContainer": d.get("containerPath") or d["hostPath"],
             "CgroupPermissions": d.get("permissions") or "rwm"}
            for d in config.get("devices") or []
        ],
        "Mounts": [],  # `mounts` only; `volumes` become Binds and Config.Volumes
    }
    host = daemon_host_config(sent, daemon)
    # resourceDockerContainerCreate: the configuration (with schema defaults) ...
    state: dict[str, Any] = {key: attribute.default for key, attribute in CONTAINER_SCHEMA.items() if attribute.default is not None}
    state.update(config)
    # ... then resourceDockerContainerRead, from `docker inspect`.
    state.update({
        "name": config["name"],
        "hostname": config.get("hostname") or "",
        "image": config["image"],  # an image id in, `{{.Image}}` back: the same id
        "privileged": host["Privileged"],
        "tty": bool(config.get("tty", False)),
        "securityOpts": host["SecurityOpt"],
        "tmpfs": host["Tmpfs"],
        "restart": host["RestartPolicy"]["Name"],
        "maxRetryCount": host["RestartPolicy"]["MaximumRetryCount"],
        "init": host["Init"],
        "usernsMode": host["UsernsMode"],
        "networkMode": host["NetworkMode"],
        "ipcMode": host["IpcMode"],
        "shmSize": host["ShmSize"] // 1024 // 1024,
        "runtime": "runc",
        "logDriver": "json-file",
        "mounts": host["Mounts"],
    })
    if config.get("devices"):
        state["devices"] = [_tf_device({"hostPath": d["PathOnHost"], "permissions": d["CgroupPermissions"],
                                        "containerPath": next((c.get("containerPath") for c in config["devices"]
                                                               if c["hostPath"] == d["PathOnHost"]), None)})
                            for d in host["Devices"]]
    return state


def _zero(value: Any) -> bool:
    return value in (None, "", 0, False, [], {})


def _as_set(values: Any) -> set[str]:
    return {json.dumps(v, sort_keys=True) for v in values or []}


def _tf_equal(attribute: Attribute, configured: Any, stored: Any) -> bool:
    if attribute.kind == "set":
        if attribute is CONTAINER_SCHEMA["devices"]:
            configured = [_tf_device(d) for d in configured or []]
        return _as_set(configured) == _as_set(stored)
    if attribute.kind == "map":
        return dict(configured or {}) == dict(stored or {})
    if isinstance(configured, float) and isinstance(stored, int):
        return configured == stored
    return bool(configured == stored) or (_zero(configured) and _zero(stored))


def _container_diff(state: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    replaces, updates = [], []
    for key, attribute in CONTAINER_SCHEMA.items():
        configured = new.get(key)
        if configured is None:
            if attribute.computed:
                continue
            configured = attribute.default
        if not _tf_equal(attribute, configured, state.get(key)):
            (replaces if attribute.force_new else updates).append(key)
    return replaces, updates


def _remote_image_diff(state: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    force_new = ("name", "pullTriggers", "platform", "triggers")
    replaces = [k for k in force_new if new.get(k) != state.get(k)]
    updates = [k for k in ("keepLocally", "forceRemove") if bool(new.get(k)) != bool(state.get(k))]
    return replaces, updates


# --------------------------------------------------------------------------- pulumi-docker Image (native)


def _checked_image_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs as `Check` returns them: platform defaulted, the context's digest added."""
    checked = json.loads(json.dumps(inputs))
    build = checked.setdefault("build", {})
    build.setdefault("platform", "linux/amd64")
    build["contextDigest"] = context_digest(Path(build["context"]), Path(build["dockerfile"]))
    return checked


def _ignore_patterns(context: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """`.dockerignore` as moby's `ignorefile.ReadAll` + `patternmatcher` read it: (negated, regex) per line."""
    path = context / ".dockerignore"
    patterns = []
    for line in path.read_text().splitlines() if path.exists() else []:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.removeprefix("!").strip()).lstrip("/")
        regex = "".join(
            ".*" if token == "**" else "[^/]*" if token == "*" else "[^/]" if token == "?" else re.escape(token)
            for token in re.split(r"(\*\*|\*|\?)", pattern) if token
        )
        patterns.append((negated, re.compile(f"^{regex}$")))
    return patterns


def context_files(context: Path) -> list[str]:
    """The files of a build context, relative, that `.dockerignore` keeps (patternmatcher
    `MatchesOrParentMatches`: a pattern excludes a path when it matches it or any parent directory; the
    last matching pattern wins, `!` re-includes)."""
    patterns = _ignore_patterns(context)
    kept = []
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        relative = path.relative_to(context).as_posix()
        parts = relative.split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        excluded = False
        for negated, regex in patterns:
            if any(regex.match(candidate) for candidate in candidates):
                excluded = not negated
        if not excluded:
            kept.append(relative)
    return kept


def context_digest(context: Path, dockerfile: Path) -> str:
    """pulumi-docker v5.1.0 `provider/provider.go` `hashContext`: the Dockerfile (as "Dockerfile"), then every
    file the ignore patterns keep, by relative path, mode and content."""
    digest = hashlib.sha256()
    for name, path in [("Dockerfile", dockerfile), *((r, context / r) for r in context_files(context))]:
        digest.update(name.encode() + b"\0" + oct(path.stat().st_mode & 0o777).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# --------------------------------------------------------------------------- Kubernetes API server

_SUFFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
             "m": Decimal("0.001"), "u": Decimal("0.000001"), "n": Decimal("0.000000001")}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def canonical_quantity(text: str) -> str:
    """A quantity as the API server returns it (apimachinery `Quantity.String` -> `CanonicalizeBytes`).

    The format of the input is kept (BinarySI for Ki..Ei, DecimalExponent for e/E, DecimalSI otherwise);
    the value is written with the largest suffix that keeps it an integer: BinarySI values below 1024 and
    values that are not a whole number of the smallest binary unit fall back to DecimalSI
    (`CanonicalizeBytes`: "BinarySI ... if the amount is less than 1024 or is not a multiple of 1024").
    Amounts below a nano round up to it (`ParseQuantity` keeps at most nano precision); the rounding of
    sub-nano BinarySI fractions is not modelled.
    """
    text = str(text).strip()
    number, suffix = text, ""
    for candidate in sorted([*_BINARY, *_SUFFIXES], key=len, reverse=True):
        if candidate and text.endswith(candidate):
            number, suffix = text[: -len(candidate)], candidate
            break
    exponent_form = any(c in number for c in "eE")
    if exponent_form:
        value = Decimal(number)
    elif suffix in _BINARY:
        value = Decimal(number) * _BINARY[suffix]
    else:
        value = Decimal(number) * Decimal(_SUFFIXES[suffix])
    sign = "-" if value < 0 else ""
    value = abs(value)
    if suffix in _BINARY and value == value.to_integral_value() and value >= 1024:
        whole = int(value)
        for name in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if whole % _BINARY[name] == 0:
                return f"{sign}{whole // _BINARY[name]}{name}"
    # DecimalSI (or DecimalExponent): the largest power of 1000 that keeps the mantissa whole.
    nanos = value * 10**9
    if nanos != nanos.to_integral_value():
        nanos = nanos.to_integral_value(rounding="ROUND_CEILING")
    nanos_int = int(nanos)
    if nanos_int == 0:
        return "0"
    exponent = -9
    while nanos_int % 1000 == 0 and exponent < 18:
        nanos_int //= 1000
        exponent += 3
    if exponent_form:
        return f"{sign}{nanos_int}" + (f"e{exponent}" if exponent else "")
    suffix_by_exponent = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
    return f"{sign}{nanos_int}{suffix_by_exponent[exponent]}"


def _canonical_resource_list(values: Any) -> Any:
    if not isinstance(values, dict):
        return values
    return {k: canonical_quantity(v) if isinstance(v, str | int | float) else v for k, v in values.items()}


def _normalise_quantities(obj: Any, path: tuple[str, ...] = ()) -> Any:
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            here = (*path, key)
            resource_list = (path[-1:] == ("resources",) and key in ("limits", "requests")) or key == "overhead"
            if resource_list or here[-2:] == ("spec", "hard"):
                out[key] = _canonical_resource_list(value)
            else:
                out[key] = _normalise_quantities(value, here)
        return out
    if isinstance(obj, list):
        return [_normalise_quantities(v, path) for v in obj]
    return obj


_FREE_FORM_MAPS = ("labels", "annotations", "data", "stringData", "binaryData", "nodeSelector", "matchLabels")


def _drop_omitted(obj: Any, key: str = "") -> Any:
    """What encodes as absent (`omitempty`): nulls, "" and [] fields; map entries keep their values."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if key in _FREE_FORM_MAPS:
                out[k] = v
                continue
            v = _drop_omitted(v, k)
            if v is None or v == "" or v == []:
                continue
            out[k] = v
        return out
    if isinstance(obj, list):
        return [_drop_omitted(v, key) for v in obj]
    return obj


def apiserver_object(inputs: dict[str, Any]) -> dict[str, Any]:
    """The live object the API server returns for these inputs (the keys the program sent)."""
    return _drop_omitted(_normalise_quantities(json.loads(json.dumps(inputs))))


def _prune(live: Any, inputs: Any) -> Any:
    """pulumi-kubernetes `pruneMap` / `pruneSlice`: the live object restricted to the old inputs' keys."""
    if isinstance(live, dict) and isinstance(inputs, dict):
        return {k: _prune(v, inputs[k]) for k, v in live.items() if k in inputs}
    if isinstance(live, list) and isinstance(inputs, list):
        return [_prune(v, t) for v, t in zip(live, inputs, strict=False)]
    return live


def _json_equal(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _changed_top_keys(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if not _json_equal(before.get(k), after.get(k)))


def _kubernetes_diff(live: dict[str, Any], old_inputs: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    pruned = _prune(live, old_inputs)
    changed = _changed_top_keys(pruned, new)
    old_meta, new_meta = old_inputs.get("metadata") or {}, new.get("metadata") or {}
    identity = (new_meta.get("name"), new_meta.get("namespace")) != (old_meta.get("name"), old_meta.get("namespace"))
    return (["metadata"] if identity else []), [k for k in changed if not (k == "metadata" and identity)]


# --------------------------------------------------------------------------- the model


@dataclass
class Stored:
    """What the state holds for one resource after an `up`: its inputs as the provider checked them, and the
    outputs its Create/Read wrote."""

    inputs: dict[str, Any]
    outputs: dict[str, Any]


@dataclass
class ProviderChanges:
    replaces: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)


def _plain(value: Any) -> Any:
    """Secret wrappers off (the providers compare plaintext)."""
    from harness import unwrap

    return unwrap(value)


def stored_state(resource: Recorded, daemon: DockerDaemon = DockerDaemon()) -> Stored:
    """The state an `up` leaves for `resource` (see the module docstring for each provider)."""
    inputs = _plain(resource.inputs)
    computed = _plain(resource.state)
    if resource.type == CONTAINER:
        return Stored(inputs, _container_state(inputs, daemon))
    if resource.type == REMOTE_IMAGE:
        return Stored(inputs, {**inputs, "imageId": computed.get("imageId"), "repoDigest": computed.get("repoDigest")})
    if resource.type == IMAGE:
        checked = _checked_image_inputs(inputs)
        return Stored(checked, {**checked, "repoDigest": computed.get("repoDigest")})
    if resource.type in COMMANDS:
        return Stored(inputs, {**inputs, "stdout": computed.get("stdout", ""), "stderr": ""})
    if resource.type == RELEASE:
        checked = {**inputs, "timeout": inputs.get("timeout", 300)}
        return Stored(checked, {**checked, "status": {"status": "deployed", "revision": 1}})
    if resource.type.startswith("kubernetes:"):
        return Stored(inputs, apiserver_object(inputs))
    return Stored(inputs, dict(inputs))


def provider_diff(
    resource: Recorded, stored: Stored, new_inputs: dict[str, Any]
) -> ProviderChanges:
    """What the resource's provider reports for `new_inputs` against `stored`."""
    new = _plain(new_inputs)
    if resource.type == CONTAINER:
        return ProviderChanges(*_container_diff(stored.outputs, new))
    if resource.type == REMOTE_IMAGE:
        return ProviderChanges(*_remote_image_diff(stored.outputs, new))
    if resource.type == IMAGE:
        return ProviderChanges([], _changed_top_keys(stored.inputs, _checked_image_inputs(new)))
    if resource.type in COMMANDS:
        changed = _changed_top_keys(stored.inputs, new)
        return ProviderChanges([k for k in changed if k == "triggers"], [k for k in changed if k != "triggers"])
    if resource.type == RELEASE:
        # CreateThreeWayMergePatch(original=old inputs, modified=new inputs, current=stored release): what the
        # new inputs set differently from the stored release, and what they drop from the old inputs. What
        # only the state holds (status) is no change.
        checked = {**new, "timeout": new.get("timeout", 300)}
        changed = {k for k in checked if not _json_equal(checked[k], stored.outputs.get(k))}
        changed |= {k for k in stored.inputs if k not in checked}
        replaces = sorted(changed & {"name", "namespace"})
        return ProviderChanges(replaces, sorted(changed - set(replaces)))
    if resource.type == K8S_PROVIDER:
        changed = _changed_top_keys(stored.inputs, new)
        keys = {"clusterIdentifier"} if "clusterIdentifier" in new else {"kubeconfig", "context", "cluster"}
        return ProviderChanges([k for k in changed if k in keys], [k for k in changed if k not in keys])
    if resource.type.startswith("kubernetes:"):
        return ProviderChanges(*_kubernetes_diff(stored.outputs, stored.inputs, new))
    changed = _changed_top_keys(stored.inputs, new)
    return ProviderChanges(changed, [])


def changes_against_state(
    first: list[Recorded], second: list[Recorded], daemon: DockerDaemon = DockerDaemon()
) -> dict[str, ProviderChanges]:
    """'<type> <name>' -> what its provider would change, for every resource of `second` that `first` left
    in the state (reads and components excluded: they have no provider Diff)."""
    stored = {r.urn: stored_state(r, daemon) for r in first if r.custom and not r.read}
    out = {}
    for resource in second:
        if resource.urn not in stored:
            continue
        changes = provider_diff(resource, stored[resource.urn], resource.inputs)
        if changes.replaces or changes.updates:
            out[f"{resource.type} {resource.name}"] = changes
    return out


@dataclass(frozen=True)
class CommandRun:
    """One script pulumi-command runs, and the inputs it runs with."""

    step: str  # "delete" | "create" | "update"
    script: str
    stdin: str
    environment: dict[str, str]


def _run(step: str, inputs: dict[str, Any], script_key: str) -> list[CommandRun]:
    script = inputs.get(script_key)
    return [CommandRun(step, script, inputs.get("stdin") or "", dict(inputs.get("environment") or {}))] if script else []


def command_runs(stored: Stored | None, new_inputs: dict[str, Any] | None, replaced: bool = False) -> list[CommandRun]:
    """What pulumi-command v1.2.1 runs (`local/commandController.go`) when the program registers `new_inputs`
    (None: no longer registers it) for a resource whose state is `stored` (None: not in the state yet).

    A new resource runs `create`. A replace runs the stored `delete` with the stored inputs (`Delete` gets
    only the state: its stdin and environment are the old ones), then the new `create`, in this order when
    replaced delete-first (tests/replacement_model.py). An update runs the new `update`, or the new `create`
    when no `update` is set, with the new inputs, which the state then keeps (`Update`). A resource the
    program no longer registers runs its stored `delete` with the stored inputs. No change runs nothing. A run
    that fails leaves the state as it was (pulumi-go-provider v1.3.0 `infer/resource.go`: a plain error returns
    no properties; pulumi-command's `run` returns `fmt.Errorf`), so the next `up` runs the same again.
    `replaced`: tests/replacement_model.py found it replaced (a trigger fed by a replaced resource's new id
    changes, though the mocks give the new resource the old id)."""
    if stored is None:
        return _run("create", _plain(new_inputs or {}), "create")
    if new_inputs is None:
        return _run("delete", stored.outputs, "delete")
    new = _plain(new_inputs)
    changed = _changed_top_keys(stored.inputs, new)  # provider_diff's rule for COMMANDS: triggers replace
    if replaced or "triggers" in changed:
        return [*_run("delete", stored.outputs, "delete"), *_run("create", new, "create")]
    if changed:
        return _run("update", new, "update" if new.get("update") else "create")
    return []
