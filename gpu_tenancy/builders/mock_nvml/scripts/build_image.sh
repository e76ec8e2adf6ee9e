set -eu
if docker info --format '{{json .SecurityOptions}}' | grep -Eq '(^|[",])name=rootless([",]|$)'; then
  reason="rootless Docker cannot create the mock NVML's /dev/nvidia* device nodes; use mode sim there"
  echo "gpu-tenancy: mode sim-nvml needs a rootful Docker engine ($reason)" >&2
  exit 1
fi
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "gpu-tenancy: $IMAGE is already built"
  exit 0
fi
set --
for name in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy; do
  if [ -n "$(printenv "$name" || true)" ]; then
    set -- "$@" --build-arg "$name"
  fi
done
echo "gpu-tenancy: building $IMAGE from $CONTEXT (first time only; several minutes)" >&2
DOCKER_BUILDKIT=1 docker build --load --provenance=false "$@" --tag "$IMAGE" --file "$DOCKERFILE" "$CONTEXT"
