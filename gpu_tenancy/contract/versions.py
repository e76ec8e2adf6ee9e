"""Every pinned version in one place.

The set fits together (evidence: shared reference `versions.md`):
- kind v0.32.0 publishes `kindest/node:v1.35.5@sha256:ce97...`; the same image serves the management
  cluster and every tenant worker, so the worker kubelet equals the tenant control plane exactly.
- Kamaji 26.8.2-edge accepts tenants up to v1.36 (`KubeadmVersion = v1.36.0`) and needs a v1.33+
  management cluster; its e2e runs the 1.35 line. The image is pinned; the chart is NOT: CLASTIX publishes
  no chart per edge release, only `0.0.0+latest`, rebuilt from master on every push (clastix/kamaji
  `.github/workflows/helm.yaml`; `.goreleaser.yaml` ships images only). Its templates and CRDs can
  therefore drift from the image. What this program sends (values, TenantControlPlane, DataStore) is
  checked against the chart at KAMAJI_CHART_CHECKED_COMMIT, the commit tagged 26.8.2-edge (tests/
  test_fidelity.py against ../shared, see its PROVENANCE.md). UNPINNED_CHARTS names it, so policy `charts-pinned`
  accepts exactly that moving version and nothing else, and every preview and update warns about it.
  That chart depends on kamaji-etcd `>=0.15.0` (its Chart.lock: 0.15.0).
- cert-manager v1.21 is the only line that supports and tests Kubernetes 1.33 -> 1.36.
- MetalLB chart 0.16.1 carries the Kubernetes 1.36 CRD fixes; L2 mode needs neither FRR nor FRR-K8s.
- HAMi chart 2.10.0 renders the v1 KubeSchedulerConfiguration for minor > 25; its kube-scheduler must
  match the tenant version and come from registry.k8s.io.
- kindnetd v20260528-9350166c is pre-loaded in the v0.32.0 node images (no pull in the tenant).
- mode sim-nvml: NVIDIA's mock NVML from NVIDIA/k8s-test-infra main at NVML_MOCK_COMMIT (2026-08-21, after
  tag v0.3.0: it carries #535, `nvmlEventSetWait` honouring its timeout; at v0.3.0 it returns at once and
  HAMi's health-check loop, rm/health.go, spins a CPU core), built on the Docker host from its
  `deployments/nvml-mock/Dockerfile` (golang 1.26.6-bookworm builder, debian
  bookworm-slim runtime; no image is published). Read at that commit: its library implements every NVML
  call HAMi v2.10.0's device plugin makes (docs/mock-nvml.md), reports the driver version of its
  Makefile's LIB_VERSION (550.163.01), and serves at most 8 GPUs per node (engine/device.go MaxDevices).
- mode real: hosts get kubelet/kubeadm of exactly the tenant version from pkgs.k8s.io, and NVIDIA
  container toolkit 1.19 (configures containerd 2.x, which Debian/Ubuntu hosts of 2026 ship) registered as
  the runtime handler `nvidia`, not the default: HAMi's RuntimeClass (chart 2.10.0 `devicePlugin.
  runtimeClassName`/`createRuntimeClass`) puts its plugin and GPU pods under it. Not exercised on real GPUs
  by this project's CI.
- The CLIs on the machine that runs `pulumi up` (gpu_tenancy/cli/tools.py installs them with `make tools`, each
  checked against a sha256 recorded there, Pulumi against its release's own checksum file): kind KIND_BINARY
  (its node images above), kubectl KUBECTL_BINARY (the tenant's minor: no client/server skew), the Pulumi CLI
  PULUMI_CLI = the `pulumi` SDK pinned in requirements.txt (the CLI runs the SDK's language host; `pulumi
  config set --raw`, used by the gpu preview, exists from v3.247.0). `make doctor` wants exactly these too.
Every value can be overridden per stack under `gpu-tenancy:versions` (docs/configuration.md); the three CLIs cannot.
"""

from __future__ import annotations

KIND_BINARY = "v0.32.0"  # the program drives the kind CLI
KUBECTL_BINARY = "v1.35.5"  # = TENANT_KUBERNETES_VERSION
PULUMI_CLI = "v3.272.0"  # = the pulumi SDK in requirements.txt

KIND_NODE_IMAGE = (
    "kindest/node:v1.35.5@sha256:ce977ae6d65918d0b58a5f8b5e940429c2ce42fa3a5619ec2bbc60b949c0ac95"
)
TENANT_KUBERNETES_VERSION = "v1.35.5"
WORKER_IMAGE = KIND_NODE_IMAGE

CERT_MANAGER_CHART_REPO = "https://charts.jetstack.io"
CERT_MANAGER_CHART_VERSION = "v1.21.1"

METALLB_CHART_REPO = "https://metallb.github.io/metallb"
METALLB_CHART_VERSION = "0.16.1"

KAMAJI_CHART_REPO = "https://clastix.github.io/charts"
KAMAJI_CHART_VERSION = "0.0.0+latest"  # a moving build, not a pin: see the docstring
KAMAJI_IMAGE_TAG = "26.8.2-edge"
KAMAJI_CHART_CHECKED_COMMIT = "ddbabd87ed0e8d7c319414383e153c46f21733a9"  # clastix/kamaji tag 26.8.2-edge

# A tenant's own etcd (tenants[].dataStore: dedicated): the kamaji-etcd chart the Kamaji chart locks
# (charts/kamaji Chart.lock: 0.15.0, etcd 3.5.17), so shared and dedicated etcds run the same etcd.
KAMAJI_ETCD_CHART_VERSION = "0.15.0"

# Charts deployed at a moving version (chart -> version) because no pinnable one is published.
UNPINNED_CHARTS = {"kamaji": KAMAJI_CHART_VERSION}

HAMI_CHART_REPO = "https://project-hami.github.io/HAMi/"
HAMI_CHART_VERSION = "2.10.0"
HAMI_IMAGE_TAG = "v2.10.0"

# NVIDIA's mock NVML (mode sim-nvml): built from this commit on the Docker host, never pushed.
NVML_MOCK_REPOSITORY = "https://github.com/NVIDIA/k8s-test-infra.git"
NVML_MOCK_COMMIT = "3b2b865d91b1844baa9feeca2820d2fab65414c7"  # main, 2026-08-21 (v0.3.0 + 49 commits)
NVML_MOCK_DOCKERFILE = "deployments/nvml-mock/Dockerfile"
NVML_MOCK_DRIVER_VERSION = "550.163.01"  # pkg/gpu/mocknvml/Makefile LIB_VERSION at that commit

NVIDIA_CONTAINER_TOOLKIT_VERSION = "1.19.0-1"  # apt version on the worker hosts (mode real)

KINDNETD_IMAGE = "docker.io/kindest/kindnetd:v20260528-9350166c"
KUBE_PROXY_REPOSITORY = "registry.k8s.io/kube-proxy"
KUBE_SCHEDULER_REGISTRY = "registry.k8s.io"
KUBE_SCHEDULER_REPOSITORY = "kube-scheduler"

# --- Host tools `make doctor` checks (gpu_tenancy/cli/doctor/host.py) ---------------------------------------------
# kind, kubectl and the Pulumi CLI must be exactly the pins above (what `make tools` installs).
DOCKER_ENGINE_MINIMUM = "24.0"  # README Prerequisites (kind v0.32.0 is tested on Docker 28)
