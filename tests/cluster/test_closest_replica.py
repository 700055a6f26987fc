"""Fetch from the closest replica (KIP-392) on three real ``moldau serve`` brokers in racks
a, b and c (``broker.rack``) with ``replica.selector.class`` set to Kafka's
``RackAwareReplicaSelector``, on a real ZooKeeper; the partition's leader is on rack a.

- At the wire level (Fetch v16 as librdkafka sends it): the leader answers a consumer of rack
  c with ``preferred_read_replica`` = the rack-c broker and no records, and serves a consumer
  of its own rack or of no rack itself; the rack-c follower serves every record up to its
  high watermark, learns a new high watermark from the leader promptly (a long poll parked on
  it is answered with the new record well before ``replica.fetch.wait.max.ms``), answers
  OFFSET_OUT_OF_RANGE past its log end, leaves Fetch v10 and ListOffsets to the leader; a
  frozen rack-c follower that left the ISR is no longer chosen, and is again once it is back
  in the ISR; moldau's own consumer with ``client.rack=c`` follows the preferred replica, and
  so does confluent-kafka through ``moldau proxy`` (seed 002's fix c): its fetches go to the
  proxy's route for broker 3.
- With confluent-kafka (``client.rack=c``): the consumer reads every record; while the leader
  is frozen (SIGSTOP, shorter than the ZooKeeper session so it stays the leader) it goes on
  reading from the rack-c broker, the only one it was sent to; after the rack-c broker is
  stopped it falls back to the leader and keeps reading, records produced before and after.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.codec import iter_decoded
from moldau.testing.cluster import BrokerCluster, BrokerSpec
from moldau.testing.waiting import wait_for
from moldau.wire.connection import BrokerConnection

from .conftest import ClusterFactory

# ~40 s of three-broker clusters: the slow suite (`make test` runs it after the default one).
pytestmark = pytest.mark.slow

wait_until = functools.partial(wait_for, interval=0.2)
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RACKS = {1: "a", 2: "b", 3: "c"}
SETTINGS = {
    "replica.selector.class": SELECTOR,
    # Long enough that a leader frozen for a while keeps its ZooKeeper session (and its
    # leadership); a frozen follower leaves the ISR after replica.lag.time.max.ms.
    "zookeeper.session.timeout.ms": "30000",
    "replica.lag.time.max.ms": "4000",
    # Long, so that a follower's high watermark that waited for it (rather than being sent
    # as soon as the leader's moved) shows.
    "replica.fetch.wait.max.ms": "8000",
}


@pytest.fixture
def racked(cluster_factory: ClusterFactory) -> Iterator[BrokerCluster]:
    specs = [BrokerSpec(broker_id=i, rack=rack) for i, rack in RACKS.items()]
    yield cluster_factory(specs, settings=SETTINGS)


def create_topic(cluster: BrokerCluster, topic: str) -> uuid.UUID:
    """``topic``, one partition on brokers [1, 2, 3] (leader 1, rack a); its topic id."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])],
                        operation_timeout=30)[topic].result(60)

    def described() -> Any:
        state = cluster.partition_state(topic, 0)
        return state is not None and state.get("leader") == 1 and len(state["isr"]) == 3

    wait_until(described, 60, "partition 0 led by broker 1 with a full ISR")
    return asyncio.run(_topic_id(cluster, topic))


