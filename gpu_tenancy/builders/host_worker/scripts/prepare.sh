#!/usr/bin/env bash
# Prepares this host as a gpu-tenancy worker (Kubernetes @KUBERNETES_VERSION@). Safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
K8S_CHANNEL=@K8S_CHANNEL@
K8S_PACKAGE=@K8S_PACKAGE@
TOOLKIT_PACKAGE=@TOOLKIT_PACKAGE@

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null; then
  echo "gpu-tenancy: the NVIDIA driver is not working on $(hostname) (nvidia-smi -L failed); install it first" >&2
  exit 1
fi

swapoff -a
sed -ri '/\sswap\s/s/^#?/#/' /etc/fstab
printf 'overlay\nbr_netfilter\n' > /etc/modules-load.d/gpu-tenancy.conf
modprobe overlay
modprobe br_netfilter
cat > /etc/sysctl.d/90-gpu-tenancy.conf <<'SYSCTL'
net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
SYSCTL
sysctl --system >/dev/null

apt-get update -q
apt-get install -y -q apt-transport-https ca-certificates curl gpg containerd conntrack socat
install -d -m 0755 /etc/apt/keyrings
curl -fsSL "https://pkgs.k8s.io/core:/stable:/${K8S_CHANNEL}/deb/Release.key" \
  | gpg --batch --yes --dearmor -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg
K8S_REPO="https://pkgs.k8s.io/core:/stable:/${K8S_CHANNEL}/deb/"
echo "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] ${K8S_REPO} /" \
  > /etc/apt/sources.list.d/kubernetes.list
curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey \
  | gpg --batch --yes --dearmor -o /etc/apt/keyrings/nvidia-container-toolkit.gpg
curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list \
  | sed 's#deb https://#deb [signed-by=/etc/apt/keyrings/nvidia-container-toolkit.gpg] https://#' \
  > /etc/apt/sources.list.d/nvidia-container-toolkit.list
apt-get update -q
apt-mark unhold kubelet kubeadm >/dev/null 2>&1 || true
apt-get install -y -q --allow-downgrades "kubelet=${K8S_PACKAGE}" "kubeadm=${K8S_PACKAGE}" \
  "nvidia-container-toolkit=${TOOLKIT_PACKAGE}" "nvidia-container-toolkit-base=${TOOLKIT_PACKAGE}"
apt-mark hold kubelet kubeadm >/dev/null

# containerd with the systemd cgroup driver (the control plane's kubelet config says systemd). The NVIDIA
# runtime is registered as the handler `@RUNTIME_HANDLER@` and NOT made the default: only pods
# under HAMi's RuntimeClass reach it (gpu_tenancy/gpu_access.py). Run without --set-as-default, nvidia-ctk
# also drops a default it set before (nvidia-container-toolkit pkg/config/engine/containerd/config.go
# AddRuntimeWithOptions), so a host prepared by an older version is fixed by running this again.
install -d /etc/containerd
if [ ! -s /etc/containerd/config.toml ] || ! grep -q 'SystemdCgroup = true' /etc/containerd/config.toml; then
  containerd config default > /etc/containerd/config.toml
  sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' /etc/containerd/config.toml
fi
nvidia-ctk runtime configure --runtime=containerd --nvidia-runtime-name=@RUNTIME_HANDLER@
systemctl enable --now containerd kubelet
systemctl restart containerd
@RUNTIME_CHECK@
