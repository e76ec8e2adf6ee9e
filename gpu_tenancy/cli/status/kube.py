"""Read one tenant's nodes, pods and ResourceQuotas through its own kubeconfig (official `kubernetes` client).

Three list calls, answers kept as the API server's JSON (`_preload_content=False`): the status code reads
the same fields whether the objects come from a cluster or from recorded files, and 1,000 pods are not
turned into client models only to be turned back. Lists are paged (`limit`/`continue`, as kubectl pages
with `--chunk-size=500`), so a large tenant is never one huge answer the API server must build at once.
With `probes`, also the API server's `/version` and `/readyz` (what `make tenants` shows). Failures become
one line (`TenantUnreachable`).
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from gpu_tenancy.cli.status.report import TenantObjects

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0
PAGE_SIZE = 500  # kubectl's default --chunk-size


class TenantUnreachable(Exception):
    """One line: why a tenant's API could not be read."""


def api_client(kubeconfig_yaml: str) -> client.ApiClient:
    try:
        document = yaml.safe_load(kubeconfig_yaml)
        if not isinstance(document, dict):
            raise TenantUnreachable("kubeconfig is not a YAML mapping")
        configuration = client.Configuration()
        config.load_kube_config_from_dict(document, client_configuration=configuration)
    # ValueError: a server URL urllib.parse refuses (`https://[fd00::1`), raised while the host is set.
    except (yaml.YAMLError, ConfigException, ValueError) as error:
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


def _all_items(list_call: Any, **options: Any) -> list[dict[str, Any]]:
    """Every item of a paged list: follow `metadata.continue` until the API server returns none."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = {"limit": PAGE_SIZE, **({"_continue": token} if token else {})}
        body = json.loads(list_call(**options, **page).data)
        items.extend(body.get("items") or ())
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return items


def _get(api: client.ApiClient, path: str, timeout: tuple[float, float]) -> tuple[int, str]:
    """(HTTP status, body) of a GET on a non-resource path, authenticated as the list calls are."""
    method, url, headers, body, post = api.param_serialize("GET", path, auth_settings=["BearerToken"])
    try:
        response = api.call_api(method, url, headers, body, post, _request_timeout=timeout)
        response.read()
        return int(response.status), (response.data or b"").decode(errors="replace")
    except ApiException as error:
        return int(error.status or 0), str(error.body or error.reason or "")


def _probes(api: client.ApiClient, timeout: tuple[float, float]) -> tuple[str, str]:
    """(gitVersion from /version, the /readyz answer: "ok", or the checks that fail in one line)."""
    code, text = _get(api, "/version", timeout)
    if code != 200:
        raise ApiException(status=code, reason=text[:80] or "no answer")
    git_version = str(json.loads(text).get("gitVersion", "?"))
    code, text = _get(api, "/readyz", timeout)
    # kube-apiserver answers 200 "ok", or 500 listing "[-]<check> failed: reason withheld" and
    # "readyz check failed"; keep only the failing checks.
    failing = [line.strip()[3:].split()[0] for line in text.splitlines() if line.strip().startswith("[-]")]
    if code == 200:
        return git_version, "ok"
    return git_version, "not ready: " + (", ".join(failing) or f"HTTP {code} {' '.join(text.split())[:80]}")


def read_tenant(kubeconfig_yaml: str, probes: bool) -> TenantObjects:
    """Nodes, pods (all namespaces) and ResourceQuotas of the cluster the kubeconfig names."""
    api = api_client(kubeconfig_yaml)
    server = api.configuration.host
    timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)
    try:
        with api:
            core = client.CoreV1Api(api)
            options: dict[str, Any] = {"_preload_content": False, "_request_timeout": timeout}
            version, readyz = _probes(api, timeout) if probes else (None, None)
            return TenantObjects(
                nodes=_all_items(core.list_node, **options),
                pods=_all_items(core.list_pod_for_all_namespaces, **options),
                quotas=_all_items(core.list_resource_quota_for_all_namespaces, **options),
                version=version,
                readyz=readyz,
            )
    except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as error:
        raise TenantUnreachable(f"cannot read {server}: {_reason(error)}") from None
