set -eu
if ! command -v kubectl >/dev/null 2>&1; then
  echo "gpu-tenancy: kubectl not found on PATH (see README: Prerequisites)" >&2
  exit 1
fi
@STDIN_KUBECONFIG@
deadline=$(( $(date +%s) + @TIMEOUT_SECONDS@ ))
while :; do
  if output=$(printf '%s\n' "$MANIFEST" | kubectl --kubeconfig "$kubeconfig" apply --server-side \
      --force-conflicts --dry-run=server --field-manager=@FIELD_MANAGER@ -f - 2>&1); then
    exit 0
  fi
  case $output in
    *"@DENIED@"*)
      echo "gpu-tenancy: the admission webhook of @OWNER@ rejected the objects: $output" >&2
      exit 1
      ;;
  esac
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "gpu-tenancy: the admission webhook of @OWNER@ did not serve within @TIMEOUT_SECONDS@s" \
      "(check: kubectl -n @NAMESPACE@ logs deploy/@DEPLOYMENT@); last error: $output" >&2
    exit 1
  fi
  sleep @INTERVAL_SECONDS@
done
