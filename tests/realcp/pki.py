"""Certificates and kubeconfigs for the real control plane, made in Python (no openssl, no cfssl).

One CA signs the API server's serving certificate and every client certificate; Kubernetes' x509 authenticator
takes the user from the subject's CN and the groups from its O entries
(k8s.io/apiserver/pkg/authentication/request/x509/x509.go CommonNameUserConversion).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import warnings
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=2)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass(frozen=True)
class Issued:
    cert_pem: bytes
    key_pem: bytes


class CertificateAuthority:
    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-tenancy-realcp-ca")])
        self.cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, organisations: tuple[str, ...] = (), server_ips: tuple[str, ...] = (),
              server_names: tuple[str, ...] = ()) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        # RFC 5280 bounds a CN at 64 characters, which a service account's user name can pass; Kubernetes' x509
        # authenticator takes any length, so the bound is not enforced here (cryptography's private switch).
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Attribute's length must be", UserWarning)
            subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organisations]
                                + [x509.NameAttribute(NameOID.COMMON_NAME, common_name, _validate=False)])
        server = bool(server_ips or server_names)
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(self.cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                  else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        )
        if server:
            names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
            names += [x509.DNSName(name) for name in server_names]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def service_account_keys() -> tuple[bytes, bytes]:
    """(private PEM, public PEM) for signing and verifying service-account tokens."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return _key_pem(key), public


def write_kubeconfig(path: Path, server: str, ca: CertificateAuthority, user: Issued, name: str) -> Path:


    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": "realcp", "cluster": {"server": server, "certificate-authority-data": b64(ca.cert_pem)}}],
        "users": [{"name": name, "user": {"client-certificate-data": b64(user.cert_pem),
                                          "client-key-data": b64(user.key_pem)}}],
        "contexts": [{"name": name, "context": {"cluster": "realcp", "user": name}}],
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path
