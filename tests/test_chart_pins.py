"""The Kamaji chart is a moving build (issue 12, defect 10): `charts-pinned` refuses such versions unless
versions.UNPINNED_CHARTS names them, and every run warns while one is deployed. Every chart is installed from the
chart cache as locked (gpu_tenancy/contract/chart_lock.py), so such a build cannot change under a stack; the pack
accepts exactly those archives as local charts."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import harness
import pytest
from chart_repo import fill_cache
from harness import dev_config, record_stack
from policy_support import (
    EXAMPLE_STACKS,
    Recorded,
    copy_stack,
    dev_stack,
    find,
    record_engine_view,
    run_resource_policy,
    set_both,
)
from provider_state import ProviderChanges, changes_against_state

from gpu_tenancy.contract import chart_lock, chart_pins, versions
from gpu_tenancy.contract.config import load_config

import tenant_policies as tp  # isort: skip  (policies/ is put on sys.path by policy_support)

RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.mark.parametrize(
    ("version", "label"),
    [
        ("0.0.0+latest", "latest"),  # what clastix publishes from master
        ("0.0.0+edge", "edge"),  # its earlier name (clastix/kamaji #982)
        ("3.0.0+master", "master"),
        ("1.0.0-nightly", "nightly"),
        ("1.2.3", None),
        ("v1.21.1", None),
        ("26.8.2-edge", None),  # one weekly release
        ("1.0.0-nightly.20260101", None),  # one night's build
        ("2.10.0+build.5", None),
        ("0.0.0", None),
    ],
)
def test_moving_build_label(version: str, label: str | None) -> None:
    assert chart_pins.moving_build_label(version) == label


def messages(resources: list[Recorded], config: dict[str, object] | None = None) -> list[str]:
    return [message for _, message, _ in run_resource_policy(tp.charts_pinned, resources, config)]


def test_only_the_named_moving_chart_passes_charts_pinned() -> None:
    assert versions.UNPINNED_CHARTS == {"kamaji": "0.0.0+latest"}
    assert messages(dev_stack()) == []


@pytest.mark.parametrize(("chart_name", "version"), [("kamaji-chart", "0.0.0+nightly"), ("metallb-chart", "0.0.0+latest"),
                                                     ("kamaji-cert-manager", "v1.21.1+master")])
def test_charts_pinned_refuses_other_moving_builds(chart_name: str, version: str) -> None:
    stack = copy_stack(dev_stack())
    release = find(stack, RELEASE, chart_name)
    set_both(release, ["version"], version)
    # The archive of that version, pulled and locked, so the version alone is wrong.
    name = str(chart_lock.chart_name(release.inputs["chart"]))
    set_both(release, ["chart"], fill_cache(harness.CHART_PROJECT, name, version, chart_lock.CHART_REPOSITORIES[name]))
    (message,) = messages(stack)
    assert f"version {version!r} is a moving build" in message and "not a pin" in message


def test_charts_pinned_refuses_kamaji_latest_once_no_longer_accepted() -> None:
    (message,) = messages(dev_stack(), {"acceptMovingBuilds": []})
    assert "chart 'kamaji' version '0.0.0+latest' is a moving build ('latest'" in message


def test_every_run_warns_that_the_kamaji_chart_is_not_pinned(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        record_stack()
    warnings = [r.getMessage() for r in caplog.records if "NOT pinned" in r.getMessage()]
    assert warnings == [
        f"chart kamaji 0.0.0+latest is NOT pinned: it is republished from a branch, so its templates and CRDs "
        f"can differ from image {versions.KAMAJI_IMAGE_TAG}; this program was checked against the chart at "
        f"commit {versions.KAMAJI_CHART_CHECKED_COMMIT[:12]} (see docs/operations.md: The Kamaji chart is not pinned)"
    ]


def test_no_warning_for_a_pinned_kamaji_chart(caplog: pytest.LogCaptureFixture) -> None:
    config = dev_config()
    config["versions"] = {**config.get("versions", {}), "kamajiChart": "1.0.0"}
    with caplog.at_level(logging.WARNING):
        record_stack(config)
    assert not [r for r in caplog.records if "NOT pinned" in r.getMessage()]


# --------------------------------------------------------------------------- the chart cache


def _cache_paths(resources: list[Any]) -> dict[str, str]:
    return {r.name: r.inputs["chart"] for r in resources if r.type == RELEASE}


@pytest.mark.parametrize("name", sorted(EXAMPLE_STACKS))
def test_every_release_installs_the_locked_archive_of_what_the_stack_pins(name: str) -> None:
    """No repository, so the provider reads nothing but the archive; the charts `make charts` pulls for the stack
    are exactly those the program installs."""
    resources = EXAMPLE_STACKS[name](False)
    releases = [r for r in resources if r.type == RELEASE]
    lock = {(c["name"], c["version"]): c["sha256"] for c in json.loads(
        (harness.CHART_PROJECT / ".charts" / "lock.json").read_text())["charts"]}
    installed = set()
    for release in releases:
        assert "repositoryOpts" not in release.inputs, release.name
        match = re.fullmatch(r"\.charts/sha256-([0-9a-f]{64})/(.+)-(v?\d.*)\.tgz", release.inputs["chart"])
        assert match, release.inputs["chart"]
        assert match.group(3) == release.inputs["version"]
        assert lock[(match.group(2), match.group(3))] == match.group(1)
        installed.add((match.group(2), match.group(3)))
    config = {"dev": harness.dev_config, "dev-nvml": harness.nvml_config, "gpu": harness.gpu_config}[name]()
    needed = chart_lock.stack_charts(load_config(config, frozenset(harness.TEST_SECRETS)))
    assert {(ref.name, ref.version) for ref in needed} == installed


def test_the_dedicated_etcd_chart_is_pulled_when_a_tenant_has_its_own_etcd() -> None:
    config = harness.dev_config()
    config["tenants"][0]["dataStore"] = "dedicated"
    needed = chart_lock.stack_charts(load_config(config, frozenset()))
    assert ("kamaji-etcd", versions.KAMAJI_ETCD_CHART_VERSION) in {(r.name, r.version) for r in needed}
    assert "kamaji-etcd" not in {r.name for r in chart_lock.stack_charts(load_config(harness.dev_config(), frozenset()))}


def test_the_program_refuses_a_chart_not_pulled_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "charts_pulled", lambda *_: setattr(chart_lock, "PROJECT_DIR", tmp_path))
    with pytest.raises(Exception, match=re.escape(
        f"chart metallb {versions.METALLB_CHART_VERSION} from {versions.METALLB_CHART_REPO}: not in the chart "
        "cache (.charts/lock.json); run `make charts STACK=dev` (`make up` runs it)")):
        record_stack()


def test_a_relocked_chart_is_an_update_of_its_release_and_the_same_archive_no_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Release's Diff compares inputs only (helm_release.go `Diff`: the deprecated `checksum` is dropped), so the
    archive's digest in the path is what makes a new build of kamaji 0.0.0+latest a change; an update, not a
    replacement (only name and namespace replace)."""
    first = record_engine_view()
    assert changes_against_state(first, record_engine_view()) == {}
    for ref in chart_lock.stack_charts(load_config(harness.dev_config(), frozenset())):
        fill_cache(tmp_path, ref.name, ref.version, ref.repo, templates="rebuilt" if ref.name == "kamaji" else "")
    monkeypatch.setattr(harness, "charts_pulled", lambda *_: setattr(chart_lock, "PROJECT_DIR", tmp_path))
    second = record_engine_view()
    assert changes_against_state(first, second) == {f"{RELEASE} kamaji-chart": ProviderChanges([], ["chart"])}
    assert _cache_paths(second)["kamaji-chart"] != _cache_paths(first)["kamaji-chart"]


