"""The Makefile, run for real by GNU make in a temporary copy of the repository.

Nothing it calls is real: ``pulumi``, ``docker``, ``kind``, ``kubectl`` and ``$(PYTHON)`` are stubs on a
PATH that holds only them and the few system tools the recipes use; each stub records its argv. The
stubs answer as the real CLIs would for what the Makefile relies on: ``pulumi stack select --create``
exists and creates a missing stack (pulumi/pulumi v3.259.0 ``pkg/cmd/pulumi/stack/stack_select.go``
``newStackSelectCmd``, flag ``--create``), and a failing pulumi command exits non-zero after printing
its error. Whether ``pulumi up``/``destroy`` prompt without ``--yes`` is Pulumi's business
(``pkg/cmd/pulumi/operations/up.go``: non-interactive without ``--yes`` is refused with
``NoConfirmationInNonInteractiveError``), so these tests check only that ``--yes`` is or is not passed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import harness
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
SYSTEM_TOOLS = ("sed", "tr", "awk", "mkdir", "touch", "cat", "chmod", "cp", "od")
ALL_TOOLS = ("pulumi", "docker", "kind", "kubectl")

pytestmark = pytest.mark.skipif(MAKE is None, reason="GNU make is not on PATH")


def _stub(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


class Run:
    def __init__(self, result: subprocess.CompletedProcess[str], log: Path, repo: Path) -> None:
        self.returncode = result.returncode
        self.output = result.stdout + result.stderr
        self.calls = log.read_text().splitlines() if log.exists() else []
        self.repo = repo

    def of(self, tool: str) -> list[str]:
        return [call for call in self.calls if call.split(" ", 1)[0] == tool]

    def own_lines(self) -> list[str]:
        """Output lines that are not make's own `make: *** ... Error` trailer."""
        return [line for line in self.output.splitlines() if line.strip() and not line.startswith("make")]


