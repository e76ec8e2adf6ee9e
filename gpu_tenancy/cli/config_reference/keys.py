"""What each key of the stack file does and what changing it does to a deployed stack, for docs/configuration.md.

`KEYS` has an entry per key the models accept (`tenants[].` for a key of every tenant), `QUOTA` one per quota
key. The resources a change replaces (`Key.replaces`) are checked against the engine's replacement rules by
tests/test_config_reference.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_tenancy.builders.tenant_datastore import datastore
from gpu_tenancy.contract import limits
from gpu_tenancy.contract.platform_config import MAX_TENANT_MINOR, MIN_TENANT_MINOR

ALL_MODES = ("sim", "sim-nvml", "real")
SIMULATED = ("sim", "sim-nvml")
REAL = ("real",)
# Accepted by the models only to be refused with a hint; not a setting.
NOT_SETTINGS = {"metallb.headroom"}


@dataclass(frozen=True)
class Replaced:
    """Resources a change replaces, by the names `pulumi preview` shows (`<tenant>`, `<host>`, `<node>` stand
    for the tenant, GPU host and node concerned; `*` for any text), in the modes where they exist."""

    pattern: str
    modes: tuple[str, ...] = ALL_MODES


@dataclass(frozen=True)
class Key:
    does: str  # what the key sets, for a reader (Markdown)
    on_change: str  # what an `up` does to a deployed stack after the key changed (Markdown)
    modes: tuple[str, ...] = ALL_MODES  # where the key has an effect
    default: str | None = None  # shown instead of the model's default (derived or mode-dependent defaults)
    replaces: tuple[Replaced, ...] = ()  # empty: nothing is replaced (updated in place, added or removed)


IN_PLACE = "Updated in place."
SAME_AS_CLUSTER = (
    Replaced("management-create", SIMULATED), Replaced("management-kubeconfig", SIMULATED),
    Replaced("management", SIMULATED), Replaced("kamaji-*", SIMULATED), Replaced("metallb-*", SIMULATED),
    Replaced("<tenant>-*", SIMULATED),
)
REPLACES_THE_LAB = (
    "Replaces the kind cluster, deleting first, while they still answer, everything on it and in the tenants "
    "(MetalLB, cert-manager, Kamaji, every control plane, every tenant's provider and what runs in the tenant, "
    "the worker containers and their joins); then all of it is created again on the new cluster."
)

KEYS: dict[str, Key] = {
    # Top level.
    "mode": Key(
        "Where the tenants run: `sim` (a kind lab on this host, GPUs registered by the mock-GPU agent), `sim-nvml` "
        "(the same lab, GPUs reported by NVIDIA's mock NVML to HAMi's own device plugin) or `real` (an existing "
        "management cluster and NVIDIA hosts). See [Modes and promotion](modes-and-promotion.md).",
        "Between `sim` and `sim-nvml` the device layer is swapped in place: the mock-GPU agent goes, the mock "
        "NVML, HAMi's device plugin and the inventory check come (or back). To or from `real` the whole "
        "platform differs: promote to `real` with a stack of its own "
        "([how](modes-and-promotion.md#how-a-team-promotes)).",
    ),
    "tenants": Key(
        "The tenants (keys [below](#tenant)): each gets its own control plane, worker(s), HAMi and GPUs.",
        "Adding a tenant creates only its resources; removing one deletes only its own (and everything running "
        "in it). No other tenant is re-addressed: default addresses come from each tenant's name and the "
        "MetalLB pool has a fixed size. The order of the list does not matter.",
    ),
    "versions": Key("The pinned versions; keys [below](#versions).", "See each key."),
    "kind": Key("The kind cluster and Docker network of the lab; keys [below](#kind).", "See each key.",
                modes=SIMULATED, default="see below"),
    "metallb": Key("MetalLB, which gives the control planes their addresses; keys [below](#metallb).",
                   "See each key."),
    "controlPlane": Key("How the tenants' API servers are exposed; keys [below](#control-plane-exposure).",
                        "See each key.", modes=REAL),
    "datastore": Key("The etcd volumes; keys [below](#datastore).", "See each key."),
    "inventoryMismatch": Key(
        "What `up` does when HAMi registers other cards on a host than the stack declares for it (type, MiB, "
        "count, health): `error` fails the `up` with one line per difference, `warn` logs them and goes on. "
        "The planner and policy `gpu-plan-fits` count on the declared cards, so keep `error` unless you are "
        "diagnosing a host. In `sim-nvml` a difference is always an error.",
        "Nothing is redeployed; the next inventory check (when a host joins again) applies it.",
        modes=REAL,
    ),
    "orderedWorkloads": Key(
        "Create each tenant's GPU workloads one after the other, in the order they are declared: each "
        "Deployment waits until the previous one's rollout is complete, so HAMi sees their pods in the planned "
        "order. A Deployment whose pods do not all run stops the ones after it. See "
        "[Planner](planner.md#order-and-ties).",
        "Only the Deployments' dependencies change; nothing is replaced or restarted.",
    ),
    "orderDependentPlan": Key(
        "What `pulumi preview` does with a replica whose fit depends on the order Kubernetes creates and "
        "schedules pods or on how HAMi breaks a tie: `warn` reports it (policy `gpu-plan-order`, advisory), "
        "`refuse` fails the preview (policy `gpu-plan-fits`). A replica that fits in no order always fails it.",
        "Only the next preview's verdict changes.",
    ),
    "metrics": Key("ServiceMonitors for HAMi's metrics; keys [below](#metrics).", "See each key."),
    "managementKubeconfig": Key(
        "**Secret.** The kubeconfig of the existing management cluster, where Kamaji, cert-manager, MetalLB "
        "and the tenants' control planes run: `pulumi config set --secret gpu-tenancy:managementKubeconfig "
        "< file`. A value stored in plain text is refused.",
        "New credentials for the same cluster update the management provider in place. Pointing it at "
        "another cluster is not a supported change.",
        modes=REAL, default="required in `real`",
    ),
    "sshPrivateKey": Key(
        "**Secret.** The private key for SSH to every GPU host: `pulumi config set --secret "
        "gpu-tenancy:sshPrivateKey < key`. A value stored in plain text is refused.",
        "In place: each host's preparation and join run again with the new key (both are safe to run again).",
        modes=REAL, default="required in `real`",
    ),
    # Tenant.
    "tenants[].name": Key(
        "A DNS-1123 label of at most 40 characters, unique in the stack. It names the tenant's namespace on "
        "the management cluster, its control plane, its Kubernetes provider and every resource made for it; "
        "its default addresses are derived from it.",
        "A rename is the removal of the tenant and the addition of a new one: everything in it is deleted and "
        "created again, at the new name's addresses.",
    ),
    "tenants[].gpus": Key(
        "The tenant's cards, as groups of one model (keys [below](#tenant-gpus)). `sim`: the mock-GPU agent "
        "registers them; `sim-nvml`: the mock NVML reports them to HAMi's device plugin, at most "
        f"{limits.MAX_GPUS_PER_NODE} per tenant (its one worker); `real`: what the hosts must register (the "
        "inventory check). The planner and policy `gpu-plan-fits` plan on them in every mode.",
        "In place. `sim`: the agent's inventory and DaemonSet are updated and register the cards again. "
        "`sim-nvml`: the mock's configuration, its DaemonSet and HAMi's release are updated, the device plugin "
        "restarts and the inventory check runs again. `real`: change the hosts' `gpus` with it; the inventory "
        "check runs again.",
        replaces=(Replaced("<tenant>-inventory-<node>-registered", ("sim-nvml",)),),
    ),
    "tenants[].workers": Key(
        "The GPU hosts of this tenant (keys [below](#gpu-hosts)), each prepared over SSH and joined with "
        "kubeadm. A tenant's only host has the tenant's `gpus`; with several hosts each says its own `gpus` "
        "and together they add up to the tenant's. One machine appears once in the stack: the same address, "
        "a name that resolves to another worker's address, or (at `up`, before any host is prepared) the "
        "same `/etc/machine-id` is refused.",
        "Adding a host prepares and joins it; removing one resets it (`kubeadm reset`) and removes its Node "
        "from the tenant. The other hosts stay as they are.",
        modes=REAL, default="required in `real`",
    ),
    "tenants[].controlPlaneAddress": Key(
        "The IPv4 address the tenant's control plane advertises; required with `controlPlane.serviceType: "
        "NodePort` (an address of a management cluster node).",
        "In place: the control plane is updated and the tenant's API endpoint moves with it.",
        modes=REAL,
    ),
    "tenants[].nodePort": Key(
        "With `controlPlane.serviceType: NodePort`: the tenant's API server port (Konnectivity takes the next "
        "one). Collisions between tenants are refused.",
        "In place: the control plane is updated and the tenant's API endpoint moves with it.",
        modes=REAL, default="`nodePortBase + 2k`, *k* from a hash of the tenant's name",
    ),
    "tenants[].podCidr": Key(
        "The tenant's pod network: IPv4, /24 or larger. A derived range that collides with another tenant's "
        "is refused when the config is read (set one explicitly); explicit overlaps, and overlaps with the "
        "kind network, GPU hosts or reserved ranges, are refused by policy `tenant-cidrs-disjoint`.",
        "Choose it before the first `up`. The control plane, kindnet and kube-proxy take the new range in "
        "place, but a node keeps the pod range it was given (Kubernetes never changes a Node's `podCIDR`): "
        "not a supported change on a deployed tenant.",
        default="a /20 of 10.128.0.0/10 picked by a hash of the tenant's name",
    ),
    "tenants[].serviceCidr": Key(
        "The tenant's Service network: IPv4, /24 or larger; derived and checked like `podCidr`.",
        "Choose it before the first `up`. The control plane takes the new range in place, but existing "
        "Services keep their addresses from the old one: not a supported change on a deployed tenant.",
        default="a /22 of 10.192.0.0/12 picked by a hash of the tenant's name",
    ),
    "tenants[].workloads": Key(
        "Deployments that ask HAMi for GPU slices (keys [below](#workloads)); the planner and policy "
        "`gpu-plan-fits` check that they fit. See [Workloads and quotas](workloads.md).",
        "In place: a changed workload's Deployment is updated (rolling, without surge); a renamed one is "
        "deleted and created under its new name; an added or removed one is created or deleted.",
    ),
    "tenants[].quota": Key(
        "The GPU quota of the tenant's `workloads` namespace (keys [below](#quota)). Leave a key out for no "
        "limit: `0` is a limit.",
        "In place: the ResourceQuota is updated. Pods already running are not evicted.",
    ),
    "tenants[].dataStore": Key(
        "`shared`: the platform's etcd, a key prefix and an etcd user per tenant. `dedicated`: an etcd of the "
        "tenant's own, so another tenant filling the shared one cannot make this tenant read-only. See "
        "[Datastore](threat-model.md#datastore).",
        "The tenant's control plane is updated to the other datastore (and a dedicated etcd is created or "
        "deleted); Kamaji migrates the tenant's data to it, and the tenant's API is briefly unavailable.",
    ),
    "tenants[].userAccess": Key(
        "`true`: a non-admin kubeconfig for the tenant's users (output `tenantUserKubeconfigs`): a "
        "ServiceAccount bound to `edit` in the `workloads` namespace only, under Pod Security `restricted`. "
        "See [Threat model](threat-model.md#a-non-admin-identity-for-a-tenants-users).",
        "Turning it on creates the identity, its quota and its admission policy; turning it off deletes them "
        "(the kubeconfig stops working).",
    ),
    # Tenant GPUs.
    "tenants[].gpus[].model": Key(
        "The card's name as `nvidia-smi --query-gpu=name` prints it (`NVIDIA L4`, `NVIDIA H100 80GB HBM3`, "
        "`Tesla T4`): what HAMi registers as its type. A near miss is corrected (`'NVIDIA-L4' is not how NVML "
        "names the card: write 'NVIDIA L4'`).",
        "As `tenants[].gpus`.",
        replaces=(Replaced("<tenant>-inventory-<node>-registered", ("sim-nvml",)),),
    ),
    "tenants[].gpus[].memoryMiB": Key(
        "The memory NVML reports for the card, which HAMi registers and the planner plans with. Taken from "
        "the [GPU catalogue](#the-gpu-catalogue) for a known model; a different value is refused, naming the "
        "right one (`24576 MiB is not what an NVIDIA L4 registers: NVML reports 23034 MiB (leave memoryMiB out to "
        "take it)`). Required for any other, as `nvidia-smi --query-gpu=name,memory.total --format=csv` "
        "prints it on that card.",
        "As `tenants[].gpus`.",
        default="the catalogue's, for a known model",
        replaces=(Replaced("<tenant>-inventory-<node>-registered", ("sim-nvml",)),),
    ),
    "tenants[].gpus[].count": Key(
        "How many cards of this model.",
        "As `tenants[].gpus`.",
        replaces=(Replaced("<tenant>-inventory-<node>-registered", ("sim-nvml",)),),
    ),
    # GPU hosts.
    "tenants[].workers[].name": Key(
        "A DNS-1123 label, unique in the tenant: the host's node name in the tenant.",
        "The host leaves under its old name (`kubeadm reset`, Node removed) and joins under the new one.",
        modes=REAL,
    ),
    "tenants[].workers[].address": Key(
        "The host's IP address or DNS name, for SSH.",
        "Replaces the host's preparation, Node and join, deleting first: the old address is reset and leaves "
        "the tenant, then the new one is prepared and joins.",
        modes=REAL,
        replaces=(
            Replaced("hosts-<tenant>-<host>", REAL), Replaced("<tenant>-<host>-prepare", REAL),
            Replaced("<tenant>-<host>-node", REAL), Replaced("<tenant>-<host>-join", REAL),
            Replaced("<tenant>-<host>-bootstrap-token-mint", REAL),
            Replaced("<tenant>-inventory-<host>-registered", REAL),
        ),
    ),
    "tenants[].workers[].user": Key(
        "The SSH user: it needs passwordless `sudo`.",
        "In place: the host's preparation and join run again over the new connection (both are safe to run "
        "again).",
        modes=REAL,
    ),
    "tenants[].workers[].port": Key("The SSH port.", "As `user`.", modes=REAL),
    "tenants[].workers[].gpus": Key(
        "The cards in this host, in the same form as `tenants[].gpus`. Required when the tenant has several "
        "hosts; a tenant's only host has the tenant's `gpus`. The planner plans each host as its own node.",
        "In place: the inventory check of the host runs again.",
        modes=REAL, default="the tenant's `gpus`, for a tenant's only host",
    ),
    "tenants[].workers[].hostKey": Key(
        "The host's SSH public key, which every SSH connection pins: `ssh-keyscan -t ed25519 <address>` "
        "without the leading address (check its fingerprint on the host with `ssh-keygen -lf "
        "/etc/ssh/ssh_host_ed25519_key.pub`). RSA keys are refused: the SSH client would only offer SHA-1 "
        "`ssh-rsa` signatures, which OpenSSH 8.8 and later refuse.",
        "As `user`.",
        modes=REAL, default="required in `real`",
    ),
    "tenants[].workers[].numa": Key(
        "Each card's NUMA node, in the order of the host's `gpus` (`nvidia-smi topo -m`, column NUMA "
        "Affinity): HAMi orders cards of equal score by it. Unset, the planner counts every tie-break as "
        "possible, so a fit that hangs on one is reported as depending on it.",
        "Only the plan changes.",
        modes=REAL,
    ),
    # Workloads.
    "tenants[].workloads[].name": Key(
        "A DNS-1123 label, unique in the tenant: the Deployment's name.",
        "The Deployment is deleted and created under the new name.",
    ),
    "tenants[].workloads[].replicas": Key("How many pods.", IN_PLACE),
    "tenants[].workloads[].image": Key(
        "The container image: a digest (`@sha256:`) or a tag with an exact release (three version numbers, a "
        "date stamp or a content hash); moving tags (`latest`, `main`, ...) and major or minor lines are "
        "refused.",
        "In place (a rolling update).",
    ),
    "tenants[].workloads[].containers": Key(
        "One entry per container, each a HAMi request (keys [below](#workload-containers)).",
        "In place (a rolling update).",
    ),
    "tenants[].workloads[].useGpuType": Key(
        "Pod annotation `nvidia.com/use-gputype`: only cards whose registered type contains one of these, "
        "case-insensitively (`L4`, `A100-SXM4`, `nvidia l4`; never `NVIDIA-L4`, a form HAMi gives only to "
        "names without the `NVIDIA` prefix, e.g. `NVIDIA-Tesla T4`).",
        "In place (a rolling update).",
    ),
    "tenants[].workloads[].noUseGpuType": Key(
        "Pod annotation `nvidia.com/nouse-gputype`: cards whose type contains one of these are excluded.",
        "In place (a rolling update).",
    ),
    "tenants[].workloads[].gpuSchedulerPolicy": Key(
        "Pod annotation `hami.io/gpu-scheduler-policy`: `binpack` fills a card before the next, `spread` "
        "takes the least used.",
        "In place (a rolling update).",
        default="HAMi's: `spread`",
    ),
    "tenants[].workloads[].nodeSchedulerPolicy": Key(
        "Pod annotation `hami.io/node-scheduler-policy`, the same choice between nodes.",
        "In place (a rolling update).",
        default="HAMi's: `binpack`",
    ),
    # Workload containers.
    "tenants[].workloads[].containers[].gpus": Key(
        "Cards for this container (`nvidia.com/gpu`), each on a different card of one node.", IN_PLACE),
    "tenants[].workloads[].containers[].gpumemMiB": Key(
        "Memory per card in MiB (`nvidia.com/gpumem`). Set it or `gpumemPercentage`, not both; with neither, "
        "the whole card's memory.",
        IN_PLACE,
    ),
    "tenants[].workloads[].containers[].gpumemPercentage": Key(
        "Memory per card in % of what the card registers (`nvidia.com/gpumem-percentage`): 50 % of an "
        "`NVIDIA L4` (23034 MiB) is 11517 MiB.",
        IN_PLACE,
    ),
    "tenants[].workloads[].containers[].gpucores": Key(
        "Compute per card in % (`nvidia.com/gpucores`). Left out on a whole-card request, HAMi's webhook sets "
        "100.",
        IN_PLACE,
    ),
    # Versions.
    "versions.kindNodeImage": Key(
        "The `kindest/node` image of the management cluster (by digest).",
        REPLACES_THE_LAB, modes=SIMULATED, replaces=SAME_AS_CLUSTER,
    ),
    "versions.kubernetes": Key(
        f"The tenants' Kubernetes version, exact (`v1.35.5`); Kamaji accepts v1.{MIN_TENANT_MINOR} to "
        f"v1.{MAX_TENANT_MINOR}, `sim-nvml` needs v1.{limits.MUTATING_ADMISSION_POLICY_BETA_MINOR} or later. "
        "The worker image's tag must equal it.",
        "The control planes are upgraded in place, with HAMi's scheduler and kube-proxy. Replaces, deleting "
        "first, each kind worker container and its join (`sim`, `sim-nvml`: a new container joins under the "
        "same node name), or resets each GPU host, removes its Node, prepares it again and joins it (`real`).",
        replaces=(
            Replaced("<tenant>-worker-container", SIMULATED), Replaced("<tenant>-worker-join", SIMULATED),
            Replaced("<tenant>-worker-image", SIMULATED), Replaced("<tenant>-mock-gpu-agent-image-load", ("sim",)),
            Replaced("<tenant>-mock-nvml-image-load", ("sim-nvml",)),
            Replaced("<tenant>-inventory-<node>-registered", ("sim-nvml", "real")),
            Replaced("<tenant>-<host>-prepare", REAL), Replaced("<tenant>-<host>-node", REAL),
            Replaced("<tenant>-<host>-join", REAL), Replaced("<tenant>-<host>-bootstrap-token-mint", REAL),
        ),
    ),
    "versions.workerImage": Key(
        "The `kindest/node` image of the kind workers; its tag must equal `kubernetes`.",
        "Replaces, deleting first, each kind worker container and its join (a new container joins under the "
        "same node name).",
        modes=SIMULATED,
        replaces=(
            Replaced("<tenant>-worker-container", SIMULATED), Replaced("<tenant>-worker-join", SIMULATED),
            Replaced("<tenant>-worker-image", SIMULATED), Replaced("<tenant>-mock-gpu-agent-image-load", ("sim",)),
            Replaced("<tenant>-mock-nvml-image-load", ("sim-nvml",)),
            Replaced("<tenant>-inventory-<node>-registered", ("sim-nvml",)),
        ),
    ),
    "versions.certManager": Key("The cert-manager chart.", "Its Helm release is upgraded in place."),
    "versions.metallb": Key("The MetalLB chart.", "Its Helm release is upgraded in place."),
    "versions.kamajiChart": Key(
        "The Kamaji chart. CLASTIX publishes no chart per edge release: see [The Kamaji chart is not "
        "pinned](operations.md#the-kamaji-chart-is-not-pinned).",
        "Its Helm release is upgraded in place.",
    ),
    "versions.kamajiImageTag": Key("Kamaji's image tag (an exact release).", "Its Helm release is upgraded in place."),
    "versions.hami": Key("The HAMi chart.", "Every tenant's HAMi release is upgraded in place."),
    "versions.hamiImageTag": Key("HAMi's image tag (an exact release).",
                                 "Every tenant's HAMi release is upgraded in place."),
    "versions.kindnetdImage": Key("The kindnet image of the tenants' pod network.",
                                  "Every tenant's kindnet DaemonSet is updated in place."),
    "versions.nvmlMockCommit": Key(
        "The NVIDIA/k8s-test-infra commit (a full SHA) the mock NVML image is built from.",
        "The image is built again and loaded into every worker; the mock's DaemonSets roll to it.",
        modes=("sim-nvml",),
        replaces=(
            Replaced("nvml-mock-image-build", ("sim-nvml",)), Replaced("<tenant>-mock-nvml-image-load", ("sim-nvml",)),
        ),
    ),
    # kind.
    "kind.clusterName": Key("The kind cluster's name.", REPLACES_THE_LAB, modes=SIMULATED,
                            default="`gpu-tenancy-<stack>`", replaces=SAME_AS_CLUSTER),
    "kind.network": Key(
        "The Docker network of the kind cluster and the workers; MetalLB's pool is taken from the top of its "
        "IPv4 subnet. Two labs on one Docker host need two networks.",
        REPLACES_THE_LAB + " MetalLB's pool moves to the new network.", modes=SIMULATED, replaces=SAME_AS_CLUSTER,
    ),
    # MetalLB.
    "metallb.enabled": Key(
        "`real`: `true` installs MetalLB with `addresses`, for a management cluster without a load balancer. "
        "`sim` and `sim-nvml` always run it (`false` is refused).",
        "In place: MetalLB is installed or removed.",
        default="on in `sim`, `sim-nvml`; off in `real`",
    ),
    "metallb.poolSize": Key(
        "How many addresses, at the top of the kind network's IPv4 subnet, are the control planes' pool. A "
        "fixed size, so removing a tenant re-addresses no other (MetalLB hands out the lowest free address "
        "first); at least the number of tenants.",
        "In place. Only raise it: a larger pool adds addresses below the ones in use, a smaller one drops the "
        "lowest, which MetalLB gave out first.",
        modes=SIMULATED,
    ),
    "metallb.addresses": Key(
        "`real` with `enabled: true`: the pool, as IPv4 ranges (`10.20.0.240-10.20.0.250`) or CIDRs; free "
        "addresses on the management nodes' L2 network.",
        "In place. Keep the addresses the control planes already have: MetalLB moves a Service whose address "
        "leaves the pool, and the tenant's API endpoint with it.",
        modes=REAL,
    ),
    # Control plane exposure.
    "controlPlane.serviceType": Key(
        "`LoadBalancer` (an address from MetalLB or the cluster's load balancer) or `NodePort` (each tenant on "
        "`controlPlaneAddress` and its own port).",
        "In place: the control planes' Services change type and every tenant's API endpoint moves. Choose it "
        "before the first `up`.",
        modes=REAL,
    ),
    "controlPlane.nodePortBase": Key(
        "With `NodePort`: the lowest port; each tenant's API port is `base + 2k` with *k* from a hash of its "
        "name, Konnectivity the port after. Collisions are refused (`tenants[].nodePort` sets a port).",
        "In place: every tenant with a derived port moves to a new endpoint.",
        modes=REAL,
    ),
    # Datastore.
    "datastore.volumeMiB": Key(
        "The size of each etcd volume (the shared one and each dedicated one). etcd's quota "
        f"(`--quota-backend-bytes`) is derived from it: (volume − {datastore.WAL_RESERVE_MIB} MiB of write-ahead "
        f"log − {datastore.SLACK_MIB} MiB) / 2, {datastore.quota_bytes(limits.DEFAULT_VOLUME_MIB) // datastore.MIB} "
        f"MiB for {limits.DEFAULT_VOLUME_MIB}, so the space alarm comes before a full disk and a defragmented "
        "copy still fits. "
        "See [Datastore](threat-model.md#datastore).",
        "Choose it before the first `up`. The change is sent as an upgrade of the etcd Helm releases, which "
        "Kubernetes refuses: a StatefulSet's volume claim template cannot change.",
    ),
    # Metrics.
    "metrics.serviceMonitors": Key(
        "`true`: a Prometheus Operator ServiceMonitor for HAMi's scheduler and, where HAMi's device plugin "
        "runs, its vGPU monitor, in every tenant (`honorLabels: true`). The operator's CRDs must exist in "
        "every tenant first. See [Metrics](metrics.md).",
        "The ServiceMonitors are created or deleted.",
    ),
    "metrics.labels": Key(
        "Labels on those ServiceMonitors: what your Prometheus selects them by (kube-prometheus-stack: "
        "`release: <its release name>`).",
        IN_PLACE,
    ),
}

QUOTA: dict[str, str] = {
    "limits.nvidia.com/gpu": (
        "vGPUs (slices) in the namespace. Written as `requests.nvidia.com/gpu`, which Kubernetes' quota counts "
        "(it counts extended resources only under `requests.`); `0` admits no pod asking for a GPU."
    ),
    "limits.nvidia.com/gpumem": (
        "MiB over all slices, enforced by HAMi's webhook and scheduler; `0` lets HAMi place no slice that "
        "holds memory."
    ),
    "limits.nvidia.com/gpucores": (
        "% of a card, summed over all slices, enforced by HAMi; `0` lets through only slices that ask for no "
        "cores."
    ),
}
