"""Shell fragments shared by the scripts the program runs on the Pulumi host (pulumi-command, `/bin/sh -c`)."""

from __future__ import annotations

# The credentials arrive on stdin (never on a command line) and live in a private temporary file that is
# removed on any exit, signals included; scripts then call kubectl with `--kubeconfig "$kubeconfig"`.
STDIN_KUBECONFIG = """umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
cat > "$kubeconfig"
"""