@pytest.mark.parametrize(("chart", "version", "problem"), [
    (".charts/sha256-{d}/hami-2.9.0.tgz", "2.10.0", "is not the cached archive of a pinned chart at version '2.10.0'"),
    (".charts/sha256-{d}/nvidia-device-plugin-2.10.0.tgz", "2.10.0", "is not the cached archive of a pinned chart"),
    ("./charts/hami-2.10.0.tgz", "2.10.0", "is not a path in the chart cache"),
    ("/tmp/x/.charts/sha256-{d}/hami-2.10.0.tgz", "2.10.0", "is not a path in the chart cache"),
    (".charts/sha256-{d}/../../hami-2.10.0.tgz", "2.10.0", "is not a path in the chart cache"),
    (".charts/sha256-{d}/hami", "2.10.0", "is not a path in the chart cache"),
    (".charts/sha256-abc/hami-2.10.0.tgz", "2.10.0", "is not a path in the chart cache"),
    ("hami", "2.10.0", "is not a path in the chart cache"),
])
def test_charts_pinned_refuses_a_local_chart_that_is_not_the_cached_pin(chart: str, version: str, problem: str) -> None:
    stack = copy_stack(dev_stack())
    release = find(stack, RELEASE, "tenant-a-hami-chart")
    set_both(release, ["chart"], chart.format(d="a" * 64))
    set_both(release, ["version"], version)
    found = [m for m in messages(stack) if "tenant-a-hami-chart" in m]
    assert len(found) == 1 and f"has no repository and {problem}" in found[0], found


