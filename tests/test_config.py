from __future__ import annotations

import copy
from typing import Any

import pytest

from gpu_tenancy.contract.config import ConfigError, load_config
from gpu_tenancy.contract.config_checks import resolve_host
from tests.harness import LabMocks, _run, dev_config

A100 = {"model": "NVIDIA A100-SXM4-80GB", "count": 1}
L4 = {"model": "NVIDIA L4", "count": 1}


def with_tenants(*tenants: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"mode": "sim", "tenants": list(tenants), **extra}


BAD_CONFIGS: list[tuple[str, dict[str, Any], str]] = [
    ("missing tenants", {"mode": "sim"}, "gpu-tenancy:tenants: is required"),
    ("missing mode", {"tenants": [{"name": "a", "gpus": [A100]}]}, "gpu-tenancy:mode: is required"),
    ("empty tenants", with_tenants(), "gpu-tenancy:tenants: List should have at least 1 item after validation, not 0"),
    ("unknown mode", {"mode": "cloud", "tenants": [{"name": "a", "gpus": [A100]}]}, "gpu-tenancy:mode: Input should be 'sim', 'sim-nvml' or 'real' (got 'cloud')"),
    ("real without kubeconfig", {"mode": "real", "tenants": [{"name": "a", "gpus": [A100]}]}, "gpu-tenancy:managementKubeconfig: is required in mode 'real' (pulumi config set --secret ...)"),
    ("duplicate names", with_tenants({"name": "a", "gpus": [A100]}, {"name": "a", "gpus": [A100]}), "gpu-tenancy:tenants: duplicate tenant name(s): a"),
    ("invalid name", with_tenants({"name": "Tenant_B", "gpus": [A100]}), "gpu-tenancy:tenants[0].name: 'Tenant_B' is not a DNS-1123 label (lower-case letters, digits, '-')"),
    # Python's `$` also matches before a final newline; Kubernetes' (Go's) does not.
    ("metrics label value with a trailing newline", with_tenants({"name": "a", "gpus": [A100]}, metrics={"enabled": True, "labels": {"release": "prom\n"}}), "gpu-tenancy:metrics.labels: release: 'prom\\n' is not a Kubernetes label value (63 characters, alphanumeric ends)"),
    ("metrics label name with a trailing newline", with_tenants({"name": "a", "gpus": [A100]}, metrics={"enabled": True, "labels": {"release\n": "prom"}}), "gpu-tenancy:metrics.labels: 'release\\n' is not a Kubernetes label name"),
    ("name with a trailing newline", with_tenants({"name": "tenant-a\n", "gpus": [A100]}), "gpu-tenancy:tenants[0].name: 'tenant-a\\n' is not a DNS-1123 label (lower-case letters, digits, '-')"),
    ("version with a trailing newline", with_tenants({"name": "a", "gpus": [A100]}, versions={"kubernetes": "v1.35.5\n"}), "gpu-tenancy:versions.kubernetes: 'v1.35.5\\n' is not an exact version like 'v1.35.5'"),
    ("name too long", with_tenants({"name": "a" * 41, "gpus": [A100]}), "gpu-tenancy:tenants[0].name: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' is longer than 40 characters (it prefixes derived names)"),
    ("no gpus", with_tenants({"name": "a", "gpus": []}), "gpu-tenancy:tenants[0].gpus: List should have at least 1 item after validation, not 0"),
    ("zero memory", with_tenants({"name": "a", "gpus": [{**A100, "memoryMiB": 0}]}), "gpu-tenancy:tenants[0].gpus[0].memoryMiB: Input should be greater than 0"),
    ("negative count", with_tenants({"name": "a", "gpus": [{**A100, "count": -1}]}), "gpu-tenancy:tenants[0].gpus[0].count: Input should be greater than 0"),
    ("memory as string", with_tenants({"name": "a", "gpus": [{**A100, "memoryMiB": "80Gi"}]}), "gpu-tenancy:tenants[0].gpus[0].memoryMiB: Input should be a valid integer (got '80Gi')"),
    ("tenants not a list", {"mode": "sim", "tenants": "tenant-a"}, "gpu-tenancy:tenants: Input should be a valid list (got 'tenant-a')"),
    ("uncatalogued model without memory", with_tenants({"name": "a", "gpus": [{**A100, "model": "NVIDIA RTX 9000"}]}), "gpu-tenancy:tenants[0].gpus[0].memoryMiB: is required for 'NVIDIA RTX 9000', which the GPU catalogue does not know: the MiB that `nvidia-smi --query-gpu=memory.total --format=csv` reports on that card"),
    ("marketed memory of a known model", with_tenants({"name": "a", "gpus": [{**L4, "memoryMiB": 24576}]}), "gpu-tenancy:tenants[0].gpus[0].memoryMiB: 24576 MiB is not what an NVIDIA L4 registers: NVML reports 23034 MiB (leave memoryMiB out to take it)"),
    ("model spelt as HAMi prefixes it", with_tenants({"name": "a", "gpus": [{**L4, "model": "NVIDIA-L4"}]}), "gpu-tenancy:tenants[0].gpus[0].model: 'NVIDIA-L4' is not how NVML names the card: write 'NVIDIA L4' (what nvidia-smi prints)"),
    ("memory beyond HAMi's int32", with_tenants({"name": "a", "gpus": [{"model": "NVIDIA X", "memoryMiB": 2**31, "count": 1}]}), "gpu-tenancy:tenants[0].gpus[0].memoryMiB: Input should be less than or equal to 2147483647"),
    ("unknown tenant key", with_tenants({"name": "a", "gpus": [A100], "gpu": []}), "gpu-tenancy:tenants[0].gpu: is not a known setting (did you mean 'gpus'?)"),
    ("unknown top-level key", with_tenants({"name": "a", "gpus": [A100]}, tenantz=[]), "gpu-tenancy:tenantz: is not a known setting (did you mean 'tenants'?)"),
    # The misspelling, not the "required" it causes.
    ("misspelt required key", {"mode": "sim", "tenant": [{"name": "a", "gpus": [A100]}]}, "gpu-tenancy:tenant: is not a known setting (did you mean 'tenants'?)"),
    ("missing model", with_tenants({"name": "a", "gpus": [{"memoryMiB": 1, "count": 1}]}), "gpu-tenancy:tenants[0].gpus[0].model: is required"),
    ("version unsupported", with_tenants({"name": "a", "gpus": [A100]}, versions={"kubernetes": "v1.37.0", "workerImage": "kindest/node:v1.37.0"}), "gpu-tenancy:versions.kubernetes: 'v1.37.0' is outside what Kamaji 26.8.2-edge accepts (v1.30 .. v1.36)"),
    ("worker mismatch", with_tenants({"name": "a", "gpus": [A100]}, versions={"workerImage": "kindest/node:v1.34.8"}), "gpu-tenancy:versions: workerImage tag 'v1.34.8' must equal kubernetes 'v1.35.5' (the worker kubelet must match its control plane)"),
    ("latest image", with_tenants({"name": "a", "gpus": [A100]}, versions={"kindNodeImage": "kindest/node:latest"}), "gpu-tenancy:versions.kindNodeImage: image 'kindest/node:latest' tag 'latest' is a moving tag"),
    ("bad cidr", with_tenants({"name": "a", "gpus": [A100], "podCidr": "10.0.0.0/33"}), "gpu-tenancy:tenants[0].podCidr: '10.0.0.0/33' is not a valid CIDR ('10.0.0.0/33' does not appear to be an IPv4 or IPv6 network)"),
    ("ipv6 cidr", with_tenants({"name": "a", "gpus": [A100], "serviceCidr": "fd00::/64"}), "gpu-tenancy:tenants[0].serviceCidr: 'fd00::/64' must be an IPv4 CIDR of /24 or larger"),
    ("headroom replaced", with_tenants({"name": "a", "gpus": [A100]}, metallb={"headroom": 8}), "gpu-tenancy:metallb.headroom: is replaced by metallb.poolSize (a fixed pool size, so removing a tenant re-addresses no other); set poolSize to at least your old tenants + headroom"),
    ("zero pool", with_tenants({"name": "a", "gpus": [A100]}, metallb={"poolSize": 0}), "gpu-tenancy:metallb.poolSize: Input should be greater than or equal to 1"),
    ("pool too small", with_tenants({"name": "a", "gpus": [A100]}, {"name": "b", "gpus": [A100]}, metallb={"poolSize": 1}), "gpu-tenancy:metallb.poolSize: 1 addresses for 2 tenants' control planes; raise it (existing addresses stay)"),
    ("unpinned workload image", with_tenants({"name": "a", "gpus": [A100], "workloads": [{"name": "w", "image": "nginx", "containers": [{"gpus": 1, "gpumemMiB": 1024}]}]}), "gpu-tenancy:tenants[0].workloads[0].image: image 'nginx' has no tag"),
    ("moving workload image", with_tenants({"name": "a", "gpus": [A100], "workloads": [{"name": "w", "image": "ghcr.io/x/app:main", "containers": [{"gpus": 1, "gpumemMiB": 1024}]}]}), "gpu-tenancy:tenants[0].workloads[0].image: image 'ghcr.io/x/app:main' tag 'main' is a moving tag"),
    ("minor-line workload image", with_tenants({"name": "a", "gpus": [A100], "workloads": [{"name": "w", "image": "python:3.11", "containers": [{"gpus": 1, "gpumemMiB": 1024}]}]}), "gpu-tenancy:tenants[0].workloads[0].image: image 'python:3.11' tag '3.11' is not an exact release (use a vX.Y.Z tag or pin a digest @sha256:...)"),
    ("empty kamaji tag", with_tenants({"name": "a", "gpus": [A100]}, versions={"kamajiImageTag": ""}), "gpu-tenancy:versions.kamajiImageTag: tag is empty (the chart would fall back to its own default tag); set an exact release tag"),
    ("moving hami tag", with_tenants({"name": "a", "gpus": [A100]}, versions={"hamiImageTag": "latest"}), "gpu-tenancy:versions.hamiImageTag: tag 'latest' is a moving tag (it can move); set an exact release tag"),
    ("derived service range inside another tenant's pod range", with_tenants({"name": "x", "gpus": [A100], "podCidr": "10.203.0.0/16"}, {"name": "tenant-a", "gpus": [A100]}), "gpu-tenancy:tenants[1].serviceCidr: 10.203.132.0/22 (derived from its name) of tenant 'tenant-a' collides with 10.203.0.0/16 of tenant 'x'; set tenants[1].serviceCidr explicitly"),
    ("17 cards in one request", with_tenants({"name": "a", "gpus": [A100], "workloads": [{"name": "w", "containers": [{"gpus": 17, "gpumemMiB": 1024}]}]}), "gpu-tenancy:tenants[0].workloads[0].containers[0].gpus: Input should be less than or equal to 16"),
    ("too many replicas", with_tenants({"name": "a", "gpus": [A100], "workloads": [{"name": "w", "replicas": 1001, "containers": [{"gpus": 1, "gpumemMiB": 1024}]}]}), "gpu-tenancy:tenants[0].workloads[0].replicas: Input should be less than or equal to 1000"),
    ("17 containers", with_tenants({"name": "a", "gpus": [A100], "workloads": [{"name": "w", "containers": [{"gpus": 1, "gpumemMiB": 1}] * 17}]}), "gpu-tenancy:tenants[0].workloads[0].containers: List should have at most 16 items after validation, not 17"),
    ("17 card groups", with_tenants({"name": "a", "gpus": [A100] * 17}), "gpu-tenancy:tenants[0].gpus: List should have at most 16 items after validation, not 17"),
    ("too many workloads", with_tenants({"name": "a", "gpus": [A100], "workloads": [{"name": f"w{i}", "containers": [{"gpus": 1, "gpumemMiB": 1}]} for i in range(101)]}), "gpu-tenancy:tenants[0].workloads: List should have at most 100 items after validation, not 101"),
    ("17 cards of a model", with_tenants({"name": "a", "gpus": [{**A100, "count": 17}]}), "gpu-tenancy:tenants[0].gpus[0].count: Input should be less than or equal to 16"),
    ("negative memory quota", with_tenants({"name": "a", "gpus": [A100], "quota": {"limits.nvidia.com/gpumem": -1}}), "gpu-tenancy:tenants[0].quota: quota 'limits.nvidia.com/gpumem' must be >= 0 (0 admits no pod asking for it)"),
    ("unknown quota key", with_tenants({"name": "a", "gpus": [A100], "quota": {"requests.cpu": 1}}), "gpu-tenancy:tenants[0].quota: unknown quota key 'requests.cpu'; allowed: limits.nvidia.com/gpu, limits.nvidia.com/gpumem, limits.nvidia.com/gpucores"),
]


HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRUI7A4r2Oe3N9zclUpPKxk3Z7S4zqycdNpn5Rp/E8V"
HOST = {"name": "gpu-01", "address": "10.20.0.11", "user": "ubuntu", "hostKey": HOST_KEY}
SECRETS = {"managementKubeconfig": "apiVersion: v1\nkind: Config\n", "sshPrivateKey": "key"}


def real(*tenants: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"mode": "real", "tenants": list(tenants), **SECRETS, **extra}


# Settings of the other mode, or missing what the mode needs (issue 6).
MODE_CONFIGS: list[tuple[str, dict[str, Any], str]] = [
    ("worker hosts in sim", with_tenants({"name": "a", "gpus": [A100], "workers": [HOST]}), "gpu-tenancy:tenants[0].workers: worker hosts are only for mode 'real' (sim starts kind nodes)"),
    ("kubeconfig in sim", with_tenants({"name": "a", "gpus": [A100]}, managementKubeconfig="x"), "gpu-tenancy:managementKubeconfig: is only for mode 'real' (sim builds its own kind cluster and workers)"),
    ("ssh key in sim", with_tenants({"name": "a", "gpus": [A100]}, sshPrivateKey="key"), "gpu-tenancy:sshPrivateKey: is only for mode 'real' (sim builds its own kind cluster and workers)"),
    ("mismatch policy in sim", with_tenants({"name": "a", "gpus": [A100]}, inventoryMismatch="warn"), "gpu-tenancy:inventoryMismatch: is only for mode 'real' (sim builds its own kind cluster and workers)"),
    ("kubeconfig in sim-nvml", {"mode": "sim-nvml", "tenants": [{"name": "a", "gpus": [A100]}], "managementKubeconfig": "x"}, "gpu-tenancy:managementKubeconfig: is only for mode 'real' (sim-nvml builds its own kind cluster and workers)"),
    ("control-plane address in sim", with_tenants({"name": "a", "gpus": [A100], "controlPlaneAddress": "10.0.0.5"}), "gpu-tenancy:tenants[0].controlPlaneAddress: is only for mode 'real' (sim takes MetalLB's address)"),
    ("node port in sim", with_tenants({"name": "a", "gpus": [A100], "nodePort": 30443}), "gpu-tenancy:tenants[0].nodePort: is only for mode 'real' with controlPlane.serviceType NodePort"),
    ("pool addresses in sim", with_tenants({"name": "a", "gpus": [A100]}, metallb={"addresses": ["10.0.0.0/28"]}), "gpu-tenancy:metallb.addresses: sim derives the pool from the kind network; remove it"),
    ("control-plane service in sim", with_tenants({"name": "a", "gpus": [A100]}, controlPlane={"serviceType": "LoadBalancer"}), "gpu-tenancy:controlPlane: is only for mode 'real' (sim exposes control planes through MetalLB)"),
    ("metallb off in sim", with_tenants({"name": "a", "gpus": [A100]}, metallb={"enabled": False}), "gpu-tenancy:metallb.enabled: sim needs MetalLB for the control planes' LoadBalancer services"),
    ("kind in real", real({"name": "a", "gpus": [A100], "workers": [HOST]}, kind={"network": "kind"}), "gpu-tenancy:kind: is only for modes 'sim' and 'sim-nvml' (real uses the cluster in managementKubeconfig)"),
    ("real without ssh key", {**real({"name": "a", "gpus": [A100], "workers": [HOST]}), "sshPrivateKey": None}, "gpu-tenancy:sshPrivateKey: is required in mode 'real' to prepare and join the worker hosts"),
    ("real tenant without hosts", real({"name": "a", "gpus": [A100]}), "gpu-tenancy:tenants[0].workers: mode 'real' needs at least one worker host per tenant"),
    ("host name with a trailing newline", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "address": "gpu01.lab\n"}]}), "gpu-tenancy:tenants[0].workers[0].address: 'gpu01.lab\\n' is neither an IP address nor a host name"),
    ("host shared by tenants", real({"name": "a", "gpus": [A100], "workers": [HOST]}, {"name": "b", "gpus": [A100], "workers": [{**HOST, "name": "gpu-02"}]}), "gpu-tenancy:tenants[1].workers[0].address: host 10.20.0.11 is already a worker of tenant a (gpu-01); a machine joins one tenant once"),
    ("nodeport without address", real({"name": "a", "gpus": [A100], "workers": [HOST]}, controlPlane={"serviceType": "NodePort"}), "gpu-tenancy:tenants[0].controlPlaneAddress: is required with controlPlane.serviceType NodePort"),
    ("metallb without pool", real({"name": "a", "gpus": [A100], "workers": [HOST]}, metallb={"enabled": True}), "gpu-tenancy:metallb.addresses: is required when MetalLB is enabled in mode 'real'"),
    ("metallb pool, metallb not enabled", real({"name": "a", "gpus": [A100], "workers": [HOST]}, metallb={"addresses": ["10.20.0.230-10.20.0.250"]}), "gpu-tenancy:metallb.addresses: is set but metallb.enabled is not true"),
    ("metallb pool, metallb disabled", real({"name": "a", "gpus": [A100], "workers": [HOST]}, metallb={"enabled": False, "addresses": ["10.20.0.230-10.20.0.250"]}), "gpu-tenancy:metallb.addresses: is set but metallb.enabled is not true"),
    ("bad metallb range", real({"name": "a", "gpus": [A100], "workers": [HOST]}, metallb={"enabled": True, "addresses": ["10.0.0.9-10.0.0.1"]}), "gpu-tenancy:metallb.addresses: '10.0.0.9-10.0.0.1' is not an IPv4 CIDR or range (the range ends before it starts)"),
    ("bad host address", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "address": "not a host!"}]}), "gpu-tenancy:tenants[0].workers[0].address: 'not a host!' is neither an IP address nor a host name"),
    ("duplicate node names", real({"name": "a", "gpus": [A100], "workers": [HOST, {**HOST, "address": "10.20.0.12"}]}), "gpu-tenancy:tenants[0].workers: duplicate worker name(s): gpu-01"),
    ("several hosts, one without gpus", real({"name": "a", "gpus": [{**L4, "count": 2}], "workers": [{**HOST, "gpus": [L4]}, {**HOST, "name": "gpu-02", "address": "10.20.0.12"}]}), "gpu-tenancy:tenants[0]: workers[1].gpus is required when a tenant has several hosts: say which cards host gpu-02 has"),
    ("hosts' cards differ from the tenant's", real({"name": "a", "gpus": [{**L4, "count": 3}], "workers": [{**HOST, "gpus": [L4]}, {**HOST, "name": "gpu-02", "address": "10.20.0.12", "gpus": [L4]}]}), "gpu-tenancy:tenants[0]: its hosts' gpus (2 x NVIDIA L4 (23034 MiB)) differ from its gpus (3 x NVIDIA L4 (23034 MiB)): the tenant's gpus are the sum of its hosts'"),
    ("unknown mismatch policy", real({"name": "a", "gpus": [A100], "workers": [HOST]}, inventoryMismatch="ignore"), "gpu-tenancy:inventoryMismatch: Input should be 'error' or 'warn' (got 'ignore')"),
    ("unknown order-dependent plan policy", with_tenants({"name": "a", "gpus": [A100]}, orderDependentPlan="ignore"), "gpu-tenancy:orderDependentPlan: Input should be 'warn' or 'refuse' (got 'ignore')"),
    ("numa list not one per card", real({"name": "a", "gpus": [{**A100, "count": 2}], "workers": [{**HOST, "numa": [0]}]}), "gpu-tenancy:tenants[0].workers[0]: numa lists 1 NUMA node(s) for 2 card(s): give one per card"),
    ("worker without host key", real({"name": "a", "gpus": [A100], "workers": [{k: v for k, v in HOST.items() if k != "hostKey"}]}),
     "gpu-tenancy:tenants[0].workers[0].hostKey: worker gpu-01 has no SSH host key, so anyone between here and 10.20.0.11 would receive its join token; set it from `ssh-keyscan -t ed25519 -p 22 10.20.0.11` after checking the fingerprint on the host (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub)"),
    ("rsa host key", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "hostKey": "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ=="}]}),
     "gpu-tenancy:tenants[0].workers[0].hostKey: is an RSA key, which pulumi-command would negotiate as ssh-rsa (SHA-1) and OpenSSH 8.8+ refuses; use the host's ed25519 key (ssh-keyscan -t ed25519 <address>)"),
    ("garbled host key", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "hostKey": "ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ=="}]}),
     "gpu-tenancy:tenants[0].workers[0].hostKey: its key data is not a ssh-ed25519 key"),
    ("same ip written twice", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "address": "fd00::11"}]}, {"name": "b", "gpus": [A100], "workers": [{**HOST, "name": "gpu-02", "address": "fd00:0:0::11"}]}),
     "gpu-tenancy:tenants[1].workers[0].address: host fd00:0:0::11 is already a worker of tenant a (gpu-01) (fd00::11 and fd00:0:0::11 resolve to the same address); a machine joins one tenant once"),
    ("host key without its key data", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "hostKey": "ssh-ed25519"}]}),
     "gpu-tenancy:tenants[0].workers[0].hostKey: is not an SSH public key line '<type> <base64>' (from ssh-keyscan)"),
    ("dsa host key", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "hostKey": "ssh-dss AAAAB3NzaC1kc3MAAACBAP"}]}),
     "gpu-tenancy:tenants[0].workers[0].hostKey: key type 'ssh-dss' is not one of ssh-ed25519, ecdsa-sha2-nistp256, ecdsa-sha2-nistp384, ecdsa-sha2-nistp521, sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com"),
    ("host key data not base64", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "hostKey": "ssh-ed25519 AAAA!AAAA"}]}),
     "gpu-tenancy:tenants[0].workers[0].hostKey: is not valid base64 after the key type"),
    ("host key data naming no key type", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "hostKey": "ssh-ed25519 AAAABP/+/fw="}]}),
     "gpu-tenancy:tenants[0].workers[0].hostKey: its key data is not a ssh-ed25519 key"),
    ("host key data shorter than its length", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "hostKey": "ssh-ed25519 AAs="}]}),
     "gpu-tenancy:tenants[0].workers[0].hostKey: its key data is not a ssh-ed25519 key"),
    ("control-plane address not IPv4", real({"name": "a", "gpus": [A100], "workers": [HOST], "controlPlaneAddress": "fd00::1"}),
     "gpu-tenancy:tenants[0].controlPlaneAddress: 'fd00::1' is not an IPv4 address"),
    ("hosts' cards of two models differ from the tenant's", real({"name": "a", "gpus": [L4, A100], "workers": [{**HOST, "gpus": [L4]}, {**HOST, "name": "gpu-02", "address": "10.20.0.12", "gpus": [{**L4, "count": 2}]}]}),
     "gpu-tenancy:tenants[0]: its hosts' gpus (3 x NVIDIA L4 (23034 MiB)) differ from its gpus (1 x NVIDIA A100-SXM4-80GB (81920 MiB), 1 x NVIDIA L4 (23034 MiB)): the tenant's gpus are the sum of its hosts'"),
    ("a tenant's only host with no cards", real({"name": "a", "gpus": [A100], "workers": [{**HOST, "gpus": []}]}),
     "gpu-tenancy:tenants[0]: workers[0].gpus is empty: leave it out to give host gpu-01 the tenant's gpus"),
    ("9 cards on a mock NVML node", {"mode": "sim-nvml", "tenants": [{"name": "a", "gpus": [{**L4, "count": 5}, {**A100, "count": 4}]}]},
     "gpu-tenancy:tenants[0].gpus: 9 GPUs on tenant a's one worker; the mock NVML serves at most 8 per node (k8s-test-infra engine/device.go MaxDevices)"),
]


