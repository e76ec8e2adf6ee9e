"""Build the real control plane's binaries from their Go modules, into a cache keyed by what they are built from.

Each component is a small Go module of ours under `tests/realcp/modules/<component>/` whose go.mod and go.sum are
the pins (one place per component, verified against the checksum database by the go command). A module of our own
is needed because each upstream main module has `replace` lines that only apply inside its own tree:
k8s.io/kubernetes replaces every k8s.io staging module with ./staging/... (our module replaces each with its
published v0.Y.Z, as kubernetes-sigs/scheduler-plugins' go.mod does), and go.etcd.io/etcd/server/v3 replaces
../api (etcd-io/etcd#18501). kwok has none, but builds the same way.

    python -m tests.realcp.build            # build what is missing, print where the binaries are
    python -m tests.realcp.build probe      # ask the Go module proxy which pinned modules it serves

The cache is `$GPU_TENANCY_CACHE/realcp` (default `~/.cache/gpu-tenancy/realcp`), one directory per component,
version and digest of its go.mod, go.sum and build flags; a directory is used only once its build completed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MODULES = Path(__file__).resolve().parent / "modules"
COMPLETE = ".complete"


@dataclass(frozen=True)
class Component:
    name: str
    module: str  # the upstream module whose version go.mod pins
    packages: tuple[str, ...]  # main packages to build
    binaries: tuple[str, ...]  # the binaries they give: go names each after its package path, less a /vN suffix
    # Version stamping: `/version` of a Kubernetes binary says v0.0.0-master unless these are set
    # (k8s.io/component-base/version/base.go).
    stamp_kubernetes_version: bool = False


COMPONENTS = (
    Component(
        "kubernetes",
        "k8s.io/kubernetes",
        ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-scheduler",
         "k8s.io/kubernetes/cmd/kube-controller-manager"),
        ("kube-apiserver", "kube-scheduler", "kube-controller-manager"),
        stamp_kubernetes_version=True,
    ),
    Component("etcd", "go.etcd.io/etcd/server/v3", ("go.etcd.io/etcd/server/v3",), ("server",)),
    # stages: kwokctl's default node and pod stages, printed from kwok's own Go packages (modules/kwok/stages).
    Component("kwok", "sigs.k8s.io/kwok", ("sigs.k8s.io/kwok/cmd/kwok", "./stages"), ("kwok", "stages")),
)

# HAMi's scheduler would be a fourth component (github.com/Project-HAMi/HAMi cmd/scheduler at the commit tagged
# v2.10.0, 4707fb02c91c, committed 2026-08-21T06:20:39Z). Its module path has no /v2, so only a pseudo-version can
# name that commit; the proxy this project reaches answers 403 "This module version is not available." for the
# module's version list and for every version asked (`probe` below asks again each time it runs).
HAMI_MODULE = "github.com/Project-HAMi/HAMi"
HAMI_VERSIONS_ASKED = ("v0.0.0-20260821062039-4707fb02c91c", "v2.10.0")


# The names the tier knows binaries by, where go's differs.
RENAMED = {"server": "etcd", "stages": "kwok-default-stages"}


class BuildError(Exception):
    """A build that could not run or failed; the message says what to do."""


def pinned_version(component: Component) -> str:
    """The version of the upstream module that the component's go.mod requires (direct or indirect)."""
    text = (MODULES / component.name / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(component.module)}\s+(v\S+)", text, re.MULTILINE)
    if not found:
        raise BuildError(f"{component.name}: go.mod requires no {component.module}")
    return found.group(1)


def ldflags(component: Component) -> str:
    flags = ["-s", "-w"]
    if component.stamp_kubernetes_version:
        version = pinned_version(component)
        major, minor = version.lstrip("v").split(".")[:2]
        base = "k8s.io/component-base/version"
        flags += [f"-X {base}.gitVersion={version}", f"-X {base}.gitMajor={major}", f"-X {base}.gitMinor={minor}",
                  f"-X {base}.gitTreeState=clean"]
    return " ".join(flags)


def go_environment() -> dict[str, str]:
    """The go command's environment: the machine's own toolchain (no download of another), no cgo (none of the
    components needs it), module files read only from go.mod/go.sum as committed."""
    environ = dict(os.environ)
    environ.update({"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -trimpath"})
    return environ


