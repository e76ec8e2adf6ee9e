"""Which resources an update replaces, and in which order the engine deletes them: a model of the engine.

Input: the program registered twice under mocks (tests/policy_support.record_engine_view), before and
after a config change, with each resource's registered options. Output: every replacement, whether the
old resource is deleted before the new one is created, and whether that old delete undoes what the new
create made or adopted.

What is modelled, and from where:

* The engine replaces a resource when its provider is replaced (`"provider"` replace key) or when the
  provider's Diff reports replace keys, plus any `replaceOnChanges` option keys (pulumi/pulumi v3.259.0
  `pkg/resource/deploy/step_generator.go`, `stepGenerator.diff` and `applyReplaceOnChanges`).
* A replacement is create-before-delete unless the `deleteBeforeReplace` option says otherwise or, when the
  option is not set, the provider's Diff asks for it (`step_generator.go`, "We have two approaches to
  performing replacements"). A replacement caused by a replaced provider carries no provider request, so
  only the option makes it delete-first.
* Deleting first also deletes first, in reverse dependency order, every transitive dependent that the
  change would replace: a resource whose provider is in that set, or whose provider Diff reports a replace
  once the properties fed by that set are unknown, or that is `deletedWith` one of them
  (`calculateDependentReplacements`); reads (external) never are. Dependents are those that name the
  resource as dependency, property dependency, provider or deletedWith (`pkg/resource/graph/
  dependency_graph.go` `DependingOn`). A resource deleted this way is created again when the program
  registers it, whatever its diff (`step_generator.go`: `old.PendingReplacement` forces the replace).
* Provider Diffs (what replaces, and whether the provider asks to delete first):
  - pulumi-command v1.2.1 `Command`: only `triggers` replace (`provider/pkg/provider/common/inputs.go`,
    `provider:"replaceOnChanges"`); other changes are updates that run `create` (or `update`) again. Its
    Diff never asks to delete first (pulumi-go-provider v1.3.0 `infer/resource.go`, DeleteBeforeReplace
    left unset).
  - pulumi-kubernetes provider config: with `clusterIdentifier` set, replaced exactly when it changes,
    unknown counting as changed (`provider/pkg/provider/provider.go` `DiffConfig`, and pulumi/pulumi
    `sdk/go/common/resource/properties_diff.go`: a computed value differs from any known one); without
    it, when the kubeconfig, context or cluster changes.
  - pulumi-kubernetes resources: a changed name or namespace replaces; other immutable fields (selectors,
    Job templates, ...) are not modelled: a replacement of a named object is deleted first by the provider
    itself (`provider.go` `Diff`, `deleteBeforeReplace`), so it can never be an undoing replacement.
  - pulumi-docker v5 `Container`: every changed input replaces (an over-approximation of the Terraform
    schema's ForceNew fields) and the provider always deletes first (`provider/resources.go`,
    `docker_container` `DeleteBeforeReplace: true`).
  - everything else: any changed input replaces (an over-approximation), create-before-delete.
* A property fed by a replaced resource's outputs counts as changed: the replacement's id and outputs are
  new (unknown during the preview). An update keeps the id, and the mocks already echo what an update
  changes in the other outputs, so the recorded values stand. A `.get` read counts as renewed when
  anything it depends on is replaced (the object it reads was recreated).

Sources as read: pulumi/pulumi v3.259.0 (the newest tag available here; the SDK is pinned at 3.272.0)
and main at 1b5949891b3c; pulumi-kubernetes main at 94977969d641 (after v4.32.0; v4.34.2 was not
available); pulumi-docker v5.1.0 and main at 237b7899bb51; pulumi-command v1.2.1.

A create-before-delete replacement undoes its new create when the old delete acts on what the new create
made or adopted: a `Command` with a `delete` (its create may adopt, e.g. `kind get clusters || kind create`,
`test -f kubelet.conf || kubeadm join`, and the old delete then removes it), or a named Kubernetes object
whose replacement keeps its name and namespace (the old delete removes the new object, or fails against a
deleted cluster).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policy_support import Recorded

COMMANDS = ("command:local:Command", "command:remote:Command")
K8S_PROVIDER = "pulumi:providers:kubernetes"
CONTAINER = "docker:index/container:Container"
RELEASE = "kubernetes:helm.sh/v3:Release"


@dataclass(frozen=True)
class Replacement:
    urn: str
    reasons: tuple[str, ...]  # replace keys, or "provider" / "dependent of <urn>"
    delete_first: bool

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


def _provider_urn(resource: Recorded) -> str:
    return resource.provider.rsplit("::", 1)[0] if resource.provider else ""


def _changed_keys(old: Recorded, new: Recorded, fresh: set[str]) -> set[str]:
    """Input keys whose values differ, or that are fed by a resource whose outputs are new."""
    keys = {k for k in old.inputs.keys() | new.inputs.keys() if old.inputs.get(k) != new.inputs.get(k)}
    keys |= {k for k, urns in new.property_dependencies.items() if fresh.intersection(urns)}
    return keys


def _replace_keys(resource: Recorded, changed: set[str]) -> list[str]:
    """The provider Diff's replace keys for `changed` inputs, plus the replaceOnChanges option."""
    keys = set(changed & set(resource.replace_on_changes))
    if resource.type in COMMANDS:
        keys |= changed & {"triggers"}
    elif resource.type == K8S_PROVIDER:
        if "clusterIdentifier" in resource.inputs:
            keys |= changed & {"clusterIdentifier"}
        else:
            keys |= changed & {"kubeconfig", "context", "cluster"}
    elif resource.type.startswith("pulumi:providers:"):
        pass
    elif resource.type.startswith("kubernetes:"):
        if "metadata" in changed:
            keys.add("metadata")  # refined by the caller: only a new name or namespace replaces
    else:
        keys |= changed
    return sorted(keys)


