"""The Kamaji chart is a moving build (issue 12, defect 10): `charts-pinned` refuses such versions unless
versions.UNPINNED_CHARTS names them, and every run warns while one is deployed."""

from __future__ import annotations

import logging

import pytest
from harness import dev_config, record_stack
from policy_support import Recorded, copy_stack, dev_stack, find, run_resource_policy, set_both

from gpu_tenancy.contract import chart_pins, versions

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
