"""A stand-in for the kind v0.32.0 CLI, as far as the program's kind commands touch files.

Run as `kind` from a PATH directory (see `install`). Clusters are names in the file $FAKE_KIND_CLUSTERS;
kubeconfig files are JSON {"clusters": [names]} (kind writes YAML; only which file it touches matters here).
It follows kubernetes-sigs/kind v0.32.0:

* `get clusters`: the names one per line, or "No kind clusters found." on stderr
  (`pkg/cmd/kind/get/clusters/clusters.go` `runE`);
* `create cluster`: fails when the name already has nodes (`pkg/cluster/internal/create/create.go`
  `alreadyExists`), reads the config from stdin with `--config -`, and merges the new context into the
  kubeconfig chosen by `pathForMerge`: the `--kubeconfig` path, else the first existing file of $KUBECONFIG
  (else its last), else $HOME/.kube/config (`pkg/cluster/internal/kubeconfig/internal/kubeconfig/paths.go`,
  `write.go` `WriteMerged`, `lock.go` `lockFile`);
* `delete cluster`: succeeds whether or not the cluster exists, and removes its context from every file of
  `paths` (explicit, else all of $KUBECONFIG, else $HOME/.kube/config), creating each file's directory
  for the lock and writing a file only if it held the context (`remove.go` `RemoveKIND`);
* `get kubeconfig`: prints the kubeconfig, writes nothing (`pkg/cmd/kind/get/kubeconfig/kubeconfig.go`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _flag(args: list[str], name: str, default: str = "") -> str:
    return args[args.index(name) + 1] if name in args else default


def _paths(explicit: str) -> list[Path]:
    if explicit:
        return [Path(explicit)]
    listed = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [Path(os.environ["HOME"]) / ".kube" / "config"]


def _path_for_merge(explicit: str) -> Path:
    paths = _paths(explicit)
    return next((p for p in paths if p.is_file()), paths[-1]) if len(paths) > 1 else paths[0]


def _locked(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(f"{path}.lock")
    lock.touch(exist_ok=False)
    lock.unlink()


def _read(path: Path) -> dict[str, list[str]]:
    return json.loads(path.read_text()) if path.is_file() else {"clusters": []}


def main(args: list[str]) -> int:
    state = Path(os.environ["FAKE_KIND_CLUSTERS"])
    clusters = state.read_text().split() if state.is_file() else []
    name = _flag(args, "--name", "kind")
    explicit = _flag(args, "--kubeconfig")
    if args[:2] == ["get", "clusters"]:
        if not clusters:
            print("No kind clusters found.", file=sys.stderr)
        for cluster in clusters:
            print(cluster)
        return 0
    if args[:2] == ["get", "kubeconfig"]:
        if name not in clusters:
            print(f'ERROR: could not locate any control plane nodes for cluster named "{name}"', file=sys.stderr)
            return 1
        print(f"apiVersion: v1\nkind: Config\ncurrent-context: kind-{name}")
        return 0
    if args[:2] == ["create", "cluster"]:
        if name in clusters:
            print(f'ERROR: failed to create cluster: node(s) already exist for a cluster with the name "{name}"',
                  file=sys.stderr)
            return 1
        if _flag(args, "--config") == "-":
            sys.stdin.read()
        state.write_text("\n".join([*clusters, name]))
        path = _path_for_merge(explicit)
        _locked(path)
        config = _read(path)
        path.write_text(json.dumps({"clusters": [*config["clusters"], f"kind-{name}"]}))
        return 0
    if args[:2] == ["delete", "cluster"]:
        state.write_text("\n".join(c for c in clusters if c != name))
        for path in _paths(explicit):
            _locked(path)
            config = _read(path)
            if f"kind-{name}" in config["clusters"]:
                path.write_text(json.dumps({"clusters": [c for c in config["clusters"] if c != f"kind-{name}"]}))
        return 0
    print(f"kind fake: unsupported {args}", file=sys.stderr)
    return 2


def install(bin_dir: Path, clusters_file: Path) -> dict[str, str]:
    """Put `kind` on a PATH directory; returns the environment to run commands with."""
    kind = bin_dir / "kind"
    kind.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} \"$@\"\n")
    kind.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_KIND_CLUSTERS": str(clusters_file)}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