def _identity(resource: Recorded) -> tuple[Any, Any]:
    """The object a Kubernetes resource addresses; a Helm release by its release name and namespace."""
    if resource.type == RELEASE:
        return resource.inputs.get("name"), resource.inputs.get("namespace")
    metadata = resource.inputs.get("metadata") or {}
    return metadata.get("name"), metadata.get("namespace")


def _provider_deletes_first(resource: Recorded) -> bool:
    """What the provider's own Diff asks for when it replaces `resource`."""
    if resource.type == CONTAINER:
        return True
    if resource.type.startswith("kubernetes:") and resource.type != RELEASE:
        return bool(_identity(resource)[0])  # named, not generateName (a Release's Diff is not modelled)
    return False


def _expand(urns: set[str], children: dict[str, list[str]]) -> set[str]:
    """Components stand for every resource under them."""
    out, todo = set(), list(urns)
    while todo:
        urn = todo.pop()
        if urn not in out:
            out.add(urn)
            todo += children.get(urn, [])
    return out


def replacements(before: list[Recorded], after: list[Recorded]) -> dict[str, Replacement]:
    """Every resource of `after` that replaces its counterpart in `before`, in registration order."""
    old_by_urn = {r.urn: r for r in before}
    children: dict[str, list[str]] = {}
    for r in after:
        children.setdefault(r.parent, []).append(r.urn)
    replaced: dict[str, Replacement] = {}
    fresh: set[str] = set()  # replaced resources, and reads of what they recreate
    for new in after:
        old = old_by_urn.get(new.urn)
        if old is None or not new.custom:
            continue
        renewed = _expand(fresh, children)
        if new.read:
            if renewed.intersection(new.dependencies) or old.inputs != new.inputs:
                fresh.add(new.urn)
            continue
        changed = _changed_keys(old, new, renewed)
        reasons = []
        provider = _provider_urn(new)
        provider_replaced = provider in replaced
        if provider_replaced or (provider != _provider_urn(old)):
            reasons.append("provider")
        keys = _replace_keys(new, changed)
        if "metadata" in keys and _identity(old) == _identity(new):
            keys.remove("metadata")
        reasons += keys
        if reasons:
            if new.delete_before_replace is not None:
                delete_first = new.delete_before_replace
            else:
                delete_first = bool(keys) and _provider_deletes_first(new)
            replaced[new.urn] = Replacement(new.urn, tuple(reasons), delete_first)
            fresh.add(new.urn)
    return _with_cascades(before, replaced, children)


def _with_cascades(
    before: list[Recorded], replaced: dict[str, Replacement], children: dict[str, list[str]]
) -> dict[str, Replacement]:
    """Mark what each delete-first replacement deletes first with it (calculateDependentReplacements)."""
    out = dict(replaced)
    for root in [r for r in replaced.values() if r.delete_first]:
        for urn in deleted_first_with(before, root.urn, children):
            previous = out.get(urn)
            reasons = (previous.reasons if previous else ()) + (f"dependent of {root.name}",)
            out[urn] = Replacement(urn, reasons, True)
    return out


def deleted_first_with(
    before: list[Recorded], root: str, children: dict[str, list[str]] | None = None
) -> list[str]:
    """What the engine deletes, in reverse of this order, before it deletes `root` to replace it."""
    if children is None:
        children = {}
        for r in before:
            children.setdefault(r.parent, []).append(r.urn)
    condemned = {root}
    out = []
    for old in before:  # registration order is dependency order
        if old.urn in condemned or not old.custom or old.read:
            continue
        deps = _expand(condemned, children)
        if _provider_urn(old) in condemned or old.deleted_with in condemned:
            requires = True  # deletedWith: pulumi/pulumi after v3.259.0 (the step generator at 1b59498)
        else:
            unknown = {k for k, urns in old.property_dependencies.items() if deps.intersection(urns)}
            keys = _replace_keys(old, unknown)
            if "metadata" in keys:
                keys.remove("metadata")  # names come from config, not from other resources, here
            requires = bool(keys)
        if requires:
            condemned.add(old.urn)
            out.append(old.urn)
    return out


def undoes_new_create(old: Recorded, new: Recorded) -> bool:
    """Whether deleting `old` after `new` was created removes what `new` made or adopted."""
    if old.type in COMMANDS:
        return bool(old.inputs.get("delete"))
    if old.type.startswith("kubernetes:"):
        return bool(_identity(old)[0]) and _identity(old) == _identity(new)
    return False


def undoing_replacements(before: list[Recorded], after: list[Recorded]) -> list[str]:
    """'<name>: <reasons>' for every create-before-delete replacement whose old delete undoes the new create."""
    old_by_urn = {r.urn: r for r in before}
    new_by_urn = {r.urn: r for r in after}
    return [
        f"{r.name}: replaced ({', '.join(r.reasons)}) create-before-delete, and its delete undoes the new create"
        for r in replacements(before, after).values()
        if not r.delete_first and r.urn in new_by_urn and undoes_new_create(old_by_urn[r.urn], new_by_urn[r.urn])
    ]
