dump="$(containerd config dump)"
if printf '%s\n' "$dump" | grep -Eq '^[[:space:]]*default_runtime_name[[:space:]]*=[[:space:]]*"@RUNTIME_HANDLER@"'; then
  echo "gpu-tenancy: containerd on $(hostname) runs every pod under the NVIDIA runtime \
(default_runtime_name = @RUNTIME_HANDLER@); remove that default (see /etc/containerd/conf.d)" >&2
  exit 1
fi
if ! printf '%s\n' "$dump" | grep -Eq "runtimes[.][\"']?@RUNTIME_HANDLER@[\"']?[.]options[]]"; then
  echo "gpu-tenancy: containerd on $(hostname) has no '@RUNTIME_HANDLER@' runtime handler after nvidia-ctk runtime configure" >&2
  exit 1
fi
