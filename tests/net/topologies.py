"""The networks of the seeds, built from lab namespaces.

Addresses are private (RFC 1918) or documentation ranges (RFC 5737: 198.51.100.0/24,
203.0.113.0/24) and exist only inside the lab's own namespaces. Where a seed shows a public
address (AWS's 54.191.84.122) the lab uses a documentation address in its place and keeps
the seed's host names.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lab import Lab, Netns

# Seed 000's docker-compose environment for kafka0, verbatim. KAFKA_ZOOKEEPER_CONNECT makes
# the broker a (one-broker) cluster: docker_network runs the compose file's `zookeeper`
# service as a real ZooKeeper (brokers.start_seed000_broker starts it first).
SEED_000_ENV = {
    "KAFKA_BROKER_ID": "0",
    "KAFKA_ZOOKEEPER_CONNECT": "zookeeper:2181",
    "KAFKA_LISTENERS": "LISTENER_BOB://kafka0:29092,LISTENER_FRED://kafka0:9092,"
                       "LISTENER_ALICE://kafka0:29094",
    "KAFKA_ADVERTISED_LISTENERS": "LISTENER_BOB://kafka0:29092,LISTENER_FRED://localhost:9092,"
                                  "LISTENER_ALICE://never-gonna-give-you-up:29094",
    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "LISTENER_BOB:PLAINTEXT,LISTENER_FRED:PLAINTEXT,"
                                            "LISTENER_ALICE:PLAINTEXT",
    "KAFKA_INTER_BROKER_LISTENER_NAME": "LISTENER_BOB",
}

DOCKER_SUBNET = "172.18.0.0/16"
KAFKA0_IP = "172.18.0.2"
CLIENT_IP = "172.18.0.3"
ZOOKEEPER_CONTAINER_IP = "172.18.0.4"


@dataclass
class DockerNetwork:
    """Seed 000's Docker setup: the host, a user-defined network, two containers.

    ``host`` owns the bridge (as dockerd does) and publishes ports from ``localhost`` to the
    kafka0 container with DNAT, as Docker's port publishing does (``ports: - '9092:9092'``).
    ``kafka0``, ``client`` (the kafkacat container) and ``zookeeper`` (the compose file's
    ``zookeeper`` service) resolve ``kafka0`` and ``zookeeper`` the way Docker's embedded DNS
    does; the host resolves only ``localhost``.
    """

    host: Netns
    kafka0: Netns
    client: Netns
    zookeeper: Netns


def docker_network(lab: Lab, *, published: tuple[int, ...] = (9092, 29094)) -> DockerNetwork:
    containers = {"kafka0": KAFKA0_IP, "zookeeper": ZOOKEEPER_CONTAINER_IP}
    host = lab.netns("host")
    kafka0 = lab.netns("kafka0", containers)
    client = lab.netns("kafkacat", containers)
    zookeeper = lab.netns("zookeeper", containers)
    lab.bridge(host, "br0", "172.18.0.1/16")
    lab.attach(host, "br0", kafka0, "eth0", f"{KAFKA0_IP}/16", gateway="172.18.0.1")
    lab.attach(host, "br0", client, "eth0", f"{CLIENT_IP}/16", gateway="172.18.0.1")
    lab.attach(host, "br0", zookeeper, "eth0", f"{ZOOKEEPER_CONTAINER_IP}/16",
               gateway="172.18.0.1")
    # Locally generated connections to 127.0.0.1 are DNATed to the container; their loopback
    # source must be allowed out of br0 (route_localnet) and masqueraded.
    host.sysctl("net.ipv4.conf.all.route_localnet", "1")
    host.sysctl("net.ipv4.conf.br0.route_localnet", "1")
    ports = ", ".join(str(p) for p in published)
    host.nft(f"""
