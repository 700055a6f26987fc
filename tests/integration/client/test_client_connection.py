"""Connections: version negotiation, KIP-511 fallback, pipelining, errors that name the
address, time-outs; broker.address.map end to end; idempotent retries through a faulty proxy."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from moldau.client import (
    AdminClient,
    Consumer,
    KafkaConnectionError,
    KafkaTimeoutError,
    NewTopic,
    Producer,
    TopicPartition,
)
from moldau.client.connection import BrokerConnection
from moldau.client.versions import client_range
from moldau.protocol.api_keys import ApiKey
from moldau.testing.processes import closed_port
from moldau.testing.runner import InProcessBroker

from .conftest import broker_versions, require_apis, topic_name
from .faulty_proxy import FaultyProxy
from .peers import Peer

pytestmark = pytest.mark.timeout(120)


def test_negotiates_highest_common_versions(peer: Peer) -> None:
    offered = broker_versions(peer)

    async def main() -> None:
        host, port = peer.bootstrap.split(":")
        conn = BrokerConnection(host, int(port))
        await conn.connect()
        try:
            for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.LIST_OFFSETS):
                if key not in offered:
                    continue
                _lo, hi = client_range(key)
                assert conn.versions.version(key) == min(hi, offered[key][1])
            # many requests in flight on one connection, answered by correlation id
            answers = await asyncio.gather(*(conn.request(ApiKey.METADATA, {
                "topics": [], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            }) for _ in range(40)))
            assert len(answers) == 40 and all(a.brokers for a in answers)
            assert conn.in_flight == 0
        finally:
            conn.close()
            await conn.wait_closed()

    asyncio.run(main())


async def _fake_broker(handler) -> tuple[asyncio.AbstractServer, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_kip511_fallback_to_the_version_the_broker_names() -> None:
    """A broker that serves ApiVersions only up to v2 answers v3 in v0 format (KIP-511)."""
    seen_versions: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                _key, version, corr = struct.unpack_from(">hhi", frame)
                seen_versions.append(version)
                # v0-format body: error, [api_key min max]; v1/v2 add throttle_time
                code = 35 if version > 2 else 0
                body = struct.pack(">hi", code, 2) + struct.pack(">hhh", 18, 0, 2)
                body += struct.pack(">hhh", 3, 0, 9)
                if version >= 1 and code == 0:
                    body += struct.pack(">i", 0)
                payload = struct.pack(">i", corr) + body
                writer.write(struct.pack(">i", len(payload)) + payload)
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    async def main() -> None:
        server, port = await _fake_broker(handler)
        try:
            conn = BrokerConnection("127.0.0.1", port)
            await conn.connect()
            assert seen_versions == [3, 2]
            assert conn.versions.version(ApiKey.METADATA) == 9
            assert not conn.versions.supports(ApiKey.FETCH)
            conn.close()
        finally:
            server.close()

    asyncio.run(main())


def test_request_timeout_names_broker_and_closes_connection() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 20)
        await asyncio.sleep(30)

    async def main() -> None:
        server, port = await _fake_broker(silent)
        try:
            conn = BrokerConnection("127.0.0.1", port, connect_timeout_ms=300)
            started = time.monotonic()
            with pytest.raises(KafkaConnectionError) as info:
                await conn.connect()
            assert time.monotonic() - started < 15  # the 300 ms limit, not the server's 30 s
            assert info.value.reason == "timeout"
            assert f"127.0.0.1:{port}" in str(info.value)
            assert "socket.connection.setup.timeout.ms=300" in str(info.value)
        finally:
            server.close()

    asyncio.run(main())


def test_request_timeout_after_connect() -> None:
    """A broker that completes the handshake and then never answers: the request fails
    after request.timeout.ms with a message naming the broker, and the connection closes."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                key, version, corr = struct.unpack_from(">hhi", frame)
                if key != ApiKey.API_VERSIONS:
                    continue  # silence
                code = 35 if version > 0 else 0
                body = struct.pack(">hi", code, 2) + struct.pack(">hhh", 18, 0, 0)
                body += struct.pack(">hhh", 3, 0, 9)
                payload = struct.pack(">i", corr) + body
                writer.write(struct.pack(">i", len(payload)) + payload)
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    async def main() -> None:
        server, port = await _fake_broker(handler)
        try:
            conn = BrokerConnection("127.0.0.1", port, request_timeout_ms=200)
            await conn.connect()
            body = {"topics": [], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False}
            pending = asyncio.ensure_future(conn.request(ApiKey.METADATA, body,
                                                         timeout_ms=5000))
            with pytest.raises(KafkaTimeoutError,
                               match=rf"metadata v9 request to bootstrap server "
                                     rf"127\.0\.0\.1:{port} got no response within 200 ms"):
                await conn.request(ApiKey.METADATA, body)
            assert not conn.connected
            # the other request in flight fails at once with the connection, not after 5 s
            with pytest.raises(KafkaConnectionError):
                await asyncio.wait_for(pending, 1)
        finally:
            server.close()

    asyncio.run(main())


def test_connection_errors_say_which_address_and_why() -> None:
    async def main(port: int) -> None:
        with pytest.raises(KafkaConnectionError) as info:
            await BrokerConnection("127.0.0.1", port).connect()
        assert info.value.reason == "refused"
        assert f"127.0.0.1:{port}" in str(info.value)
        with pytest.raises(KafkaConnectionError) as info:
            await BrokerConnection("no-such-host.invalid", 9092).connect()
        assert info.value.reason == "dns"
        assert "no-such-host.invalid" in str(info.value)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                             "default.api.timeout.ms": 500})
        with pytest.raises(KafkaTimeoutError, match=f"127.0.0.1:{port}.*refused"):
            await admin.start()
        await admin.close()

    with closed_port() as port:
        asyncio.run(main(port))


