"""The optional non-admin identity of a tenant (tenants[].userAccess; gpu_tenancy/builders/tenant_access/tenant_access.py)."""

from __future__ import annotations

import base64
from typing import Any

import yaml
from admission_cel import Request, binding_denials, denials
from harness import dev_config, is_secret, tenant_kubeconfig, unwrap
from policy_support import find, record_engine_view, run_resource_policy, run_stack_policy
from pulumi_policy import StackValidationPolicy
from test_status_outputs import stack_outputs

from gpu_tenancy.builders.tenant_access import tenant_access

import tenant_policies as tp  # isort: skip  (policies/ is put on sys.path by policy_support)


def with_user_access() -> dict[str, Any]:
    config = dev_config()
    config["tenants"][0]["userAccess"] = True
    config["tenants"][1].pop("workloads")
    config["tenants"][1].pop("quota")
    config["tenants"][1]["userAccess"] = True  # no workloads: the namespace is still made for its users
    return config


def test_a_user_gets_edit_in_the_workloads_namespace_only() -> None:
    stack = record_engine_view(with_user_access())
    for tenant in ("tenant-a", "tenant-b"):
        binding = find(stack, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", f"{tenant}-user-access-edit")
        assert unwrap(binding.inputs)["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                     "name": "edit"}
        assert unwrap(binding.inputs)["metadata"]["namespace"] == "workloads"
        # Named after the identity it binds (the realcp user-access tests refuse the user deleting it by that name).
        assert unwrap(binding.inputs)["metadata"]["name"] == "tenant-user"
        # The labels the pack reads a resource's tenant and component from (policies/tenancy_lib.py label_tenant).
        assert unwrap(binding.inputs)["metadata"]["labels"] == {"gpu-tenancy.io/tenant": tenant,
                                                                "gpu-tenancy.io/component": "tenant-user"}
        assert unwrap(binding.inputs)["subjects"] == [{"kind": "ServiceAccount", "name": "tenant-user",
                                                       "namespace": "workloads"}]
        namespace = find(stack, "kubernetes:core/v1:Namespace", f"{tenant}-workloads-namespace")
        assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
        quota = find(stack, "kubernetes:core/v1:ResourceQuota", f"{tenant}-user-access-quota")
        assert quota.inputs["spec"]["hard"] == {"services.nodeports": "0", "services.loadbalancers": "0"}
    assert not any(r.type.endswith("ClusterRoleBinding") and "user-access" in r.name for r in stack)


def test_the_user_kubeconfig_is_a_secret_with_the_accounts_token() -> None:
    outputs = stack_outputs(with_user_access(), "dev")
    assert is_secret(outputs["tenantUserKubeconfigs"])
    kubeconfigs = unwrap(outputs["tenantUserKubeconfigs"])
    assert set(kubeconfigs) == {"tenant-a", "tenant-b"}
    user = yaml.safe_load(kubeconfigs["tenant-a"])
    admin = yaml.safe_load(tenant_kubeconfig("tenant-a"))
    assert user["clusters"][0]["cluster"] == admin["clusters"][0]["cluster"]
    assert user["users"][0]["user"] == {"token": "sa-token-tenant-user"}
    assert user["contexts"][0]["context"]["namespace"] == "workloads"
    token = find(record_engine_view(with_user_access()), "kubernetes:core/v1:Secret", "tenant-a-user-access-token")
    assert token.inputs["type"] == "kubernetes.io/service-account-token"
    # The token controller fills the Secret in seconds; `up` waits for it five minutes at most.
    assert token.inputs["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": "tenant-user", "pulumi.com/waitFor": '["jsonpath={.data.token}"]',
        "pulumi.com/timeoutSeconds": "300"}
    assert token.inputs["metadata"]["labels"] == {"gpu-tenancy.io/tenant": "tenant-a",
                                                  "gpu-tenancy.io/component": "tenant-user"}
    assert "tenantUserKubeconfigs" not in stack_outputs(dev_config(), "dev")


def test_the_pack_passes_a_stack_with_user_access() -> None:
    stack = record_engine_view(with_user_access())
    for policy in tp.ALL_POLICIES:
        if policy.name == "gpu-plan-fits":
            continue  # tenant-b declares no workloads here; the plan is another test's concern
        run = run_stack_policy if isinstance(policy, StackValidationPolicy) else run_resource_policy
        assert run(policy, stack) == [], policy.name


def service(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}], **spec}}


