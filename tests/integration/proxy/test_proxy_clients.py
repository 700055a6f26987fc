"""Unmodified confluent-kafka and kcat through ``moldau proxy`` to a broker they cannot reach.

The broker listens on 127.0.0.1 but advertises ``broker.invalid:<port>`` (seed 002: the
address a client is handed is not one it can connect to). Directly, the clients fail after
bootstrap; through the proxy, whose ``--address-map`` reaches the broker, they produce,
consume, join groups, commit and use the admin API.
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.testing.processes import closed_port
from moldau.testing.proxy import UNREACHABLE_HOST, ProxyProcess, free_port, proxied_broker
from moldau.testing.runner import BrokerProcess

TIMEOUT = 30


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[BrokerProcess, ProxyProcess]]:
    with proxied_broker({"auto.create.topics.enable": "true"}) as pair:
        yield pair


def kcat(*args: str, stdin: str | None = None,
         timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    if shutil.which("kcat") is None:
        pytest.fail("kcat not installed: run `python -m moldau.testing.install_clients`")
    return subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_direct_clients_are_handed_an_address_they_cannot_reach(
        setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    broker, _ = setup
    listing = kcat("-b", broker.bootstrap, "-L").stdout
    assert f"broker 1 at {UNREACHABLE_HOST}:{broker.port()}" in listing
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000,
                         "log_level": 0})
    errors: list[object] = []
    producer.produce(name("direct"), b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None  # timed out: broker.invalid does not resolve


def test_kcat_metadata_lists_the_proxy(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    _, proxy = setup
    listing = kcat("-b", proxy.bootstrap, "-L").stdout
    assert re.search(rf"broker 1 at 127\.0\.0\.1:{proxy.port(1)}\b", listing), listing
    assert UNREACHABLE_HOST not in listing


def test_bootstrap_is_the_broker_port(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    # The bootstrap server is broker 1's address (after the address map): clients bootstrap
    # from broker 1's proxy port and recognise it as broker 1.
    _, proxy = setup
    assert proxy.bootstrap == f"127.0.0.1:{proxy.port(1)}"
    listing = kcat("-b", proxy.bootstrap, "-L").stdout
    assert listing.startswith(f"Metadata for all topics (from broker 1: {proxy.bootstrap}/1)")


def test_separate_bootstrap_port_and_port_base(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    # "localhost:PORT" is not an address the cluster advertises: it gets a port of its own.
    broker, _ = setup
    base = free_port() - 1  # broker 1 -> base + 1
    boot = free_port()
    with ProxyProcess(f"localhost:{broker.port()}",
                      address_map=f"{UNREACHABLE_HOST}=127.0.0.1",
                      args=["--port-base", str(base), "--bootstrap-port", str(boot)]) as proxy:
        assert proxy.port(1) == base + 1
        assert proxy.bootstrap == f"127.0.0.1:{boot}"
        [listener] = proxy.started["bootstrap"]["listeners"]
        assert listener == {"port": boot, "upstream": f"localhost:{broker.port()}",
                            "node_id": None}
        listing = kcat("-b", proxy.bootstrap, "-L").stdout
        assert listing.startswith(f"Metadata for all topics (from broker -1: "
                                  f"127.0.0.1:{boot}/bootstrap)"), listing
        assert f"broker 1 at 127.0.0.1:{base + 1}" in listing
        topic = name("separate")
        assert kcat("-b", proxy.bootstrap, "-P", "-t", topic, stdin="1\n2\n").returncode == 0
        consumed = kcat("-b", proxy.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
        assert consumed.stdout.splitlines() == ["1", "2"]


def test_kcat_produce_consume(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    _, proxy = setup
    topic = name("kcat")
    lines = [f"line {i}" for i in range(200)]
    produced = kcat("-b", proxy.bootstrap, "-P", "-t", topic, stdin="\n".join(lines) + "\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat("-b", proxy.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == lines


def test_kcat_group_consumer(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    _, proxy = setup
    topic, group = name("kcat-group"), name("g")
    assert kcat("-b", proxy.bootstrap, "-P", "-t", topic, stdin="a\nb\nc\n").returncode == 0
    # -G joins a balanced consumer group: FindCoordinator, JoinGroup, SyncGroup, OffsetCommit
    consumed = kcat("-b", proxy.bootstrap, "-G", group, "-o", "beginning", "-e", "-q",
                    "-X", "enable.auto.commit=true", topic)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["a", "b", "c"]


def test_confluent_produce_group_commit_resume(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    _, proxy = setup
    topic, group = name("ck"), name("group")
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    [future] = admin.create_topics([NewTopic(topic, 3, 1)], operation_timeout=TIMEOUT).values()
    future.result(TIMEOUT)

    producer = Producer({"bootstrap.servers": proxy.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    failures: list[object] = []
    for i in range(3000):
        producer.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(),
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(TIMEOUT) == 0
    assert failures == []

    def consumer() -> Consumer:
        c = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000})
        c.subscribe([topic])
        return c

    first = consumer()
    seen: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 1000 and time.monotonic() < deadline:
        msg = first.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.append(msg.value())
    assert len(seen) >= 1000
    first.commit(asynchronous=False)
    committed = first.committed([TopicPartition(topic, p) for p in range(3)], timeout=TIMEOUT)
    first.close()

    second = consumer()
    rest: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) + len(rest) < 3000 and time.monotonic() < deadline:
        msg = second.poll(0.5)
        if msg is not None and msg.error() is None:
            rest.append(msg.value())
    second.close()
    assert sum(max(tp.offset, 0) for tp in committed) == len(seen)
    assert sorted(seen + rest) == sorted(f"value-{i}".encode() for i in range(3000))


def test_confluent_admin_describe_cluster(setup: tuple[BrokerProcess, ProxyProcess]) -> None:
    _, proxy = setup
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    description = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert [(n.id, n.host, n.port) for n in description.nodes] == [
        (1, "127.0.0.1", proxy.port(1))]
    metadata = admin.list_topics(timeout=TIMEOUT)
    assert {(b.id, b.host, b.port) for b in metadata.brokers.values()} == {
        (1, "127.0.0.1", proxy.port(1))}


def test_sigterm_with_clients_connected_exits_cleanly() -> None:
    with proxied_broker() as (_broker, proxy):
        producer = Producer({"bootstrap.servers": proxy.bootstrap})
        producer.produce(name("t"), b"x")
        assert producer.flush(TIMEOUT) == 0
        started = time.monotonic()
        assert proxy.stop() == 0
        assert time.monotonic() - started < 10
        assert any(e.get("event") == "stopped" for e in proxy.events)
        log = proxy.log_text()
        assert re.search(r"port \d+ -> broker 1 at broker\.invalid:\d+ \(via 127\.0\.0\.1:\d+\)",
                         log), log
        assert "stopping: closing" in log


def test_unreachable_upstream_closes_the_client_and_says_why() -> None:
    # No address map: the proxy itself cannot reach broker.invalid.
    unreachable = {"advertised.listeners": "PLAINTEXT://broker.invalid:9"}
    with BrokerProcess(settings=unreachable) as broker, ProxyProcess(broker.bootstrap) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port(1)), timeout=10) as sock:
            sock.settimeout(10)
            assert sock.recv(100) == b""  # closed by the proxy
        deadline = time.monotonic() + 10
        while "cannot connect" not in proxy.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        log = proxy.log_text()
        assert "cannot connect to broker 1 at broker.invalid:9: DNS lookup of 'broker.invalid'" \
            " failed" in log, log
        assert "--address-map ADVERTISED=REACHABLE" in log


def test_start_fails_clearly_when_no_bootstrap_server_answers(tmp_path: Path) -> None:
    with closed_port() as port:
        proxy = ProxyProcess(f"127.0.0.1:{port}", args=["--startup-timeout-ms", "1500"],
                             log_path=tmp_path / "proxy.log")
        with pytest.raises(RuntimeError) as info:
            proxy.start(timeout=20)
    text = str(info.value)
    assert "exited with 1" in text
    assert f"cannot fetch metadata from the upstream cluster at 127.0.0.1:{port}" in text
    assert "connection refused" in text



def test_sigterm_while_the_cluster_does_not_answer_yet() -> None:
    with closed_port() as port:
        _sigterm_during_start_up(port)


def _sigterm_during_start_up(port: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "moldau.cli.main", "proxy", "--json", "--bootstrap-server",
         f"127.0.0.1:{port}", "--startup-timeout-ms", "60000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # the signal handlers are in place before this line
    assert "discovering the cluster from 127.0.0.1:" in line, line
    time.sleep(0.3)  # inside the start-up retries
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert '"event": "stopped"' in out
    assert "stopped before the upstream cluster answered" in err
