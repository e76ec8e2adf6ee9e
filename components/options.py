"""What a component takes from its `opts`, as Pulumi's own components do.

A component's `provider`/`providers` go into its provider bag, which every child created with `parent=self`
inherits by package (pulumi 3.272.0 sdk/python/lib/pulumi/resource.py `Resource.__init__`, `_get_providers`).
Its `depends_on` is not inherited: the SDK sends it with the component's own registration only, so each
component hands it on to the children that must wait for it.
"""

from __future__ import annotations

import pulumi


def dependencies(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """`opts.depends_on` as a list, for the children that wait for what the component waits for."""
    depends_on = opts.depends_on if opts is not None else None
    if depends_on is None:
        return []
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    # An Output of resources cannot be handed on before it resolves: refused, never dropped.
    if isinstance(depends_on, list | tuple) and all(isinstance(r, pulumi.Resource) for r in depends_on):
        return list(depends_on)
    raise TypeError(f"depends_on must be a resource or a list of resources, not {type(depends_on).__name__}")


def require_provider(component: pulumi.ComponentResource, package: str = "kubernetes") -> pulumi.ProviderResource:
    """The `package` provider the component's children inherit; an error when there is none.

    Without it each child would go through the default provider (the ambient kubeconfig), which may be
    any cluster: a component that creates Kubernetes objects is always given the cluster they belong to.
    """
    provider = component.get_provider(f"{package}::")
    if provider is None:
        raise pulumi.RunError(
            f"{component.pulumi_resource_name}: no {package} provider: pass "
            f"opts=pulumi.ResourceOptions(provider=<the cluster's provider>) or set it on a parent"
        )
    return provider
