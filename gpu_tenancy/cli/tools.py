"""The pinned command-line tools a deploy needs (kind, kubectl, the Pulumi CLI), installed per project.

    python3 -m gpu_tenancy tools install --dir .tools/bin [--only kind,kubectl]   # what `make tools` runs
    gpu-tenancy tools published                                                 # maintainers: upstream sums

Each tool is downloaded from its upstream release URL into a temporary file next to the target, its
sha256 compared with the one recorded below for exactly that version and platform, and only then made
executable under its own name; a mismatch leaves nothing behind. A tool whose sha256 could not be recorded
(``published_direct``: the Pulumi CLI) is checked against the checksum file its own release publishes, fetched
from the release host itself, never through a mirror; the sha256 that file named is kept in
``<dir>/../published-sha256.txt`` and any later download of the same version must match it. A tool already
on PATH at the pinned version is used as it is; one of another version is shadowed by the project's copy (the
Makefile puts the directory first on PATH). Docker, Python and make stay the only host prerequisites.

Standard library only: `make up` runs this before the project's venv exists.

Upstream release layouts (read at the pinned tags):
- kind: `kind-<os>-<arch>` next to `kind-<os>-<arch>.sha256sum` (``<hex>  <file>``) on the GitHub release
  (kubernetes-sigs/kind v0.32.0 hack/release/build/cross.sh); `kind version` prints
  ``kind v0.32.0 go1.26.3 linux/amd64`` (pkg/cmd/kind/version/version.go DisplayVersion).
- kubectl: ``https://dl.k8s.io/release/<v>/bin/<os>/<arch>/kubectl`` and ``kubectl.sha256`` (the hex alone);
  `kubectl version --client -o json` has ``clientVersion.gitVersion``.
- Pulumi: ``pulumi-<tag>-<os>-<x64|arm64>.tar.gz``, every file under ``pulumi/`` (the CLI and its language
  hosts, which must sit next to it), and ``pulumi-<version>-checksums.txt`` (pulumi/pulumi .goreleaser.yml
  ``archives`` and ``checksum``); `pulumi version` prints ``v3.272.0``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpu_tenancy.cli.base_command import CommandParser, command_parser
from gpu_tenancy.cli.status_codes import FAILURE, SUCCESS
from gpu_tenancy.contract import versions

# A download mirror (e.g. a corporate proxy cache): https://<host>/<path> is fetched from <mirror>/<host>/<path>.
# Checksums are verified all the same, so a mirror cannot change what is installed.
MIRROR_ENV = "GPU_TENANCY_TOOLS_MIRROR"
# Where the sha256 a release published is kept after its first verified install (next to the tools' directory).
PUBLISHED_LOCK = "published-sha256.txt"
PLATFORMS = ("linux-amd64", "linux-arm64")
DOWNLOAD_TIMEOUT = 120


class ToolError(Exception):
    """A tool cannot be installed as pinned: one line naming the tool and what to do."""


@dataclass(frozen=True)
class Tool:
    name: str
    version: str  # as upstream tags it, with the leading v
    # (version, platform) -> the artifact's sha256. A version bump without its checksums is refused.
    sha256: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # No sha256 recorded: check against the release's own checksum file, fetched directly (see the docstring).
    published_direct: bool = False

    def url(self, target: str) -> str:
        os_name, arch = target.split("-")
        if self.name == "kind":
            return f"https://github.com/kubernetes-sigs/kind/releases/download/{self.version}/kind-{target}"
        if self.name == "kubectl":
            return f"https://dl.k8s.io/release/{self.version}/bin/{os_name}/{arch}/kubectl"
        pulumi_arch = "x64" if arch == "amd64" else arch
        return (
            f"https://github.com/pulumi/pulumi/releases/download/{self.version}/"
            f"pulumi-{self.version}-{os_name}-{pulumi_arch}.tar.gz"
        )

    def published_checksums_url(self, target: str) -> str:
        if self.name == "kind":
            return self.url(target) + ".sha256sum"
        if self.name == "kubectl":
            return self.url(target) + ".sha256"
        return (
            f"https://github.com/pulumi/pulumi/releases/download/{self.version}/"
            f"pulumi-{self.version.removeprefix('v')}-checksums.txt"
        )

    @property
    def archive(self) -> bool:
        return self.name == "pulumi"

    def version_command(self, executable: str) -> list[str]:
        if self.name == "kubectl":
            return [executable, "version", "--client", "-o", "json"]
        return [executable, "version"]

    def parse_version(self, stdout: str) -> str | None:
        """The version a tool reports (None: not recognisable as this tool's output)."""
        text = stdout.strip()
        if self.name == "kubectl":
            try:
                reported = json.loads(text)["clientVersion"]["gitVersion"]
            except (ValueError, KeyError, TypeError):
                return None
            return str(reported)
        if self.name == "kind":
            match = re.match(r"kind (v\d\S*) ", text + " ")  # "kind v0.32.0 go1.24.6 linux/amd64"
            return match[1] if match else None
        first = text.splitlines()[0].strip() if text else ""
        return first if re.fullmatch(r"v\d+\.\d+\.\d+\S*", first) else None


# Recorded from each release's published checksum file (see `python3 -m gpu_tenancy tools published`).
TOOLS = (
    Tool(
        "kind",
        versions.KIND_BINARY,
        {
            ("v0.32.0", "linux-amd64"): "50030de23cf40a18505f20426f6a8506bedf13c6e509244bd1fa9463721b0f54",
            ("v0.32.0", "linux-arm64"): "b92cd615e97585de8ddade28ed5cd7feb4248d717c233eea5b03c37298900f5d",
        },
    ),
    Tool(
        "kubectl",
        versions.KUBECTL_BINARY,
        {
            ("v1.35.5", "linux-amd64"): "90f75ea6ecc9ea5633262e1c0b83a40560003b30fc94a04cb099404fcef0c224",
            ("v1.35.5", "linux-arm64"): "ac69e06fd6860d69786692f5af1c3a1208ed54f8366a4d97ab15c172e99765ee",
        },
    ),
    # Not recorded: pulumi-3.272.0-checksums.txt could not be read from where this was written (no GitHub access;
    # no registry ships the CLI). Until `published` prints it for recording, the release's own file is used.
    Tool("pulumi", versions.PULUMI_CLI, {}, published_direct=True),
)
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}


