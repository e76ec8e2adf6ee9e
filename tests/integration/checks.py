"""What four live checks decide, as pure functions of what they read from the lab, so that each is shown to fail
offline against a lab broken on purpose (tests/test_e2e_checks.py). Each returns the problems it finds; the check
asserts there are none.

- test_07 (fractional sharing): every pod's device is the card tenant-a's node registers, all on that node and
  Running at once, with HAMi's recorded share. A check that the pods got one UUID cannot fail with one card.
- test_10 (isolation): the viewer's API shows its own worker and pods on it (so the listing works) and nothing of
  the other tenant's; the other API servers refuse its credentials as unauthenticated (401). A 403 means the
  server authenticated them: its client CA trusts the viewer's certificate. kube-apiserver answers a certificate
  it cannot verify with 401, not as anonymous (k8s.io/apiserver pkg/authentication/request/x509/x509.go returns
  an error when Verify fails; the anonymous fallback is union.NewFailOnError, so an error is never anonymous).
- test_09b (a dynamically linked GPU container): where HAMi's device plugin allocates, the run shows whether
  HAMi-core (libvgpu.so) was mapped into the process, and the mode says whether it must be.
- F6 (an interrupted up): the interrupt must cut the step off, not arrive after it finished
  (tests/integration/faults.py step_finished).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

# test_09b's container prints this line: whether HAMi-core is mapped into the Python process.
LIBVGPU_LINE = "libvgpu mapped: "
DYNAMIC_OK = "dynamically linked ok"
DYNAMIC_COMMAND = [
    "python3", "-c",
    "import ctypes, ssl; "
    f"print({LIBVGPU_LINE!r} + str('libvgpu' in open('/proc/self/maps').read())); print({DYNAMIC_OK!r})",
]
# Whether HAMi-core must be in the process, per mode: sim-nvml's admission policy sets CUDA_DISABLE_CONTROL
# so that Allocate does not preload it (the mock has no libcuda); on a real host it is preloaded.
LIBVGPU_EXPECTED = {"sim-nvml": False, "real": True}


def shared_card_problems(
    devices: Mapping[str, list[list[dict[str, Any]]]],
    nodes: Mapping[str, str | None],
    phases: Mapping[str, str],
    registered: Iterable[Mapping[str, Any]],
    node: str,
    memory: int,
    cores: int,
) -> list[str]:
    """`devices`: each pod's hami.io/vgpu-devices-allocated (per container); `nodes`/`phases`: each pod's node and
    phase read in one pass; `registered`: the node's hami.io/node-nvidia-register devices."""
    problems = []
    cards = {str(device.get("id")) for device in registered}
    if len(cards) != 1:
        problems.append(f"{node} registers {sorted(cards)}, the check expects one card shared")
    used = set()
    for pod, containers in devices.items():
        flat = [device for container in containers for device in container]
        if len(flat) != 1:
            problems.append(f"{pod}: {len(flat)} devices allocated, expected one slice of one card")
            continue
        (device,) = flat
        used.add(device["uuid"])
        if device["uuid"] not in cards:
            problems.append(f"{pod}: on {device['uuid']}, not a card {node} registers ({sorted(cards)})")
        if (device.get("usedmem"), device.get("usedcores")) != (memory, cores):
            problems.append(f"{pod}: HAMi recorded {device.get('usedmem')} MiB / {device.get('usedcores')} cores, "
                            f"expected {memory} / {cores}")
    if len(used) > 1:
        problems.append(f"the pods are on {sorted(used)}: not one card shared")
    elsewhere = {pod: where for pod, where in nodes.items() if where != node}
    if elsewhere:
        problems.append(f"pods not on {node}: {elsewhere}")
    waiting = {pod: phase for pod, phase in phases.items() if phase != "Running"}
    if waiting:
        problems.append(f"not all Running at once on the shared card: {waiting}")
    if set(devices) != set(nodes) or set(nodes) != set(phases):
        problems.append(f"pods read inconsistently: {sorted(devices)} / {sorted(nodes)} / {sorted(phases)}")
    return problems


