"""E2E fixtures: opt-in gate, prerequisite check, and a throwaway stack deployed with the Automation API.

Runs only with ``-m e2e`` or ``GPU_TENANCY_E2E=1``; otherwise every test here is skipped, so the
normal ``pytest tests`` run stays offline. Opted in, the run is strict: missing prerequisites are a usage
error naming exactly what is missing, and a check that skips fails the run, so nothing passes by not
running. ``GPU_TENANCY_E2E_STRICT=0`` (``make e2e E2E_STRICT=0``, a local dry run) turns both into skips.
At the end the run prints what ran (each check's outcome), the stage timings and the footprint, and
writes them to ``reports/e2e/timings.json`` and ``summary.md`` (tests/integration/report.py).

``GPU_TENANCY_E2E_STACK`` chooses the example stack (support.E2E_STACKS): ``dev`` (default, ``make e2e``)
deploys the dev stack's tenants in mode ``sim`` as ``e2e-<random>``; ``dev-nvml`` (``make e2e-nvml``) the
dev-nvml stack's in mode ``sim-nvml`` as ``e2e-nvml-<random>``. Checks marked ``e2e_mode(...)`` run only
against a stack of one of those modes; against another they are deselected, and the summary names them.
The teardown check (``e2e_last``) runs after every other check, whatever file it is in.

The stack lives in a temporary file backend with a random passphrase, is deployed with the policy
pack in ``policies/`` (a preview gates the ``up``, as the CLI's ``pulumi up`` does), and is always
destroyed (also when the deploy or a test fails). Everything it logs goes to ``reports/e2e/<stack>/``,
which CI uploads: nothing secret may go there. When destroy fails, the random passphrase that decrypts
the kept state is written next to that state (a temporary directory outside the repository), never there.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_tenancy.cli.charts.pull import pull as pull_charts
from gpu_tenancy.contract.chart_lock import stack_charts
from gpu_tenancy.contract.stack_file import load_stack_file
from tests.integration.diagnostics import collect
from tests.integration.report import render_markdown
from tests.integration.support import (
    CONTAINER_STATS_FORMAT,
    DEPLOY_STAGE,
    DESTROY_STAGE,
    PREREQUISITES_STAGE,
    STACK_ENV,
    E2EStack,
    Footprint,
    StageTimings,
    UpProgress,
    conflicting_clusters,
    container_memory,
    memory_in_use,
    missing_prerequisites,
    mode_skip_reason,
    opted_in,
    preview_then_up,
    select_stack,
    stack_resources_left,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
REPORTS_DIR = Path(os.environ.get("GPU_TENANCY_E2E_REPORTS") or REPO_ROOT / "reports" / "e2e")
POLICY_PACK_DIR = REPO_ROOT / "policies"
DEV_STACK_FILE = REPO_ROOT / "Pulumi.dev.yaml"
STRICT_ENV = "GPU_TENANCY_E2E_STRICT"
MODE_MARKER = "e2e_mode"
LAST_MARKER = "e2e_last"
FAULT_MARKER = "e2e_fault"  # test_faults.py: after every other check, before the teardown
# Per Kubernetes API call: (connect, read) seconds. Waits are done by polling, never by long reads.
API_TIMEOUT = (10, 60)
COMMAND_TIMEOUT = 120
FAILED_TESTS: list[str] = []
# What the session prints at the end (pytest captures fixture output of passing runs).
SUMMARY: list[str] = []


@dataclass
class RunRecord:
    """What one live run did, filled as it goes and written out at the end (tests/integration/report.py)."""

    opted_in: bool = False
    strict: bool = True
    timings: StageTimings = field(default_factory=StageTimings)
    footprint: Footprint = field(default_factory=Footprint)
    run: dict[str, Any] = field(default_factory=dict)
    run_dir: Path | None = None
    outcomes: dict[str, str] = field(default_factory=dict)  # node id -> passed/failed/errors/skipped
    skip_reasons: dict[str, str] = field(default_factory=dict)
    not_for_mode: list[str] = field(default_factory=list)

    def checks(self) -> dict[str, int]:
        counts = {key: 0 for key in ("passed", "failed", "errors", "skipped")}
        for outcome in self.outcomes.values():
            counts[outcome] += 1
        return {**counts, "not for this mode": len(self.not_for_mode)}

    def report(self) -> dict[str, Any]:
        return {
            "unit": "seconds",
            "stages": self.timings.stages(),
            "footprint": self.footprint.to_dict(),
            "run": self.run,
            "checks": self.checks(),
        }


RUN = RunRecord()


def strict_run() -> bool:
    return os.environ.get(STRICT_ENV, "1") != "0"


def _docker_reachable() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _kind_clusters() -> list[str]:
    try:
        result = subprocess.run(["kind", "get", "clusters"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return result.stdout.split()


def selected_stack() -> E2EStack:
    return select_stack(os.environ.get(STACK_ENV))


def _skip_reason(config: pytest.Config) -> str | None:
    if not opted_in(config.getoption("-m") or "", os.environ.get("GPU_TENANCY_E2E")):
        return "e2e tests are opt-in: run `make e2e`, `pytest -m e2e` or set GPU_TENANCY_E2E=1"
    try:
        selected_stack()
    except ValueError as error:
        return str(error)
    missing = missing_prerequisites(shutil.which, _docker_reachable)
    if missing:
        return "e2e prerequisites missing: " + ", ".join(missing)
    conflicts = conflicting_clusters(_kind_clusters())
    if conflicts:
        return (
            "another gpu-tenancy stack runs on this host (kind clusters: " + ", ".join(conflicts) + "); it shares "
            "the kind network and the MetalLB pool: destroy it (`make destroy` or `kind delete cluster --name ...`) "
            "or run the suite on another host"
        )
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MODE_MARKER}(*modes, reason): an e2e check that runs only against a stack of one of these modes"
    )
    config.addinivalue_line("markers", f"{LAST_MARKER}: the e2e check that runs after all others (it destroys the stack)")
    config.addinivalue_line("markers", f"{FAULT_MARKER}: a fault check; runs after the other checks, before the last")


def _e2e_items(items: list[pytest.Item]) -> list[pytest.Item]:
    integration_dir = Path(__file__).resolve().parent
    return [item for item in items if integration_dir in Path(str(item.path)).resolve().parents]


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Before `-m`/`-k` select (pytest's mark plugin): every check here is an e2e check and the teardown check
    goes last; after: skip, refuse or leave out what this run cannot or need not run."""
    e2e_items = _e2e_items(items)
    for item in e2e_items:
        item.add_marker(pytest.mark.e2e)
    last = [item for item in e2e_items if item.get_closest_marker(LAST_MARKER)]
    faults = [item for item in e2e_items if item.get_closest_marker(FAULT_MARKER) and item not in last]
    items[:] = [item for item in items if item not in last and item not in faults] + faults + last
    yield
    _select_for_this_run(config, items)


