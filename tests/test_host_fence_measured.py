"""The host firewall of mode real, measured: its rules loaded into a network namespace standing for a GPU host of
tenant-a, with a pod behind it (routed and masqueraded as a CNI does), on a lab network where tenant-a's and
tenant-b's control planes and tenant-b's GPU host listen. Connections are really opened, and each must be accepted
or refused as docs/real-gpus.md#host-firewall says.

Needs root with network-namespace rights and the `ip` and `nft` commands; skipped otherwise, with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from gpu_tenancy.builders.host_worker import fence

OWN_CP, OTHER_CP, OTHER_HOST, HOST, POD = "10.20.0.240", "10.20.0.241", "10.20.0.12", "10.20.0.11", "10.244.0.2"
NODE2 = "10.20.0.242"  # another management node's address: kube-proxy serves every NodePort there too
# IPv6, which the tenancy does not use but every host has: a global address and a link-local one on each link.
HOST6, OTHER_HOST6, POD6, HOST_LL, OTHER_LL = ("2001:db8:20::11", "2001:db8:20::12", "2001:db8:244::2", "fe80::11",
                                               "fe80::12")
PORTS = (6443, 6444, 8132, 10250)  # API server, konnectivity (NodePort: the next port; LoadBalancer: 8132), kubelet


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"needs the {tool} command (apt-get install iproute2 nftables)"
    probe = subprocess.run(["ip", "netns", "add", f"gtfprobe{os.getpid()}"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make a network namespace here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"gtfprobe{os.getpid()}"], check=False)
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def sh(*commands: str) -> None:
    for command in commands:
        done = subprocess.run(command, shell=True, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}: {done.stderr}"


# A Go server's listener (the kubelet's, the API server's): a wildcard listen address takes one dual-stack socket
# (Go net.favoriteAddrFamily), so it answers over IPv4 and IPv6 alike.
LISTEN = textwrap.dedent("""
    import socket, sys, threading
    def serve(port):
        s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", port)); s.listen(16)
        while True:
            c, _ = s.accept(); c.close()
    for port in map(int, sys.argv[1:]):
        threading.Thread(target=serve, args=(port,), daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
""")

CONNECT = textwrap.dedent("""
    import errno, socket, sys
    family, _, _, _, address = socket.getaddrinfo(sys.argv[1], int(sys.argv[2]), type=socket.SOCK_STREAM)[0]
    s = socket.socket(family, socket.SOCK_STREAM); s.settimeout(1.5)
    if len(sys.argv) > 3:
        s.bind(socket.getaddrinfo(sys.argv[3], 0, type=socket.SOCK_STREAM)[0][4])
    try:
        s.connect(address); print("open")
    except ConnectionRefusedError:
        print("refused")
    except (TimeoutError, socket.timeout):
        print("dropped")
    except OSError as error:  # unreachable and the like: named, for the assertion to show
        print(errno.errorcode.get(error.errno or 0, str(error)))
""")

# An ICMPv6 echo (no ping here): the reply needs neighbour discovery to work both ways.
ECHO6 = textwrap.dedent("""
    import socket, sys
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6); s.settimeout(1.5)
    try:
        s.sendto(bytes([128, 0, 0, 0, 0, 1, 0, 1]), (sys.argv[1], 0))  # echo request; the kernel sums it
        while s.recv(1500)[0] != 129:
            pass
        print("answered")
    except (TimeoutError, socket.timeout):
        print("silent")
    except OSError as error:  # the echo request itself refused
        print(error.strerror)