@pytest.mark.parametrize("line", [f"10.20.0.11 {HOST_KEY}", f"10.20.0.11 {HOST_KEY} comment", f"{HOST_KEY} root@gpu-01"])
def test_a_ssh_keyscan_line_is_accepted_as_a_host_key(line: str) -> None:
    """`ssh-keyscan` prints `<host> <type> <base64>`; a .pub file holds `<type> <base64> <comment>`."""
    config = real({"name": "a", "gpus": [A100], "workers": [{**HOST, "hostKey": line}]})
    assert load_config(config, frozenset(SECRETS)).tenants[0].workers[0].host_key == HOST_KEY


def test_one_machine_under_a_name_and_an_address_is_refused() -> None:
    """gpu-01.lab resolves to 10.20.0.11: listed for two tenants, one destroy would reset the other's host."""
    resolved = {"gpu-01.lab": {"10.20.0.11"}, "10.20.0.11": {"10.20.0.11"}, "10.20.0.12": {"10.20.0.12"}}
    by_name = {**HOST, "name": "gpu-02", "address": "gpu-01.lab"}
    config = real({"name": "a", "gpus": [A100], "workers": [HOST]}, {"name": "b", "gpus": [A100], "workers": [by_name]})
    with pytest.raises(ConfigError) as error:
        load_config(config, frozenset(SECRETS), resolve=lambda address: resolved.get(address, set()))
    assert str(error.value) == (
        "gpu-tenancy:tenants[1].workers[0].address: host gpu-01.lab is already a worker of tenant a (gpu-01) "
        "(10.20.0.11 and gpu-01.lab resolve to the same address); a machine joins one tenant once"
    )
    # Within one tenant too (each of its two hosts with one of its two cards).
    config = real({"name": "a", "gpus": [{**A100, "count": 2}], "workers": [{**HOST, "gpus": [A100]}, {**by_name, "gpus": [A100]}]})
    with pytest.raises(ConfigError, match=r"tenants\[0\]\.workers\[1\]\.address: host gpu-01.lab is already"):
        load_config(config, frozenset(SECRETS), resolve=lambda address: resolved.get(address, set()))
    # A name that does not resolve here is left to the machine-id check at prepare time.
    assert load_config(config, frozenset(SECRETS), resolve=lambda address: set())


