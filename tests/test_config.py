from __future__ import annotations

import copy
from typing import Any

import pytest

from gpu_tenancy.config import ConfigError, load_config
from tests.harness import LabMocks, _run, dev_config

A100 = {"model": "NVIDIA-A100-SXM4-80GB", "memoryMiB": 81920, "count": 1}


def with_tenants(*tenants: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"mode": "sim", "tenants": list(tenants), **extra}


BAD_CONFIGS: list[tuple[str, dict[str, Any], str]] = [
    ("missing tenants", {"mode": "sim"}, "gpu-tenancy:tenants: is required"),
    ("missing mode", {"tenants": [{"name": "a", "gpus": [A100]}]}, "gpu-tenancy:mode: is required"),
    ("empty tenants", with_tenants(), "gpu-tenancy:tenants: "),
    ("unknown mode", {"mode": "cloud", "tenants": [{"name": "a", "gpus": [A100]}]}, "gpu-tenancy:mode: "),
    ("real not yet", {"mode": "real", "tenants": [{"name": "a", "gpus": [A100]}]}, "gpu-tenancy:mode: 'real'"),
    ("duplicate names", with_tenants({"name": "a", "gpus": [A100]}, {"name": "a", "gpus": [A100]}), "gpu-tenancy:tenants: duplicate tenant name(s): a"),
    ("invalid name", with_tenants({"name": "Tenant_B", "gpus": [A100]}), "gpu-tenancy:tenants[0].name: 'Tenant_B' is not a DNS-1123 label"),
    ("name too long", with_tenants({"name": "a" * 41, "gpus": [A100]}), "gpu-tenancy:tenants[0].name: "),
    ("no gpus", with_tenants({"name": "a", "gpus": []}), "gpu-tenancy:tenants[0].gpus: "),
    ("zero memory", with_tenants({"name": "a", "gpus": [{**A100, "memoryMiB": 0}]}), "gpu-tenancy:tenants[0].gpus[0].memoryMiB: "),
    ("negative count", with_tenants({"name": "a", "gpus": [{**A100, "count": -1}]}), "gpu-tenancy:tenants[0].gpus[0].count: "),
    ("memory as string", with_tenants({"name": "a", "gpus": [{**A100, "memoryMiB": "80Gi"}]}), "gpu-tenancy:tenants[0].gpus[0].memoryMiB: "),
    ("tenants not a list", {"mode": "sim", "tenants": "tenant-a"}, "gpu-tenancy:tenants: "),
    ("non-NVIDIA model", with_tenants({"name": "a", "gpus": [{**A100, "model": "MI300X"}]}), "gpu-tenancy:tenants[0].gpus[0].model: "),
    ("unknown tenant key", with_tenants({"name": "a", "gpus": [A100], "gpu": []}), "gpu-tenancy:tenants[0].gpu: is not a known setting"),
    ("unknown top-level key", with_tenants({"name": "a", "gpus": [A100]}, tenantz=[]), "gpu-tenancy:tenantz: is not a known setting"),
    ("missing model", with_tenants({"name": "a", "gpus": [{"memoryMiB": 1, "count": 1}]}), "gpu-tenancy:tenants[0].gpus[0].model: is required"),
    ("version unsupported", with_tenants({"name": "a", "gpus": [A100]}, versions={"kubernetes": "v1.37.0", "workerImage": "kindest/node:v1.37.0"}), "gpu-tenancy:versions.kubernetes: "),
    ("worker mismatch", with_tenants({"name": "a", "gpus": [A100]}, versions={"workerImage": "kindest/node:v1.34.8"}), "gpu-tenancy:versions: workerImage tag 'v1.34.8' must equal"),
    ("latest image", with_tenants({"name": "a", "gpus": [A100]}, versions={"kindNodeImage": "kindest/node:latest"}), "gpu-tenancy:versions.kindNodeImage: "),
    ("bad cidr", with_tenants({"name": "a", "gpus": [A100], "podCidr": "10.0.0.0/33"}), "gpu-tenancy:tenants[0].podCidr: "),
    ("ipv6 cidr", with_tenants({"name": "a", "gpus": [A100], "serviceCidr": "fd00::/64"}), "gpu-tenancy:tenants[0].serviceCidr: "),
    ("negative headroom", with_tenants({"name": "a", "gpus": [A100]}, metallb={"headroom": -1}), "gpu-tenancy:metallb.headroom: "),
    ("unknown quota key", with_tenants({"name": "a", "gpus": [A100], "quota": {"requests.cpu": 1}}), "gpu-tenancy:tenants[0].quota: unknown quota key"),
]


@pytest.mark.parametrize(("case", "config", "expected"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_fails_with_one_line_naming_the_key(case: str, config: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(config)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(expected), message


@pytest.mark.parametrize(("case", "config", "expected"), BAD_CONFIGS[:8], ids=[c[0] for c in BAD_CONFIGS[:8]])
def test_bad_config_registers_no_resource(case: str, config: dict[str, Any], expected: str) -> None:
    mocks = LabMocks()
    with pytest.raises(Exception) as error:
        _run(mocks, config, preview=True, stack="dev")
    assert expected in str(error.value)
    assert mocks.resources == [], [r.name for r in mocks.resources]


def test_dev_stack_config_is_valid_and_minimal() -> None:
    config = load_config(dev_config())
    assert [t.name for t in config.tenants] == ["tenant-a", "tenant-b"]
    assert set(dev_config()) == {"mode", "tenants"}
    assert config.cidrs(config.tenants[0]) == ("10.100.0.0/16", "10.101.0.0/16")
    assert config.cidrs(config.tenants[1]) == ("10.102.0.0/16", "10.103.0.0/16")


def test_versions_can_be_overridden_per_stack() -> None:
    raw = copy.deepcopy(dev_config())
    raw["versions"] = {
        "kubernetes": "v1.36.1",
        "workerImage": "kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5",
    }
    assert load_config(raw).versions.kubernetes == "v1.36.1"