def go_version() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("no Go toolchain on PATH: install Go 1.26 (https://go.dev/doc/install) to run the "
                         "real control-plane tier")
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True, env=go_environment())
    return out.stdout.strip()


def cache_root() -> Path:
    base = os.environ.get("GPU_TENANCY_CACHE") or Path.home() / ".cache" / "gpu-tenancy"
    return Path(base) / "realcp"


def build_key(component: Component, toolchain: str) -> str:
    digest = hashlib.sha256()
    for part in ((MODULES / component.name / "go.mod").read_bytes(), (MODULES / component.name / "go.sum").read_bytes(),
                 ldflags(component).encode(), toolchain.encode(), json.dumps(go_environment_keys(), sort_keys=True).encode()):
        digest.update(hashlib.sha256(part).digest())
    return f"{component.name}-{pinned_version(component)}-{digest.hexdigest()[:12]}"


def go_environment_keys() -> dict[str, str]:
    environ = go_environment()
    return {key: environ[key] for key in ("GOTOOLCHAIN", "CGO_ENABLED", "GOFLAGS")}


def build(component: Component, toolchain: str, log: bool = True) -> Path:
    """The directory holding the component's binaries, built now if no completed build is cached."""
    target = cache_root() / build_key(component, toolchain)
    if (target / COMPLETE).is_file() and all((target / binary).is_file() for binary in component.binaries):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{component.name}-", dir=target.parent))
    if log:
        print(f"realcp: building {component.name} {pinned_version(component)} into {target}", file=sys.stderr, flush=True)
    result = subprocess.run(
        ["go", "build", "-ldflags", ldflags(component), "-o", f"{staging}/", *component.packages],
        cwd=MODULES / component.name, env=go_environment(), capture_output=True, text=True,
    )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildError(f"{component.name}: go build failed:\n{result.stderr.strip()[-4000:]}")
    built = {path.name for path in staging.iterdir()}
    missing = [binary for binary in component.binaries if binary not in built]
    if missing:
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildError(f"{component.name}: go build made no {', '.join(missing)} (made: {sorted(built)})")
    (staging / COMPLETE).write_text(pinned_version(component) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def build_all(log: bool = True) -> dict[str, Path]:
    """Every binary the tier starts, by name."""
    toolchain = go_version()
    binaries: dict[str, Path] = {}
    for component in COMPONENTS:
        directory = build(component, toolchain, log)
        binaries.update({RENAMED.get(binary, binary): directory / binary for binary in component.binaries})
    return binaries


def probe() -> list[tuple[str, str, str]]:
    """(module, version, the proxy's answer) for each pinned module and for HAMi's scheduler."""
    asks = [(component.module, pinned_version(component)) for component in COMPONENTS]
    asks += [(HAMI_MODULE, version) for version in HAMI_VERSIONS_ASKED]
    answers = []
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["go", "mod", "init", "probe"], cwd=scratch, capture_output=True, env=go_environment(), check=True)
        for module, version in asks:
            out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=scratch,
                                 capture_output=True, text=True, env={**go_environment(), "GOFLAGS": "-mod=mod"})
            try:
                error = json.loads(out.stdout).get("Error", "")
            except json.JSONDecodeError:
                error = (out.stderr or out.stdout).strip()
            answers.append((module, version, "served" if out.returncode == 0 and not error else error))
    return answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.realcp.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", choices=("build", "probe"), default="build")
    parser.add_argument("--if-go", action="store_true",
                        help="without a Go toolchain, say so in one line and succeed (unless CI=true)")
    args = parser.parse_args(argv)
    if args.if_go and shutil.which("go") is None and os.environ.get("CI", "").lower() != "true":
        print("realcp: no Go toolchain on PATH, the real control-plane tier will be skipped (install Go 1.26 to run it)")
        return 0
    try:
        if args.command == "probe":
            answers = probe()
            for module, version, answer in answers:
                print(f"{module}@{version}: {answer}")
            return 0
        for name, path in build_all().items():
            print(f"{name}: {path}")
    except BuildError as error:
        print(f"realcp: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