CAPTURING = service(externalIPs=["10.20.0.11"])
# (case, operation, namespace, old Service, new Service, refused by the policy and binding the program registers);
# tests/realcp/test_admission_identities.py sends the same requests to a real API server as the tenant's user.
SERVICE_REQUESTS: list[tuple[str, str, str, dict[str, Any] | None, dict[str, Any], bool]] = [
    ("create with externalIPs", "CREATE", "workloads", None, CAPTURING, True),
    ("create without", "CREATE", "workloads", None, service(), False),
    ("create with externalIPs elsewhere", "CREATE", "other", None, CAPTURING, False),
    ("update adding externalIPs", "UPDATE", "workloads", service(), CAPTURING, True),
    ("update keeping none", "UPDATE", "workloads", service(), service(), False),
]


def test_services_with_external_ips_are_refused_in_the_users_namespace() -> None:
    spec = tenant_access.services_policy_spec("workloads")
    assert denials(spec, Request("services", "CREATE", "workloads", service(externalIPs=["10.20.0.11"]))) == [
        "Services of tenant users take no externalIPs (they could capture other addresses' traffic)"]
    assert denials(spec, Request("services", "CREATE", "workloads", service())) == []
    assert denials(spec, Request("services", "CREATE", "other", service(externalIPs=["10.20.0.11"]))) == []


def test_the_registered_service_policy_refuses_external_ips_on_create_and_update() -> None:
    """As the program registers policy and binding: an UPDATE that adds externalIPs to an admitted Service is
    refused like a CREATE (CVE-2020-8554 needs only one of them), and the binding denies, not only warns."""
    stack = record_engine_view(with_user_access())
    policy = unwrap(find(stack, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
                         "tenant-a-user-access-services-policy").inputs)
    binding = unwrap(find(stack, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
                          "tenant-a-user-access-services-policy-binding").inputs)
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    spec, bound = policy["spec"], binding["spec"]
    for case, operation, namespace, old, new, refused in SERVICE_REQUESTS:
        request = Request("services", operation, namespace, new, old=old)
        assert bool(binding_denials(spec, bound, request)) is refused, case


def test_the_kubeconfig_builder_decodes_the_token() -> None:
    token = base64.b64encode(b"abc").decode()
    built = yaml.safe_load(tenant_access.kubeconfig("t", tenant_kubeconfig("t"), token, "workloads"))
    assert built["users"] == [{"name": "t-user", "user": {"token": "abc"}}]
    assert built["current-context"] == "t-user"
    # What the official client (and kubectl's clientcmd) reads: a v1 Config whose current context resolves.
    from kubernetes import client
    from kubernetes.config.kube_config import KubeConfigLoader

    assert (built["apiVersion"], built["kind"]) == ("v1", "Config")
    configuration = client.Configuration()
    KubeConfigLoader(config_dict=built).load_and_set(configuration)
    admin = yaml.safe_load(tenant_kubeconfig("t"))
    assert configuration.host == admin["clusters"][0]["cluster"]["server"]
    assert configuration.api_key == {"BearerToken": "Bearer abc"}


def test_every_object_of_the_identity_is_valid_kubernetes_with_no_unknown_field() -> None:
    # The tenant's API server (1.35) drops or refuses a misspelt field: strict validation against its schemas.
    import kubernetes_validate

    stack = record_engine_view(with_user_access())
    made = [r for r in stack if r.custom and "$gpu-tenancy:tenant_access:TenantAccess$kubernetes:" in r.urn]
    assert {r.type.rsplit(":", 1)[1] for r in made} == {"RoleBinding", "Secret", "ResourceQuota", "ServiceAccount",
                                                        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for resource in made:
        body = {k: v for k, v in unwrap(resource.inputs).items() if not k.startswith("__")}
        kubernetes_validate.validate(body, "1.35.0", strict=True)
