"""Read one tenant's nodes, pods and ResourceQuotas through its own kubeconfig (official `kubernetes` client).

Three list calls, answers kept as the API server's JSON (`_preload_content=False`): the status code reads
the same fields whether the objects come from a cluster or from recorded files, and 1,000 pods are not
turned into client models only to be turned back. Failures become one line (`TenantUnreachable`).
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from gpu_tenancy.status import TenantObjects

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0


class TenantUnreachable(Exception):
    """One line: why a tenant's API could not be read."""


def api_client(kubeconfig_yaml: str) -> client.ApiClient:
    try:
        document = yaml.safe_load(kubeconfig_yaml)
        if not isinstance(document, dict):
            raise TenantUnreachable("kubeconfig is not a YAML mapping")
        configuration = client.Configuration()
        config.load_kube_config_from_dict(document, client_configuration=configuration)
    except (yaml.YAMLError, ConfigException) as error:
        raise TenantUnreachable(f"unusable kubeconfig: {' '.join(str(error).split())}") from None
    configuration.retries = False  # one attempt: an unreachable tenant must not hold up the others
    return client.ApiClient(configuration)


def _reason(error: BaseException) -> str:
    if isinstance(error, ApiException) and error.status:
        return f"HTTP {error.status} {error.reason}".strip()
    # status 0: the client wrapped a transport error (e.g. urllib3's SSLError) without an HTTP answer.
    cause: BaseException = error
    while isinstance(cause, urllib3.exceptions.MaxRetryError) and cause.reason is not None:
        cause = cause.reason
    text = str(cause.reason) if isinstance(cause, ApiException) else str(cause)
    for known in ("Connection refused", "timed out", "Name or service not known", "No route to host",
                  "certificate verify failed"):
        if known.lower() in text.lower():
            return known.lower()
    return " ".join(text.split())[:160] or type(cause).__name__


def _items(response: Any) -> list[dict[str, Any]]:
    body = json.loads(response.data)
    return list(body.get("items") or [])


def read_tenant(kubeconfig_yaml: str) -> TenantObjects:
    """Nodes, pods (all namespaces) and ResourceQuotas of the cluster the kubeconfig names."""
    api = api_client(kubeconfig_yaml)
    server = api.configuration.host
    try:
        with api:
            core = client.CoreV1Api(api)
            options: dict[str, Any] = {"_preload_content": False, "_request_timeout": (CONNECT_TIMEOUT, READ_TIMEOUT)}
            return TenantObjects(
                nodes=_items(core.list_node(**options)),
                pods=_items(core.list_pod_for_all_namespaces(**options)),
                quotas=_items(core.list_resource_quota_for_all_namespaces(**options)),
            )
    except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as error:
        raise TenantUnreachable(f"cannot read {server}: {_reason(error)}") from None
