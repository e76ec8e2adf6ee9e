"""Pure kubeadm helpers: discovery hash and endpoint extraction from a kubeconfig."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import urlparse

import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def _cluster(kubeconfig: str) -> dict[str, str]:
    parsed = yaml.load(kubeconfig, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    try:
        cluster: dict[str, str] = parsed["clusters"][0]["cluster"]
    except (TypeError, KeyError, IndexError):
        raise ValueError("kubeconfig has no clusters[0].cluster entry") from None
    return cluster


def server_endpoint(kubeconfig: str) -> str:
    """`host:port` of the kubeconfig's first cluster."""
    url = urlparse(_cluster(kubeconfig)["server"])
    if not url.hostname:
        raise ValueError("kubeconfig server has no host")
    return f"{url.hostname}:{url.port or 443}"


def ca_cert_hash(kubeconfig: str) -> str:
    """kubeadm's `--discovery-token-ca-cert-hash`: sha256 of the CA's SubjectPublicKeyInfo."""
    pem = base64.b64decode(_cluster(kubeconfig)["certificate-authority-data"])
    certificate = x509.load_pem_x509_certificate(pem)
    spki = certificate.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()
