set -eu
@PRIVATE_KUBECONFIG@
kind delete cluster --name @CLUSTER@ --kubeconfig "$kubeconfig_dir/config"
