"""The GPU models the program knows, as NVML reports them on a real card.

HAMi v2.10.0's device plugin registers a card with NVML's own name (``nvmlDeviceGetName``) as its type,
kept as it is when it starts with "NVIDIA" and prefixed "NVIDIA-" otherwise, and with NVML's total memory
(``nvmlDeviceGetMemoryInfo``, bytes / 1024 / 1024) as its MiB (pkg/device-plugin/nvidiadevice/nvinternal/
plugin/register.go ``getAPIDevices``; ``deviceMemoryScaling`` is 1 in this program). So a stack declares a
card by the name ``nvidia-smi`` prints, and plans, simulates and checks against the memory NVML reports,
which is less than the marketed size on most cards (the driver keeps part of it).

Each entry names the published ``nvidia-smi``/NVML output it was read from. NVIDIA's mock NVML profiles
(k8s-test-infra) state marketed sizes and are not a source here: the program configures the mock with
these values.

Pure data and lookups: no Pulumi, no I/O.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from gpu_tenancy.hami import protocol as hami

# HAMi's DeviceInfo.Devmem is an int32 of MiB (pkg/device/devices.go).
MAX_MEMORY_MIB = 2**31 - 1


@dataclass(frozen=True)
class GpuModel:
    nvml_name: str  # nvmlDeviceGetName, as nvidia-smi prints it
    memory_mib: int  # nvmlDeviceGetMemoryInfo().total / MiB on a current driver
    architecture: str  # the mock NVML's `architecture` value
    compute_capability: tuple[int, int]
    source: str  # where the name and memory were read (published nvidia-smi / NVML output)

    @property
    def hami_type(self) -> str:
        return hami.device_type(self.nvml_name)


# Totals as NVML reports them from driver branch R510 on (R535 .. R59x agree): the whole framebuffer.
# Earlier drivers reported less (an A100 80GB 81251 MiB, a T4 15109 MiB); they cannot run the Kubernetes
# and HAMi versions pinned here anyway. GDDR6 cards (A10, A10G, L4, L40, L40S, T4) are listed with ECC on,
# the data-centre default: with ECC off NVML reports 1/16 more (an L40S 49140 MiB instead of 46068), and
# the inventory check then names the difference. nvmlDeviceGetMemoryInfo (v1, what HAMi calls) and
# `nvidia-smi --query-gpu=memory.total` report the same total.
CATALOGUE: tuple[GpuModel, ...] = (
    GpuModel(
        "NVIDIA A100-SXM4-40GB", 40960, "ampere", (8, 0),
        "https://github.com/bottlerocket-os/bottlerocket-core-kit/pull/834 (driver 580.126.09); "
        "https://github.com/modal-labs/modal-client/pull/2797",
    ),
    GpuModel(
        "NVIDIA A100-PCIE-40GB", 40960, "ampere", (8, 0),
        "name: https://github.com/NVIDIA/semantic-segmentation/issues/178; memory: nvidia-smi captures on "
        "drivers 525.60.13 .. 595.58.03 (the SXM4 board's framebuffer)",
    ),
    GpuModel(
        "NVIDIA A100-SXM4-80GB", 81920, "ampere", (8, 0),
        "https://github.com/allenai/PeerRead/issues/40 (driver 525.85.12); "
        "https://github.com/vllm-project/vllm/issues/17269 (name, 570.124.06)",
    ),
    GpuModel(
        "NVIDIA A100 80GB PCIe", 81920, "ampere", (8, 0),
        "https://github.com/vllm-project/vllm/issues/41519 (the A800 80GB PCIe twin board, 550.54.15); "
        "nvidia-smi captures on drivers 535.129.03 and 595.71.05",
    ),
    GpuModel(
        "NVIDIA H100 80GB HBM3", 81559, "hopper", (9, 0),
        "https://github.com/Project-HAMi/HAMi/issues/961 (HAMi's register log); "
        "https://github.com/NVIDIA/nccl/issues/1264 (driver 550.54.15)",
    ),
    GpuModel(
        "NVIDIA H100 PCIe", 81559, "hopper", (9, 0),
        "name: https://github.com/zzc0721/torch-performance-test-data/issues/95; memory: nvidia-smi captures on "
        "drivers 535.216.03 .. 570.211.01",
    ),
    GpuModel(
        "NVIDIA H100 NVL", 95830, "hopper", (9, 0),
        "https://github.com/Project-HAMi/HAMi/issues/1014 (HAMi's register log); "
        "https://github.com/NVIDIA/gpu-admin-tools/issues/4 (driver 535.183.01)",
    ),
    GpuModel(
        "NVIDIA H200", 143771, "hopper", (9, 0),
        "name: https://github.com/NVIDIA/mig-parted/issues/120; memory: nvidia-smi captures on drivers "
        "570.133.20 .. 580.178.04; https://github.com/Project-HAMi/HAMi/issues/1520 (141 GB H20-3e, same total)",
    ),
    GpuModel(
        "NVIDIA L4", 23034, "ada", (8, 9),
        "https://github.com/modal-labs/modal-client/pull/2797; nvidia-smi captures on drivers "
        "535.216.01 .. 595.91.07",
    ),
    GpuModel(
        "NVIDIA L40", 46068, "ada", (8, 9),
        "nvidia-smi captures on drivers 535.309.01 and 610.57.04 (ECC on)",
    ),
    GpuModel(
        "NVIDIA L40S", 46068, "ada", (8, 9),
        "https://github.com/akash-network/provider-configs/pull/99 (--query-gpu, driver 595.71.05, ECC on)",
    ),
    GpuModel(
        "NVIDIA A10", 23028, "ampere", (8, 6),
        "https://github.com/Project-HAMi/HAMi/issues/1940 (HAMi v2.9.0 register log, driver 535.129.03); "
        "https://github.com/mayooot/detect-gpu/issues/3 (go-nvml v1: 24146608128 bytes)",
    ),
    GpuModel(
        "NVIDIA A10G", 23028, "ampere", (8, 6),
        "https://github.com/NVIDIA/DCGM/issues/232 (driver 535.247.01)",
    ),
    GpuModel(
        "Tesla T4", 15360, "turing", (7, 5),
        "https://github.com/modal-labs/modal-client/pull/2797; name: https://github.com/NVIDIA/nvidia-docker/issues/1628",
    ),
    GpuModel(
        "Tesla V100-SXM2-16GB", 16384, "volta", (7, 0),
        "https://github.com/1CatAI/1Cat-vLLM/issues/14 (driver 570.211.01)",
    ),
    GpuModel(
        "Tesla V100-SXM2-32GB", 32768, "volta", (7, 0),
        "https://github.com/Wan-Video/Wan2.1/issues/5 (driver 525.105.17)",
    ),
)

_BY_NAME = {model.nvml_name: model for model in CATALOGUE}


def _normalised(name: str) -> str:
    """'NVIDIA-A100-SXM4-80GB', 'nvidia a100 sxm4 80gb' -> 'a100sxm480gb'."""
    return re.sub(r"[^a-z0-9]", "", name.lower()).removeprefix(hami.NVIDIA.device_type.lower())


_BY_NORMALISED = {_normalised(model.nvml_name): model for model in CATALOGUE}


def lookup(name: str) -> GpuModel | None:
    """The catalogue entry for an exact NVML name, else None."""
    return _BY_NAME.get(name)


def suggestion(name: str) -> GpuModel | None:
    """The entry a near-miss spelling means ('NVIDIA-L4' for 'NVIDIA L4'); None when nothing is close."""
    return _BY_NORMALISED.get(_normalised(name))


def close_match(name: str) -> GpuModel | None:
    """A catalogue entry one typo away ('NVIDA L4' for 'NVIDIA L4'): difflib's ratio of at least 0.85 on the
    names' lower-case letters and digits. A card outside the catalogue may be that close too: a hint only."""
    spelt = {re.sub(r"[^a-z0-9]", "", model.nvml_name.lower()): model for model in CATALOGUE}
    matches = difflib.get_close_matches(re.sub(r"[^a-z0-9]", "", name.lower()), list(spelt), n=1, cutoff=0.85)
    return spelt[matches[0]] if matches else None


def registered_memory(model: str, declared: int | None) -> int:
    """The MiB HAMi registers for a card NVML names `model`: the catalogue's, which a declaration may repeat
    but not contradict; for a model outside the catalogue, the declared MiB. ValueError says what to write."""
    known = lookup(model)
    if known is None:
        if declared is None:
            near = close_match(model)
            raise ValueError(
                f"is required for {model!r}, which the GPU catalogue does not know"
                + (f" (did you mean {near.nvml_name!r}?)" if near else "")
                + ": the MiB that `nvidia-smi --query-gpu=memory.total --format=csv` reports on that card"
            )
        return declared
    if declared is not None and declared != known.memory_mib:
        raise ValueError(
            f"{declared} MiB is not what an {known.nvml_name} registers: NVML reports {known.memory_mib} MiB "
            "(leave memoryMiB out to take it)"
        )
    return known.memory_mib
