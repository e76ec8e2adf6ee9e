"""The tier itself: the processes are the pinned upstream builds, and they serve what the other tests rely on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.realcp import build
from tests.realcp.cluster import RealControlPlane


def _go_mod_version(component: str, module: str) -> str:
    # Read here from the committed go.mod, independently of build.pinned_version.
    text = (Path(__file__).parent / "modules" / component / "go.mod").read_text()
    found = re.search(rf"{re.escape(module)} (v[0-9][^\s]*)", text)
    assert found, f"{component}/go.mod pins no {module}"
    return found.group(1)


def test_version_is_the_pinned_release_not_master(real_control_plane: RealControlPlane) -> None:
    version = real_control_plane.get_json("/version")
    pinned = _go_mod_version("kubernetes", "k8s.io/kubernetes")
    assert version["gitVersion"] == pinned
    assert (version["major"], version["minor"]) == tuple(pinned.lstrip("v").split(".")[:2])


def test_every_staging_module_is_replaced_by_the_release_of_the_same_minor() -> None:
    text = (Path(__file__).parent / "modules" / "kubernetes" / "go.mod").read_text()
    minor = _go_mod_version("kubernetes", "k8s.io/kubernetes").lstrip("v").split(".", 1)[1]
    replaced = re.findall(r"^\t(k8s\.io/[a-z0-9-]+) => (k8s\.io/[a-z0-9-]+) (v\S+)$", text, re.MULTILINE)
    assert len(replaced) >= 30
    assert all(source == target and version == f"v0.{minor}" for source, target, version in replaced), replaced


def test_both_mutating_admission_policy_versions_are_served(real_control_plane: RealControlPlane) -> None:
    # v1 is what a 1.36 API server serves by default; v1beta1 is what a 1.35 tenant serves (with its feature gate).
    groups = real_control_plane.get_json("/apis/admissionregistration.k8s.io")
    versions = {entry["version"] for entry in groups["versions"]}
    assert {"v1", "v1beta1"} <= versions
    for version in ("v1", "v1beta1"):
        kinds = {r["kind"] for r in real_control_plane.get_json(f"/apis/admissionregistration.k8s.io/{version}")["resources"]}
        assert {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} <= kinds, version


def test_the_binaries_come_from_the_cache_keyed_by_their_pins(realcp_binaries: dict[str, Path]) -> None:
    for name, path in realcp_binaries.items():
        assert path.is_file() and path.stat().st_mode & 0o111, name
        key = path.parent.name
        component = next(c for c in build.COMPONENTS if key.startswith(f"{c.name}-"))
        assert key.startswith(f"{component.name}-{_go_mod_version(component.name, component.module)}-"), key
        assert (path.parent / build.COMPLETE).is_file()


def test_every_process_is_still_running(real_control_plane: RealControlPlane) -> None:
    assert real_control_plane.alive() == {name: True for name in
                                          ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")}


def test_a_changed_build_setting_is_a_new_cache_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    # No build: only the key. Each input of the build (its environment's values, the toolchain) must change it.
    component = build.COMPONENTS[0]
    before = build.build_key(component, "go1.26.8")
    assert build.build_key(component, "go1.26.9") != before
    environ = build.go_environment()
    monkeypatch.setattr(build, "go_environment", lambda: {**environ, "CGO_ENABLED": "1"})
    assert build.build_key(component, "go1.26.8") != before
