"""Which API versions each real client uses against Moldau, seen on the wire.

Each client runs a small workload (produce with idempotence, fetch, offsets by time, a group
that commits, admin where the client has it) through a :class:`~.wiretap.WireTap`; the test
asserts the versions FACTS.md lists for that client, so a change in what we advertise that
pushes a client onto another version (or an older code path) shows up here.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator

import pytest

from moldau.protocol.api_keys import ApiKey

from . import test_aiokafka as aio
from . import test_confluent_kafka as ck
from . import test_kafka_python as kp
from . import test_kafkajs as kjs
from .conftest import COMPAT_SETTINGS, require_tool, unique_name
from .endpoint import KafkaEndpoint
from .records import Rec, make_records, now_ms
from .wiretap import WireTap, tapped_endpoint

K = ApiKey
# Highest version of each API the client used (FACTS.md, "Versions each client picks").
EXPECTED: dict[str, dict[int, int]] = {
    "confluent-kafka": {K.API_VERSIONS: 3, K.METADATA: 13, K.PRODUCE: 10, K.FETCH: 16,
                        K.LIST_OFFSETS: 7, K.FIND_COORDINATOR: 2, K.JOIN_GROUP: 5,
                        K.SYNC_GROUP: 3, K.LEAVE_GROUP: 1, K.OFFSET_COMMIT: 9,
                        K.OFFSET_FETCH: 9, K.INIT_PRODUCER_ID: 4},
    "kcat": {K.API_VERSIONS: 3, K.METADATA: 4, K.PRODUCE: 7, K.FETCH: 11, K.LIST_OFFSETS: 2,
             K.FIND_COORDINATOR: 2, K.JOIN_GROUP: 5, K.SYNC_GROUP: 3, K.LEAVE_GROUP: 1,
             K.OFFSET_COMMIT: 7, K.OFFSET_FETCH: 7},
    "kafka-python": {K.API_VERSIONS: 4, K.METADATA: 13, K.PRODUCE: 9, K.FETCH: 12,
                     K.LIST_OFFSETS: 11, K.FIND_COORDINATOR: 6, K.JOIN_GROUP: 7,
                     K.SYNC_GROUP: 5, K.LEAVE_GROUP: 5, K.OFFSET_COMMIT: 8,
                     K.OFFSET_FETCH: 8, K.INIT_PRODUCER_ID: 4},
    "aiokafka": {K.API_VERSIONS: 0, K.METADATA: 5, K.PRODUCE: 7, K.FETCH: 11, K.LIST_OFFSETS: 3,
                 K.FIND_COORDINATOR: 1, K.JOIN_GROUP: 5, K.SYNC_GROUP: 3, K.LEAVE_GROUP: 1,
                 K.OFFSET_COMMIT: 3, K.OFFSET_FETCH: 3, K.INIT_PRODUCER_ID: 0},
    "kafkajs": {K.API_VERSIONS: 2, K.METADATA: 6, K.PRODUCE: 7, K.FETCH: 11, K.LIST_OFFSETS: 3,
                K.FIND_COORDINATOR: 2, K.JOIN_GROUP: 5, K.SYNC_GROUP: 3, K.LEAVE_GROUP: 3,
                K.OFFSET_COMMIT: 5, K.OFFSET_FETCH: 4, K.INIT_PRODUCER_ID: 1},
}
# Sent only when a session lasts long enough; checked when seen.
OPTIONAL = {"confluent-kafka": {K.HEARTBEAT: 3}, "kcat": {K.HEARTBEAT: 3},
            "kafka-python": {K.HEARTBEAT: 4}, "aiokafka": {K.HEARTBEAT: 1},
            "kafkajs": {K.HEARTBEAT: 3}}


@pytest.fixture(scope="module")
def tapped() -> Iterator[KafkaEndpoint]:
    with tapped_endpoint(COMPAT_SETTINGS) as endpoint:
        yield endpoint


def _records(n: int = 50) -> list[Rec]:
    return make_records("versions", n, base_ts=now_ms() - 60_000)


def confluent_workload(ep: KafkaEndpoint) -> None:
    admin = ck.AdminClient({"bootstrap.servers": ep.bootstrap, "log_level": 2})
    topic = unique_name("v-ck")
    ck.create_topic(admin, topic)
    records = _records()
    ck.produce(ep.bootstrap, topic, records,
               **{"enable.idempotence": True, "compression.type": "gzip"})
    assert len(ck.consume(ep.bootstrap, topic, 0, len(records))) == len(records)
    consumer = ck._group_consumer(ep.bootstrap, unique_name("v-ck"))
    consumer.subscribe([topic])
    assert len(ck._poll_n(consumer, len(records))) == len(records)
    consumer.offsets_for_times([ck.TopicPartition(topic, 0, records[0].timestamp)], 30)
    consumer.commit(asynchronous=False)
    consumer.committed([ck.TopicPartition(topic, 0)], 30)
    consumer.close()


# Client ids a workload sets so that only its own requests count: kcat and confluent-kafka
# both say "rdkafka" by default, and a confluent-kafka client of the workload before may still
# refresh its metadata (Metadata v13) while kcat (librdkafka 2.0: v4) runs.
CLIENT_IDS = {"kcat": "moldau-versions-kcat"}


def kcat_workload(ep: KafkaEndpoint) -> None:
    from .test_kcat import kcat

    require_tool("kcat")
    topic = unique_name("v-kcat")
    ident = ("-X", f"client.id={CLIENT_IDS['kcat']}")
    kcat("-P", "-b", ep.bootstrap, "-t", topic, "-z", "gzip", *ident,
         stdin="".join(f"m{i}\n" for i in range(50)))
    kcat("-C", "-b", ep.bootstrap, "-t", topic, "-o", "beginning", "-e", *ident)
    kcat("-Q", "-b", ep.bootstrap, "-t", f"{topic}:0:0", *ident)
    kcat("-L", "-b", ep.bootstrap, *ident)
    kcat("-b", ep.bootstrap, "-G", unique_name("v-kcat"), "-X", "auto.offset.reset=earliest",
         *ident, "-c", "50", topic)


def kafka_python_workload(ep: KafkaEndpoint) -> None:
    admin = kp.KafkaAdminClient(bootstrap_servers=ep.bootstrap)
    topic = unique_name("v-kp")
    kp.create_topic(admin, topic)
    admin.close()
    records = _records()
    kp.produce(ep.bootstrap, topic, records, compression_type="gzip")
    assert len(kp.consume(ep.bootstrap, topic, 0, len(records))) == len(records)
    consumer = kp._group_consumer(ep.bootstrap, unique_name("v-kp"), topic)
    assert len(kp._poll_n(consumer, len(records))) == len(records)
    consumer.commit()
    tp = kp.TopicPartition(topic, 0)
    consumer.committed(tp)
    consumer.offsets_for_times({tp: records[0].timestamp})
    consumer.close()


def aiokafka_workload(ep: KafkaEndpoint) -> None:
    topic = unique_name("v-aio")
    aio.create_topic(ep.bootstrap, topic)
    records = _records()
    aio.produce(ep.bootstrap, topic, records, compression_type="gzip", enable_idempotence=True)
    assert len(aio.consume(ep.bootstrap, topic, 0, len(records))) == len(records)
    got, _, _ = aio.run(aio._group_read(ep.bootstrap, unique_name("v-aio"), topic,
                                        len(records), True))
    assert len(got) == len(records)

    async def by_time() -> None:
        consumer = aio.AIOKafkaConsumer(bootstrap_servers=ep.bootstrap)
        await consumer.start()
        try:
            await consumer.offsets_for_times({aio.TopicPartition(topic, 0): 0})
        finally:
            await consumer.stop()

    aio.run(by_time())


def kafkajs_workload(ep: KafkaEndpoint) -> None:
    topic = unique_name("v-kjs")
    records = _records()
    kjs.node("produce", {"bootstrap": ep.bootstrap, "topic": topic, "codec": "gzip",
                         "idempotent": True, "records": kjs.encode(records)})
    kjs.node("offsets", {"bootstrap": ep.bootstrap, "topic": topic, "timestamps": [0]})
    out = kjs.node("group-phase", {"bootstrap": ep.bootstrap, "topic": topic,
                                   "group": unique_name("v-kjs"), "count": len(records)})
    assert len(out["records"]) == len(records)


WORKLOADS: dict[str, Callable[[KafkaEndpoint], None]] = {
    "confluent-kafka": confluent_workload,
    "kcat": kcat_workload,
    "kafka-python": kafka_python_workload,
    "aiokafka": aiokafka_workload,
    "kafkajs": kafkajs_workload,
}


@pytest.mark.parametrize("client", list(WORKLOADS))
def test_client_api_versions(client: str, tapped: KafkaEndpoint) -> None:
    tap: WireTap = tapped.extra["tap"]
    tap.reset()
    try:
        WORKLOADS[client](tapped)
    except subprocess.CalledProcessError as exc:  # pragma: no cover - message only
        pytest.fail(f"{client} workload failed: {exc}")
    used = tap.versions(CLIENT_IDS.get(client))
    highest = {key: max(versions) for key, versions in used.items()}
    expected = EXPECTED[client]
    seen = {key: highest.get(key) for key in expected}
    differences = {K(k).name: (seen[k], want) for k, want in expected.items() if seen[k] != want}
    assert not differences, (
        f"{client}: (used, expected) {differences}; all used (client id, api, version): "
        f"{sorted(tap.by_client)}")
    for key, version in OPTIONAL[client].items():
        if key in highest:
            assert highest[key] == version, f"{client}: {K(key).name} v{highest[key]}"