def test_a_pool_of_exactly_one_address_per_tenant_is_enough() -> None:
    config = load_config(with_tenants({"name": "a", "gpus": [A100]}, {"name": "b", "gpus": [A100]}, metallb={"poolSize": 2}))
    assert config.metallb.pool_size == 2


@pytest.mark.parametrize(("case", "config", "expected"), BAD_CONFIGS + MODE_CONFIGS, ids=[c[0] for c in BAD_CONFIGS + MODE_CONFIGS])
def test_bad_config_fails_with_one_line_naming_the_key_and_the_reason(case: str, config: dict[str, Any], expected: str) -> None:
    assert expected.split(": ", 1)[1], f"{case}: the expected message must say why, not only which key"
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(ConfigError) as error:
        load_config(config, frozenset(SECRETS))
    assert str(error.value) == expected


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
    # Literal on purpose: a change here re-addresses (replaces) every existing tenant of that name.
    assert config.cidrs(config.tenants[0]) == ("10.174.16.0/20", "10.203.132.0/22")
    assert config.cidrs(config.tenants[1]) == ("10.149.160.0/20", "10.197.104.0/22")


def test_versions_can_be_overridden_per_stack() -> None:
    raw = copy.deepcopy(dev_config())
    raw["versions"] = {
        "kubernetes": "v1.36.1",
        "workerImage": "kindest/node:v1.36.1@sha256:3489c7674813ba5d8b1a9977baea8a6e553784dab7b84759d1014dbd78f7ebd5",
    }
    assert load_config(raw).versions.kubernetes == "v1.36.1"


