"""Kamaji applies each TCP's kubelet configurationJSONPatches with a real RFC 6902 engine; so do these tests.

A patch Kamaji cannot apply means no `kubelet-config` ConfigMap in the tenant, and every `kubeadm join` then
fails ("could not download the kubelet configuration from ConfigMap kubelet-config").
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from gpu_tenancy.builders.tenant_control_plane import control_plane_spec
from tests.harness import by_type, gpu_config, record_stack, registered_gpus
from tests.kamaji_kubelet import KubeletDecodeError, apply_kubelet_patches, kamaji_kubelet_configuration

TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


def _registered_specs(stack: str) -> list[dict[str, Any]]:
    if stack == "dev":
        resources = record_stack()
    else:
        config = gpu_config()
        resources = record_stack(config, stack="gpu", node_register=registered_gpus(config))
    specs = [tcp.inputs["spec"] for tcp in by_type(resources, TCP)]
    assert specs, f"the {stack} stack registers no TenantControlPlane"
    return specs


def test_the_double_is_shaped_as_kamaji_serialises_it() -> None:
    # No cgroupfs on the TCP: Kamaji empties cgroupDriver after defaulting, and omitempty drops it.
    assert "cgroupDriver" not in kamaji_kubelet_configuration()
    assert kamaji_kubelet_configuration("cgroupfs")["cgroupDriver"] == "cgroupfs"
    # Defaulted pointer fields are present, so `add` on them replaces the default.
    assert kamaji_kubelet_configuration()["failSwapOn"] is True


def test_replace_on_an_absent_key_fails_as_in_evanphx_json_patch() -> None:
    spec = {"kubernetes": {"kubelet": {"configurationJSONPatches": [
        {"op": "replace", "path": "/cgroupDriver", "value": "systemd"}]}}}
    with pytest.raises(jsonpatch.JsonPatchConflict):
        apply_kubelet_patches(spec)


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_registered_kubelet_patches_apply_and_set_systemd(stack: str) -> None:
    for spec in _registered_specs(stack):
        kubelet = apply_kubelet_patches(spec)
        assert kubelet["cgroupDriver"] == "systemd"
        assert kubelet["authentication"]["x509"]["clientCAFile"] == "/etc/kubernetes/pki/ca.crt"


def test_kind_workers_get_what_kind_sets_for_node_containers() -> None:
    (spec, *_) = _registered_specs("dev")
    kubelet = apply_kubelet_patches(spec)
    assert kubelet["cgroupRoot"] == "/kubelet"
    assert kubelet["failSwapOn"] is False
    assert kubelet["imageGCHighThresholdPercent"] == 100
    assert kubelet["evictionHard"] == {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"}


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_every_kubelet_refuses_a_cgroup_v1_host(stack: str) -> None:
    """Kubernetes 1.35 kubelets fail on cgroup v1 unless failCgroupV1 is set false, and no TCP of the program
    sets it: such a host is refused up front (`make doctor`, gpu_tenancy/cli/doctor/command.py) instead of in every join."""
    assert kamaji_kubelet_configuration()["failCgroupV1"] is True
    for spec in _registered_specs(stack):
        assert apply_kubelet_patches(spec)["failCgroupV1"] is True


@pytest.mark.parametrize("runtime", ["kind", "host"])
def test_patches_apply_whatever_the_deprecated_cgroupfs_says(runtime: str) -> None:
    spec = control_plane_spec.tenant_control_plane_spec("v1.35.5", "10.100.0.0/16", "10.101.0.0/16", node_runtime=runtime)
    for cgroupfs in ("", "cgroupfs", "systemd"):
        spec["kubernetes"]["kubelet"]["cgroupfs"] = cgroupfs
        assert apply_kubelet_patches(spec)["cgroupDriver"] == "systemd"


def _patched(*patches: dict[str, Any]) -> dict[str, Any]:
    return apply_kubelet_patches({"kubernetes": {"kubelet": {"configurationJSONPatches": list(patches)}}})


def test_a_misspelt_patch_path_is_applied_then_lost_as_kamaji_decodes_it() -> None:
    # evanphx/json-patch adds any member; Kamaji's non-strict, case-sensitive decode into KubeletConfiguration
    # then drops it: the upload succeeds and the kubelet keeps its default.
    kubelet = _patched({"op": "add", "path": "/cgroupdriver", "value": "systemd"},
                       {"op": "add", "path": "/evictionhard", "value": {"nodefs.available": "0%"}},
                       {"op": "add", "path": "/authentication/x509/clientCaFile", "value": "/tmp/ca"})
    assert "cgroupdriver" not in kubelet and "cgroupDriver" not in kubelet
    assert "evictionhard" not in kubelet and "evictionHard" not in kubelet
    assert kubelet["authentication"]["x509"] == {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}


def test_a_field_a_patch_empties_is_dropped_where_its_tag_says_omitempty() -> None:
    # `cgroupRoot string omitempty`: "" is not serialised; `failSwapOn *bool omitempty`: a set false pointer is.
    kubelet = _patched({"op": "add", "path": "/cgroupRoot", "value": ""},
                       {"op": "add", "path": "/failSwapOn", "value": False})
    assert "cgroupRoot" not in kubelet
    assert kubelet["failSwapOn"] is False


def test_a_value_of_the_wrong_kind_fails_the_decode_and_the_upload() -> None:
    with pytest.raises(KubeletDecodeError, match=r"failSwapOn: cannot unmarshal \"no\" into Go value of type \*bool"):
        _patched({"op": "add", "path": "/failSwapOn", "value": "no"})
    with pytest.raises(KubeletDecodeError, match=r"maxPods: cannot unmarshal 1.5 into Go value of type int32"):
        _patched({"op": "add", "path": "/maxPods", "value": 1.5})


def test_every_registered_patch_path_survives_kamajis_decode() -> None:
    """Each path the program patches names a KubeletConfiguration field: none is lost on the way to the node."""
    for stack in ("dev", "gpu"):
        for spec in _registered_specs(stack):
            kubelet = apply_kubelet_patches(spec)
            for patch in spec["kubernetes"]["kubelet"]["configurationJSONPatches"]:
                node: Any = kubelet
                for part in patch["path"].lstrip("/").split("/"):
                    assert part in node, f"{stack}: {patch['path']} is dropped by Kamaji's decode"
                    node = node[part]
