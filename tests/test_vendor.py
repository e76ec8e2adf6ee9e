"""The GPU vendor's names live in one place (gpu_tenancy.hami.protocol.NVIDIA) and are HAMi v2.10.0's own.

The scan reads string constants from each product file's syntax tree: docstrings and comments may name the
resources where they explain, code takes them from the vendor object.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpu_tenancy.builders.gpu_access import gpu_access
from gpu_tenancy.builders.workloads import workload_names, workloads
from gpu_tenancy.contract import tenant_config
from gpu_tenancy.hami import protocol as hami
from gpu_tenancy.hami.planner import fit
from gpu_tenancy.hami.planner import model as planner_model
from gpu_tenancy.hami.planner.model import ContainerRequest, Device, Node, Workload
from gpu_tenancy.hami.planner.orders import verdicts

REPO = Path(__file__).resolve().parent.parent
VENDOR_MODULE = "gpu_tenancy/hami/protocol.py"
# What only the vendor module may spell in code: the vendor's resource domain and its register annotation.
VENDOR_SPELLINGS = ("nvidia.com/", "node-nvidia-register")
# Product files that may still spell them, each with why.
EXCEPTIONS = {
    VENDOR_MODULE: "defines the vendor's names",
    "components/inventory_check.py": "the kubectl jsonpath of the script run on the host: the bytes sent stay as they are",
}
# The day-two commands are not scanned: their help and reference text names the keys a user writes.
NOT_SCANNED = ("gpu_tenancy/cli/",)


def product_files() -> list[Path]:
    """The Pulumi program, its components, gpu_tenancy (but the commands) and the policy pack."""
    files = [REPO / "__main__.py"]
    for folder in ("components", "gpu_tenancy", "policies"):
        files += sorted((REPO / folder).rglob("*.py"))
    return [f for f in files if not str(f.relative_to(REPO)).startswith(NOT_SCANNED)]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constants that are a module's, class's or function's docstring."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def vendor_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string constant in code (f-string parts included, docstrings not) that spells
    one of VENDOR_SPELLINGS."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        and any(spelling in node.value for spelling in VENDOR_SPELLINGS)
    )


def test_only_the_vendor_module_spells_the_vendors_names() -> None:
    found = []
    for path in product_files():
        name = str(path.relative_to(REPO))
        if name not in EXCEPTIONS:
            found += [f"{name}:{line}: {text!r}" for line, text in vendor_literals(path.read_text())]
    assert not found, f"take these from gpu_tenancy.hami.protocol.NVIDIA: {found}"


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_each_exception_still_spells_a_vendor_name(name: str) -> None:
    """An exception that no longer applies comes off the list."""
    path = REPO / name
    assert path.is_file(), f"{name} is gone: remove it from EXCEPTIONS"
    assert vendor_literals(path.read_text()), f"{name} no longer spells a vendor name: remove it from EXCEPTIONS"


def test_the_scan_sees_code_and_skips_docstrings() -> None:
    planted = '''"""Module docstring naming nvidia.com/gpu."""
KEY = "limits.nvidia.com/gpumem"  # a comment naming hami.io/node-nvidia-register


def f(x):
    """Docstring naming hami.io/node-nvidia-register."""
    return f"{x} hami.io/node-nvidia-register"
'''
    assert vendor_literals(planted) == [(2, "limits.nvidia.com/gpumem"), (7, " hami.io/node-nvidia-register")]
    assert len(product_files()) > 100 and REPO / VENDOR_MODULE in product_files()
    assert not any("gpu_tenancy/cli/" in str(f) for f in product_files())


# HAMi v2.10.0's values, typed here as read upstream.
def test_the_vendor_is_hamis_nvidia() -> None:
    v = hami.NVIDIA
    # pkg/device/nvidia/device.go const block: NvidiaGPUDevice, RegisterAnnos, HandshakeAnnos, GPUInUse, GPUNoUse.
    assert v.device_type == "NVIDIA"
    assert v.register_annotation == "hami.io/node-nvidia-register"
    assert v.handshake_annotation == "hami.io/node-handshake"
    assert v.use_type_annotation == "nvidia.com/use-gputype"
    assert v.nouse_type_annotation == "nvidia.com/nouse-gputype"
    # pkg/device/nvidia/device.go InitNvidiaDevice: InRequestDevices / SupportDevices[NvidiaGPUDevice].
    assert v.devices_to_allocate_annotation == "hami.io/vgpu-devices-to-allocate"
    assert v.devices_allocated_annotation == "hami.io/vgpu-devices-allocated"
    # pkg/scheduler/config/config.go InitDefaultDevices (and charts/hami/values.yaml resourceName, resourceMem,
    # resourceMemPercentage, resourceCores).
    assert v.resource_count == "nvidia.com/gpu"
    assert v.resource_memory == "nvidia.com/gpumem"
    assert v.resource_memory_percentage == "nvidia.com/gpumem-percentage"
    assert v.resource_cores == "nvidia.com/gpucores"
    # charts/hami/templates/device-plugin/runtime-class.yaml: `handler: nvidia`.
    assert v.runtime_handler == "nvidia"
    # pkg/util/nodelock/nodelock.go NodeLockKey: one lock for every vendor, not the vendor's.
    assert hami.NODE_LOCK_ANNOTATION == "hami.io/mutex.lock"


def test_derived_names() -> None:
    # pkg/device/quota.go managedQuotaName: a managed quota key is "limits." and the resource name.
    assert hami.NVIDIA.quota_keys == ("limits.nvidia.com/gpu", "limits.nvidia.com/gpumem", "limits.nvidia.com/gpucores")
    # pkg/device/nvidia/device.go mutateContainerResource: any of the four makes a GPU container.
    assert hami.NVIDIA.request_resources == (
        "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"
    )


def test_the_product_takes_its_names_from_the_vendor() -> None:
    """The modules that name the vendor's resources hold HAMi's values (read through the vendor object)."""
    assert (hami.RESOURCE_GPU, hami.RESOURCE_GPU_MEMORY, hami.RESOURCE_GPU_MEMORY_PERCENTAGE,
            hami.RESOURCE_GPU_CORES) == ("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage",
                                         "nvidia.com/gpucores")
    assert hami.NODE_REGISTER_ANNOTATION == "hami.io/node-nvidia-register"
    assert hami.DEVICE_VENDOR == "NVIDIA"
    assert gpu_access.GPU_RUNTIME_CLASS == "nvidia"
    assert gpu_access.GPU_REQUEST_RESOURCES[0] == gpu_access.GPU_RESOURCE == "nvidia.com/gpu"
    assert (workload_names.USE_GPU_TYPE_ANNOTATION, workload_names.NOUSE_GPU_TYPE_ANNOTATION) == (
        "nvidia.com/use-gputype", "nvidia.com/nouse-gputype"
    )
    assert set(tenant_config.QUOTA_KEYS) == set(workloads.QUOTA_KEY_MAP) == {
        planner_model.QUOTA_GPU, planner_model.QUOTA_GPUMEM, planner_model.QUOTA_GPUCORES
    }
    # Kubernetes' quota counts an extended resource under `requests.` only; HAMi keeps limits.<memory|cores>.
    assert workloads.QUOTA_KEY_MAP == {
        "limits.nvidia.com/gpu": "requests.nvidia.com/gpu",
        "limits.nvidia.com/gpumem": "limits.nvidia.com/gpumem",
        "limits.nvidia.com/gpucores": "limits.nvidia.com/gpucores",
    }


def test_the_planner_matches_types_as_hamis_scheduler() -> None:
    # score.go getNodeResources: strings.Contains(strings.ToLower(type), strings.ToLower("NVIDIA"));
    # gpu_policy.go ComputeScore: the request counts on a device whose type is exactly "NVIDIA".
    assert fit._NVIDIA == "nvidia"
    assert fit._REQUEST_TYPE == "NVIDIA"


@pytest.mark.parametrize(("card_type", "verdict"), [
    ("NVIDIA-NVIDIA L4", "fits"),
    ("nvidia-written-by-hand", "fits"),  # getNodeResources compares lower-cased: any case of the marker counts
    ("Tesla T4", "never"),  # no marker: the scheduler never fits an NVIDIA request on it
])
def test_the_planners_verdicts_take_the_cards_the_scheduler_takes(card_type: str, verdict: str) -> None:
    """Two cards and two pod shapes (no symmetric shortcut): every tie-break ``orders`` walks sees the cards."""
    nodes = [Node("h", (Device("g0", card_type, 23034), Device("g1", card_type, 16000, index=1)))]
    workloads = [Workload("a", (ContainerRequest(1, 8000),)), Workload("b", (ContainerRequest(1, 12000, None, 30),))]
    assert [r.verdict for r in verdicts(nodes, workloads).replicas] == [verdict, verdict]
    # One card, one shape: the symmetric shortcut decides, with the same rule.
    one = [Node("h", (Device("g0", card_type, 23034),))]
    assert [r.verdict for r in verdicts(one, [Workload("w", (ContainerRequest(1, 8000),), replicas=2)]).replicas] == [
        verdict, verdict
    ]