def test_credentials_must_be_stored_as_secrets() -> None:
    config = real({"name": "a", "gpus": [A100], "workers": [HOST]})
    assert load_config(config, frozenset(SECRETS)).mode == "real"
    with pytest.raises(ConfigError, match=r"^gpu-tenancy:managementKubeconfig: must be a secret \(pulumi config set --secret"):
        load_config(config, frozenset({"sshPrivateKey"}))


def test_secret_values_never_appear_in_errors() -> None:
    config = real({"name": "a", "gpus": [A100], "workers": [HOST]}, managementKubeconfig=["s3cr3t-token"])
    with pytest.raises(ConfigError) as error:
        load_config(config, frozenset(SECRETS))
    assert str(error.value) == (
        "gpu-tenancy:managementKubeconfig: Input should be a valid string (value not shown: it is a secret)"
    )
    parsed = load_config(real({"name": "a", "gpus": [A100], "workers": [HOST]}), frozenset(SECRETS))
    assert "apiVersion" not in repr(parsed) and "key" not in repr(parsed.ssh_private_key)


@pytest.mark.parametrize(("case", "config", "expected"), MODE_CONFIGS[:5], ids=[c[0] for c in MODE_CONFIGS[:5]])
def test_mixed_mode_config_registers_no_resource(case: str, config: dict[str, Any], expected: str) -> None:
    mocks = LabMocks()
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(Exception) as error:
        _run(mocks, config, preview=True, stack="gpu")
    assert expected in str(error.value)
    assert mocks.resources == [], [r.name for r in mocks.resources]