def host_platform(system: str | None = None, machine: str | None = None) -> str | None:
    """linux-amd64 or linux-arm64; None for a platform no tool is pinned for."""
    os_name = (system or platform.system()).lower()
    machine = (machine or platform.machine()).lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    target = f"{os_name}-{arch}"
    return target if target in PLATFORMS else None


def mirrored(url: str, mirror: str | None) -> str:
    if not mirror:
        return url
    return mirror.rstrip("/") + "/" + url.split("://", 1)[1]


def parse_published_checksum(tool: Tool, target: str, text: str) -> str | None:
    """The sha256 a release publishes for ``target``'s artifact, from its checksum file."""
    wanted = tool.url(target).rsplit("/", 1)[1]
    for line in text.splitlines():
        fields = line.split()
        if not fields or not re.fullmatch(r"[0-9a-f]{64}", fields[0]):
            continue
        if len(fields) == 1 and not tool.archive:  # kubectl.sha256: the hex alone
            return fields[0]
        if len(fields) >= 2 and fields[1].lstrip("*") == wanted:
            return fields[0]
    return None


Fetch = Callable[[str, Path], None]


def fetch(url: str, destination: Path) -> None:
    """Download ``url`` to ``destination`` (urllib follows the release hosts' redirects)."""
    request = urllib.request.Request(url, headers={"User-Agent": "gpu-tenancy-tools"})
    try:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as response, destination.open("wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as error:
        raise ToolError(
            f"download of {url} failed: {error}. Fix: `make tools` again once this host reaches it (a proxy cache: "
            f"{MIRROR_ENV}=<url>), or install that version yourself"
        ) from error


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def reported_version(tool: Tool, executable: str) -> str | None:
    try:
        result = subprocess.run(
            tool.version_command(executable),
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tool.parse_version(result.stdout) if result.returncode == 0 else None


def on_path_elsewhere(name: str, bin_dir: Path, path: str | None = None) -> str | None:
    """``name`` on PATH outside the project's directory."""
    entries = [entry for entry in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep)]
    others = os.pathsep.join(e for e in entries if e and Path(e).resolve() != bin_dir.resolve())
    return shutil.which(name, path=others)


@dataclass
class Installer:
    bin_dir: Path
    target: str | None  # None: a platform no tool is pinned for (only tools already on PATH can be used)
    fetch: Fetch = fetch
    mirror: str | None = None
    say: Callable[[str], None] = print

    @property
    def lock_path(self) -> Path:
        return self.bin_dir.parent / PUBLISHED_LOCK

    def locked_sha256(self, tool: Tool, target: str) -> str | None:
        """The sha256 a first verified install took from the release's checksum file, if any."""
        try:
            lines = self.lock_path.read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            fields = line.split()
            if fields[:3] == [tool.name, tool.version, target] and len(fields) == 4:
                return fields[3]
        return None

    def expected_sha256(self, tool: Tool, target: str) -> tuple[str, str]:
        """(sha256, how it is known) for ``tool``'s artifact on ``target``."""
        recorded = tool.sha256.get((tool.version, target))
        if recorded:
            return recorded, "recorded in gpu_tenancy/cli/tools.py"
        published_url = tool.published_checksums_url(target)
        if not tool.published_direct:
            raise ToolError(
                f"{tool.name} {tool.version} ({target}): no sha256 recorded in gpu_tenancy/cli/tools.py, so it is "
                f"not downloaded. Record the one {published_url} publishes "
                f"(`python3 -m gpu_tenancy tools published`), or install {tool.name} {tool.version} yourself"
            )
        with tempfile.TemporaryDirectory(dir=self.bin_dir) as scratch:
            sums = Path(scratch) / "checksums"
            try:  # never through the mirror: it must not vouch for its own copy
                self.fetch(published_url, sums)
            except ToolError as error:
                raise ToolError(
                    f"{tool.name} {tool.version}: {published_url} could not be read ({error.__cause__ or error}); it "
                    "is fetched from the "
                    f"release itself, never a mirror. Fix: let this host reach it, or install {tool.name} "
                    f"{tool.version} yourself"
                ) from None
            published = parse_published_checksum(tool, target, sums.read_text(errors="replace"))
        if not published:
            raise ToolError(f"{published_url} names no sha256 for {tool.url(target).rsplit('/', 1)[1]}")
        locked = self.locked_sha256(tool, target)
        if locked and locked != published:
            raise ToolError(
                f"{tool.name} {tool.version}: {published_url} now names sha256 {published}, but {locked} was "
                f"verified here before ({self.lock_path}): the release changed, nothing is installed"
            )
        return published, f"published in {published_url}"

    def _lock(self, tool: Tool, target: str, sha256: str) -> None:
        if self.locked_sha256(tool, target) == sha256:
            return
        with self.lock_path.open("a") as lock:
            lock.write(f"{tool.name} {tool.version} {target} {sha256}\n")

    def ensure(self, tool: Tool) -> str:
        """Make ``tool`` available at its pinned version; returns the executable used."""
        own = self.bin_dir / tool.name
        if own.exists() and reported_version(tool, str(own)) == tool.version:
            self.say(f"{tool.name} {tool.version}: {own}")
            return str(own)
        elsewhere = on_path_elsewhere(tool.name, self.bin_dir)
        found = reported_version(tool, elsewhere) if elsewhere else None
        if elsewhere and found == tool.version:
            if own.exists():  # a stale project copy would shadow the right one
                own.unlink()
            self.say(f"{tool.name} {tool.version}: {elsewhere}")
            return elsewhere
        why = f"{elsewhere} is {found or 'of an unknown version'}" if elsewhere else "not on PATH"
        self.install(tool, why)
        return str(own)

    def install(self, tool: Tool, why: str) -> None:
        if self.target is None:
            raise ToolError(
                f"{tool.name} {tool.version} is needed ({why}) and `make tools` downloads only for "
                f"{', '.join(PLATFORMS)}: install it yourself"
            )
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        expected, source = self.expected_sha256(tool, self.target)
        url = tool.url(self.target)
        with tempfile.TemporaryDirectory(dir=self.bin_dir, prefix=f".{tool.name}-") as scratch:
            download = Path(scratch) / "download"
            self.fetch(mirrored(url, self.mirror), download)
            actual = sha256_of(download)
            if actual != expected:
                raise ToolError(
                    f"{tool.name} {tool.version}: sha256 of {url} is {actual}, expected {expected}: not installed"
                )
            files = self._unpack(tool, download, Path(scratch)) if tool.archive else {tool.name: download}
            if tool.name not in files:
                raise ToolError(f"{url} holds no {tool.name} executable")
            for name, path in files.items():
                path.chmod(0o755)
                os.replace(path, self.bin_dir / name)
        installed = reported_version(tool, str(self.bin_dir / tool.name))
        if installed != tool.version:
            raise ToolError(f"{tool.name} from {url} reports {installed or 'no version'}, pinned {tool.version}")
        if not tool.sha256.get((tool.version, self.target)):
            self._lock(tool, self.target, actual)
        self.say(f"{tool.name} {tool.version}: installed into {self.bin_dir} ({why}; sha256 {actual[:12]}… verified, "
                 f"{source})")

    @staticmethod
    def _unpack(tool: Tool, archive: Path, scratch: Path) -> dict[str, Path]:
        """Regular files directly under the archive's ``<tool>/`` directory (nothing else is extracted)."""
        unpacked = scratch / "unpacked"
        unpacked.mkdir()
        files = {}
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                parts = member.name.split("/")
                if member.isfile() and len(parts) == 2 and parts[0] == tool.name and parts[1]:
                    source = tar.extractfile(member)
                    assert source is not None
                    target = unpacked / parts[1]
                    with source, target.open("wb") as out:
                        shutil.copyfileobj(source, out)
                    files[parts[1]] = target
        return files


def selected(only: str | None) -> list[Tool]:
    if not only:
        return list(TOOLS)
    names = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in names if name not in TOOLS_BY_NAME]
    if unknown:
        raise ToolError(f"unknown tool(s) {', '.join(unknown)}; pinned: {', '.join(TOOLS_BY_NAME)}")
    return [TOOLS_BY_NAME[name] for name in names]