def http_status(call: Callable[[], Any]) -> int | None:
    """The HTTP status a Kubernetes API call got (200 when it succeeded)."""
    from kubernetes.client.rest import ApiException

    try:
        call()
    except ApiException as error:
        return int(error.status)
    return 200


def isolation_problems(
    viewer: str,
    other: str,
    nodes: Iterable[str],
    own_worker: str,
    other_worker: str,
    namespaces: Iterable[str],
    marker: str,
    pods: Iterable[tuple[str, str, str | None]],
    statuses: Mapping[str, int | None],
) -> list[str]:
    """What `viewer`'s credentials see on its own API (`nodes`, `namespaces`, `pods` as namespace, name, node)
    and the HTTP status each other API server (`statuses`, by target) answers them with."""
    problems = []
    nodes, namespaces, pods = set(nodes), set(namespaces), list(pods)
    if other_worker in nodes:
        problems.append(f"{viewer} sees {other}'s node {other_worker}")
    if own_worker not in nodes:
        problems.append(f"{viewer} does not see its own worker {own_worker} (nodes: {sorted(nodes)})")
    leaked = sorted(name for name in (marker, other) if name in namespaces)
    if leaked:
        problems.append(f"{viewer} sees {other}'s namespaces {leaked}")
    foreign = [f"{ns}/{name} on {node}" for ns, name, node in pods if node is not None and node not in nodes]
    if foreign:
        problems.append(f"{viewer} sees pods on nodes it does not have: {foreign}")
    if not any(node == own_worker for _, _, node in pods):
        problems.append(f"{viewer} sees no pod on its own worker {own_worker}: the pod listing shows nothing")
    for target, status in statuses.items():
        if status != 401:
            meaning = ("authenticated them (its client CA trusts the certificate)" if status == 403
                       else "did not refuse them")
            problems.append(f"{viewer}'s credentials got HTTP {status} from the {target} API: it {meaning}; "
                            "expected 401")
    return problems


def dynamic_run_problems(mode: str, phase: str | None, log: str, env: Mapping[str, str]) -> list[str]:
    """test_09b's pod: ended `phase`, printed `log`, was admitted with `env`."""
    if mode not in LIBVGPU_EXPECTED:
        return [f"mode {mode}: no HAMi-core to preload, the check cannot fail here (run it in "
                f"{sorted(LIBVGPU_EXPECTED)})"]
    problems = []
    if phase != "Succeeded" or DYNAMIC_OK not in log:
        problems.append(f"ended {phase} with log {log!r} (exit 127 before main: HAMi's ld.so.preload of "
                        "libvgpu.so without libcuda in the container)")
    mapped = [line.removeprefix(LIBVGPU_LINE).strip() for line in log.splitlines() if line.startswith(LIBVGPU_LINE)]
    expected = LIBVGPU_EXPECTED[mode]
    if mapped != [str(expected)]:
        problems.append(f"libvgpu.so mapped: {mapped or 'not reported'}, expected {expected} in mode {mode}")
    if mode == "sim-nvml" and env.get("CUDA_DISABLE_CONTROL") != "T":
        problems.append(f"the CUDA-control admission policy did not set CUDA_DISABLE_CONTROL=T: env {dict(env)}")
    return problems


# test_23/24 (network reach): what busybox `wget` printed after trying an HTTPS address from inside a pod.
REACH_OPEN, REACH_CLOSED = "open", "closed"


def reach_verdict(output: str) -> str:
    """'open' when the address answered at all (an HTTP status, or the API server's /version), 'closed' when the
    connection was refused, timed out or had no route; anything else is not guessed (busybox 1.37 networking/
    wget.c messages)."""
    if "gitVersion" in output or "server returned error" in output or "HTTP/" in output:
        return REACH_OPEN
    closed = ("can't connect to remote host", "timed out", "Network unreachable", "No route to host",
              "Connection refused", "Connection reset")
    if any(marker in output for marker in closed):
        return REACH_CLOSED
    raise AssertionError(f"cannot tell whether the address answered from: {output!r}")