def test_a_catalogued_card_takes_the_memory_nvml_reports() -> None:
    config = load_config(with_tenants({"name": "a", "gpus": [L4, {"model": "Tesla T4", "count": 2}]}))
    # NVML's totals on a current driver (gpu_tenancy/hami/gpu_catalogue.py names the published output).
    assert [(g.model, g.memory_mib, g.registered_type) for g in config.tenants[0].gpus] == [
        ("NVIDIA L4", 23034, "NVIDIA L4"),
        ("Tesla T4", 15360, "NVIDIA-Tesla T4"),
    ]
    assert all(g.in_catalogue for g in config.tenants[0].gpus)


def test_an_uncatalogued_card_keeps_its_declared_memory_and_is_flagged() -> None:
    gpu = load_config(with_tenants({"name": "a", "gpus": [{"model": "NVIDIA RTX 9000", "memoryMiB": 98304, "count": 1}]})).tenants[0].gpus[0]
    assert (gpu.memory_mib, gpu.in_catalogue) == (98304, False)


def test_quota_zero_is_a_limit() -> None:
    quota = {"limits.nvidia.com/gpu": 0, "limits.nvidia.com/gpumem": 0, "limits.nvidia.com/gpucores": 0}
    assert load_config(with_tenants({"name": "a", "gpus": [A100], "quota": quota})).tenants[0].quota == quota


