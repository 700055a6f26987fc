"""PeerConnections against a real broker: one connection per (peer, purpose) to the peer's
inter-broker endpoint from the image, reused while it is open, replaced after a drop or a
move, closed when the peer leaves the image or the node stops."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Iterator

import pytest

from moldau.broker.metadata.image import BrokerRegistration, MetadataImage
from moldau.broker.metadata.records import BrokerEndpoint
from moldau.broker.peers import PeerConnections
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.testing.runner import InProcessBroker
from moldau.wire.errors import KafkaConnectionError


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as b:
        yield b


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _register(image: MetadataImage, broker_id: int, port: int, listener: str = "PLAINTEXT"
              ) -> None:
    image.brokers[broker_id] = BrokerRegistration(
        broker_id, uuid.uuid4(), [BrokerEndpoint(listener, "127.0.0.1", port)], None, False)


def test_one_connection_per_peer_and_purpose(broker: InProcessBroker) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])

    async def main() -> None:
        image = MetadataImage()
        _register(image, 2, port)
        peers = PeerConnections(node_id=7, image=image, listener="PLAINTEXT")
        markers = await peers.get(2, "txn-markers")
        assert markers.client_id == "broker-7-to-txn-markers"
        assert await peers.get(2, "txn-markers") is markers
        verification = await peers.get(2, "txn-verification")
        assert verification is not markers
        answer = await markers.request(ApiKey.METADATA, {"topics": [],
                                       "allow_auto_topic_creation": False}, version=4)
        assert answer.brokers  # a real answer from the peer
        # Concurrent callers share one connection.
        peers.drop(2, "txn-markers")
        assert not markers.connected
        both = await asyncio.gather(peers.get(2, "txn-markers"), peers.get(2, "txn-markers"))
        assert both[0] is both[1] and both[0] is not markers
        # The peer leaves the image: its connections close.
        del image.brokers[2]
        peers.sync()
        assert not both[0].connected and not verification.connected
        with pytest.raises(KafkaError) as info:
            await peers.get(2, "txn-markers")
        assert info.value.code == ErrorCode.broker_not_available
        # It comes back on another address: a new connection there.
        _register(image, 2, _free_port())
        with pytest.raises(KafkaConnectionError):
            await peers.get(2, "txn-markers")
        _register(image, 2, port)
        again = await peers.get(2, "txn-markers")
        assert again.connected
        peers.close()
        assert not again.connected
        with pytest.raises(KafkaError):
            await peers.get(2, "txn-markers")

    asyncio.run(main())


def test_no_endpoint_on_the_inter_broker_listener_says_so() -> None:
    async def main() -> None:
        image = MetadataImage()
        _register(image, 2, 9, listener="EXTERNAL")
        peers = PeerConnections(node_id=1, image=image, listener="INTERNAL")
        with pytest.raises(KafkaError, match=r"inter\.broker\.listener\.name=INTERNAL"):
            await peers.get(2, "txn-markers")
        with pytest.raises(ValueError):
            await peers.get(1, "txn-markers")

    asyncio.run(main())