def published(fetcher: Fetch = fetch, mirror: str | None = None, say: Callable[[str], None] = print) -> int:
    """Compare every recorded sha256 with what the releases publish; 1 when one differs or is missing."""
    status = 0
    with tempfile.TemporaryDirectory() as scratch:
        for tool in TOOLS:
            for target in PLATFORMS:
                sums = Path(scratch) / f"{tool.name}-{target}"
                fetcher(mirrored(tool.published_checksums_url(target), mirror), sums)
                upstream = parse_published_checksum(tool, target, sums.read_text(errors="replace"))
                recorded = tool.sha256.get((tool.version, target))
                verdict = "recorded" if recorded == upstream else ("NOT RECORDED" if not recorded else "DIFFERS")
                status |= verdict != "recorded"
                say(f'("{tool.version}", "{target}"): "{upstream}",  # {tool.name}: {verdict}')
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser("tools", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    install = commands.add_parser("install", help="install the pinned tools that are missing or of another version")
    install.add_argument("--dir", required=True, type=Path, help="the project's tool directory (first on PATH)")
    install.add_argument("--only", help="comma-separated subset, e.g. kubectl,pulumi")
    commands.add_parser("published", help="print each release's published sha256 next to the recorded one")
    args = parser.parse_args(argv)
    mirror = os.environ.get(MIRROR_ENV) or None
    failed = 0
    try:
        if args.command == "published":
            return published(mirror=mirror)
        installer = Installer(args.dir.resolve(), host_platform(), mirror=mirror)
        chosen = selected(args.only)
    except ToolError as error:
        print(f"make tools: {error}", file=sys.stderr)
        return FAILURE
    for tool in chosen:  # every tool, so one run names every one that cannot be installed
        try:
            installer.ensure(tool)
        except ToolError as error:
            print(f"make tools: {error}", file=sys.stderr)
            failed += 1
    return FAILURE if failed else SUCCESS