async def _topic_id(cluster: BrokerCluster, topic: str) -> uuid.UUID:
    """The topic's id, once broker 1 knows the topic (ZooKeeper has it first)."""
    conn = await _connect(cluster, 1)
    try:
        deadline = time.monotonic() + 60
        while True:
            answer = await conn.request(ApiKey.METADATA, {
                "topics": [{"name": topic, "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}, version=12)
            [entry] = answer.topics
            if entry.error_code == ErrorCode.none and entry.topic_id is not None:
                # broker.rack is in Metadata's brokers.
                assert {b.node_id: b.rack for b in answer.brokers} == RACKS
                return entry.topic_id
            assert time.monotonic() < deadline, f"broker 1 does not know {topic}"
            await asyncio.sleep(0.2)
    finally:
        conn.close()


async def _connect(cluster: BrokerCluster, broker_id: int) -> BrokerConnection:
    host, port = cluster.broker(broker_id).address().rsplit(":", 1)
    conn = BrokerConnection(host, int(port), client_id="rack-c-consumer")
    await conn.connect()
    return conn


def produce(cluster: BrokerCluster, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    errors: list[Any] = []
    for value in values:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda err, _msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(90) == 0 and not errors, errors[:3]


def fetch_body(topic_id: uuid.UUID, offset: int, *, rack: str, max_wait_ms: int = 0,
               epoch: int = -1) -> dict[str, Any]:
    """A consumer's Fetch v16 (librdkafka's version), one partition."""
    return {"replica_state": {"replica_id": -1, "replica_epoch": -1},
            "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "", "topic_id": topic_id, "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20, "replica_directory_id": None}]}],
            "forgotten_topics_data": [], "rack_id": rack, "cluster_id": None}


async def fetch(conn: BrokerConnection, topic_id: uuid.UUID, offset: int, *, rack: str,
                version: int = 16, topic: str = "", **kwargs: Any) -> Any:
    body = fetch_body(topic_id, offset, rack=rack, **kwargs)
    if version < 15:
        body["replica_id"] = -1
    if version < 13:
        body["topics"][0]["topic"] = topic
    answer = await conn.request(ApiKey.FETCH, body, version=version)
    [topic] = answer.responses
    [partition] = topic.partitions
    return partition


def values(records: bytes | None) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for b in iter_decoded(records or b"") for r in b.records]


async def read_all(conn: BrokerConnection, topic_id: uuid.UUID, count: int) -> list[bytes]:
    """Every record up to ``count`` through ``conn`` (a follower), as a consumer of rack c."""
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        answer = await fetch(conn, topic_id, len(got), rack="c", max_wait_ms=500)
        assert answer.error_code == ErrorCode.none, ErrorCode(answer.error_code).name
        assert answer.preferred_read_replica == -1  # a follower never redirects
        for offset, value in values(answer.records):
            if offset >= len(got):
                assert offset == len(got)
                got.append(value)
    return got