# --------------------------------------------------------------------------- the archive the lock records


def _locked_project(root: Path) -> Path:
    """A project whose cache and lock hold the dev stack's charts, as `make charts STACK=dev` leaves them."""
    for ref in chart_lock.stack_charts(load_config(harness.dev_config(), frozenset())):
        fill_cache(root, ref.name, ref.version, ref.repo)
    return root


def _hami_entry(lock: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in lock["charts"] if c["name"] == "hami")


def _no_lock(root: Path) -> str:
    (root / ".charts" / "lock.json").unlink()
    return f"cannot be checked: there is no chart lock at {root}/.charts/lock.json; run `make charts STACK=dev`"


def _lock_not_json(root: Path) -> str:
    (root / ".charts" / "lock.json").write_text("{")
    return "cannot be checked against the chart lock: " + f"{root}/.charts/lock.json: not valid JSON"


def _no_entry(root: Path) -> str:
    lock = json.loads((root / ".charts" / "lock.json").read_text())
    lock["charts"].remove(_hami_entry(lock))
    (root / ".charts" / "lock.json").write_text(json.dumps(lock))
    return (f"is not in the chart lock {root}/.charts/lock.json (no hami {versions.HAMI_CHART_VERSION} from "
            f"{versions.HAMI_CHART_REPO}); run `make charts STACK=dev`")


def _locked_elsewhere(root: Path) -> str:
    lock = json.loads((root / ".charts" / "lock.json").read_text())
    _hami_entry(lock)["sha256"] = "b" * 64
    (root / ".charts" / "lock.json").write_text(json.dumps(lock))
    return (f"is not the archive the chart lock {root}/.charts/lock.json records for hami "
            f"{versions.HAMI_CHART_VERSION} (sha256 {'b' * 64}); run `make charts STACK=dev`")


def _archive_replaced(root: Path) -> str:
    lock = json.loads((root / ".charts" / "lock.json").read_text())
    digest = _hami_entry(lock)["sha256"]
    (root / ".charts" / f"sha256-{digest}" / f"hami-{versions.HAMI_CHART_VERSION}.tgz").write_bytes(b"other chart")
    return (f"does not have the sha256 the chart lock records for hami {versions.HAMI_CHART_VERSION} ({digest}); "
            "run `make charts STACK=dev`")


@pytest.mark.parametrize("damage", [_no_lock, _lock_not_json, _no_entry, _locked_elsewhere, _archive_replaced])
def test_the_pack_refuses_an_archive_the_projects_lock_does_not_hold(
    damage: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded path is unchanged; the lock it is checked against (or the file at it) is not what `make charts`
    left, so both policies that check a Release's chart refuse it, naming the command that pulls and records it."""
    root = _locked_project(tmp_path)
    monkeypatch.setenv("GPU_TENANCY_CHART_PROJECT", str(root))
    monkeypatch.setenv("PULUMI_STACK", "dev")
    stack = dev_stack()
    assert [m for m in messages(stack) if "chart" in m] == []
    assert [m for _, m, _ in run_resource_policy(tp.field_allowlist, stack) if "chart" in m] == []
    problem = damage(root)
    chart = find(stack, RELEASE, "tenant-a-hami-chart").inputs["chart"]
    pinned = [m for m in messages(stack) if "tenant-a-hami-chart" in m]
    assert len(pinned) == 1 and f"chart {chart!r} has no repository and {problem}" in pinned[0], pinned
    allowed = [m for name, m, _ in run_resource_policy(tp.field_allowlist, stack) if name == "tenant-a-hami-chart"]
    assert len(allowed) == 1 and f"installs chart {chart!r}, which {problem}" in allowed[0], allowed


def test_an_archive_not_in_this_checkouts_cache_is_checked_by_the_lock_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock holds the sha256 that `make charts` verified; the archive's own bytes are compared where it is."""
    root = _locked_project(tmp_path)
    monkeypatch.setenv("GPU_TENANCY_CHART_PROJECT", str(root))
    archive = root / find(dev_stack(), RELEASE, "tenant-a-hami-chart").inputs["chart"]
    archive.unlink()
    assert [m for m in messages(dev_stack()) if "chart" in m] == []
