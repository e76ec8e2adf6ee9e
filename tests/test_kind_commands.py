"""The management cluster's kind commands, run as pulumi-command runs them, against tests/kind_fake.py.

pulumi-command v1.2.1 runs a local command as `/bin/sh -c <create>` with the provider's environment plus
`environment`, and `stdin` on standard input when it is not empty (`provider/pkg/provider/local/
commandOutputs.go` `run`). The commands are taken from the dev stack as the program registers them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kind_fake import install
from policy_support import Recorded, dev_stack, find

from gpu_tenancy.builders.kind_cluster import kind


def _run(script: str, stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", script], input=stdin or None, env=env, text=True, capture_output=True,
                          timeout=30)


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Any]:
    """A user's machine: HOME with a kubeconfig of their own, a private TMPDIR, kind on PATH."""
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text('{"clusters": ["kind-someone-else"]}')
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {"HOME": str(home), "TMPDIR": str(tmp), **install(bin_dir, tmp_path / "clusters")}
    env.pop("KUBECONFIG", None)
    return {"env": {k: v for k, v in {**os.environ, **env}.items() if k != "KUBECONFIG"}, "home": home, "tmp": tmp,
            "clusters": tmp_path / "clusters"}


def _create() -> Recorded:
    return find(dev_stack(), "command:local:Command", "management-create")


def _clusters(host: dict[str, Any]) -> list[str]:
    return host["clusters"].read_text().split() if host["clusters"].is_file() else []


def test_create_and_delete_leave_the_users_kubeconfig_alone(host: dict[str, Any]) -> None:
    create = _create()
    user_config = (host["home"] / ".kube" / "config").read_text()
    created = _run(create.inputs["create"], create.inputs["stdin"], host["env"])
    assert created.returncode == 0, created.stderr
    assert _clusters(host) == ["gpu-tenancy-dev"]
    assert (host["home"] / ".kube" / "config").read_text() == user_config
    deleted = _run(create.inputs["delete"], "", host["env"])
    assert deleted.returncode == 0, deleted.stderr
    assert _clusters(host) == []
    assert (host["home"] / ".kube" / "config").read_text() == user_config
    assert list(host["tmp"].iterdir()) == [], "the private kubeconfig must not outlive the command"


def test_create_and_delete_leave_the_files_in_KUBECONFIG_alone(host: dict[str, Any]) -> None:
    own = host["home"] / "work.kubeconfig"
    own.write_text('{"clusters": ["prod"]}')
    env = {**host["env"], "KUBECONFIG": f"{own}{os.pathsep}{host['home'] / 'missing'}"}
    create = _create()
    assert _run(create.inputs["create"], create.inputs["stdin"], env).returncode == 0
    assert own.read_text() == '{"clusters": ["prod"]}'
    assert _run(create.inputs["delete"], "", env).returncode == 0
    assert own.read_text() == '{"clusters": ["prod"]}'
    assert not (host["home"] / "missing").exists()


def test_create_adopts_a_running_cluster_of_the_same_name(host: dict[str, Any]) -> None:
    """Adoption is why the command must be replaced delete-first (tests/test_lifecycle.py)."""
    host["clusters"].write_text("gpu-tenancy-dev")
    create = _create()
    adopted = _run(create.inputs["create"], create.inputs["stdin"], host["env"])
    assert adopted.returncode == 0, adopted.stderr
    assert _clusters(host) == ["gpu-tenancy-dev"]


def test_a_failed_create_fails_the_command_and_cleans_up(host: dict[str, Any]) -> None:
    # A cluster kind does not list but whose nodes exist (e.g. listing failed): create refuses it.
    script = kind.create_command("gpu-tenancy-dev", "kindest/node:v1.35.5@sha256:" + "0" * 64).replace(
        "kind get clusters", "false"
    )
    host["clusters"].write_text("gpu-tenancy-dev")
    failed = _run(script, "kind: Cluster\n", host["env"])
    assert failed.returncode != 0
    assert "already exist" in failed.stderr
    assert list(host["tmp"].iterdir()) == []


def test_delete_of_a_missing_cluster_succeeds(host: dict[str, Any]) -> None:
    deleted = _run(_create().inputs["delete"], "", host["env"])
    assert deleted.returncode == 0, deleted.stderr


def test_the_kubeconfig_is_read_from_kind_not_from_a_file(host: dict[str, Any]) -> None:
    host["clusters"].write_text("gpu-tenancy-dev")
    read = find(dev_stack(), "command:local:Command", "management-kubeconfig")
    printed = _run(read.inputs["create"], "", host["env"])
    assert printed.returncode == 0 and "kind-gpu-tenancy-dev" in printed.stdout


def test_kind_creates_the_cluster_on_the_configured_network() -> None:
    """kind v0.32.0 takes a network other than `kind` from KIND_EXPERIMENTAL_DOCKER_NETWORK (provider.go
    `Provision`); the workers and the MetalLB pool already follow `kind.network`, so must the cluster."""
    from harness import dev_config, record_stack, unwrap

    config = dev_config()
    config["kind"] = {"network": "kind-lab"}
    (create,) = [r for r in record_stack(config) if r.name == "management-create"]
    inputs = unwrap(create.inputs)
    assert inputs["environment"] == {"KIND_EXPERIMENTAL_DOCKER_NETWORK": "kind-lab"}
    assert "kind-lab" in inputs["triggers"]  # another network is another cluster
    (worker,) = {unwrap(r.inputs)["networksAdvanced"][0]["name"] for r in record_stack(config)
                 if r.typ == "docker:index/container:Container"}
    assert worker == "kind-lab"


def test_the_cluster_runs_the_pinned_node_image_and_a_new_one_is_a_new_cluster() -> None:
    create = _create()
    image = "kindest/node:v1.35.5@sha256:ce977ae6d65918d0b58a5f8b5e940429c2ce42fa3a5619ec2bbc60b949c0ac95"
    assert f"kind create cluster --name gpu-tenancy-dev --image {image} --config - " in create.inputs["create"]
    assert create.inputs["triggers"] == ["gpu-tenancy-dev", image]


def test_kind_s_own_network_leaves_existing_stacks_unchanged() -> None:
    """No new input for stacks on kind's default network: a new trigger would replace their cluster."""
    create = find(dev_stack(), "command:local:Command", "management-create")
    assert "environment" not in create.inputs or not create.inputs["environment"]
    assert len(create.inputs["triggers"]) == 2


def test_the_config_on_stdin_names_the_cluster_it_creates() -> None:
    """kind's `--name` wins over the config's `name` (kind `pkg/cluster/internal/create/create.go`
    `fixupOptions`: NameOverride); the config still says the same. The engine stores stdin as an input, so a
    change here is an update of a deployed cluster's command on the next `up`."""
    assert _create().inputs["stdin"] == (
        "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nname: gpu-tenancy-dev\nnodes:\n- role: control-plane\n"
    )
