"""The kind CLI commands that create, read and delete the management cluster (mode sim).

Pure builders: names in, shell text out; components/kind_cluster.py wires them to pulumi-command.

kind writes the new cluster's credentials into a kubeconfig file on `create` and removes them on
`delete`: the `--kubeconfig` path if given, else every file in $KUBECONFIG, else ~/.kube/config
(kubernetes-sigs/kind v0.32.0 `pkg/cluster/internal/kubeconfig/internal/kubeconfig/paths.go` `paths`).
The program reads the credentials with `kind get kubeconfig`, which prints them and writes nothing, so
both commands point kind at a private file in a temporary directory that is removed when they exit: the
user's kubeconfig is never rewritten.
"""

from __future__ import annotations

import shlex

from gpu_tenancy.builders import shell


def _private_kubeconfig() -> str:
    return shell.script(__name__, "_private_kubeconfig.sh")


def create_command(cluster_name: str, node_image: str) -> str:
    """Creates the cluster from the kind config on stdin, or adopts a running one of the same name.

    `kind create cluster` refuses a name that already has nodes (kind v0.32.0
    `pkg/cluster/internal/create/create.go` `alreadyExists`), so an existing cluster is adopted. That is
    only safe because the command is replaced delete-before-create (components/kind_cluster.py).
    """
    return shell.script(
        __name__, "create.sh", PRIVATE_KUBECONFIG=_private_kubeconfig(), CLUSTER=shlex.quote(cluster_name),
        NODE_IMAGE=shlex.quote(node_image),
    )


def delete_command(cluster_name: str) -> str:
    """Deletes the cluster; like `rm -f`, succeeds when it is already gone (kind `deletecluster.go`)."""
    return shell.script(
        __name__, "delete.sh", PRIVATE_KUBECONFIG=_private_kubeconfig(), CLUSTER=shlex.quote(cluster_name)
    )


def kubeconfig_command(cluster_name: str) -> str:
    """Prints the cluster's admin kubeconfig (external address) to stdout."""
    return f"kind get kubeconfig --name {shlex.quote(cluster_name)}"


# The management provider's `clusterIdentifier`. pulumi-kubernetes replaces a provider, and everything on it, when
# this changes (`provider/pkg/provider/provider.go` `DiffConfig`): it keeps the text every existing stack holds.
CLUSTER_IDENTIFIER = "management"
