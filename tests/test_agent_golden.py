import json
from pathlib import Path

from gpu_tenancy import hami

GOLDEN = Path(__file__).parent / "golden" / "register-annotations.json"
TENANTS = {
    "tenant-a": [{"model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920, "count": 1}],
    "tenant-b": [{"model": "NVIDIA-L4", "memoryMiB": 24576, "count": 2}],
}


def render() -> dict[str, str]:
    return {tenant: hami.register_annotation(hami.device_inventory(tenant, gpus)) for tenant, gpus in TENANTS.items()}


def test_register_annotations_match_golden() -> None:
    assert render() == json.loads(GOLDEN.read_text(encoding="utf-8"))
