"""MetalLB's pool and advertisement wait until its admission webhook serves (issue 12, defect 5).

The chart's controller is Ready before its webhooks are registered (see gpu_tenancy/builders/metallb/admission_gate.py),
so the program gates both objects on a dry-run of exactly those objects being admitted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness import TEST_SECRETS, dev_config, gpu_config, is_secret, nodeport_gpu_config, registered_gpus, unwrap
from policy_support import Recorded, record_engine_view

from components import metallb
from gpu_tenancy.builders.metallb import admission_gate, metallb_objects

GATE = "command:local:Command"
POOL = "kubernetes:metallb.io/v1beta1:IPAddressPool"
L2 = "kubernetes:metallb.io/v1beta1:L2Advertisement"
RELEASE = "kubernetes:helm.sh/v3:Release"
KUBECONFIG = "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: gate-secret}}]\n"


def stack_view(name: str) -> list[Recorded]:
    if name == "dev":
        return record_engine_view(dev_config())
    config = gpu_config()
    return record_engine_view(config, stack="gpu", node_register=registered_gpus(config))


def one(resources: list[Recorded], typ: str, name: str) -> Recorded:
    found = [r for r in resources if r.type == typ and r.name == name]
    assert len(found) == 1, f"expected one {typ} named {name!r}, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_pool_and_advertisement_wait_for_the_webhook_gate(stack: str) -> None:
    resources = stack_view(stack)
    gate = one(resources, GATE, "metallb-webhook-ready")
    release = one(resources, RELEASE, "metallb-chart")
    assert release.urn in gate.dependencies, "the gate runs once the chart is installed"
    created = []
    for typ, name in ((POOL, "metallb-pool"), (L2, "metallb-l2")):
        resource = one(resources, typ, name)
        assert gate.urn in resource.dependencies, f"{name} is created before MetalLB's webhook serves"
        created.append({k: unwrap(resource.inputs[k]) for k in ("apiVersion", "kind", "metadata", "spec")})
    # The gate dry-runs the very objects the program creates.
    manifest = gate.inputs["environment"][admission_gate.MANIFEST_ENV]
    assert list(yaml.safe_load_all(manifest)) == created
    assert gate.inputs["create"] == admission_gate.wait_until_admitted_script(metallb.CONTROLLER, metallb.NAMESPACE)
    # The management kubeconfig reaches kubectl on stdin, as a secret, and never on the command line.
    assert is_secret(gate.inputs["stdin"])
    kubeconfig = unwrap(gate.inputs["stdin"])
    if stack == "gpu":
        assert kubeconfig == TEST_SECRETS["managementKubeconfig"]
    assert kubeconfig not in gate.inputs["create"] and kubeconfig not in manifest


def test_no_gate_without_metallb() -> None:
    config = nodeport_gpu_config()
    resources = record_engine_view(config, stack="gpu", node_register=registered_gpus(config))
    assert not [r for r in resources if r.name == "metallb-webhook-ready"]


# --------------------------------------------------------------------------- the gate script


def script(timeout_seconds: int = 30, interval_seconds: int = 0) -> str:
    return admission_gate.wait_until_admitted_script(
        metallb.CONTROLLER, metallb.NAMESPACE, timeout_seconds=timeout_seconds, interval_seconds=interval_seconds
    )


# Messages as the API server and kubectl print them. Not serving: the apiserver wraps the failed call
# (k8s.io/apiserver pkg/util/webhook/error.go `ErrCallingWebhook.Error`) in an InternalError, which
# kubectl prints as "Error from server (InternalError): ..." (k8s.io/kubectl pkg/cmd/util/helpers.go
# `StandardErrorMessage`). Refused: `ToStatusErr` in k8s.io/apiserver
# pkg/admission/plugin/webhook/errors/statuserror.go.
NOT_SERVING = (
    'Error from server (InternalError): Internal error occurred: failed calling webhook '
    '"ipaddresspoolvalidationwebhook.metallb.io": failed to call webhook: Post '
    '"https://metallb-webhook-service.metallb-system.svc:443/validate-metallb-io-v1beta1-ipaddresspool'
    '?timeout=10s": dial tcp 10.96.112.7:443: connect: connection refused'
)
DENIED = (
    'Error from server (Forbidden): admission webhook "ipaddresspoolvalidationwebhook.metallb.io" denied '
    'the request: CIDR "172.18.255.245/32" in pool "kind-ipv4" overlaps with already defined CIDR'
)
ADMITTED = "ipaddresspool.metallb.io/kind-ipv4 serverside-applied (server dry run)\n"

FAKE_KUBECTL = textwrap.dedent(
    '''\
    #!{python}
    """Stand-in for `kubectl apply --server-side --dry-run=server` against an API server whose MetalLB
    webhook answers from a script: each call takes the next "exit-code|output" line of $FAKE_RESPONSES
    (the last one repeats) and records its argv, the kubeconfig file's content and stdin.
    Follows kubectl's contract only: exit 1 with the server's error on stderr, exit 0 on success."""
    import json, os, sys
    state = os.environ["FAKE_STATE"]
    calls = json.load(open(state)) if os.path.exists(state) else []
    kubeconfig = sys.argv[sys.argv.index("--kubeconfig") + 1]
    calls.append({{"argv": sys.argv[1:], "kubeconfig_path": kubeconfig,
                  "kubeconfig": open(kubeconfig).read(), "stdin": sys.stdin.read()}})
    json.dump(calls, open(state, "w"))
    responses = os.environ["FAKE_RESPONSES"].split("\\n")
    code, _, output = responses[min(len(calls), len(responses)) - 1].partition("|")
    (sys.stdout if code == "0" else sys.stderr).write(output)
    sys.exit(int(code))
    '''
)


def run_gate(tmp_path: Path, responses: list[str], text: str | None = None) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL.format(python=sys.executable))
    kubectl.chmod(0o755)
    state = tmp_path / "calls.json"
    manifest = metallb_objects.metallb_manifest([
        metallb_objects.metallb_ip_address_pool(metallb.NAMESPACE, "kind-ipv4", ["172.18.255.245-172.18.255.254"]),
        metallb_objects.metallb_l2_advertisement(metallb.NAMESPACE, "kind-ipv4"),
    ])
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
        admission_gate.MANIFEST_ENV: manifest,
        "FAKE_STATE": str(state),
        "FAKE_RESPONSES": "\n".join(responses),
    }
    result = subprocess.run(["/bin/sh", "-c", text or script()], input=KUBECONFIG, env=env,
                            capture_output=True, text=True, timeout=60)
    calls = json.loads(state.read_text()) if state.exists() else []
    for call in calls:
        assert call["stdin"].rstrip("\n") == manifest.rstrip("\n")
    return result, calls


def test_gate_retries_until_the_webhook_admits(tmp_path: Path) -> None:
    result, calls = run_gate(tmp_path, [f"1|{NOT_SERVING}", f"1|{NOT_SERVING}", f"0|{ADMITTED}"])
    assert result.returncode == 0, result.stderr
    assert len(calls) == 3
    for call in calls:
        argv = call["argv"]
        assert argv[argv.index("--kubeconfig") + 2:] == [
            "apply", "--server-side", "--force-conflicts", "--dry-run=server",
            f"--field-manager={admission_gate.FIELD_MANAGER}", "-f", "-",
        ]
        assert call["kubeconfig"] == KUBECONFIG and KUBECONFIG not in " ".join(argv)
        assert not Path(call["kubeconfig_path"]).exists(), "the kubeconfig copy outlives the gate"


def test_gate_fails_at_once_when_the_webhook_refuses(tmp_path: Path) -> None:
    result, calls = run_gate(tmp_path, [f"1|{DENIED}", f"0|{ADMITTED}"])
    assert result.returncode == 1 and len(calls) == 1
    assert "metallb-system/metallb-controller rejected the objects" in result.stderr
    assert "overlaps with already defined CIDR" in result.stderr


def test_gate_gives_up_naming_metallb_controller(tmp_path: Path) -> None:
    started = time.monotonic()
    result, calls = run_gate(tmp_path, [f"1|{NOT_SERVING}"], script(timeout_seconds=2, interval_seconds=1))
    assert result.returncode == 1 and len(calls) >= 2
    assert time.monotonic() - started < 30
    assert "admission webhook of metallb-system/metallb-controller did not serve within 2s" in result.stderr
    assert "kubectl -n metallb-system logs deploy/metallb-controller" in result.stderr
    assert "connection refused" in result.stderr, "the last error is shown"
    assert KUBECONFIG not in result.stderr + result.stdout


@pytest.mark.parametrize("bad", [{"deployment": "Metal LB"}, {"namespace": "a;b"}])
def test_gate_builder_refuses_names_that_are_not_kubernetes_names(bad: dict[str, str]) -> None:
    args = {"deployment": metallb.CONTROLLER, "namespace": metallb.NAMESPACE, **bad}
    with pytest.raises(ValueError, match="not a Kubernetes name"):
        admission_gate.wait_until_admitted_script(**args)


def test_gate_script_passes_shellcheck(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(shellcheck).exists():
        pytest.skip("shellcheck not installed (pip install -r requirements-dev.txt)")
    path = tmp_path / "gate.sh"
    path.write_text("#!/bin/sh\n" + script())
    result = subprocess.run([shellcheck, "--severity=style", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