table ip docker_publish {{
    chain output {{
        type nat hook output priority -100;
        ip daddr 127.0.0.1 tcp dport {{ {ports} }} dnat to {KAFKA0_IP}
    }}
    chain postrouting {{
        type nat hook postrouting priority 100;
        ip saddr 127.0.0.0/8 oifname "br0" masquerade
    }}
}}
""")
    return DockerNetwork(host, kafka0, client, zookeeper)


# --- AWS (seed 000) ---------------------------------------------------------------------------

EC2_PRIVATE_IP = "172.31.18.160"
EC2_PUBLIC_IP = "203.0.113.122"  # stands in for 54.191.84.122
EC2_INTERNAL_NAME = "ip-172-31-18-160.us-west-2.compute.internal"
EC2_PUBLIC_NAME = "ec2-54-191-84-122.us-west-2.compute.amazonaws.com"
LAPTOP_IP = "198.51.100.23"


@dataclass
class AwsNetwork:
    """A VPC (EC2 instance ``ec2``, client ``vpc_client``), its internet gateway, a laptop.

    The gateway maps the instance's public address 1:1 to its private one (as AWS does).
    ``public_name_inside`` decides whether the public DNS name also resolves inside the VPC
    (seed 000 option 1: it does, to the private address; option 2: it does not).
    """

    ec2: Netns
    vpc_client: Netns
    gateway: Netns
    laptop: Netns


def aws_network(lab: Lab, *, public_name_inside: bool) -> AwsNetwork:
    inside = {EC2_INTERNAL_NAME: EC2_PRIVATE_IP}
    if public_name_inside:
        inside[EC2_PUBLIC_NAME] = EC2_PRIVATE_IP
    gateway = lab.netns("igw")
    ec2 = lab.netns("ec2", inside)
    vpc_client = lab.netns("vpcclient", inside)
    laptop = lab.netns("laptop", {EC2_PUBLIC_NAME: EC2_PUBLIC_IP})
    lab.bridge(gateway, "vpc0", "172.31.16.1/20")
    lab.attach(gateway, "vpc0", ec2, "eth0", f"{EC2_PRIVATE_IP}/20", gateway="172.31.16.1")
    lab.attach(gateway, "vpc0", vpc_client, "eth0", "172.31.20.5/20", gateway="172.31.16.1")
    lab.link(gateway, "inet0", "198.51.100.1/24", laptop, "eth0", f"{LAPTOP_IP}/24")
    laptop.ip("route", "add", "default", "via", "198.51.100.1")
    gateway.sysctl("net.ipv4.ip_forward", "1")
    gateway.nft(f"""