def test_a_tenants_only_host_holds_the_tenants_gpus() -> None:
    config = load_config(real({"name": "a", "gpus": [{**L4, "count": 2}], "workers": [HOST]}), frozenset(SECRETS))
    assert [(g.model, g.count) for g in config.tenants[0].workers[0].gpus] == [("NVIDIA L4", 2)]


def test_hosts_may_split_a_tenants_gpus() -> None:
    hosts = [{**HOST, "gpus": [L4]}, {**HOST, "name": "gpu-02", "address": "10.20.0.12", "gpus": [L4]}]
    config = load_config(real({"name": "a", "gpus": [{**L4, "count": 2}], "workers": hosts}), frozenset(SECRETS))
    assert [[g.count for g in w.gpus] for w in config.tenants[0].workers] == [[1], [1]]


def test_a_mock_nvml_node_takes_eight_cards() -> None:
    config = load_config({"mode": "sim-nvml", "tenants": [{"name": "a", "gpus": [{**L4, "count": 4}, {**A100, "count": 4}]}]})
    assert sum(gpu.count for gpu in config.tenants[0].gpus) == 8


def test_a_worker_address_resolves_as_the_system_resolver_answers() -> None:
    """An IP literal is itself; `localhost` comes from /etc/hosts, no DNS needed."""
    assert resolve_host("fd00:0:0::11") == {"fd00::11"}
    assert "127.0.0.1" in resolve_host("localhost")


def test_a_name_may_be_as_long_as_a_dns_label_and_no_longer() -> None:
    """A DNS-1123 label is at most 63 characters (Kubernetes' `validation.IsDNS1123Label`)."""
    longest = "w" * 63
    workload = {"name": longest, "containers": [{"gpus": 1}]}
    stack = load_config(with_tenants({"name": "a", "gpus": [A100], "workloads": [workload]}), frozenset(SECRETS))
    assert stack.tenants[0].workloads[0].name == longest
    with pytest.raises(ConfigError) as error:
        load_config(with_tenants({"name": "a", "gpus": [A100], "workloads": [{**workload, "name": longest + "w"}]}),
                    frozenset(SECRETS))
    assert str(error.value) == (
        f"gpu-tenancy:tenants[0].workloads[0].name: '{longest}w' is not a DNS-1123 label (lower-case letters, digits, '-')"
    )
