"""E2E fixtures: opt-in gate, prerequisite check, and a throwaway stack deployed with the Automation API.

Runs only with ``-m e2e`` or ``GPU_TENANCY_E2E=1``; otherwise every test here is skipped, so the
normal ``pytest tests`` run stays offline. When opted in but prerequisites are missing, tests are
skipped with a reason naming exactly what is missing; with ``GPU_TENANCY_E2E_STRICT=1`` (the CI job)
that is an error instead, so a misconfigured runner can never pass by skipping.

``GPU_TENANCY_E2E_STACK`` chooses the example stack (support.E2E_STACKS): ``dev`` (default, ``make e2e``)
deploys the dev stack's tenants in mode ``sim`` as ``e2e-<random>``; ``dev-nvml`` (``make e2e-nvml``) the
dev-nvml stack's in mode ``sim-nvml`` as ``e2e-nvml-<random>``. Checks marked ``e2e_mode(...)`` run only
against a stack of one of those modes and skip, naming it, otherwise. The teardown check (``e2e_last``)
runs after every other check, whatever file it is in.

The stack lives in a temporary file backend with a random passphrase, is deployed with the policy
pack in ``policies/`` (a preview gates the ``up``, as the CLI's ``pulumi up`` does), and is always
destroyed (also when the deploy or a test fails). Everything it logs goes to ``reports/e2e/<stack>/``.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.support import (
    DEVICE_PLUGIN_SELECTOR,
    MOCK_GPU_AGENT_SELECTOR,
    NVML_MOCK_COMPONENT_SELECTOR,
    STACK_ENV,
    E2EStack,
    StageTimings,
    UpProgress,
    conflicting_clusters,
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
            "the kind network and the MetalLB pool: destroy it (`make destroy` or `kind delete cluster --name ...`); "
            "in CI the e2e job runs on the gpu-tenancy-e2e runner, never the gpu-tenancy-dev one"
        )
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MODE_MARKER}(*modes, reason): an e2e check that runs only against a stack of one of these modes"
    )
    config.addinivalue_line("markers", f"{LAST_MARKER}: the e2e check that runs after all others (it destroys the stack)")
    config.addinivalue_line("markers", f"{FAULT_MARKER}: a fault check; runs after the other checks, before the last")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    integration_dir = Path(__file__).resolve().parent
    e2e_items = [item for item in items if integration_dir in Path(str(item.path)).resolve().parents]
    for item in e2e_items:
        item.add_marker(pytest.mark.e2e)
    if not e2e_items:
        return
    last = [item for item in e2e_items if item.get_closest_marker(LAST_MARKER)]
    faults = [item for item in e2e_items if item.get_closest_marker(FAULT_MARKER) and item not in last]
    items[:] = [item for item in items if item not in last and item not in faults] + faults + last
    reason = _skip_reason(config)
    if reason is None:
        stack = selected_stack()
        for item in e2e_items:
            marker = item.get_closest_marker(MODE_MARKER)
            why = marker and mode_skip_reason(marker.args, stack, marker.kwargs.get("reason", ""))
            if why:
                item.add_marker(pytest.mark.skip(reason=why))
        return
    if os.environ.get(STRICT_ENV) == "1" and not reason.startswith("e2e tests are opt-in"):
        raise pytest.UsageError(f"{STRICT_ENV}=1 and the e2e suite cannot run: {reason}")
    for item in e2e_items:
        item.add_marker(pytest.mark.skip(reason=reason))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if SUMMARY:
        terminalreporter.section("e2e stage timings and artifacts")
        for line in SUMMARY:
            terminalreporter.write_line(line)


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
        assert isinstance(loaded, dict) and loaded.get("clusters"), "stack output is not a kubeconfig"
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

    def output(self, name: str) -> Any:
        assert name in self.outputs, f"stack output {name!r} missing; got {sorted(self.outputs)}"
        return self.outputs[name]

    def api_client(self, kubeconfig_yaml: str, *, verify_ssl: bool = True) -> Any:
        return TimeoutApiClient.from_kubeconfig(kubeconfig_yaml, verify_ssl=verify_ssl)

    def tenant_kubeconfig(self, tenant: str) -> str:
        kubeconfigs = self.output("tenantKubeconfigs")
        assert tenant in kubeconfigs, f"stack output 'tenantKubeconfigs' has no {tenant!r}; got {sorted(kubeconfigs)}"
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
        self.timings.record("destroy", time.monotonic() - started)
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


def collect_diagnostics(lab: DeployedLab, tenants: list[str]) -> None:
    """Best effort: what a user needs to act on a failure, written next to the Pulumi log."""
    from kubernetes import client

    def dump(name: str, produce: Any) -> None:
        try:
            text = produce()
        except Exception as error:
            text = f"<could not collect: {error!r}>"
        (lab.run_dir / name).write_text(str(text), encoding="utf-8")

    for tenant in tenants:
        try:
            core = client.CoreV1Api(lab.tenant_client(tenant))
        except Exception as error:
            (lab.run_dir / f"{tenant}-unreachable.txt").write_text(repr(error), encoding="utf-8")
            continue

        def nodes(core: Any = core) -> str:
            lines = []
            for node in core.list_node().items:
                hami_annotations = {k: v for k, v in (node.metadata.annotations or {}).items() if "hami.io" in k}
                gpu = {k: v for k, v in (node.status.allocatable or {}).items() if k.startswith("nvidia.com")}
                lines.append(f"{node.metadata.name} allocatable={gpu} annotations={hami_annotations}")
            return "\n".join(lines)

        def pods(core: Any = core) -> str:
            lines = []
            for pod in core.list_pod_for_all_namespaces().items:
                hami_annotations = {k: v for k, v in (pod.metadata.annotations or {}).items() if "hami.io" in k}
                lines.append(
                    f"{pod.metadata.namespace}/{pod.metadata.name} phase={pod.status.phase} "
                    f"node={pod.spec.node_name} scheduler={pod.spec.scheduler_name} {hami_annotations}"
                )
            return "\n".join(lines)

        def events(core: Any = core) -> str:
            items = core.list_event_for_all_namespaces().items
            return "\n".join(
                f"{e.last_timestamp} {e.involved_object.namespace}/{e.involved_object.name} {e.reason}: {e.message}"
                for e in items[-300:]
            )

        def logs(core: Any = core) -> str:
            chunks = []
            selectors = (
                MOCK_GPU_AGENT_SELECTOR,
                "app.kubernetes.io/component=hami-scheduler",
                DEVICE_PLUGIN_SELECTOR,
                NVML_MOCK_COMPONENT_SELECTOR,
            )
            for selector in selectors:
                for pod in core.list_pod_for_all_namespaces(label_selector=selector).items:
                    for container in pod.spec.containers:
                        try:  # one container that never started must not hide the others' logs
                            text = core.read_namespaced_pod_log(
                                pod.metadata.name, pod.metadata.namespace, container=container.name, tail_lines=300
                            )
                        except Exception as error:
                            text = f"<no log: {error!r}>"
                        chunks.append(f"==== {pod.metadata.name}/{container.name}\n{text}")
            return "\n".join(chunks)

        dump(f"{tenant}-nodes.txt", nodes)
        dump(f"{tenant}-pods.txt", pods)
        dump(f"{tenant}-events.txt", events)
        dump(f"{tenant}-logs.txt", logs)

    def management() -> str:
        custom = client.CustomObjectsApi(lab.management_client())
        tcps = custom.list_cluster_custom_object("kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes")["items"]
        return yaml.safe_dump([{"name": t["metadata"]["name"], "status": t.get("status")} for t in tcps])

    dump("management-tenantcontrolplanes.yaml", management)


@pytest.fixture(scope="session")
def lab() -> Iterator[DeployedLab]:
    from pulumi import automation as auto

    example = selected_stack()
    stack_name = f"{example.prefix}-{secrets.token_hex(3)}"
    run_dir = REPORTS_DIR / stack_name
    run_dir.mkdir(parents=True, exist_ok=True)
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
    timings = StageTimings()
    progress = UpProgress(tenant_names)
    lab = DeployedLab(None, {}, timings, run_dir, mode=example.mode, config=config)
    print(f"\ne2e stack {stack_name} (a copy of {example.stack_file}, mode {example.mode}): logs in {run_dir}")
    try:
        lab.stack = auto.create_or_select_stack(
            stack_name,
            work_dir=str(REPO_ROOT),
            opts=auto.LocalWorkspaceOptions(
                env_vars=env, stack_settings={stack_name: auto.StackSettings(config=config)}
            ),
        )
        lab.pulumi_log(f"== pulumi preview, then up {stack_name} (policy pack {POLICY_PACK_DIR})")
        result = preview_then_up(lab.stack, [str(POLICY_PACK_DIR)], on_output=lab.pulumi_log, on_event=progress)
        timings.record("pulumi preview + up", time.monotonic() - progress.started)
        progress.record_into(timings)
        lab.outputs = _plain_outputs(result.outputs)
        yield lab
    finally:
        progress.record_into(timings)
        if FAILED_TESTS and lab.outputs:
            collect_diagnostics(lab, tenant_names)
        gone = lab.stack is None or lab.destroy()
        left = host_leftovers(cluster)
        if left:
            fallback_cleanup(lab, cluster)
        if gone:
            shutil.rmtree(state_dir, ignore_errors=True)
        else:
            (run_dir / "passphrase").write_text(env["PULUMI_CONFIG_PASSPHRASE"], encoding="utf-8")
            os.chmod(run_dir / "passphrase", 0o600)
            SUMMARY.append(
                f"DESTROY FAILED for {stack_name}; state kept in {state_dir} (passphrase in {run_dir / 'passphrase'}).\n"
                f"Retry: PULUMI_CONFIG_PASSPHRASE=$(cat {run_dir / 'passphrase'}) "
                f"PULUMI_BACKEND_URL=file://{state_dir} pulumi destroy --stack {stack_name}"
            )
        if left:
            SUMMARY.append(f"left on the Docker host before the fallback cleanup: {left}")
        report = timings.to_json()
        (run_dir / "timings.json").write_text(report)
        (REPORTS_DIR / "timings.json").write_text(report)
        SUMMARY.append(timings.summary_table())
        SUMMARY.append(f"timings: {run_dir / 'timings.json'}; Pulumi log and diagnostics: {run_dir}")
        print("\n" + "\n".join(SUMMARY))
        if gone:
            (REPO_ROOT / f"Pulumi.{stack_name}.yaml").unlink(missing_ok=True)
        else:
            SUMMARY.append(f"kept Pulumi.{stack_name}.yaml in {REPO_ROOT} for the retry; delete it afterwards")