def run_make(
    tmp_path: Path,
    *args: str,
    tools: tuple[str, ...] = ALL_TOOLS,
    installs: tuple[str, ...] = (),
    stack_files: dict[str, str] | None = None,
    **env: str,
) -> Run:
    repo, bin_dir, log = tmp_path / "repo", tmp_path / "bin", tmp_path / "calls.log"
    repo.mkdir(exist_ok=True)
    for name in ("Makefile", "Pulumi.yaml", "Pulumi.dev.yaml", "Pulumi.gpu.yaml", "requirements.txt", "requirements-dev.txt", "pyproject.toml",
                 "gpu_tenancy/hami/agent/requirements.txt"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, repo / name)
    for name, text in (stack_files or {}).items():
        (repo / name).write_text(text)
    bin_dir.mkdir(exist_ok=True)
    for tool in SYSTEM_TOOLS:
        target = shutil.which(tool)
        assert target, f"{tool} is needed to run the Makefile"
        link = bin_dir / tool
        if not link.exists():
            link.symlink_to(target)
    project_tools = tmp_path / "project-tools"  # what the fake `gpu_tenancy tools install` puts into --dir
    project_tools.mkdir(exist_ok=True)
    for tool, directory in [*((t, bin_dir) for t in tools), *((t, project_tools) for t in installs)]:
        # FAKE_FAIL="stack select" makes `pulumi stack select ...` fail the way the CLI does.
        # `docker context inspect` answers $FAKE_CONTEXT_HOST; pulumi records the DOCKER_HOST it was given.
        _stub(
            directory / tool,
            f'echo "{tool} $*" >> "{log}"\n'
            f'case "{tool} $*" in "{tool} $FAKE_FAIL"*) echo "error: {tool} $FAKE_FAIL failed in the stub" >&2; exit 255;; esac\n'
            f'case "{tool} $*" in "docker context inspect"*) echo "${{FAKE_CONTEXT_HOST:-}}";; '
            f'"pulumi up"*) echo "pulumi-env DOCKER_HOST=${{DOCKER_HOST:-}}" >> "{log}"; '
            f'echo "pulumi-passphrase-file ${{PULUMI_CONFIG_PASSPHRASE_FILE:-}}" >> "{log}";; '
            f'"pulumi destroy"*) [ -z "${{GPU_TENANCY_LAB_GONE:-}}${{PULUMI_K8S_DELETE_UNREACHABLE:-}}" ] || echo '
            f'"pulumi-destroy-env LAB_GONE=${{GPU_TENANCY_LAB_GONE:-}} DELETE_UNREACHABLE=${{PULUMI_K8S_DELETE_UNREACHABLE:-}}" '
            f'>> "{log}";; esac',
        )
    python = tmp_path / "python"
    # `$(PYTHON) -m venv <dir>`: record it and leave a pip and a pytest that record their argv (pytest also the
    # e2e suite's environment: GPU_TENANCY_E2E*). `$(PYTHON) -m gpu_tenancy tools ...` is only recorded, with the
    # PATH it runs with (tests/test_tools.py runs the real one).
    _stub(
        python,
        f'echo "python $*" >> "{log}"\n'
        f'if [ "$2 $3" = "gpu_tenancy tools" ]; then echo "tools-path $PATH" >> "{log}"; [ "${{FAKE_TOOLS_EXIT:-0}}" = 0 ] || exit 1; '
        f'mkdir -p "$6"; for t in "{project_tools}"/*; do [ -e "$t" ] && cp "$t" "$6/"; done; exit 0; fi\n'
        'mkdir -p "$3/bin"',
    )
    with python.open("a") as script:
        script.write(
            f'printf \'#!/bin/sh\\necho "pip $*" >> "{log}"\\n\' > "$3/bin/pip"\nchmod +x "$3/bin/pip"\n'
            f"cat > \"$3/bin/pytest\" <<'EOF'\n#!/bin/sh\n"
            f'echo "pytest $* [E2E=${{GPU_TENANCY_E2E:-}} STRICT=${{GPU_TENANCY_E2E_STRICT:-}} '
            f'STACK=${{GPU_TENANCY_E2E_STACK:-}}]" >> "{log}"\n'
            'EOF\nchmod +x "$3/bin/pytest"\n'
            # The venv's `gpu-tenancy` (and its python): it answers FAKE_DOCTOR (exit code of a check, 0 by
            # default), FAKE_LAB_GONE (exit code of `--lab-gone`, 1: the lab is there) and FAKE_CHARTS.
            + "".join(
                f"cat > \"$3/bin/{name}\" <<'EOF'\n#!/bin/sh\n"
                f'echo "{label} $*" >> "{log}"\n'
                'case "$*" in *--lab-gone*) exit "${FAKE_LAB_GONE:-1}";; esac\n'
                'case "$*" in "charts "*) exit "${FAKE_CHARTS:-0}";; esac\n'
                'case "$*" in *--missing-images*) [ -z "${FAKE_MISSING_IMAGES:-}" ] || echo "$FAKE_MISSING_IMAGES"; exit 0;; esac\n'
                'case "$*" in *--hosts-off*) [ -z "${FAKE_HOST_DELETES:-}" ] || echo "$FAKE_HOST_DELETES"; exit "${FAKE_DOCTOR:-0}";; esac\n'
                'exit "${FAKE_DOCTOR:-0}"\n'
                f'EOF\nchmod +x "$3/bin/{name}"\n'
                for name, label in (("python", "venv-python"), ("gpu-tenancy", "gpu-tenancy"))
            )
        )
    environment = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "PULUMI_CONFIG_PASSPHRASE": "test",
        "FAKE_FAIL": "-",
        **env,
    }
    assert MAKE is not None
    result = subprocess.run(
        [MAKE, "--no-print-directory", "-C", str(repo), f"PYTHON={python}", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Run(result, log, repo)


def _phony_targets() -> list[str]:
    lines = [line for line in (REPO_ROOT / "Makefile").read_text().splitlines() if line.startswith(".PHONY:")]
    assert lines, "the Makefile declares no .PHONY targets"
    return [target for line in lines for target in line.split(":", 1)[1].split()]


def test_help_is_the_default_goal_and_describes_every_target(tmp_path: Path) -> None:
    run = run_make(tmp_path)
    assert run.returncode == 0, run.output
    described = dict(re.findall(r"^  (\S+)\s+(\S.*)$", run.output, flags=re.MULTILINE))
    missing = [target for target in _phony_targets() if target not in described]
    assert not missing, f"`make help` does not describe {missing}:\n{run.output}"
    assert not run.calls, "make help must not build or call anything"


def test_preview_on_a_fresh_clone_creates_the_stack_first(tmp_path: Path) -> None:
    run = run_make(tmp_path, "preview")
    assert run.returncode == 0, run.output
    assert run.of("pulumi") == [
        "pulumi stack select --create dev",
        "pulumi preview --stack dev --policy-pack policies --diff",
    ]


def test_stack_selection_errors_are_not_hidden(tmp_path: Path) -> None:
    run = run_make(tmp_path, "up", FAKE_FAIL="stack select")
    assert run.returncode != 0, run.output
    assert "error: pulumi stack select failed in the stub" in run.output
    assert run.of("pulumi") == ["pulumi stack select --create dev"], "nothing may run after a failed select"


DOCKER_MISSING = ("problem: docker: not found on PATH. Fix: install Docker Engine (https://docs.docker.com/engine/install/, "
                  "or your distribution's docker.io package) and let this user use it (sudo usermod -aG docker $USER, "
                  "then log in again)")


@pytest.mark.parametrize("jobs", [[], ["-j4"]], ids=["serial", "parallel"])
@pytest.mark.parametrize("goal", ["preview", "destroy"])
def test_prerequisites_are_checked_before_the_venv_is_built(tmp_path: Path, jobs: list[str], goal: str) -> None:
    run = run_make(tmp_path, *jobs, goal, tools=("pulumi", "kind", "kubectl"))
    assert run.returncode != 0
    assert run.own_lines() == [DOCKER_MISSING], run.output
    assert not (run.repo / ".venv").exists() and not run.of("pulumi"), run.calls


def test_every_prerequisite_problem_is_named_in_one_pass(tmp_path: Path) -> None:
    """Docker missing, a tool that cannot be installed and no passphrase: all three, not the first alone."""
    run = run_make(tmp_path, "preview", "STACK=lab", tools=(), FAKE_TOOLS_EXIT="1", PULUMI_CONFIG_PASSPHRASE="",
                   stack_files={"Pulumi.lab.yaml": "config:\n  gpu-tenancy:mode: sim\n"})
    assert run.returncode != 0
    assert any(c.startswith("python -m gpu_tenancy tools install") for c in run.calls), run.calls
    assert run.own_lines()[1:] == [DOCKER_MISSING], run.output
    assert run.own_lines()[0].startswith("preflight: generated "), "a sim stack's passphrase is made, not asked for"
    (tmp_path / "real").mkdir()
    real = run_make(tmp_path / "real", "preview", "STACK=gpu", tools=(), FAKE_TOOLS_EXIT="1", PULUMI_CONFIG_PASSPHRASE="")
    assert real.own_lines() == [
        "problem: passphrase: not set. Fix: export PULUMI_CONFIG_PASSPHRASE=<yours> (secrets in the local state are "
        "encrypted with it)"], real.output
    assert any(c.startswith("python -m gpu_tenancy tools install") for c in real.calls), real.calls


def test_up_names_the_tools_and_the_hosts_problems_in_one_pass(tmp_path: Path) -> None:
    """The tools that cannot be installed and doctor's host checks (Docker, inotify, ... from the runtime venv
    alone) in the same run; nothing reaches Pulumi."""
    run = run_make(tmp_path, "up", tools=(), FAKE_TOOLS_EXIT="1", FAKE_DOCTOR="1")
    assert run.returncode != 0
    assert any(c.startswith("python -m gpu_tenancy tools install") for c in run.calls), run.calls
    assert any(c.startswith("gpu-tenancy doctor") and "--before-up" in c for c in run.calls), run.calls
    assert not run.of("pulumi")
    assert [c for c in run.of("pip")] == [
        "pip install --quiet --disable-pip-version-check -c gpu_tenancy/hami/agent/requirements.txt -r requirements.txt",
        "pip install --quiet --disable-pip-version-check wheel==0.45.1",
        "pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .",
    ], "the runtime and the gpu-tenancy command only, not the tests' tools"


@pytest.mark.parametrize("goal", ["up", "preview", "destroy"])
def test_a_missing_stack_file_is_named_in_one_line(tmp_path: Path, goal: str) -> None:
    run = run_make(tmp_path, goal, "STACK=stagin")
    assert run.returncode != 0
    assert run.own_lines() == [
        "Pulumi.stagin.yaml not found: STACK=stagin names no stack file (have: Pulumi.dev.yaml Pulumi.gpu.yaml)"
    ], run.output
    assert not run.calls


@pytest.mark.parametrize(
    ("stack", "confirm", "yes"),
    [("dev", "", True), ("gpu", "", False), ("gpu", "CONFIRM=1", True), ("gpu", "CONFIRM=yes", False)],
)
@pytest.mark.parametrize("goal", ["up", "destroy"])
def test_real_stacks_are_changed_only_after_confirmation(
    tmp_path: Path, goal: str, stack: str, confirm: str, yes: bool
) -> None:
    run = run_make(tmp_path, goal, f"STACK={stack}", *([confirm] if confirm else []))
    assert run.returncode == 0, run.output
    (call,) = [call for call in run.of("pulumi") if call.startswith(f"pulumi {goal} ")]
    assert call.startswith(f"pulumi {goal} --stack {stack}")
    assert ("--yes" in call.split()) is yes, call


@pytest.mark.parametrize(
    ("mode_line", "yes"),
    [
        ('  gpu-tenancy:mode: "real"  # GPU hosts', False),
        ("  gpu-tenancy:mode: 'sim'", True),
        ("  gpu-tenancy:mode: sim # kind on this host", True),
        ("  gpu-tenancy:mode: sim-nvml", True),  # kind on this host too
        ("  gpu-tenancy:mode: simulated", False),  # not a mode the program knows
        ("", False),  # no mode: not known to be sim, so Pulumi asks
    ],
)
def test_mode_is_read_from_the_stack_file(tmp_path: Path, mode_line: str, yes: bool) -> None:
    run = run_make(tmp_path, "up", "STACK=lab", stack_files={"Pulumi.lab.yaml": f"config:\n{mode_line}\n"})
    assert run.returncode == 0, run.output
    (call,) = [call for call in run.of("pulumi") if call.startswith("pulumi up ")]
    assert ("--yes" in call.split()) is yes, call


def test_test_targets_need_no_deploy_tools(tmp_path: Path) -> None:
    """`make lint` on a machine without pulumi or docker: no preflight, the venv is built."""
    run = run_make(tmp_path, "venv", tools=())
    assert run.returncode == 0, run.output
    assert run.of("python") and run.of("pip"), run.calls


def test_a_sim_deploy_pins_pulumi_docker_to_the_current_docker_context(tmp_path: Path) -> None:
    # kind and the docker CLI follow the current context; pulumi-docker reads only DOCKER_HOST.
    run = run_make(tmp_path, "up", FAKE_CONTEXT_HOST="unix:///run/user/1000/docker.sock", PULUMI_CONFIG_PASSPHRASE="x")
    assert run.returncode == 0, run.output
    assert "pulumi-env DOCKER_HOST=unix:///run/user/1000/docker.sock" in run.calls


def test_a_sim_nvml_deploy_is_pinned_to_the_same_docker_daemon(tmp_path: Path) -> None:
    """sim-nvml builds the mock NVML image with pulumi-command's `docker build` and starts worker containers
    with pulumi-docker: both must reach the daemon kind uses."""
    run = run_make(tmp_path, "up", "STACK=lab", FAKE_CONTEXT_HOST="unix:///run/user/1000/docker.sock",
                   PULUMI_CONFIG_PASSPHRASE="x", stack_files={"Pulumi.lab.yaml": "config:\n  gpu-tenancy:mode: sim-nvml\n"})
    assert run.returncode == 0, run.output
    assert "pulumi-env DOCKER_HOST=unix:///run/user/1000/docker.sock" in run.calls


def test_an_explicit_docker_host_wins(tmp_path: Path) -> None:
    run = run_make(tmp_path, "up", FAKE_CONTEXT_HOST="unix:///elsewhere.sock", DOCKER_HOST="tcp://10.0.0.5:2375",
                   PULUMI_CONFIG_PASSPHRASE="x")
    assert run.returncode == 0, run.output
    assert "pulumi-env DOCKER_HOST=tcp://10.0.0.5:2375" in run.calls


ALL_CHECKS = "tests/integration --ignore=tests/integration/test_faults.py"


@pytest.mark.parametrize(
    ("goal", "stack", "tests"),
    [("e2e", "dev", ALL_CHECKS), ("e2e-nvml", "dev-nvml", ALL_CHECKS), ("e2e-faults", "dev", "tests/integration/test_faults.py")],
)
def test_e2e_targets_choose_the_example_stack(tmp_path: Path, goal: str, stack: str, tests: str) -> None:
    # An exported choice does not leak into the other target: `make e2e` is always the dev stack.
    run = run_make(tmp_path, goal, tools=(), GPU_TENANCY_E2E_STACK="elsewhere", GPU_TENANCY_E2E_STRICT="0")
    assert run.returncode == 0, run.output
    assert run.of("pytest") == [f"pytest {tests} -m e2e -v -rs [E2E=1 STRICT=1 STACK={stack}]"], run.calls
    assert not run.of("pulumi") and not run.of("docker"), "the suite checks its own prerequisites"
    # The pinned tools first, the same way `make up` gets them.
    assert run.calls.index(f"python -m gpu_tenancy tools install --dir {run.repo}/.tools/bin") < run.calls.index(
        run.of("pytest")[0]
    ), run.calls


def test_e2e_is_strict_unless_told_otherwise(tmp_path: Path) -> None:
    """A skip fails `make e2e`; E2E_STRICT=0 (a local dry run) is the explicit opt-out."""
    run = run_make(tmp_path, "e2e", "E2E_STRICT=0", tools=())
    assert run.returncode == 0, run.output
    assert run.of("pytest") == [f"pytest {ALL_CHECKS} -m e2e -v -rs [E2E=1 STRICT=0 STACK=dev]"], run.calls


@pytest.mark.parametrize(
    ("stack", "needed"), [("dev", "kind,kubectl,pulumi"), ("gpu", "kubectl,pulumi")]
)
@pytest.mark.parametrize("goal", ["up", "preview", "destroy"])
def test_deploys_get_the_pinned_tools_first(tmp_path: Path, goal: str, stack: str, needed: str) -> None:
    """`make up` installs what the stack needs when missing or of another version (gpu_tenancy/cli/tools.py decides,
    tests/test_tools.py), and every pulumi/kind/kubectl call then finds the project's copy first on PATH."""
    run = run_make(tmp_path, goal, f"STACK={stack}", tools=("docker",), installs=("pulumi", "kind", "kubectl"))
    assert run.returncode == 0, run.output
    install = f"python -m gpu_tenancy tools install --dir {run.repo}/.tools/bin --only {needed}"
    assert install in run.calls, run.calls
    if goal != "up":  # up builds the runtime venv first: its preflight runs doctor's host checks too
        assert run.calls.index(install) < run.calls.index(next(c for c in run.calls if c.startswith("python -m venv"))), (
            "tools before the venv: they need no venv"
        )
    assert run.of("pulumi") and run.calls.index(install) < run.calls.index(run.of("pulumi")[0]), run.calls
    (path,) = [call.split(" ", 1)[1] for call in run.calls if call.startswith("tools-path ")]
    assert path.split(":")[0] == f"{run.repo}/.tools/bin", path


@pytest.mark.parametrize("goal", ["up", "preview"])
def test_a_tool_that_cannot_be_installed_stops_the_deploy(tmp_path: Path, goal: str) -> None:
    run = run_make(tmp_path, goal, tools=("docker",), FAKE_TOOLS_EXIT="1")
    assert run.returncode != 0
    assert not run.of("pulumi"), run.calls
    assert any(call.startswith("python -m venv") for call in run.calls) is (goal == "up"), run.calls


def test_plan_prints_the_planners_report_for_the_stack_file(tmp_path: Path) -> None:
    """The planner CLI itself is tested in tests/test_plan_cli.py; here: which file, which options."""
    run = run_make(tmp_path, "plan", "STACK=gpu", "PNG=plan.png", "WIDTH=120", tools=())
    assert run.returncode == 0, run.output
    assert [c for c in run.calls if c.startswith("gpu-tenancy plan")] == [
        "gpu-tenancy plan report Pulumi.gpu.yaml --png plan.png --width 120"]


def test_up_runs_the_host_checks_first_and_refreshes(tmp_path: Path) -> None:
    run = run_make(tmp_path, "up")
    assert run.returncode == 0, run.output
    doctor = [c for c in run.calls if c.startswith("gpu-tenancy doctor") and "--before-up" in c]
    assert doctor == [f"gpu-tenancy doctor --stack dev --state-dir {run.repo}/state --before-up"]
    (up,) = [c for c in run.of("pulumi") if c.startswith("pulumi up ")]
    assert "--refresh" in up.split() and "--policy-pack" in up.split()
    assert run.calls.index(doctor[0]) < run.calls.index(up)


@pytest.mark.parametrize("goal", ["up", "preview"])
def test_deploys_pull_the_stacks_charts_after_the_host_checks(tmp_path: Path, goal: str) -> None:
    run = run_make(tmp_path, goal)
    assert run.returncode == 0, run.output
    (charts,) = [c for c in run.calls if c.startswith("gpu-tenancy charts")]
    assert charts == "gpu-tenancy charts --stack dev"
    (deploy,) = [c for c in run.of("pulumi") if c.startswith(f"pulumi {goal} ")]
    assert run.calls.index(charts) < run.calls.index(deploy)
    if goal == "up":
        doctor = [c for c in run.calls if "--before-up" in c]
        assert run.calls.index(doctor[0]) < run.calls.index(charts)


def test_a_chart_that_cannot_be_pulled_stops_the_deploy(tmp_path: Path) -> None:
    run = run_make(tmp_path, "up", FAKE_CHARTS="1")
    assert run.returncode != 0
    assert not [c for c in run.of("pulumi") if c.startswith("pulumi up")]


def test_relock_names_each_chart_to_take_anew(tmp_path: Path) -> None:
    run = run_make(tmp_path, "charts", "STACK=gpu", "RELOCK=kamaji,hami")
    assert run.returncode == 0, run.output
    assert [c for c in run.calls if c.startswith("gpu-tenancy charts")] == [
        "gpu-tenancy charts --stack gpu --relock kamaji --relock hami"]


def test_a_host_problem_stops_up_before_anything_is_created(tmp_path: Path) -> None:
    run = run_make(tmp_path, "up", FAKE_DOCTOR="1")
    assert run.returncode != 0
    assert not [c for c in run.of("pulumi") if c.startswith("pulumi up")]


def test_doctor_needs_no_deploy_tools(tmp_path: Path) -> None:
    """It reports missing tools itself, so no preflight stands in its way; it needs the runtime, not the tests'
    tools."""
    run = run_make(tmp_path, "doctor", tools=())
    assert run.returncode == 0, run.output
    assert not [c for c in run.of("pip") if "requirements-dev.txt" in c], run.calls
    assert [c for c in run.calls if c.startswith("gpu-tenancy doctor")] == [
        f"gpu-tenancy doctor --stack dev --state-dir {run.repo}/state"]


def test_destroy_of_a_lab_that_is_there_deletes_everything(tmp_path: Path) -> None:
    run = run_make(tmp_path, "destroy")
    assert run.returncode == 0, run.output
    assert [c for c in run.of("pulumi") if c.startswith("pulumi destroy")] == ["pulumi destroy --stack dev --yes"]
    assert not [c for c in run.calls if c.startswith("pulumi-destroy-env")]


def test_destroy_of_a_lab_whose_kind_cluster_is_gone_drops_what_cannot_answer(tmp_path: Path) -> None:
    run = run_make(tmp_path, "destroy", FAKE_LAB_GONE="0")
    assert run.returncode == 0, run.output
    assert [c for c in run.of("pulumi") if c.startswith("pulumi destroy")] == [
        "pulumi destroy --stack dev --refresh --yes"]
    assert "destroy: the kind cluster of stack dev is gone" in run.output
    assert "pulumi-destroy-env LAB_GONE=1 DELETE_UNREACHABLE=true" in run.calls


def test_a_sim_stack_gets_a_generated_passphrase_file_once(tmp_path: Path) -> None:
    run = run_make(tmp_path, "up", PULUMI_CONFIG_PASSPHRASE="")
    assert run.returncode == 0, run.output
    passphrase = run.repo / "state" / "passphrase"
    assert f"pulumi-passphrase-file {passphrase}" in run.calls
    assert passphrase.stat().st_mode & 0o777 == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}", passphrase.read_text()), "32 random bytes, hex"
    first = passphrase.read_text()
    again = run_make(tmp_path, "up", PULUMI_CONFIG_PASSPHRASE="")
    assert again.returncode == 0 and passphrase.read_text() == first, "never replaced: the state is encrypted with it"
    assert "generated" not in again.output


def test_a_passphrase_of_the_users_own_is_left_alone(tmp_path: Path) -> None:
    run = run_make(tmp_path, "up", PULUMI_CONFIG_PASSPHRASE="mine")
    assert run.returncode == 0, run.output
    assert "pulumi-passphrase-file " in run.calls and not (run.repo / "state" / "passphrase").exists()


def test_a_real_stack_still_asks_for_a_chosen_passphrase(tmp_path: Path) -> None:
    run = run_make(tmp_path, "preview", "STACK=gpu", PULUMI_CONFIG_PASSPHRASE="")
    assert run.returncode != 0
    assert "export PULUMI_CONFIG_PASSPHRASE=" in run.output and not (run.repo / "state" / "passphrase").exists()


def test_up_builds_again_the_images_docker_no_longer_has(tmp_path: Path) -> None:
    """doctor --missing-images names them (tests/test_doctor.py); up replaces exactly those."""
    urn = "urn:pulumi:dev::gpu-tenancy::gpu-tenancy:tenant:Tenant$docker:index/image:Image::tenant-a-image"
    run = run_make(tmp_path, "up", FAKE_MISSING_IMAGES=f"--replace {urn}")
    assert run.returncode == 0, run.output
    (up,) = [c for c in run.of("pulumi") if c.startswith("pulumi up ")]
    assert up.split()[-2:] == ["--replace", urn], up
    assert any(c.startswith("gpu-tenancy doctor --stack dev --missing-images") for c in run.calls)
    (tmp_path / "again").mkdir()
    plain = run_make(tmp_path / "again", "up")
    assert "--replace" not in next(c for c in plain.of("pulumi") if c.startswith("pulumi up "))


def test_destroy_with_hosts_off_destroys_the_rest_then_forgets_their_joins(tmp_path: Path) -> None:
    """Which URNs: tests/test_day_after.py. Here the order: everything else (continuing past the joins that
    cannot reach their host), then the joins leave the state, then what they held up."""
    join = "urn:pulumi:gpu::gpu-tenancy::gpu-tenancy:host_worker:HostWorker$command:remote:Command::tenant-b-gpu-l4-01-join"
    run = run_make(tmp_path, "destroy", "STACK=gpu", "CONFIRM=1", "HOSTS_OFF=gpu-l4-01", FAKE_HOST_DELETES=join)
    assert run.returncode == 0, run.output
    assert [c for c in run.of("pulumi") if c.startswith(("pulumi destroy", "pulumi state"))] == [
        "pulumi destroy --stack gpu --continue-on-error --yes",
        f"pulumi state delete --stack gpu --yes {join}",
        "pulumi destroy --stack gpu --yes",
    ]
    assert any('--hosts-off gpu-l4-01' in c for c in run.calls), run.calls


def test_destroy_with_an_unknown_host_off_changes_nothing(tmp_path: Path) -> None:
    run = run_make(tmp_path, "destroy", "STACK=gpu", "CONFIRM=1", "HOSTS_OFF=gpu-l4-99", FAKE_DOCTOR="2")
    assert run.returncode != 0
    assert not [c for c in run.of("pulumi") if c.startswith(("pulumi destroy", "pulumi state"))], run.calls


@pytest.mark.parametrize(("fresh", "runs", "not_runs"), [
    ("", "mutmut run --max-children 2", "run --mutmut"),
    ("1", 'tests/mutation_operators.py run --mutmut "$module"', "mutmut run"),
])
def test_mutation_runs_mutmut_or_with_fresh_its_mutants_each_in_a_fresh_pytest(
        fresh: str, runs: str, not_runs: str) -> None:
    repo = Path(__file__).resolve().parents[1]
    installed = [f"-o.venv/bin/{name}" for name in (".installed", "mutmut", "gpu-tenancy")]
    done = subprocess.run([str(MAKE), "-n", *installed, "mutation", "MODULES=gpu_tenancy/builders/x.py",
                           f"FRESH={fresh}"], cwd=repo, capture_output=True, text=True, timeout=60, check=True)
    assert runs in done.stdout and not_runs not in done.stdout
    assert "tests/mutation_operators.py run \"$module\"" in done.stdout  # the operators mutmut lacks, either way


def test_the_make_the_tests_run_never_installs_into_the_venv() -> None:
    """tests/harness.py's MAKE on the repository's Makefile, dry run (`-n`), with every input of the venv newer
    than it (`-W`): no pip. With only the last stamp counted as built, the same run would reinstall the package
    (then pointing the shared venv at whichever copy of the repository the test ran in)."""
    newer = [flag for name in ("pyproject.toml", "requirements.txt", "requirements-dev.txt") for flag in ("-W", name)]
    goals = ["status", "tenants", "kubeconfig", "TENANT=tenant-a", "kubeconfig-management"]

    def dry_run(make: list[str]) -> str:
        done = subprocess.run([*make, "-n", *newer, *goals], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True)
        return done.stdout

    assert "pip install" in dry_run(["make", "-s", "-o", ".venv/bin/.installed"])
    planned = dry_run(harness.MAKE)
    assert "pip" not in planned and "-m venv" not in planned
    assert planned.count(".venv/bin/gpu-tenancy ") == 4  # each goal still runs its command