def test_unreachable_advertised_address_hint_and_address_map() -> None:
    """The NAT case of seed 002: the bootstrap address works, but the metadata names an
    address the client cannot reach. The error names that address, says where it came from
    and points at broker.address.map; with the map, the same client works."""
    with closed_port() as dead:  # what the broker advertises: connections are refused
        _unreachable_then_mapped(dead)


def _unreachable_then_mapped(dead: int) -> None:
    settings = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{dead}"}
    with InProcessBroker(settings=settings) as broker:
        real = broker.broker.bound_port()

        async def main() -> None:
            topic = topic_name("nat")
            async with AdminClient({"bootstrap.servers": f"127.0.0.1:{real}",
                                    "default.api.timeout.ms": 2000}) as admin:
                assert [(b.host, b.port) for b in admin.cluster.brokers.values()] == [
                    ("127.0.0.1", dead)]
                with pytest.raises(KafkaConnectionError) as info:
                    await admin.cluster.connection(1)
                assert info.value.reason == "refused"
                message = str(info.value)
                assert f"broker 1 at 127.0.0.1:{dead}" in message, message
                assert "came from the cluster's metadata" in message, message
                assert "broker.address.map" in message, message
                with pytest.raises(KafkaTimeoutError, match=rf"127\.0\.0\.1:{dead}.*refused"
                                                            r".*broker\.address\.map"):
                    await admin.create_topics([NewTopic(topic, 1, 1)])
            mapped = {"bootstrap.servers": f"127.0.0.1:{real}",
                      "broker.address.map": f"127.0.0.1:{dead}=127.0.0.1:{real}"}
            async with AdminClient(mapped) as admin:
                [info_] = admin.cluster.brokers.values()
                assert (info_.port, info_.advertised) == (real, ("127.0.0.1", dead))
                assert await admin.create_topics([NewTopic(topic, 1, 1)]) == {topic: None}
                conn = await admin.cluster.connection(1)
                assert conn.connected and conn.port == real
            async with Producer(mapped) as producer:
                meta = await producer.send(topic, b"through the map")
            assert meta.offset == 0

        asyncio.run(main())


def test_address_map_rewrites_a_foreign_brokers_addresses(noida: Peer) -> None:
    """broker.address.map against another implementation (noida-db) behind a proxy: every
    broker the metadata names is rewritten to the proxy, and requests travel through it."""
    host, port = noida.bootstrap.split(":")

    async def main() -> None:
        proxy = await FaultyProxy(host, int(port)).start()
        try:
            config = {"bootstrap.servers": f"127.0.0.1:{proxy.port}",
                      "broker.address.map": f"{host}:{port}=127.0.0.1:{proxy.port}"}
            async with AdminClient(config) as admin:
                brokers = admin.cluster.brokers
                assert brokers and all(b.port == proxy.port for b in brokers.values())
                assert all(b.advertised == (host, int(port)) for b in brokers.values())
                conn = await admin.cluster.connection(next(iter(brokers)))
                assert conn.port == proxy.port
                seen = len(proxy.api_keys_seen)
                await admin.list_topics()
                assert ApiKey.METADATA in proxy.api_keys_seen[seen:], proxy.api_keys_seen
                coordinators = await admin.cluster.find_coordinators(["some-group"])
                assert coordinators["some-group"].port == proxy.port
                described = await admin.describe_cluster()
                assert described.brokers
                assert all(b.port == proxy.port for b in described.brokers)
        finally:
            await proxy.stop()

    asyncio.run(main())


@pytest.mark.parametrize("idempotent", [True, False])
def test_retry_after_lost_response(peer: Peer, idempotent: bool) -> None:
    """The broker appends a batch but its answer is lost: the producer retries it.

    With idempotence the retry carries the same producer id and sequence and the broker
    keeps one copy; without it the log gets a duplicate (which shows the test can fail).
    """
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.INIT_PRODUCER_ID)
    host, port = peer.bootstrap.split(":")

    async def main() -> None:
        topic = topic_name("retry")
        async with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
            await admin.create_topics([NewTopic(topic, 1, 1)])
            await admin.cluster.wait_for_topics([topic], 10000)
        proxy = await FaultyProxy(host, int(port)).start()
        try:
            proxy.drop_produce_responses = 1
            config = {
                "bootstrap.servers": f"127.0.0.1:{proxy.port}",
                "broker.address.map": f"{host}:{port}=127.0.0.1:{proxy.port}",
                "enable.idempotence": idempotent, "linger.ms": 0, "retry.backoff.ms": 50,
            }
            async with Producer(config) as producer:
                meta = await producer.send(topic, b"only-once")
            assert proxy.dropped == 1
        finally:
            await proxy.stop()
        async with Consumer({"bootstrap.servers": peer.bootstrap,
                             "auto.offset.reset": "earliest"}) as consumer:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            end = (await consumer.end_offsets([tp]))[tp]
            values = []
            deadline = time.monotonic() + 10
            while len(values) < end and time.monotonic() < deadline:
                values += [r.value for r in await consumer.poll(0.5)]
        if idempotent:
            assert values == [b"only-once"]
            # Tansu answers the retried duplicate with DUPLICATE_SEQUENCE_NUMBER and no offset
            assert meta.offset == (-1 if peer.name == "tansu" else 0)
        else:
            assert values == [b"only-once", b"only-once"]

    asyncio.run(main())