def _select_for_this_run(config: pytest.Config, items: list[pytest.Item]) -> None:
    e2e_items = _e2e_items(items)
    if not e2e_items:
        return
    started = time.monotonic()
    reason = _skip_reason(config)
    RUN.opted_in = not (reason or "").startswith("e2e tests are opt-in")
    RUN.strict = strict_run()
    if reason is None:
        RUN.timings.record(PREREQUISITES_STAGE, time.monotonic() - started)
        stack = selected_stack()
        other_mode = []
        for item in e2e_items:
            marker = item.get_closest_marker(MODE_MARKER)
            if marker and mode_skip_reason(marker.args, stack, marker.kwargs.get("reason", "")):
                other_mode.append(item)
        if other_mode:  # not a skip: these checks are not part of this stack's suite
            RUN.not_for_mode = [f"{item.nodeid} (mode {' or '.join(item.get_closest_marker(MODE_MARKER).args)})"
                                for item in other_mode]  # type: ignore[union-attr]
            config.hook.pytest_deselected(items=other_mode)
            items[:] = [item for item in items if item not in other_mode]
        return
    if RUN.opted_in and RUN.strict:
        raise pytest.UsageError(
            f"the e2e suite cannot run: {reason} (a live run is strict; {STRICT_ENV}=0, or make e2e E2E_STRICT=0, "
            "lets it skip instead)"
        )
    for item in e2e_items:
        item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each check's outcome, for the summary of what ran."""
    if not RUN.opted_in:
        return
    if report.skipped:
        RUN.outcomes[report.nodeid] = "skipped"
        longrepr = report.longrepr
        reason = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        RUN.skip_reasons[report.nodeid] = reason.removeprefix("Skipped: ")
    elif report.failed:
        RUN.outcomes[report.nodeid] = "failed" if report.when == "call" else "errors"
    elif report.when == "call":
        RUN.outcomes.setdefault(report.nodeid, "passed")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not RUN.opted_in or not RUN.outcomes:
        return
    skipped = [nodeid for nodeid, outcome in RUN.outcomes.items() if outcome == "skipped"]
    if RUN.strict and skipped:
        SUMMARY.append(f"FAILED: {len(skipped)} check(s) skipped and a live run is strict ({STRICT_ENV}=0 allows it)")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    report = RUN.report()
    REPORTS_DIR.mkdir(parents=True, exist_ok=True)
    for directory in {REPORTS_DIR, *([RUN.run_dir] if RUN.run_dir else [])}:
        (directory / "timings.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        (directory / "summary.md").write_text(render_markdown(report) + _outcomes_markdown(), encoding="utf-8")


def _outcomes_markdown() -> str:
    lines = ["", "| check | outcome |", "|---|---|"]
    for nodeid, outcome in RUN.outcomes.items():
        reason = f": {RUN.skip_reasons[nodeid]}" if nodeid in RUN.skip_reasons else ""
        lines.append(f"| `{nodeid.rsplit('/', 1)[-1]}` | {outcome}{reason} |")
    lines += [f"| `{entry.rsplit('/', 1)[-1]}` | not for this stack's mode |" for entry in RUN.not_for_mode]
    return "\n".join(lines) + "\n"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not RUN.opted_in or not RUN.outcomes:
        return
    terminalreporter.section("e2e: what ran")
    for nodeid, outcome in RUN.outcomes.items():
        reason = f" ({RUN.skip_reasons[nodeid]})" if nodeid in RUN.skip_reasons else ""
        terminalreporter.write_line(f"{outcome.upper():8} {nodeid}{reason}")
    for entry in RUN.not_for_mode:
        terminalreporter.write_line(f"{'NOT RUN':8} {entry}: not for this stack's mode")
    checks = RUN.checks()
    terminalreporter.write_line(
        "checks: " + ", ".join(f"{key} {count}" for key, count in checks.items())
        + f" ({'strict' if RUN.strict else 'not strict'})"
    )
    if RUN.run_dir is None:  # nothing was deployed
        return
    terminalreporter.section("e2e stage timings, footprint and artifacts")
    terminalreporter.write_line(RUN.timings.summary_table())
    lab = RUN.footprint.to_dict()["lab"]
    terminalreporter.write_line(", ".join(f"{key.replace('_', ' ')}: {_gib(value)}" for key, value in lab.items()))
    for line in SUMMARY:
        terminalreporter.write_line(line)


def _gib(value: int | None) -> str:
    return "unknown" if value is None else f"{value / (1 << 30):.2f} GiB"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        FAILED_TESTS.append(item.nodeid)
    return report


class TimeoutApiClient:
    """Factory for kubernetes ApiClients whose calls default to API_TIMEOUT instead of waiting forever."""

    @staticmethod
    def from_kubeconfig(kubeconfig_yaml: str, *, verify_ssl: bool = True) -> Any:
        from kubernetes import client, config

        class _Client(client.ApiClient):  # type: ignore[misc]
            def call_api(self, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
                return super().call_api(*args, _request_timeout=_request_timeout or API_TIMEOUT, **kwargs)

        loaded = yaml.safe_load(kubeconfig_yaml)
        if not (isinstance(loaded, dict) and loaded.get("clusters")):  # never `assert`: pytest would print it
            raise AssertionError("stack output is not a kubeconfig")
        configuration = client.Configuration()
        config.load_kube_config_from_dict(loaded, client_configuration=configuration, persist_config=False)
        configuration.verify_ssl = verify_ssl and configuration.verify_ssl
        return _Client(configuration)


class DeployedLab:
    """A deployed throwaway stack plus the timings and log files it produced."""

    def __init__(
        self,
        stack: Any,
        outputs: dict[str, Any],
        timings: StageTimings,
        run_dir: Path,
        mode: str = "sim",
        config: dict[str, Any] | None = None,
    ) -> None:
        self.stack = stack
        self.outputs = outputs
        self.timings = timings
        self.run_dir = run_dir
        self.mode = mode  # gpu-tenancy:mode of the deployed stack
        self.config = config or {}  # its stack config (gpu-tenancy:* keys)
        self.log_path = run_dir / "pulumi.log"
        self.destroyed = False
        self.diagnose: Callable[[], None] = lambda: None  # set by the fixture: diagnostics if a check failed
        self.diagnosed = False

    def before_destroying(self) -> None:
        """Called before anything of the lab is destroyed (destroy, and the fault checks that destroy parts of
        it): the diagnostics of the checks failed so far, once, while there is still a lab to read them from."""
        if not self.diagnosed and FAILED_TESTS:
            self.diagnosed = True
            self.diagnose()

    def output(self, name: str) -> Any:
        # Raised, not asserted: pytest's assertion rewriting would print the outputs (kubeconfigs) into the log.
        if name not in self.outputs:
            raise AssertionError(f"stack output {name!r} missing; got {sorted(self.outputs)}")
        return self.outputs[name]

    def api_client(self, kubeconfig_yaml: str, *, verify_ssl: bool = True) -> Any:
        return TimeoutApiClient.from_kubeconfig(kubeconfig_yaml, verify_ssl=verify_ssl)

    def tenant_kubeconfig(self, tenant: str) -> str:
        kubeconfigs = self.output("tenantKubeconfigs")
        if tenant not in kubeconfigs:
            raise AssertionError(f"stack output 'tenantKubeconfigs' has no {tenant!r}; got {sorted(kubeconfigs)}")
        kubeconfig: str = kubeconfigs[tenant]
        return kubeconfig

    def tenant_client(self, tenant: str, *, verify_ssl: bool = True) -> Any:
        return self.api_client(self.tenant_kubeconfig(tenant), verify_ssl=verify_ssl)

    def management_client(self) -> Any:
        return self.api_client(self.output("managementKubeconfig"))

    def pulumi_log(self, line: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(line.rstrip("\n") + "\n")

    def destroy(self) -> bool:
        """Destroy and remove the stack once; True when it is gone. Failures are logged, not raised."""
        if self.destroyed:
            return True
        self.before_destroying()
        started = time.monotonic()
        for attempt in (1, 2):
            self.pulumi_log(f"== pulumi destroy (attempt {attempt})")
            try:
                self.stack.destroy(on_output=self.pulumi_log, remove=True, color="never")
            except Exception as error:
                self.pulumi_log(f"== destroy attempt {attempt} failed: {error}")
                continue
            self.destroyed = True
            break
        self.timings.record(DESTROY_STAGE, time.monotonic() - started)
        return self.destroyed


def e2e_stack_config(dev_stack_file: Path = DEV_STACK_FILE, mode: str = "sim") -> dict[str, Any]:
    """An example stack's config for the throwaway stack: ``mode`` (sim, or sim-nvml for dev-nvml), the same
    tenants and GPUs.

    Declared workloads keep their Deployments but with 0 replicas: the checks below size their pods
    against empty GPUs (ten pods fill the A100's ten slots), so nothing else may hold a slot.
    """
    config: dict[str, Any] = dict(yaml.safe_load(dev_stack_file.read_text())["config"])
    secure = [key for key, value in config.items() if isinstance(value, dict) and "secure" in value]
    assert not secure, f"{dev_stack_file.name} holds secrets the e2e stack cannot decrypt: {secure}"
    config["gpu-tenancy:mode"] = mode
    # Its own kind cluster, named after the throwaway stack, never the dev stack's.
    kind = {k: v for k, v in (config.get("gpu-tenancy:kind") or {}).items() if k != "clusterName"}
    config.pop("gpu-tenancy:kind", None)
    if kind:
        config["gpu-tenancy:kind"] = kind
    tenants = []
    for tenant in config.get("gpu-tenancy:tenants", []):
        workloads = [{**workload, "replicas": 0} for workload in tenant.get("workloads", [])]
        tenants.append({**tenant, **({"workloads": workloads} if workloads else {})})
    config["gpu-tenancy:tenants"] = tenants
    return config


def _plain_outputs(raw: Mapping[str, Any]) -> dict[str, Any]:
    # The Automation API reads outputs with --show-secrets: kubeconfigs arrive as plain strings.
    return {key: value.value for key, value in raw.items()}


def _run(args: list[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=COMMAND_TIMEOUT).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"<{' '.join(args)} failed: {error}>"


def host_leftovers(cluster: str) -> list[str]:
    containers = _run(["docker", "ps", "-a", "--format", "{{.Names}}"]).split()
    networks = _run(["docker", "network", "ls", "--format", "{{.Name}}"]).split()
    left = stack_resources_left(containers, networks, cluster)
    if cluster in _kind_clusters():
        left.append(f"kind cluster {cluster}")
    return left


def fallback_cleanup(lab: DeployedLab, cluster: str) -> None:
    """After a failed destroy: remove what the stack left on the Docker host (the state is kept)."""
    lab.pulumi_log(f"== fallback cleanup of {cluster}")
    lab.pulumi_log(_run(["kind", "delete", "cluster", "--name", cluster]))
    containers = [
        name
        for name in _run(["docker", "ps", "-a", "--format", "{{.Names}}"]).split()
        if name.startswith(f"{cluster}-")
    ]
    if containers:
        lab.pulumi_log(_run(["docker", "rm", "-f", "-v", *containers]))


def kind_kubeconfig(cluster: str) -> str:
    """The kind cluster's kubeconfig as the host reaches it (`kind get kubeconfig`), whatever the stack recorded."""
    return _run(["kind", "get", "kubeconfig", "--name", cluster])


def _docker_disk_used() -> int | None:
    """Bytes in use on the filesystem that holds Docker's data (images, containers, volumes)."""
    root = _run(["docker", "info", "--format", "{{.DockerRootDir}}"]).strip()
    try:
        return shutil.disk_usage(root).used if root.startswith("/") else None
    except OSError:
        return None


def _host_memory_used() -> int | None:
    try:
        return memory_in_use(Path("/proc/meminfo").read_text())
    except (OSError, KeyError, ValueError):
        return None


def sample_footprint(footprint: Footprint, label: str) -> None:
    footprint.sample(label, _docker_disk_used(), _host_memory_used())


def run_description(example: E2EStack, stack_name: str) -> dict[str, Any]:
    """Where and when this ran: the GitHub runner image (ImageOS/ImageVersion, set by actions/runner-images
    images/ubuntu/scripts/build/configure-environment.sh) or this host; CPUs and memory as the suite saw them."""
    image = os.environ.get("ImageOS")  # noqa: SIM112 (the runner image names it so)
    hosted = os.environ.get("RUNNER_ENVIRONMENT") == "github-hosted"
    runner = (
        f"{'GitHub-hosted' if hosted else 'runner'} {image} image {os.environ.get('ImageVersion', '?')}"  # noqa: SIM112
        if image
        else "a local host"
    )
    try:
        total = next(
            int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
    except (OSError, StopIteration, ValueError):
        total = None
    return {
        "example": example.name,
        "mode": example.mode,
        "stack": stack_name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "runner": runner,
        "cpus": os.cpu_count(),
        "memory_bytes": total,
        "commit": os.environ.get("GITHUB_SHA") or _run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"]).strip(),
    }


def _diagnose(lab: DeployedLab, tenants: list[str]) -> None:
    failed = ", ".join(nodeid.rsplit("::", 1)[-1] for nodeid in FAILED_TESTS[:5])
    collect(lab.run_dir, f"after {len(FAILED_TESTS)} failed check(s) ({failed})", lab.management_client,
            {tenant: (lambda tenant=tenant: lab.tenant_client(tenant)) for tenant in tenants})


@pytest.fixture(scope="session")
def lab() -> Iterator[DeployedLab]:
    from pulumi import automation as auto

    example = selected_stack()
    stack_name = f"{example.prefix}-{secrets.token_hex(3)}"
    run_dir = REPORTS_DIR / stack_name
    run_dir.mkdir(parents=True, exist_ok=True)
    RUN.run_dir, RUN.run = run_dir, run_description(example, stack_name)
    state_dir = Path(tempfile.mkdtemp(prefix="gpu-tenancy-e2e-state-"))
    print(f"\ne2e state backend: {state_dir}")
    env = {
        "PULUMI_BACKEND_URL": f"file://{state_dir}",
        "PULUMI_CONFIG_PASSPHRASE": base64.b16encode(secrets.token_bytes(16)).decode(),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }
    config = e2e_stack_config(REPO_ROOT / example.stack_file, example.mode)
    tenant_names = [tenant["name"] for tenant in config.get("gpu-tenancy:tenants", [])]
    cluster = f"gpu-tenancy-{stack_name}"  # StackConfig.cluster_name without kind.clusterName
    timings = RUN.timings
    progress = UpProgress(tenant_names)
    lab = DeployedLab(None, {}, timings, run_dir, mode=example.mode, config=config)
    lab.diagnose = lambda: _diagnose(lab, tenant_names)
    print(f"\ne2e stack {stack_name} (a copy of {example.stack_file}, mode {example.mode}): logs in {run_dir}")
    sample_footprint(RUN.footprint, "before")
    try:
        # What `make up` does before Pulumi: the stack's charts into the project's chart cache (`make charts`).
        pulled, problems = pull_charts(REPO_ROOT, stack_charts(load_stack_file(REPO_ROOT / example.stack_file)),
                                       stack=example.name)
        lab.pulumi_log("\n".join(["== make charts", *pulled, *problems]))
        assert not problems, "\n".join(problems)
        lab.stack = auto.create_or_select_stack(
            stack_name,
            work_dir=str(REPO_ROOT),
            opts=auto.LocalWorkspaceOptions(
                env_vars=env, stack_settings={stack_name: auto.StackSettings(config=config)}
            ),
        )
        lab.pulumi_log(f"== pulumi preview, then up {stack_name} (policy pack {POLICY_PACK_DIR})")
        result = preview_then_up(lab.stack, [str(POLICY_PACK_DIR)], on_output=lab.pulumi_log, on_event=progress)
        timings.record(DEPLOY_STAGE, time.monotonic() - progress.started)
        progress.record_into(timings)
        sample_footprint(RUN.footprint, "after up")
        RUN.footprint.containers = container_memory(
            _run(["docker", "stats", "--no-stream", "--format", CONTAINER_STATS_FORMAT]), cluster
        )
        lab.outputs = _plain_outputs(result.outputs)
        yield lab
    finally:
        progress.record_into(timings)
        if FAILED_TESTS or not lab.outputs:  # a check failed, or the deploy did
            (run_dir / "docker-ps.txt").write_text(_run(["docker", "ps", "-a"]), encoding="utf-8")
        if not lab.outputs and lab.stack is not None:  # the deploy failed: what it made, from the host
            collect(run_dir, "after the deploy failed", lambda: lab.api_client(kind_kubeconfig(cluster)),
                    connect_tenant=lab.api_client)
            lab.diagnosed = True
        gone = lab.stack is None or lab.destroy()
        left = host_leftovers(cluster)
        if left:
            fallback_cleanup(lab, cluster)
        sample_footprint(RUN.footprint, "after destroy")
        if gone:
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            # Next to the state it decrypts, outside the repository: reports/e2e is uploaded by CI.
            passphrase = state_dir / "passphrase"
            passphrase.touch(mode=0o600)
            passphrase.write_text(env["PULUMI_CONFIG_PASSPHRASE"], encoding="utf-8")
            SUMMARY.append(
                f"DESTROY FAILED for {stack_name}; state kept in {state_dir} (passphrase in {passphrase}).\n"
                f"Retry: PULUMI_CONFIG_PASSPHRASE=$(cat {passphrase}) "
                f"PULUMI_BACKEND_URL=file://{state_dir} pulumi destroy --stack {stack_name}"
            )
        if left:
            SUMMARY.append(f"left on the Docker host before the fallback cleanup: {left}")
        SUMMARY.append(f"timings: {run_dir / 'timings.json'}; Pulumi log and diagnostics: {run_dir}")
        print("\n" + "\n".join(SUMMARY))
        if gone:
            (REPO_ROOT / f"Pulumi.{stack_name}.yaml").unlink(missing_ok=True)
        else:
            SUMMARY.append(f"kept Pulumi.{stack_name}.yaml in {REPO_ROOT} for the retry; delete it afterwards")