table ip igw {{
    chain prerouting {{
        type nat hook prerouting priority -100;
        iifname "inet0" ip daddr {EC2_PUBLIC_IP} dnat to {EC2_PRIVATE_IP}
    }}
}}
""")
    return AwsNetwork(ec2, vpc_client, gateway, laptop)


# --- NAT between headquarters and a branch (seed 002) -----------------------------------------

HQ_BROKER_IP = "10.10.0.11"  # ip1: the broker's address inside headquarters
NAT_BROKER_IP = "203.0.113.11"  # n_ip1: the address opened to the branch
BRANCH_IP = "203.0.113.50"


@dataclass
class NatNetwork:
    """Headquarters (broker ``hq``, internal client ``hq_client``), NAT box ``nat``, ``branch``.

    The NAT box translates n_ip1 to ip1 and only lets translated connections through: the
    branch has a route to headquarters, but a direct connection to ip1 is dropped (the
    seed's firewall: "因为没开墙"), so it hangs until the client's timeout.
    """

    hq: Netns
    hq_client: Netns
    nat: Netns
    branch: Netns


def nat_network(lab: Lab, *, reject: bool = False) -> NatNetwork:
    """Build the seed 002 network; ``reject=True`` makes the NAT box answer forbidden
    connections with ICMP host-unreachable instead of dropping them silently."""
    nat = lab.netns("nat")
    hq = lab.netns("hq")
    hq_client = lab.netns("hqclient")
    branch = lab.netns("branch")
    lab.bridge(nat, "hq0", "10.10.0.1/24")
    lab.attach(nat, "hq0", hq, "eth0", f"{HQ_BROKER_IP}/24", gateway="10.10.0.1")
    lab.attach(nat, "hq0", hq_client, "eth0", "10.10.0.21/24", gateway="10.10.0.1")
    lab.link(nat, "wan0", "203.0.113.1/24", branch, "eth0", f"{BRANCH_IP}/24")
    nat.ip("addr", "add", f"{NAT_BROKER_IP}/32", "dev", "wan0")
    branch.ip("route", "add", "10.10.0.0/24", "via", "203.0.113.1")
    nat.sysctl("net.ipv4.ip_forward", "1")
    verdict = "reject with icmp type host-unreachable" if reject else "drop"
    nat.nft(f"""
table ip nat_box {{
    chain prerouting {{
        type nat hook prerouting priority -100;
        iifname "wan0" ip daddr {NAT_BROKER_IP} dnat to {HQ_BROKER_IP}
    }}
    chain forward_filter {{
        type filter hook forward priority 0; policy accept;
        iifname "wan0" ct status dnat accept
        iifname "wan0" {verdict}
    }}
}}
""")
    return NatNetwork(hq, hq_client, nat, branch)


# --- two networks, three brokers on both (seed 001 as a cluster) ----------------------------

INTERNAL_SUBNET = "10.20.0.0/24"
EXTERNAL_SUBNET = "198.51.100.0/24"
ZOOKEEPER_IP = "10.20.0.2"
INTERNAL_PORT = 9092
EXTERNAL_PORT = 9093


def internal_ip(broker_id: int) -> str:
    return f"10.20.0.{10 + broker_id}"


def external_ip(broker_id: int) -> str:
    return f"198.51.100.{10 + broker_id}"


def internal_name(broker_id: int) -> str:
    """The name broker ``broker_id`` advertises on INTERNAL (as a Docker service name)."""
    return f"kafka{broker_id}"


def external_name(broker_id: int) -> str:
    """The name broker ``broker_id`` advertises on EXTERNAL."""
    return f"kafka{broker_id}.example.net"


@dataclass
class TwoNetworks:
    """An internal and an external network joined only through the brokers.

    ``switch`` holds the two bridges (``int0``, ``ext0``) and no addresses or routes, so
    nothing is forwarded between the networks: a packet crosses only by being answered by a
    broker. ``zookeeper`` and ``internal_client`` are on the internal network,
    ``external_client`` on the external one, each ``brokers[id]`` on both (``eth0``
    internal, ``eth1`` external), and ``ops`` (an operator's machine) on both as well.
    Internal names (``kafka1``, ``zookeeper``) resolve only on the internal network,
    external names (``kafka1.example.net``) only on the external one; ``ops`` knows both,
    the brokers only the internal ones (a broker never dials an external name: it talks to
    the others on its inter-broker listener, INTERNAL).
    """

    switch: Netns
    zookeeper: Netns
    brokers: dict[int, Netns]
    internal_client: Netns
    external_client: Netns
    ops: Netns


def two_networks(lab: Lab, broker_ids: tuple[int, ...] = (1, 2, 3)) -> TwoNetworks:
    internal = {"zookeeper": ZOOKEEPER_IP,
                **{internal_name(i): internal_ip(i) for i in broker_ids}}
    external = {external_name(i): external_ip(i) for i in broker_ids}
    switch = lab.netns("switch")
    lab.bridge(switch, "int0", None)
    lab.bridge(switch, "ext0", None)
    zookeeper = lab.netns("zookeeper", internal)
    lab.attach(switch, "int0", zookeeper, "eth0", f"{ZOOKEEPER_IP}/24")
    brokers = {}
    for i in broker_ids:
        ns = lab.netns(f"kafka{i}", internal)
        lab.attach(switch, "int0", ns, "eth0", f"{internal_ip(i)}/24")
        lab.attach(switch, "ext0", ns, "eth1", f"{external_ip(i)}/24")
        brokers[i] = ns
    internal_client = lab.netns("intclient", internal)
    lab.attach(switch, "int0", internal_client, "eth0", "10.20.0.100/24")
    external_client = lab.netns("extclient", external)
    lab.attach(switch, "ext0", external_client, "eth0", "198.51.100.100/24")
    ops = lab.netns("ops", {**internal, **external})
    lab.attach(switch, "int0", ops, "eth0", "10.20.0.200/24")
    lab.attach(switch, "ext0", ops, "eth1", "198.51.100.200/24")
    return TwoNetworks(switch, zookeeper, brokers, internal_client, external_client, ops)
