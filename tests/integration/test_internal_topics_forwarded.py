"""A broker that is not the controller creates ``__consumer_offsets`` (its first
FindCoordinator) by forwarding CreateTopics to the controller: a real ``moldau serve`` process
acting as the controller creates it for the forwarding channel, and still refuses a client
that asks for an internal topic.

Found in a three-broker ZooKeeper cluster: groups whose first FindCoordinator reached a broker
other than the controller waited forever, every try refused with "Topic '__consumer_offsets'
is internal".
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from moldau.broker.group.partitioning import OFFSETS_TOPIC
from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.forwarding import ForwardingControllerChannel
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import (
    BrokerEndpoint,
    ControllerChangeRecord,
    RegisterBrokerRecord,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.runner import BrokerProcess
from moldau.wire.connection import BrokerConnection


def forwarding_to(port: int) -> ForwardingControllerChannel:
    """The channel of broker 2, whose image names broker 1 (at ``port``) the controller."""
    image = MetadataImage()
    image.replay(RegisterBrokerRecord(1, uuid.uuid4(), [BrokerEndpoint("PLAINTEXT", "127.0.0.1",
                                                                       port)]))
    image.replay(ControllerChangeRecord(1, 1))
    return ForwardingControllerChannel(node_id=2, image=image, listener="PLAINTEXT",
                                       request_timeout_ms=10_000, retry_backoff_ms=20)


def test_the_controller_creates_internal_topics_for_brokers_only() -> None:
    with BrokerProcess() as controller:
        port = controller.port()

        async def main() -> tuple[Any, Any, Any]:
            forwarding = forwarding_to(port)
            try:
                [made] = await forwarding.create_topics([TopicSpec(
                    OFFSETS_TOPIC, 3, 1, configs={"cleanup.policy": "compact"})])
            finally:
                forwarding.close()
            conn = BrokerConnection("127.0.0.1", port)
            await conn.connect()
            try:
                refused = await conn.request(ApiKey.CREATE_TOPICS, {
                    "topics": [{"name": "__transaction_state", "num_partitions": 1,
                                "replication_factor": 1, "assignments": [], "configs": []}],
                    "timeout": 30_000, "validate_only": False})
                metadata = await conn.request(ApiKey.METADATA, {
                    "topics": [{"name": OFFSETS_TOPIC, "topic_id": None}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
            finally:
                conn.close()
            return made, refused, metadata

        made, refused, metadata = asyncio.run(main())
    assert (made.error, made.num_partitions) == (E.none, 3)
    [topic] = metadata.topics
    assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (E.none, True, 3)
    assert refused.topics[0].error_code == E.invalid_request  # a client may not