def test_the_leader_sends_a_rack_c_consumer_to_the_rack_c_follower(
        racked: BrokerCluster) -> None:
    cluster = racked
    topic = f"near-{uuid.uuid4().hex[:8]}"
    topic_id = create_topic(cluster, topic)
    sent = [f"v{i}".encode() for i in range(300)]
    produce(cluster, topic, sent)
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    described = admin.describe_cluster(request_timeout=30).result(60)
    assert {n.id: n.rack for n in described.nodes} == RACKS  # and in DescribeCluster's

    async def main() -> None:
        leader, follower = await _connect(cluster, 1), await _connect(cluster, 3)
        try:
            answer = await fetch(leader, topic_id, 0, rack="c")
            assert (answer.error_code, answer.preferred_read_replica) == (ErrorCode.none, 3)
            assert not answer.records and answer.high_watermark == 300
            for rack in ("a", "", "elsewhere"):  # the leader's rack, none, no replica there
                answer = await fetch(leader, topic_id, 0, rack=rack)
                assert answer.preferred_read_replica == -1 and values(answer.records)
            # Fetch v10 has no rack: the leader reads, whatever the consumer's rack.
            answer = await fetch(leader, topic_id, 0, rack="c", version=10,
                                 topic=topic)
            assert answer.error_code == ErrorCode.none and values(answer.records)

            # The follower serves every record, up to its high watermark.
            assert await read_all(follower, topic_id, 300) == sent
            # A long poll parked on the follower at its end is answered with the next
            # record once the leader's high watermark reaches it (the follower learns it
            # from its next fetch answer).
            parked = asyncio.ensure_future(
                fetch(follower, topic_id, 300, rack="c", max_wait_ms=30_000))
            answered: list[float] = []
            parked.add_done_callback(lambda _: answered.append(time.monotonic()))
            await asyncio.sleep(0.3)
            assert not parked.done()
            await asyncio.to_thread(produce, cluster, topic, [b"late"])
            acked = time.monotonic()
            answer = await asyncio.wait_for(parked, 60)
            assert values(answer.records) == [(300, b"late")], answer
            # The leader sends the follower its new high watermark at once, not after
            # replica.fetch.wait.max.ms (8 s here): a bound far below it, never a tight one.
            lag = answered[0] - acked
            print(f"a consumer of the follower got the record {lag * 1000:.0f} ms after the "
                  f"producer's acks=all acknowledgement")
            assert lag < 5.0, f"the follower's high watermark came {lag:.1f} s after the ack"
            # Past the follower's log end: OFFSET_OUT_OF_RANGE (the client asks the leader).
            answer = await fetch(follower, topic_id, 5000, rack="c", epoch=0)
            assert answer.error_code == ErrorCode.offset_out_of_range
            # Fetch v10 and ListOffsets go to the leader only.
            answer = await fetch(follower, topic_id, 0, rack="c", version=10,
                                 topic=topic)
            assert answer.error_code == ErrorCode.not_leader_or_follower
            offsets = await follower.request(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": topic, "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1,
                         "timestamp": -1}]}]}, version=7)
            code = offsets.topics[0].partitions[0].error_code
            assert code == ErrorCode.not_leader_or_follower
        finally:
            leader.close()
            follower.close()

    asyncio.run(main())
    # Moldau's own consumer follows the leader's preferred read replica too.
    assert asyncio.run(moldau_consumer_read(cluster, topic, 301)) == ([*sent, b"late"], 3)

    # A follower out of the ISR is not chosen: freeze the rack-c broker until its leader
    # drops it (replica.lag.time.max.ms), then let it go on until it is back in.
    cluster.sigstop(3)
    try:
        wait_until(lambda: 3 not in cluster.partition_state(topic, 0)["isr"], 60,
                   "broker 3 out of the ISR")
        answer = asyncio.run(_one_fetch(cluster, 1, topic_id))
        assert answer.preferred_read_replica == -1 and values(answer.records)
    finally:
        cluster.sigcont(3)
    wait_until(lambda: 3 in cluster.partition_state(topic, 0)["isr"], 60,
               "broker 3 back in the ISR")
    wait_until(lambda: asyncio.run(_one_fetch(cluster, 1, topic_id)).preferred_read_replica
               == 3, 30, "the leader choosing broker 3 again")

    # Through `moldau proxy` (seed 002's fix c): the preferred replica is a broker id, which
    # the client finds in the proxy's rewritten metadata, so it fetches from broker 3 through
    # the proxy's route for broker 3.
    from moldau.testing.proxy import ProxyProcess

    with ProxyProcess(cluster.bootstrap()) as proxy:
        consumer = RackConsumer(proxy.bootstrap, topic)
        try:
            assert consumer.read_until(301) == [*sent, b"late"]
            consumer.read_until(0, 30, until=lambda: consumer.fetching_from(topic) == 3)
            assert consumer.fetching_from(topic) == 3
            brokers = consumer.stats["brokers"]
            fetched = {b["nodeid"]: b["req"].get("Fetch", 0) for b in brokers.values()
                       if b.get("nodeid", -1) >= 0}
            assert fetched[3] > 0, fetched
            assert all(str(proxy.port(3)) in name for name, b in brokers.items()
                       if b.get("nodeid") == 3), list(brokers)
        finally:
            consumer.close()


async def _one_fetch(cluster: BrokerCluster, broker_id: int, topic_id: uuid.UUID) -> Any:
    conn = await _connect(cluster, broker_id)
    try:
        return await fetch(conn, topic_id, 0, rack="c")
    finally:
        conn.close()


