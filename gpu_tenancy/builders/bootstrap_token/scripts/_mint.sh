token_id="$(LC_ALL=C tr -dc 'a-z0-9' < /dev/urandom | head -c 6)"
token_secret="$(LC_ALL=C tr -dc 'a-z0-9' < /dev/urandom | head -c 16)"
expires=$(( $(date -u +%s) + @TTL_SECONDS@ ))
expiration="$(date -u -d "@$expires" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r "$expires" +%Y-%m-%dT%H:%M:%SZ)"
# Retried: the admin kubeconfig's group gets its rights only when Kamaji's tenant-side controllers have run
# (controllers/soot/manager.go, kubeadm_phases.go PhaseClusterAdminRBAC), which the TCP's Ready does not
# wait for; Kamaji's own e2e retries the same (e2e/worker_kubeadm_join_test.go). A create that went
# through but whose answer was lost comes back AlreadyExists, which is success.
attempt=0
until output=$(@SECRET_PRINTF@ \
    | kubectl --kubeconfig "$kubeconfig" --request-timeout=60s create -f - 2>&1); do
  case $output in *AlreadyExists*) break ;; esac
  attempt=$((attempt + 1))
  if [ "$attempt" -ge @MINT_ATTEMPTS@ ]; then
    echo "gpu-tenancy: could not create the bootstrap token in the tenant: $output" >&2
    exit 1
  fi
  sleep @MINT_RETRY_SECONDS@
done
