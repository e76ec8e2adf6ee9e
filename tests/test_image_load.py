"""The agent image reaches a worker's containerd the way `kind load docker-image` puts it there."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_tenancy.builders import image_load

# `containerd config dump` as containerd 2.x (config version 3, TOML literal strings) and 1.x (version 2)
# print it; only the parts the snapshotter lookup reads, plus a neighbour section with its own key.
CONTAINERD_2 = """version = 3
root = '/var/lib/containerd'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    discard_unpacked_layers = true
    snapshotter = 'native'

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10'

  [plugins.'io.containerd.snapshotter.v1.overlayfs']
    snapshotter = 'not-this-one'
"""
CONTAINERD_1 = """version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      snapshotter = "fuse-overlayfs"
"""

# Fake `docker`: `exec NODE containerd config dump` prints $FAKE_CONFIG, `save IMAGE` prints a tar stand-in,
# `exec -i NODE ctr ...` records its argv and stdin (docker/cli exec and save; containerd ctr import).
_DOCKER = r'''
import json, os, sys
args = sys.argv[1:]
log = os.environ["FAKE_LOG"]
if args[:1] == ["save"]:
    sys.stdout.write("tar-of-" + args[1])
    sys.exit(0)
if args[:1] == ["exec"] and args[2:5] == ["containerd", "config", "dump"]:
    sys.stdout.write(os.environ["FAKE_CONFIG"])
    sys.exit(0)
if args[:2] == ["exec", "-i"]:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": args, "stdin": sys.stdin.read()}) + "\n")
    sys.exit(0)
sys.exit(127)
'''


def _run(tmp_path: Path, config: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    docker = tmp_path / "docker"
    docker.write_text(f"#!{sys.executable}\n{_DOCKER}")
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "log.jsonl"
    env = {
        "PATH": f"{tmp_path}:{os.environ['PATH']}", "FAKE_LOG": str(log), "FAKE_CONFIG": config,
        "IMAGE": "gpu-tenancy/mock-gpu-agent:abc", "NODE_CONTAINER": "lab-tenant-a-worker",
    }
    result = subprocess.run(["/bin/sh", "-c", image_load.load_script()], env=env, capture_output=True, text=True)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


@pytest.mark.parametrize(("config", "snapshotter"), [(CONTAINERD_2, "native"), (CONTAINERD_1, "fuse-overlayfs")])
def test_the_import_uses_the_nodes_snapshotter_as_kind_does(tmp_path: Path, config: str, snapshotter: str) -> None:
    result, calls = _run(tmp_path, config)
    assert result.returncode == 0, result.stderr
    (call,) = calls
    assert call["argv"] == [
        "exec", "-i", "lab-tenant-a-worker", "ctr", "--namespace=k8s.io", "images", "import",
        "--all-platforms", "--digests", f"--snapshotter={snapshotter}", "-",
    ]
    assert call["stdin"] == "tar-of-gpu-tenancy/mock-gpu-agent:abc"


def test_an_unreadable_config_fails_before_importing(tmp_path: Path) -> None:
    result, calls = _run(tmp_path, "version = 3\n")
    assert result.returncode == 1 and "cannot tell the containerd snapshotter" in result.stderr
    assert calls == []


def test_the_load_script_passes_shellcheck(tmp_path: Path) -> None:
    script = tmp_path / "load.sh"
    script.write_text("#!/bin/sh\n" + image_load.load_script())
    shellcheck = Path(sys.executable).parent / "shellcheck"
    result = subprocess.run([str(shellcheck), "-s", "sh", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
