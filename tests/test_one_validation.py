"""One validation path: the program (`__main__.py` read_config, run under mocks), the planner (`make plan`) and
`make doctor` accept and refuse the same stack files, in the same words (gpu_tenancy/contract/stack_file.py)."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_tenancy.cli.plan.plan_input import InputError, load_document
from tests.harness import dev_config, record_stack

REPO = Path(__file__).resolve().parents[1]


def _many_tenants(config: dict[str, Any]) -> None:
    first = config["tenants"][0]
    config["tenants"] = [{**copy.deepcopy(first), "name": f"t-{i}", "workloads": []} for i in range(101)]


def _misspelt_key(config: dict[str, Any]) -> None:
    config["inventoryMismach"] = "warn"


def _misspelt_model(config: dict[str, Any]) -> None:
    config["tenants"][0]["gpus"] = [{"model": "NVIDA L4", "count": 1}]


def _huge_request(config: dict[str, Any]) -> None:
    config["tenants"][0]["workloads"][0]["containers"][0] = {"gpus": 1, "gpumemMiB": 10**21}


def _huge_quota(config: dict[str, Any]) -> None:
    config["tenants"][0]["quota"] = {"limits.nvidia.com/gpumem": 10**21}


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("101 tenants", _many_tenants, "gpu-tenancy:tenants: List should have at most 100 items after validation, not 101"),
    ("misspelt key", _misspelt_key, "gpu-tenancy:inventoryMismach: is not a known setting (did you mean "
                                    "'inventoryMismatch'?)"),
    ("misspelt model", _misspelt_model, "gpu-tenancy:tenants[0].gpus[0].memoryMiB: is required for 'NVIDA L4', which "
                                        "the GPU catalogue does not know (did you mean 'NVIDIA L4'?)"),
    ("10^21 MiB", _huge_request, "gpu-tenancy:tenants[0].workloads[0].containers[0].gpumemMiB: Input should be less "
                                 "than or equal to 2147483647"),
    ("10^21 quota", _huge_quota, "gpu-tenancy:tenants[0].quota: quota 'limits.nvidia.com/gpumem' must be at most "
                                 "9223372036854775807"),
]


def _stack_file(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "Pulumi.lab.yaml"
    path.write_text(yaml.safe_dump({"config": {f"gpu-tenancy:{k}": v for k, v in config.items()}}))
    return path


@pytest.mark.parametrize(("change", "words"), [(c, w) for _, c, w in CASES], ids=[n for n, _, _ in CASES])
def test_program_planner_and_doctor_refuse_alike(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], words: str
) -> None:
    config = dev_config()
    change(config)
    with pytest.raises(Exception) as program:  # the program raises pulumi.RunError
        record_stack(config)
    program_line = str(program.value).strip().splitlines()[-1]
    assert program_line.startswith(words), program_line
    path = _stack_file(tmp_path, config)
    with pytest.raises(InputError) as planner:
        load_document(str(path))
    assert str(planner.value) == f"{path}: {program_line}"
    doctor = subprocess.run([sys.executable, "-m", "gpu_tenancy", "doctor", "--stack", "lab", "--stack-file", str(path)],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert doctor.returncode == 2 and doctor.stderr.strip() == f"doctor: {path}: {program_line}", doctor.stderr


@pytest.mark.parametrize("stack", ["dev", "dev-nvml", "gpu"])
def test_the_example_stacks_are_accepted_by_the_file_readers(stack: str) -> None:
    from gpu_tenancy.contract.stack_file import load_stack_file

    assert load_stack_file(REPO / f"Pulumi.{stack}.yaml").tenants
    assert load_document(str(REPO / f"Pulumi.{stack}.yaml")).nodes
