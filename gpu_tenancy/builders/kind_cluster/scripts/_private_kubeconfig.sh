kubeconfig_dir=$(mktemp -d)
trap 'rm -rf "$kubeconfig_dir"' EXIT
