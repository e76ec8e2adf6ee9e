"""Golden: the register annotation the agent writes for the dev stack's tenants.

The inventory goes the same way as in the program: Pulumi.dev.yaml -> load_config -> GpuConfig
dumped by alias (what components/tenant.py hands the agent) -> hami.device_inventory.
The golden file is edited by hand only: its types and MiB are what HAMi registers for an A100 80GB SXM4 and
an L4 on a real host (NVML's names and totals, tests/fixtures/nvidia_smi/cards.json).
"""

import json
from pathlib import Path

from gpu_tenancy.contract.config import load_config
from gpu_tenancy.hami import protocol as hami
from tests.harness import dev_config

GOLDEN = Path(__file__).parent / "golden" / "register-annotations.json"


def render() -> dict[str, str]:
    stack = load_config(dev_config())
    return {
        tenant.name: hami.register_annotation(
            hami.device_inventory(tenant.name, [gpu.model_dump(by_alias=True) for gpu in tenant.gpus])
        )
        for tenant in stack.tenants
    }


def test_register_annotations_match_golden() -> None:
    assert render() == json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_golden_is_one_a100_for_tenant_a_and_two_l4_for_tenant_b() -> None:
    golden = {tenant: json.loads(value) for tenant, value in json.loads(GOLDEN.read_text(encoding="utf-8")).items()}
    assert sorted(golden) == ["tenant-a", "tenant-b"]
    assert [(d["type"], d["devmem"], d["count"]) for d in golden["tenant-a"]] == [("NVIDIA A100-SXM4-80GB", 81920, 10)]
    assert [(d["type"], d["devmem"], d["index"]) for d in golden["tenant-b"]] == [
        ("NVIDIA L4", 23034, 0),
        ("NVIDIA L4", 23034, 1),
    ]
    assert all(d["health"] is True and d["devcore"] == 100 for devices in golden.values() for d in devices)
