"""Where every Helm Release of the program takes its chart from: the project's chart cache, as locked."""

from __future__ import annotations

import pulumi

from gpu_tenancy.contract import chart_lock


def cached_chart(name: str, version: str) -> str:
    """The locked archive of chart `name` at `version` (`chart=` of a Release, with no repository_opts)."""
    ref = chart_lock.ChartRef(name=name, version=version, repo=chart_lock.CHART_REPOSITORIES[name])
    try:
        return chart_lock.cached_chart(ref, pulumi.get_stack())
    except chart_lock.ChartCacheError as error:
        raise pulumi.RunError(str(error)) from None