""")


class Lab:
    def __init__(self, suffix: str) -> None:
        self.host, self.lab, self.pod = f"gtfhost{suffix}", f"gtflab{suffix}", f"gtfpod{suffix}"
        self.listeners: list[subprocess.Popen[str]] = []

    def up(self) -> None:
        h, lab, pod = self.host, self.lab, self.pod
        sh(f"ip netns add {h}", f"ip netns add {lab}", f"ip netns add {pod}",
           f"ip link add gtfh0 netns {h} type veth peer name gtfl0 netns {lab}",
           f"ip link add gtfh1 netns {h} type veth peer name gtfp0 netns {pod}",
           f"ip -n {h} addr add {HOST}/24 dev gtfh0", f"ip -n {h} addr add 10.244.0.1/24 dev gtfh1",
           f"ip -n {lab} addr add {OWN_CP}/24 dev gtfl0", f"ip -n {lab} addr add {OTHER_CP}/24 dev gtfl0",
           f"ip -n {lab} addr add {OTHER_HOST}/24 dev gtfl0", f"ip -n {pod} addr add {POD}/24 dev gtfp0",
           f"ip -n {lab} addr add {NODE2}/24 dev gtfl0",
           f"ip -n {h} addr add {HOST6}/64 dev gtfh0 nodad", f"ip -n {h} addr add {HOST_LL}/64 dev gtfh0 nodad",
           f"ip -n {h} addr add 2001:db8:244::1/64 dev gtfh1 nodad",
           f"ip -n {lab} addr add {OTHER_HOST6}/64 dev gtfl0 nodad",
           f"ip -n {lab} addr add {OTHER_LL}/64 dev gtfl0 nodad", f"ip -n {pod} addr add {POD6}/64 dev gtfp0 nodad",
           *(f"ip -n {ns} link set {dev} up" for ns, dev in ((h, "lo"), (h, "gtfh0"), (h, "gtfh1"), (lab, "lo"),
                                                              (lab, "gtfl0"), (pod, "lo"), (pod, "gtfp0"))),
           f"ip -n {pod} route add default via 10.244.0.1",
           f"ip -n {pod} -6 route add default via 2001:db8:244::1", f"ip -n {lab} -6 route add 2001:db8:244::/64 via {HOST6}",
           f"ip netns exec {h} sysctl -qw net.ipv4.ip_forward=1",
           f"ip netns exec {h} sysctl -qw net.ipv6.conf.all.forwarding=1",
           # The CNI's masquerade, after the forward chain (postrouting), as on a node.
           f"ip netns exec {h} nft 'add table ip cni; add chain ip cni post {{ type nat hook postrouting priority "
           f"srcnat; }}; add rule ip cni post ip saddr 10.244.0.0/24 oifname gtfh0 masquerade'")
        for ns in (lab, h):
            listener = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", LISTEN, *map(str, PORTS)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
            self.listeners.append(listener)

    def fence(self, rules: str) -> None:
        done = subprocess.run(["ip", "netns", "exec", self.host, "nft", "-f", "-"], input=rules, text=True,
                              capture_output=True)
        assert done.returncode == 0, done.stderr

    def unfence(self) -> None:
        subprocess.run(["ip", "netns", "exec", self.host, "nft", "delete", "table", "inet", fence.TABLE],
                       capture_output=True, check=False)

    def connect(self, ns: str, address: str, port: int, source: str | None = None) -> str:
        args = ["ip", "netns", "exec", ns, sys.executable, "-c", CONNECT, address, str(port)]
        return subprocess.run([*args, source] if source else args, capture_output=True, text=True,
                              check=True).stdout.strip()

    def echo6(self, ns: str, address: str) -> str:
        return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", ECHO6, address], capture_output=True,
                              text=True, check=True).stdout.strip()

    def down(self) -> None:
        for listener in self.listeners:
            listener.kill()
            listener.wait()
        for ns in (self.host, self.lab, self.pod):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    lab = Lab(str(os.getpid()))
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


def test_without_the_fence_everything_is_open(lab: Lab) -> None:
    """The lab itself: what the fence closes is open before it, from the host and from its pod, IPv6 included."""
    lab.unfence()
    for ns in (lab.host, lab.pod):
        assert {lab.connect(ns, address, port) for address in (OWN_CP, OTHER_CP, OTHER_HOST, NODE2, OTHER_HOST6)
                for port in PORTS} == {"open"}
    assert lab.connect(lab.host, f"{OTHER_LL}%gtfh0", 10250) == "open"
    assert lab.connect(lab.lab, HOST, 10250, source=OTHER_HOST) == "open"
    assert lab.connect(lab.lab, HOST6, 10250, source=OTHER_HOST6) == "open"
    assert lab.connect(lab.lab, f"{HOST_LL}%gtfl0", 10250, source=f"{OTHER_LL}%gtfl0") == "open"


def _load_balancer_fence(lab: Lab) -> None:
    lab.fence(fence.fence_rules(f"{OWN_CP}:6443", [f"{OTHER_CP}:6443"], [OTHER_HOST], node_ports=False))


@pytest.mark.parametrize("ns_name", ["host", "pod"])
def test_the_fenced_host_and_its_pods_reach_only_their_own_control_plane(lab: Lab, ns_name: str) -> None:
    _load_balancer_fence(lab)
    ns = lab.host if ns_name == "host" else lab.pod
    assert {port: lab.connect(ns, OWN_CP, port) for port in PORTS} == dict.fromkeys(PORTS, "open")
    assert {port: lab.connect(ns, OTHER_CP, port) for port in PORTS} == dict.fromkeys(PORTS, "refused")
    assert {port: lab.connect(ns, OTHER_HOST, port) for port in PORTS} == dict.fromkeys(PORTS, "refused")


def test_the_other_tenants_host_opens_no_connection_to_it(lab: Lab) -> None:
    _load_balancer_fence(lab)
    assert lab.connect(lab.lab, HOST, 10250, source=OTHER_HOST) == "dropped"
    assert lab.connect(lab.lab, HOST, 10250, source=OWN_CP) == "open"


@pytest.mark.parametrize("ns_name", ["host", "pod"])
def test_the_fence_holds_over_ipv6(lab: Lab, ns_name: str) -> None:
    """The other tenant's host over its global and its link-local IPv6 address (a kubelet listens on both
    families): closed both ways, while IPv4 to the own control plane works and neighbour discovery still does."""
    _load_balancer_fence(lab)
    ns = lab.host if ns_name == "host" else lab.pod
    assert {port: lab.connect(ns, OTHER_HOST6, port) for port in PORTS} == dict.fromkeys(PORTS, "refused")
    if ns == lab.host:
        # Rejected, but the kernel routes no ICMPv6 error back to a scoped (link-local) source: it times out.
        assert lab.connect(ns, f"{OTHER_LL}%gtfh0", 10250) == "dropped"
    assert lab.connect(lab.lab, HOST6, 10250, source=OTHER_HOST6) == "dropped"
    assert lab.connect(lab.lab, f"{HOST_LL}%gtfl0", 10250, source=f"{OTHER_LL}%gtfl0") == "dropped"
    assert {port: lab.connect(ns, OWN_CP, port) for port in PORTS} == dict.fromkeys(PORTS, "open")
    sh(f"ip -n {lab.host} neigh flush all", f"ip -n {lab.lab} neigh flush all")
    assert lab.echo6(lab.host, OTHER_HOST6) == "answered"  # ICMPv6: neighbour discovery, both ways


def test_node_ports_of_the_other_tenant_are_closed_on_every_address(lab: Lab) -> None:
    """NodePort: both tenants on one address, tenant-a's API server on port 10250 here, tenant-b's on 6443 and its
    konnectivity on 6444; kube-proxy serves them on another management node's address too."""
    lab.fence(fence.fence_rules(f"{OWN_CP}:10250", [f"{OWN_CP}:6443"], [], node_ports=True))
    for address in (OWN_CP, NODE2):
        assert {port: lab.connect(lab.pod, address, port) for port in PORTS} == {
            6443: "refused", 6444: "refused", 8132: "open", 10250: "open"}, address
    assert lab.connect(lab.host, NODE2, 6443) == "refused"


def test_running_it_again_replaces_the_table(lab: Lab) -> None:
    """The same `nft -f` with new rules (a tenant removed): the old rules are gone, none doubled."""
    _load_balancer_fence(lab)
    lab.fence(fence.fence_rules(f"{OWN_CP}:6443", [], [], node_ports=False))
    assert lab.connect(lab.pod, OTHER_CP, 6443) == "open"
    assert lab.connect(lab.lab, HOST, 10250, source=OTHER_HOST) == "open"
