"""Run the Pulumi program under mocks and record what it registers.

`record_stack(config)` evaluates `__main__.py` exactly as the engine would (fresh module namespace,
config set for project `gpu-tenancy`), with mocks that fail loudly on unknown invokes.
`unknowns=True` simulates a fresh-stack preview: command output, the Docker network lookup and every
resource output the program reads come back unknown.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pulumi.runtime import MockCallArgs, MockResourceArgs, Mocks
from pulumi.runtime.rpc import UNKNOWN

from gpu_tenancy import hami

REPO = Path(__file__).resolve().parents[1]
PROJECT = "gpu-tenancy"
DEV_STACK_FILE = REPO / "Pulumi.dev.yaml"
KIND_IPAM = [
    {"subnet": "fc00:f853:ccd:e793::/64", "gateway": "fc00:f853:ccd:e793::1"},
    {"subnet": "172.18.0.0/16", "gateway": "172.18.0.1"},
]


def stack_config(stack: str) -> dict[str, Any]:
    """A stack file's config, keyed without the namespace."""
    raw = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {key.split(":", 1)[1]: value for key, value in raw.items()}


def dev_config() -> dict[str, Any]:
    """The dev stack's config, keyed without the namespace."""
    return stack_config("dev")


# What `pulumi config set --secret` would hold for the gpu stack's credentials in these tests.
TEST_SECRETS = {
    "managementKubeconfig": "apiVersion: v1\nkind: Config\nusers: [{name: admin, user: {token: mgmt-secret}}]\n",
    "sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----\ntest-ssh-key\n-----END OPENSSH PRIVATE KEY-----\n",
}


def gpu_config() -> dict[str, Any]:
    """The gpu (real) example stack with the credentials a user sets as secrets."""
    return {**stack_config("gpu"), **TEST_SECRETS}


def registered_gpus(config: dict[str, Any]) -> dict[str, str]:
    """Node name -> the register annotation HAMi's device plugin would write for the declared gpus."""
    annotations: dict[str, str] = {}
    for tenant in config["tenants"]:
        workers = tenant.get("workers") or []
        if workers:
            devices = hami.device_inventory(tenant["name"], tenant["gpus"])
            annotations[workers[0]["name"]] = hami.register_annotation(devices)
            for worker in workers[1:]:
                annotations[worker["name"]] = "[]"
    return annotations


def _test_ca_pem() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


CA_PEM = _test_ca_pem()


def tenant_kubeconfig(tenant: str) -> str:
    """A tenant's admin kubeconfig; its address depends on the tenant only (not on call order)."""
    digest = int(hashlib.sha256(tenant.encode()).hexdigest(), 16)
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": tenant,
                    "cluster": {
                        "server": f"https://10.{digest % 200}.{(digest >> 8) % 250}.{(digest >> 16) % 250 + 1}:6443",
                        "certificate-authority-data": base64.b64encode(CA_PEM).decode(),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": f"secret-token-{tenant}"}}],
        }
    )


class LabMocks(Mocks):
    def __init__(
        self,
        unknowns: bool = False,
        ipam: list[dict[str, str]] | None = None,
        node_register: dict[str, str] | None = None,
    ) -> None:
        self.unknowns = unknowns
        self.ipam = KIND_IPAM if ipam is None else ipam
        self.node_register = node_register or {}
        self.resources: list[MockResourceArgs] = []
        self.calls: list[MockCallArgs] = []

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.resources.append(args)
        outputs = dict(args.inputs)
        if args.typ in ("command:local:Command", "command:remote:Command"):
            outputs["stdout"] = UNKNOWN if self.unknowns else "apiVersion: v1\nkind: Config\n"
        elif args.typ == "kubernetes:core/v1:Node" and args.resource_id:
            node = str(args.resource_id)
            annotations = {hami.NODE_REGISTER_ANNOTATION: self.node_register[node]} if node in self.node_register else {}
            outputs["metadata"] = UNKNOWN if self.unknowns else {"name": node, "annotations": annotations}
        elif args.typ == "kubernetes:core/v1:Secret" and args.resource_id:
            tenant = str(args.resource_id).split("/", 1)[0]
            kubeconfig = tenant_kubeconfig(tenant)
            outputs["data"] = (
                UNKNOWN if self.unknowns else {"admin.conf": base64.b64encode(kubeconfig.encode()).decode()}
            )
        elif args.typ == "random:index/randomString:RandomString":
            outputs["result"] = UNKNOWN if self.unknowns else "a" * int(args.inputs["length"])
        elif args.typ == "docker:index/remoteImage:RemoteImage":
            outputs["imageId"] = UNKNOWN if self.unknowns else "sha256:0123"
        elif args.typ == "docker:index/image:Image":
            outputs["imageName"] = args.inputs.get("imageName")
            outputs["repoDigest"] = UNKNOWN if self.unknowns else "sha256:4567"
        resource_id = UNKNOWN if self.unknowns and args.custom else f"{args.name}-id"
        return (None if resource_id is UNKNOWN else resource_id), outputs

    def call(self, args: MockCallArgs) -> dict[str, Any]:  # type: ignore[override]  # Mocks.call accepts a plain dict too
        self.calls.append(args)
        if args.token == "docker:index/getNetwork:getNetwork":
            if self.unknowns:
                return {"name": UNKNOWN, "id": UNKNOWN, "driver": UNKNOWN, "ipamConfigs": UNKNOWN}
            return {"name": args.args["name"], "id": "net-1", "driver": "bridge", "ipamConfigs": self.ipam}
        raise NotImplementedError(f"mock not implemented for invoke {args.token}")


def _run(
    mocks: LabMocks, config: dict[str, Any], preview: bool, stack: str, secrets: tuple[str, ...] = tuple(TEST_SECRETS)
) -> None:
    """Evaluate the program; keys in `secrets` are stored as `pulumi config set --secret` would."""
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=preview)
    pulumi.runtime.set_all_config(
        {f"{PROJECT}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in config.items()},
        [f"{PROJECT}:{k}" for k in secrets if k in config],
    )

    @pulumi.runtime.test
    def program() -> None:
        runpy.run_path(str(REPO / "__main__.py"), run_name="__main__")

    program()


def record_stack(
    config: dict[str, Any] | None = None,
    *,
    preview: bool = False,
    unknowns: bool = False,
    stack: str = "dev",
    ipam: list[dict[str, str]] | None = None,
    node_register: dict[str, str] | None = None,
) -> list[MockResourceArgs]:
    return record_mocks(
        config, preview=preview, unknowns=unknowns, stack=stack, ipam=ipam, node_register=node_register
    ).resources


def record_mocks(
    config: dict[str, Any] | None = None,
    *,
    preview: bool = False,
    unknowns: bool = False,
    stack: str = "dev",
    ipam: list[dict[str, str]] | None = None,
    node_register: dict[str, str] | None = None,
) -> LabMocks:
    """Like `record_stack`, returning the mocks (resources and invokes)."""
    mocks = LabMocks(unknowns=unknowns, ipam=ipam, node_register=node_register)
    _run(mocks, dev_config() if config is None else config, preview or unknowns, stack)
    return mocks


SECRET_SIG = "4dabf18193072939515e22adb298388d"


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and SECRET_SIG in value


def unwrap(value: Any) -> Any:
    """Inputs with secret wrappers removed (for schema validation)."""
    if is_secret(value):
        return unwrap(value.get("value"))
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def by_type(resources: list[MockResourceArgs], typ: str) -> list[MockResourceArgs]:
    return [r for r in resources if r.typ == typ]