class RackConsumer:
    """A confluent-kafka consumer with ``client.rack=c`` assigned partition 0 from the start,
    fetching in small steps (so that reading the topic takes many fetches), keeping the
    values it read in order and librdkafka's last statistics."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        import json

        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.stats: dict[str, Any] = {}

        def on_stats(text: str) -> None:
            self.stats = json.loads(text)

        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
            "enable.auto.commit": False, "client.rack": "c",
            "max.partition.fetch.bytes": 16384, "fetch.max.bytes": 16384,
            "message.max.bytes": 16384,
            "queued.min.messages": 20, "fetch.wait.max.ms": 100,
            "statistics.interval.ms": 500, "stats_cb": on_stats})
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.values: list[bytes] = []

    def read_until(self, count: int, timeout: float = 90.0,
                   until: Callable[[], bool] | None = None) -> list[bytes]:
        """Poll until ``count`` values were read (or ``until`` holds), at most ``timeout``
        seconds (polling also serves librdkafka's statistics callback)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (until() if until is not None else len(self.values) >= count):
                break
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            assert msg.offset() == len(self.values), (msg.offset(), len(self.values))
            self.values.append(msg.value())
        return self.values

    def fetching_from(self, topic: str) -> Any:
        """The broker librdkafka's statistics say partition 0 is fetched from."""
        partition = self.stats.get("topics", {}).get(topic, {}).get("partitions", {}).get("0")
        return partition.get("broker") if partition else None

    def close(self) -> None:
        self.consumer.close()


def test_confluent_kafka_reads_from_the_rack_c_follower_and_falls_back_to_the_leader(
        racked: BrokerCluster) -> None:
    cluster = racked
    topic = f"branch-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic)
    sent = [f"{i:06d}".encode() + b"." * 1018 for i in range(2000)]  # 1 KiB each
    produce(cluster, topic, sent)
    consumer = RackConsumer(cluster.bootstrap(), topic)
    try:
        consumer.read_until(0, 30, until=lambda: consumer.fetching_from(topic) == 3)
        print("librdkafka's statistics of partition 0:", {
            k: v for k, v in consumer.stats["topics"][topic]["partitions"]["0"].items()
            if k in ("leader", "broker", "fetch_state", "fetchq_cnt")})
        assert consumer.fetching_from(topic) == 3, "librdkafka fetching from broker 3 (rack c)"
        before = len(consumer.values)
        assert before < 1500 and consumer.values == sent[:before]
        # Freeze the leader (for less than the ZooKeeper session: it stays the leader). The
        # rest of the records, many fetches' worth, can only come from the rack-c broker.
        cluster.sigstop(1)
        try:
            frozen_at = time.monotonic()
            read = consumer.read_until(2000, timeout=20)
            assert len(read) == 2000, f"read {len(read)} of 2000 with the leader frozen"
            print(f"read {2000 - before} records from the rack-c follower in "
                  f"{time.monotonic() - frozen_at:.1f} s while the leader was frozen")
        finally:
            cluster.sigcont(1)
        assert read == sent
        assert cluster.partition_state(topic, 0)["leader"] == 1  # still the leader

        # Moldau's consumer too reads from broker 3 before it stops, and from the leader after.
        from moldau.client.sync import SyncConsumer
        from moldau.client.types import TopicPartition

        own = SyncConsumer({"bootstrap.servers": cluster.bootstrap(), "client.rack": "c",
                            "auto.offset.reset": "earliest"})
        own.assign([(topic, 0)])
        own_state = own._client.subscription.state(TopicPartition(topic, 0))
        own_read = read_moldau(own, 2000)
        assert own_read == sent and own_state.preferred_replica == 3

        # Stop the rack-c broker: the consumers fall back to the leader and keep reading
        # what was written before and after.
        more = [f"{i:06d}".encode() for i in range(2000, 2300)]
        produce(cluster, topic, more[:150])
        cluster.stop_broker(3)
        produce(cluster, topic, more[150:])
        assert consumer.read_until(2300) == sent + more
        consumer.read_until(0, 30, until=lambda: consumer.fetching_from(topic) == 1)
        assert consumer.fetching_from(topic) == 1, "librdkafka fetching from the leader"
        assert own_read + read_moldau(own, 300) == sent + more
        assert own_state.preferred_replica == -1
        own.close()
    finally:
        consumer.close()


def read_moldau(consumer: Any, count: int, timeout: float = 90.0) -> list[bytes]:
    """The next ``count`` values a moldau SyncConsumer returns."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += [r.value for r in consumer.poll(1.0)]
    return got


async def moldau_consumer_read(cluster: BrokerCluster, topic: str, count: int
                               ) -> tuple[list[bytes], int]:
    """``count`` values read by a moldau Consumer with ``client.rack=c``, and the replica
    its fetcher was reading from at the end."""
    from moldau.client.consumer import Consumer
    from moldau.client.types import TopicPartition

    tp = TopicPartition(topic, 0)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "client.rack": "c",
                         "auto.offset.reset": "earliest"})
    await consumer.start()
    try:
        consumer.assign([tp])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            got += [r.value for r in await consumer.poll(1.0)]
        return got, getattr(consumer.subscription.state(tp), "preferred_replica", -1)
    finally:
        await consumer.close()
