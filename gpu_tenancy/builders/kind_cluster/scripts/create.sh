set -eu
@PRIVATE_KUBECONFIG@
if ! kind get clusters 2>/dev/null | grep -qx @CLUSTER@; then
  kind create cluster --name @CLUSTER@ --image @NODE_IMAGE@ --config - --wait 180s --kubeconfig "$kubeconfig_dir/config"
fi
