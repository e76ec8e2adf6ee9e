"""Each clause of gpu_tenancy/builders/worker/kind_node.py decides a case, against kind v0.32.0's own code:
`pkg/cluster/internal/providers/docker/util.go` (usernsRemap, mountDevMapper, mountFuse), `provider.go` `info()`,
`provision.go` (runArgsForNode, getProxyEnv) and `common/proxy.go` (getProxyEnvs). Expected values are written
from that code, case by case."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpu_tenancy.builders.worker import kind_node
from gpu_tenancy.builders.worker.kind_node import KindHostFlags


def info(options: list[Any] | None = None, driver: Any = "overlay2", status: Any = None) -> str:
    return json.dumps({"SecurityOptions": options, "Driver": driver, "DriverStatus": status})


@pytest.mark.parametrize(("case", "docker_info", "expected"), [
    # mountDevMapper: strings.ToLower(strings.TrimSpace(driver)).
    ("driver in capitals with spaces", info(driver=" BTRFS\n"), KindHostFlags(mount_dev_mapper=True)),
    ("overlay2", info(driver="overlay2"), KindHostFlags()),
    ("no driver", info(driver=None), KindHostFlags()),
    # The backing filesystem, lower-cased: btrfs, zfs or xfs; the first "Backing Filesystem" entry decides.
    ("XFS backing", info(status=[["Backing Filesystem", "XFS"]]), KindHostFlags(mount_dev_mapper=True)),
    ("zfs backing", info(status=[["Backing Filesystem", "zfs"]]), KindHostFlags(mount_dev_mapper=True)),
    ("extfs backing", info(status=[["Backing Filesystem", "extfs"]]), KindHostFlags()),
    ("first entry decides", info(status=[["Supports d_type", "true"], ["Backing Filesystem", "xfs"],
                                         ["Backing Filesystem", "extfs"]]), KindHostFlags(mount_dev_mapper=True)),
    ("first entry decides, extfs", info(status=[["Backing Filesystem", "extfs"], ["Backing Filesystem", "xfs"]]),
     KindHostFlags()),
    ("another key naming xfs", info(status=[["Backing", "xfs"]]), KindHostFlags()),
    # kind would index past a one-field entry and panic; the program skips it and reads on.
    ("a two-field entry after a short one", info(status=[["Backing Filesystem"], ["Backing Filesystem", "btrfs"]]),
     KindHostFlags(mount_dev_mapper=True)),
    # usernsRemap: the JSON list of security options contains "name=userns".
    ("userns among others", info(["name=seccomp,profile=builtin", "name=userns"]), KindHostFlags(userns_host=True)),
    ("no userns", info(["name=seccomp,profile=builtin"]), KindHostFlags()),
    # Not a string (kind's []string would not even decode): skipped, the others still read.
    ("a non-string option is skipped", info([7, "name=userns"]), KindHostFlags(userns_host=True)),
    # info(): a CSV field equal to name=rootless, quoted or not; rootless: /dev/fuse, never /dev/mapper.
    ("quoted rootless field", info(['name=seccomp,"name=rootless"'], driver="zfs"), KindHostFlags(mount_fuse=True)),
    ("rootless-like field", info(["name=rootlessx"], driver="zfs"), KindHostFlags(mount_dev_mapper=True)),
    ("rootless with userns", info(["name=userns", "name=rootless"]), KindHostFlags(userns_host=True, mount_fuse=True)),
    # Anything but a JSON object: every flag false.
    ("a JSON list", json.dumps([{"Driver": "btrfs"}]), KindHostFlags()),
    ("not JSON", "{Driver: btrfs", KindHostFlags()),
])
def test_host_flags_case_by_case(case: str, docker_info: str, expected: KindHostFlags) -> None:
    assert kind_node.host_flags(docker_info) == expected, case


def test_the_worker_containers_security_options_are_kinds_and_dockers() -> None:
    # provision.go runArgsForNode: seccomp and apparmor unconfined; `label=disable` is what dockerd stores for a
    # privileged container that names no label option (moby daemon/create.go generateSecurityOpt).
    assert kind_node.SECURITY_OPTS == ("seccomp=unconfined", "apparmor=unconfined", "label=disable")


@pytest.mark.parametrize(("environ", "expected"), [
    ({"KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER": "fuse-overlayfs"},
     ["KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=fuse-overlayfs"]),
    # `docker run -e NAME` passes nothing for an unset or empty NAME.
    ({"KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER": ""}, []),
    ({"kind_experimental_containerd_snapshotter": "native"}, []),
    ({}, []),
])
def test_the_snapshotter_variable_reaches_the_node_only_when_set(environ: dict[str, str], expected: list[str]) -> None:
    assert kind_node.snapshotter_env(environ) == expected


@pytest.mark.parametrize(("environ", "expected"), [
    ({"HTTP_PROXY": "http://p:3128"}, True), ({"http_proxy": "http://p:3128"}, True),
    ({"HTTPS_PROXY": "http://p:3128"}, True), ({"https_proxy": "http://p:3128"}, True),
    ({"NO_PROXY": "corp.example"}, True), ({"no_proxy": "corp.example"}, True),
    ({"HTTP_PROXY": ""}, False), ({"FTP_PROXY": "http://p:3128"}, False), ({}, False),
])
def test_any_proxy_variable_in_either_case_counts(environ: dict[str, str], expected: bool) -> None:
    assert kind_node.has_proxy(environ) is expected


@pytest.mark.parametrize(("environ", "expected"), [
    ({"http_proxy": "http://u:p@proxy:3128"}, True), ({"HTTPS_PROXY": "https://u@proxy:3128"}, True),
    # The upper-case spelling is read first, the lower-case one still checked.
    ({"HTTP_PROXY": "http://proxy:3128", "http_proxy": "http://u:p@proxy:3128"}, True),
    ({"HTTPS_PROXY": "proxy:3128"}, False), ({"NO_PROXY": "u@proxy"}, False),
])
def test_credentials_in_either_proxy_url_and_spelling(environ: dict[str, str], expected: bool) -> None:
    assert kind_node.proxy_has_credentials(environ) is expected


def test_proxy_variables_as_kinds_get_proxy_envs() -> None:
    # getProxyEnvs: the upper-case spelling wins; both spellings passed; NO_PROXY gets the service and pod subnets,
    # then getProxyEnv puts the Docker network's subnets first and the node names and DNS suffixes after.
    env = kind_node.proxy_env({"HTTP_PROXY": "http://up:3128", "http_proxy": "http://low:3128"},
                              "10.96.0.0/16", "10.244.0.0/16", ["172.18.0.0/16"], ["lab-worker", "lab-worker2"])
    no_proxy = "172.18.0.0/16,10.96.0.0/16,10.244.0.0/16,lab-worker,lab-worker2,.svc,.svc.cluster,.svc.cluster.local"
    assert env == {"HTTP_PROXY": "http://up:3128", "http_proxy": "http://up:3128",
                   "NO_PROXY": no_proxy, "no_proxy": no_proxy}


def test_no_proxy_alone_is_passed_and_extended() -> None:
    env = kind_node.proxy_env({"no_proxy": "corp.example"}, "10.96.0.0/16", "10.244.0.0/16", [], ["w"])
    no_proxy = "corp.example,10.96.0.0/16,10.244.0.0/16,w,.svc,.svc.cluster,.svc.cluster.local"
    assert env == {"NO_PROXY": no_proxy, "no_proxy": no_proxy}
