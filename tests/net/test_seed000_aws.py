"""Seed 000's AWS cases: a broker on EC2, a client in the VPC, a laptop on the internet.

The internet gateway namespace maps the instance's public address 1:1 to its private one.
Host names are the seed's; names resolve only through each namespace's hosts file: the
internal name only inside the VPC, the public name outside (and, for option 1, inside too,
to the private address, as AWS's DNS does).
"""

from __future__ import annotations

from .brokers import start_broker
from .clients import (
    concurrently,
    confluent_roundtrip,
    doctor,
    kcat_metadata,
    kcat_produce,
    kcat_roundtrip,
)
from .lab import Lab, Netns, netlab
from .topologies import EC2_INTERNAL_NAME, EC2_PUBLIC_NAME, aws_network

PUBLIC = f"{EC2_PUBLIC_NAME}:9092"
INTERNAL = f"{EC2_INTERNAL_NAME}:9092"


@netlab
def test_default_listener_advertises_the_internal_host_name() -> None:
    """Seed steps 1-6: ``listeners`` left at its host name default; the laptop fails."""
    with Lab() as lab:
        net = aws_network(lab, public_name_inside=True)
        # The instance's host name is its internal name; an empty listener host means the
        # machine's canonical host name, as in Kafka.
        hostname = ["unshare", "--uts", "sh", "-c",
                    f'hostname {EC2_INTERNAL_NAME} && exec "$@"', "sh"]
        start_broker(lab, net.ec2, properties={"node.id": "0", "listeners": "PLAINTEXT://:9092"},
                     argv_prefix=hostname)
        meta = kcat_metadata(net.laptop, PUBLIC)
        assert meta.brokers == [(0, INTERNAL)]
        produced, _, (status, text, data) = concurrently(
            lambda: kcat_produce(net.laptop, PUBLIC, "test", ["test"], timeout_ms=3000),
            # Step 5: the same command on the broker machine works.
            lambda: kcat_roundtrip(net.ec2, PUBLIC, "from-ec2"),
            lambda: doctor(net.laptop, PUBLIC))
        assert produced.returncode != 0
        assert f"Failed to resolve '{INTERNAL}'" in produced.stderr, produced.stderr
        assert status == 1, text
        [finding] = data["findings"]
        assert finding["code"] == "unresolvable"
        fixes = {f["kind"]: f["action"] for f in finding["fixes"]}
        # The doctor proposes exactly the seed's option 1 line.
        assert fixes["advertised.listeners"] == f"advertised.listeners=PLAINTEXT://{PUBLIC}"


@netlab
def test_option_1_one_listener_with_an_everywhere_resolvable_name() -> None:
    with Lab() as lab:
        net = aws_network(lab, public_name_inside=True)
        start_broker(lab, net.ec2, properties={
            "node.id": "0",
            "listeners": "PLAINTEXT://0.0.0.0:9092",
            "advertised.listeners": f"PLAINTEXT://{PUBLIC}",
        })
        def check(ns: Netns) -> None:
            assert kcat_metadata(ns, PUBLIC).brokers == [(0, PUBLIC)]
            kcat_roundtrip(ns, PUBLIC, f"opt1-{ns.role}")
            confluent_roundtrip(ns, PUBLIC, f"opt1-{ns.role}-confluent")
            status, text, _ = doctor(ns, PUBLIC)
            assert status == 0, text

        concurrently(lambda: check(net.vpc_client), lambda: check(net.laptop))


@netlab
def test_option_2_internal_and_external_listeners() -> None:
    internal = f"{EC2_INTERNAL_NAME}:19092"
    with Lab() as lab:
        net = aws_network(lab, public_name_inside=False)
        # Seed 000's option 2 configuration, verbatim.
        start_broker(lab, net.ec2, properties={
            "node.id": "0",
            "listeners": "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "advertised.listeners": f"INTERNAL://{internal},EXTERNAL://{PUBLIC}",
            "inter.broker.listener.name": "INTERNAL",
        })
        def check(ns: Netns, bootstrap: str) -> None:
            assert kcat_metadata(ns, bootstrap).brokers == [(0, bootstrap)]
            kcat_roundtrip(ns, bootstrap, f"opt2-{ns.role}")
            confluent_roundtrip(ns, bootstrap, f"opt2-{ns.role}-confluent")
            status, text, _ = doctor(ns, bootstrap)
            assert status == 0, text

        concurrently(lambda: check(net.vpc_client, internal), lambda: check(net.laptop, PUBLIC))
        # Inside the VPC the public name does not resolve (that is why option 2 exists);
        # the doctor, run on the broker machine through the external port, says so and
        # points at the internal listener.
        status, text, data = doctor(net.ec2, f"{'127.0.0.1'}:9092")
        assert status == 1, text
        [finding] = data["findings"]
        assert finding["code"] == "unresolvable"
        assert "listener EXTERNAL" in finding["message"]
        assert finding["fixes"][0]["action"] == f"--bootstrap-server {internal}"
