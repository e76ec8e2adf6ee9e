set -eu
umask 077
worker="$GPU_TENANCY_WORKER"
template="$GPU_TENANCY_JOIN_CONFIGURATION"
kubeconfig="$(mktemp)"
token_id=""
cleanup() {
  docker exec "$worker" rm -f @JOIN_FILE@ >/dev/null 2>&1 || true
  if [ -n "$token_id" ]; then
    @REVOKE@
  fi
  rm -f "$kubeconfig"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cat > "$kubeconfig"

# Wait for systemd and containerd inside the node container, as kind does before kubeadm.
@WAIT_FOR_CONTAINERD@
# pulumi-command runs this script on create and on every update, with the new inputs (v1.2.1
# local/commandController.go `Update`: `create` when no `update` is set). A node joined with this
# configuration stays as it is; one joined to another endpoint or CA (the control plane moved, its CA
# changed) leaves and joins again here, with the kubeconfig that reaches the tenant now.
if docker exec "$worker" test -f @KUBELET_CONF@; then
  joined_with="$(docker exec "$worker" cat @JOINED_WITH@ 2>/dev/null || true)"
  if [ "$joined_with" = "$(printf '%s\n' "$template")" ]; then
    exit 0
  fi
  echo "gpu-tenancy: $worker was joined with another endpoint, CA or node registration: resetting it to join again" >&2
  docker exec "$worker" kubeadm reset --force
fi
# A join that failed half-way left files kubeadm's preflight refuses to overwrite: start clean.
if docker exec "$worker" sh -c @HALF_JOINED@; then
  echo "gpu-tenancy: $worker holds a half-finished join; kubeadm reset first" >&2
  docker exec "$worker" kubeadm reset --force
fi
# Swap stays on: /proc/swaps is the host's, so turning it off here would turn off the host's swap; the kubelet runs with
# failSwapOn false and kubeadm's Swap preflight is ignored, as kind does.
docker exec "$worker" sh -c 'modprobe br_netfilter 2>/dev/null || true'

case "$template" in
  *@TOKEN_PLACEHOLDER@*) ;;
  *) echo "gpu-tenancy: GPU_TENANCY_JOIN_CONFIGURATION has no token placeholder" >&2; exit 1 ;;
esac
@MINT@
before="${template%%@TOKEN_PLACEHOLDER@*}"
after="${template#*@TOKEN_PLACEHOLDER@}"
printf '%s%s%s\n' "$before" "$token_id.$token_secret" "$after" \
  | docker exec -i "$worker" sh -c 'umask 077; cat > @JOIN_FILE@'
# This node is not joined now: a Node of its name is its own earlier registration (an old container's, or
# this one's before a reset), Ready until its lease runs out, and kubeadm refuses the name while it is ("a
# Node with name ... and status Ready already exists"). Removed here, through the tenant's current API
# server, so that no delete has to reach the tenant with a kubeconfig stored before it moved.
kubectl --kubeconfig "$kubeconfig" --request-timeout=60s delete node "$worker" --ignore-not-found
docker exec "$worker" kubeadm join --config @JOIN_FILE@
printf '%s\n' "$template" | docker exec -i "$worker" sh -c 'cat > @JOINED_WITH@'
