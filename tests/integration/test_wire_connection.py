"""moldau.wire's connection as the broker uses it to reach another broker (the client's
connection is the same class with the client's address hint): version negotiation, pipelined
requests answered in order, and failures that name the peer and what to fix on the broker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.processes import closed_port
from moldau.testing.runner import InProcessBroker
from moldau.wire.connection import BrokerConnection
from moldau.wire.errors import KafkaConnectionError


@dataclass(frozen=True)
class OtherBroker:
    """A broker as another broker knows it (a Peer)."""

    node_id: int
    host: str
    port: int

    def describe(self) -> str:
        return f"controller {self.node_id} at {self.host}:{self.port}"


def test_pipelined_requests_are_answered_in_order() -> None:
    with InProcessBroker() as node:
        port = node.broker.bound_port()

        async def main() -> None:
            peer = OtherBroker(1, "127.0.0.1", port)
            conn = BrokerConnection("127.0.0.1", port, client_id="broker-2-to-controller",
                                    broker=peer)
            await conn.connect()
            try:
                assert conn.versions.require(ApiKey.METADATA) == 13
                requests = [conn.request(ApiKey.METADATA, {
                    "topics": None, "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False}) for _ in range(5)]
                requests.append(conn.request(ApiKey.DESCRIBE_CLUSTER, {
                    "include_cluster_authorized_operations": False, "endpoint_type": 1,
                    "include_fenced_brokers": False}))
                answers = await asyncio.gather(*requests)
                assert [a.controller_id for a in answers] == [1] * 6
                assert answers[-1].error_code == ErrorCode.none
            finally:
                conn.close()
                await conn.wait_closed()

        asyncio.run(main())


def test_a_refused_peer_is_named_with_the_brokers_fix() -> None:
    with closed_port() as port:
        async def main() -> str:
            conn = BrokerConnection("127.0.0.1", port, broker=OtherBroker(3, "127.0.0.1", port))
            with pytest.raises(KafkaConnectionError) as failure:
                await conn.connect()
            assert failure.value.reason == "refused"
            return str(failure.value)

        message = asyncio.run(main())
    assert f"controller 3 at 127.0.0.1:{port}" in message
    assert "advertised.listeners" in message
    assert "broker.address.map" not in message  # a client setting, not the broker's


def test_a_silent_peer_times_out_and_the_connection_closes() -> None:
    async def main() -> None:
        accepted: list[asyncio.StreamWriter] = []

        async def never_answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            accepted.append(w)

        server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = BrokerConnection("127.0.0.1", port, connect_timeout_ms=300)
        with pytest.raises(KafkaConnectionError) as failure:
            await conn.connect()
        assert failure.value.reason == "timeout"
        assert "300" in str(failure.value)
        assert not conn.connected
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(main())


def test_a_cancelled_request_leaves_the_connection_usable() -> None:
    """A caller that stops waiting (a heartbeat task cancelled when a member leaves) must not
    make the broker's answer to it look like an unknown correlation id that closes the
    connection under the next request (the member's LeaveGroup)."""
    with InProcessBroker() as node:
        port = node.broker.bound_port()
        body = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}

        async def main() -> None:
            conn = BrokerConnection("127.0.0.1", port, client_id="t")
            await conn.connect()
            try:
                for _ in range(20):
                    abandoned = asyncio.get_running_loop().create_task(
                        conn.request(ApiKey.METADATA, body))
                    await asyncio.sleep(0)  # written, waiting for its answer
                    abandoned.cancel()
                    answer = await conn.request(ApiKey.METADATA, body)
                    assert answer.controller_id == 1
                    assert conn.connected
            finally:
                conn.close()
                await conn.wait_closed()

        asyncio.run(main())
