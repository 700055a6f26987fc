"""Regenerate the live fuzzer's seed corpus (requests.corpus) from real clients.

    .venv/bin/python -m tests.faults.fuzz.capture [--out PATH] [--missing-only]

Starts a ``moldau serve`` subprocess behind a recording relay (the broker advertises the
relay, so every connection goes through it), runs a workload with each real client —
confluent-kafka (produce with every codec, a classic group and a KIP-848
``group.protocol=consumer`` group, commits, the admin API), kafka-python, aiokafka, kcat and
kafkajs — and records every request frame they send. Then, for every (api key, version) the
broker serves that no client sent, it builds a request from kio entities: a captured request
of the same API at another version converted field by field, or a plausible body written
below (``--missing-only`` does just this for an existing corpus: it adds seeds for APIs and
versions served since it was captured, and leaves the captured frames as they are). The
result is written with :func:`.corpus.write_corpus` and a table of which client covered what
is printed.

The workloads use the topic and group names of :mod:`.corpus` so the seeds address topics
the fuzz run creates. Failures of single client steps are printed and skipped: a client that
cannot do something still leaves the requests it sent.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import json
import os
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from moldau.broker.dispatch import load_handlers, parse_frame
from moldau.protocol.api_keys import ApiKey, api_name
from moldau.protocol.entities import build, to_dict
from moldau.protocol.messages import (
    decode_request,
    decode_request_header,
    encode_request,
    request_schema,
)
from moldau.testing.processes import free_port
from moldau.testing.runner import BrokerProcess

from .corpus import (
    CORPUS_PATH,
    FREE_TOPICS,
    GROUPS,
    PLAYGROUND_TOPICS,
    Seed,
    read_corpus,
    write_corpus,
)
from .mutate import HAND_CODED

ROOT = Path(__file__).resolve().parents[3]
JS_DIR = ROOT / "tests" / "compat" / "js"
MAX_SEED_BYTES = 16 * 1024
PER_SOURCE = 2  # frames kept per (api key, version, source)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
BROKER_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": 6000,
    "offsets.topic.num.partitions": 3,
}


class Recorder:
    """A TCP relay 127.0.0.1:<port> -> broker that keeps every request frame it forwards,
    labelled with :attr:`source` (the client whose workload is running)."""

    def __init__(self) -> None:
        self.frames: list[Seed] = []
        self.source = "unknown"
        self.upstream_port = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: Any = None

    def start(self) -> Recorder:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._requests(reader, up_writer), self._pipe(up_reader, writer),
                             return_exceptions=True)
        writer.close()
        up_writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = struct.unpack(">i", head)
                frame = await reader.readexactly(size)
                self.frames.append(Seed(self.source, frame))
                writer.write(head + frame)
                await writer.drain()
        finally:
            writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(1 << 20):
                writer.write(chunk)
                await writer.drain()
        finally:
            writer.close()


def _step(name: str, fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception as exc:
        print(f"  step {name!r} failed: {type(exc).__name__}: {exc}", flush=True)


def _records(tag: str, n: int = 12) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [(b"%s-k%d" % (tag.encode(), i), b"%s-value-%d" % (tag.encode(), i),
             [("h", b"%d" % i)] if i % 3 == 0 else []) for i in range(n)]


# --- confluent-kafka (librdkafka 2.16) -----------------------------------------------------


def confluent_workload(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def wait(futures: Any) -> None:
        for future in (futures.values() if isinstance(futures, dict) else [futures]):
            with contextlib.suppress(Exception):
                future.result(15)

    wait(admin.create_topics([NewTopic(name, n, 1, config=cfg)
                              for name, (n, cfg) in PLAYGROUND_TOPICS.items()]))
    free = FREE_TOPICS[0]
    _step("create validate_only", lambda: wait(admin.create_topics(
        [NewTopic(free, 2, 1)], validate_only=True)))
    _step("create", lambda: wait(admin.create_topics(
        [NewTopic(free, 2, 1, config={"retention.ms": "3600000"})])))
    _step("describe configs", lambda: wait(admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, "fuzz-a"), ConfigResource(ResourceType.BROKER, "1")])))
    _step("alter configs", lambda: wait(admin.alter_configs(
        [ConfigResource(ResourceType.TOPIC, free, set_config={"retention.ms": "7200000"})])))
    _step("incremental alter", lambda: wait(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, free, incremental_configs=[ConfigEntry(
            "retention.ms", "100000", incremental_operation=AlterConfigOpType.SET)])])))
    _step("create partitions", lambda: wait(admin.create_partitions([NewPartitions(free, 3)])))
    _step("describe cluster", lambda: wait(admin.describe_cluster()))
    _step("describe topics", lambda: admin.list_topics(timeout=10))

    for codec in CODECS:
        def send(codec: str = codec) -> None:
            producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                 "enable.idempotence": True, "linger.ms": 5})
            for key, value, headers in _records(codec):
                producer.produce("fuzz-a", value, key, partition=hash(key) % 3, headers=headers)
                producer.produce("fuzz-compact", value, key)
            producer.produce(free, b"v", b"k", partition=0)
            producer.flush(15)
        _step(f"produce {codec}", send)
    _step("produce acks=1", lambda: _ck_plain(Producer, bootstrap))

    _step("list offsets", lambda: wait(admin.list_offsets(
        {TopicPartition("fuzz-a", 0): OffsetSpec.earliest(),
         TopicPartition("fuzz-a", 1): OffsetSpec.latest(),
         TopicPartition("fuzz-a", 2): OffsetSpec.max_timestamp()})))
    _step("delete records", lambda: wait(admin.delete_records([TopicPartition(free, 0, 1)])))

    def classic() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUPS[0],
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        consumer.subscribe(["fuzz-a", "fuzz-b"])
        deadline = time.monotonic() + 8
        got = 0
        while time.monotonic() < deadline and got < 30:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        consumer.commit(asynchronous=False)
        consumer.committed([TopicPartition("fuzz-a", 0)], 10)
        consumer.offsets_for_times([TopicPartition("fuzz-a", 0, int(time.time() * 1000) - 60000)],
                                   10)
        consumer.close()
    _step("classic group", classic)

    def kip848() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUPS[2],
                             "group.protocol": "consumer", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["fuzz-a"])
        deadline = time.monotonic() + 8
        got = 0
        while time.monotonic() < deadline and got < 20:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        with contextlib.suppress(Exception):
            consumer.commit(asynchronous=False)
        consumer.close()
    _step("kip-848 group", kip848)

    from confluent_kafka import ConsumerGroupTopicPartitions
    _step("list groups", lambda: wait(admin.list_consumer_groups()))
    _step("describe groups", lambda: wait(admin.describe_consumer_groups(list(GROUPS))))
    _step("list group offsets", lambda: wait(admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(GROUPS[0])])))
    _step("alter group offsets", lambda: wait(admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(GROUPS[1], [TopicPartition("fuzz-a", 0, 1)])])))
    _step("delete groups", lambda: wait(admin.delete_consumer_groups([GROUPS[1]])))
    _step("delete topics", lambda: wait(admin.delete_topics([free])))


def _ck_plain(producer_cls: Any, bootstrap: str) -> None:
    producer = producer_cls({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    producer.produce("fuzz-b", b"plain", None)
    producer.produce("fuzz-small", b"x" * 100, b"k")
    producer.flush(15)


# --- kafka-python 3 ------------------------------------------------------------------------


def kafka_python_workload(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )

    free = FREE_TOPICS[1]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    _step("create validate_only", lambda: admin.create_topics(
        [NewTopic(free, 2, 1)], validate_only=True))
    _step("create", lambda: admin.create_topics(
        [NewTopic(free, 2, 1, topic_configs={"retention.ms": "3600000"})]))
    _step("describe configs", lambda: admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "fuzz-a"),
         ConfigResource(ConfigResourceType.BROKER, "1")]))
    _step("alter configs", lambda: admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, free, configs={"retention.ms": "7200000"})]))
    _step("create partitions", lambda: admin.create_partitions({free: NewPartitions(3)}))
    _step("describe cluster", admin.describe_cluster)
    _step("describe topics", lambda: admin.describe_topics(["fuzz-a"]))

    for codec in CODECS:
        def send(codec: str = codec) -> None:
            producer = KafkaProducer(bootstrap_servers=bootstrap,
                                     compression_type=None if codec == "none" else codec,
                                     linger_ms=5)
            for key, value, headers in _records(codec):
                producer.send("fuzz-a", value, key, headers=headers,
                              partition=len(key) % 3)
                producer.send("fuzz-compact", value, key)
            producer.send(free, b"v", b"k", partition=0)
            producer.flush(15)
            producer.close(5)
        _step(f"produce {codec}", send)
    _step("delete records", lambda: admin.delete_records({TopicPartition(free, 0): 1}))

    def group() -> None:
        consumer = KafkaConsumer("fuzz-a", bootstrap_servers=bootstrap, group_id=GROUPS[0],
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=3000)
        for got, _msg in enumerate(consumer, 1):
            if got >= 30:
                break
        consumer.commit()
        tp = TopicPartition("fuzz-a", 0)
        consumer.committed(tp)
        consumer.offsets_for_times({tp: int(time.time() * 1000) - 60000})
        consumer.beginning_offsets([tp])
        consumer.end_offsets([tp])
        consumer.close()
    _step("group", group)
    _step("list groups", admin.list_groups)
    _step("describe groups", lambda: admin.describe_groups([GROUPS[0]]))
    _step("list group offsets", lambda: admin.list_group_offsets(GROUPS[0]))
    _step("delete group offsets", lambda: admin.delete_group_offsets(
        GROUPS[0], [TopicPartition("fuzz-b", 0)]))
    _step("delete groups", lambda: admin.delete_groups([GROUPS[1]]))
    _step("delete topics", lambda: admin.delete_topics([free]))
    admin.close()


# --- aiokafka ------------------------------------------------------------------------------


def aiokafka_workload(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    free = FREE_TOPICS[2]

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()

        async def step(name: str, coro: Any) -> None:
            try:
                await asyncio.wait_for(coro, 15)
            except Exception as exc:
                print(f"  step {name!r} failed: {type(exc).__name__}: {exc}", flush=True)

        await step("create", admin.create_topics([NewTopic(free, 2, 1)]))
        await step("describe configs", admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "fuzz-a")]))
        await step("alter configs", admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, free, {"retention.ms": "7200000"})]))
        await step("create partitions", admin.create_partitions({free: NewPartitions(3)}))
        await step("describe cluster", admin.describe_cluster())
        for codec in CODECS:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                        compression_type=None if codec == "none" else codec,
                                        enable_idempotence=codec == "gzip")
            try:
                await producer.start()
                for key, value, headers in _records(codec, 6):
                    await producer.send_and_wait("fuzz-b", value, key, headers=headers)
                await producer.send_and_wait(free, b"v", b"k", partition=0)
            except Exception as exc:
                print(f"  produce {codec} failed: {exc}", flush=True)
            finally:
                await producer.stop()
        await step("delete records", admin.delete_records(
            {TopicPartition(free, 0): RecordsToDelete(1)}))
        consumer = AIOKafkaConsumer("fuzz-b", bootstrap_servers=bootstrap, group_id=GROUPS[0],
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=3000)
            await consumer.commit()
            tp = TopicPartition("fuzz-b", 0)
            await consumer.committed(tp)
            await consumer.offsets_for_times({tp: 0})
        finally:
            await consumer.stop()
        await step("list groups", admin.list_consumer_groups())
        await step("describe groups", admin.describe_consumer_groups([GROUPS[0]]))
        await step("list group offsets", admin.list_consumer_group_offsets(GROUPS[0]))
        await step("delete topics", admin.delete_topics([free]))
        await admin.close()

    asyncio.run(run())


# --- kcat (Debian's librdkafka 2.0.2) ------------------------------------------------------


def kcat_workload(bootstrap: str) -> None:
    def kcat(*args: str, stdin: str | None = None) -> None:
        subprocess.run(["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True,
                       text=True, timeout=60, check=True)

    for codec in CODECS:
        extra = [] if codec == "none" else ["-z", codec]
        _step(f"produce {codec}", lambda extra=extra: kcat(
            "-P", "-t", "fuzz-b", "-K", "\t", "-H", "h=1", *extra,
            stdin="".join(f"k{i}\tv{i}\n" for i in range(10))))
    _step("consume", lambda: kcat("-C", "-t", "fuzz-b", "-o", "beginning", "-e"))
    _step("query", lambda: kcat("-Q", "-t", "fuzz-b:0:0"))
    _step("metadata", lambda: kcat("-L"))
    _step("group", lambda: kcat("-G", GROUPS[0], "-X", "auto.offset.reset=earliest",
                                "-c", "10", "fuzz-b"))


# --- kafkajs 2.2.4 -------------------------------------------------------------------------


def kafkajs_workload(bootstrap: str) -> None:
    def node(command: str, job: dict[str, Any]) -> None:
        subprocess.run(["node", str(JS_DIR / "compat.js"), command], input=json.dumps(job),
                       capture_output=True, text=True, timeout=90, cwd=JS_DIR, check=True,
                       env={**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")})

    import base64

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    for codec in CODECS:
        records = [{"key": b64(k), "value": b64(v),
                    "headers": [[n, b64(hv)] for n, hv in h], "timestamp": -1}
                   for k, v, h in _records(codec, 6)]
        _step(f"produce {codec}", lambda codec=codec, records=records: node("produce", {
            "bootstrap": bootstrap, "topic": "fuzz-b", "codec": codec,
            "idempotent": codec == "gzip", "records": records}))
    _step("offsets", lambda: node("offsets", {"bootstrap": bootstrap, "topic": "fuzz-b",
                                              "timestamps": [0]}))
    _step("admin", lambda: node("admin", {"bootstrap": bootstrap, "topic": FREE_TOPICS[0]}))
    _step("group", lambda: node("group-phase", {"bootstrap": bootstrap, "topic": "fuzz-b",
                                                "group": GROUPS[1], "count": 5,
                                                "timeoutMs": 15000}))


WORKLOADS: dict[str, Callable[[str], None]] = {
    "confluent-kafka": confluent_workload,
    "kafka-python": kafka_python_workload,
    "aiokafka": aiokafka_workload,
    "kcat": kcat_workload,
    "kafkajs": kafkajs_workload,
}


# --- requests no client sent ---------------------------------------------------------------

_TOPIC_ID = "5f1b6d1c-3b8e-4f4e-9a3c-2d7c1e9b0a11"
# Plausible bodies for every API served, as plain data with the fields of every version
# (``build`` keeps what a version has). Used when no client sent the API at any version.
TEMPLATES: dict[int, dict[str, Any]] = {
    ApiKey.PRODUCE: {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
        {"name": "fuzz-b",
         "partition_data": [{"index": 0, "records": None}]}]},
    ApiKey.FETCH: {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 1 << 20,
                   "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                   "topics": [{"topic": "fuzz-a", "topic_id": _TOPIC_ID, "partitions": [
                       {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                        "last_fetched_epoch": -1, "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20}]}],
                   "forgotten_topics_data": [], "rack_id": ""},
    ApiKey.LIST_OFFSETS: {"replica_id": -1, "isolation_level": 0, "timeout": 5000,
                          "topics": [{"name": "fuzz-a", "partitions": [
                              {"partition_index": 0, "current_leader_epoch": -1,
                               "timestamp": -1}]}]},
    ApiKey.METADATA: {"topics": [{"name": "fuzz-a", "topic_id": None}],
                      "allow_auto_topic_creation": True,
                      "include_cluster_authorized_operations": False,
                      "include_topic_authorized_operations": False},
    ApiKey.OFFSET_COMMIT: {"group_id": GROUPS[0], "generation_id_or_member_epoch": -1,
                           "member_id": "", "group_instance_id": None, "retention_time": -1,
                           "topics": [{"name": "fuzz-a", "partitions": [
                               {"partition_index": 0, "committed_offset": 1,
                                "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
    ApiKey.OFFSET_FETCH: {"group_id": GROUPS[0], "topics": [
        {"name": "fuzz-a", "partition_indexes": [0, 1]}], "require_stable": False,
        "groups": [{"group_id": GROUPS[0], "member_id": None, "member_epoch": -1,
                    "topics": [{"name": "fuzz-a", "partition_indexes": [0]}]}]},
    ApiKey.FIND_COORDINATOR: {"key": GROUPS[0], "key_type": 0, "coordinator_keys": [GROUPS[0]]},
    ApiKey.JOIN_GROUP: {"group_id": GROUPS[1], "session_timeout": 6000,
                        "rebalance_timeout": 1000, "member_id": "",
                        "group_instance_id": None, "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01"
                                       b"\x00\x06fuzz-a\xff\xff\xff\xff"}]},
    ApiKey.HEARTBEAT: {"group_id": GROUPS[1], "generation_id": 1, "member_id": "m-1",
                       "group_instance_id": None},
    ApiKey.LEAVE_GROUP: {"group_id": GROUPS[1], "member_id": "m-1",
                         "members": [{"member_id": "m-1", "group_instance_id": None,
                                      "reason": "bye"}]},
    ApiKey.SYNC_GROUP: {"group_id": GROUPS[1], "generation_id": 1, "member_id": "m-1",
                        "group_instance_id": None, "protocol_type": "consumer",
                        "protocol_name": "range",
                        "assignments": [{"member_id": "m-1", "assignment": b""}]},
    ApiKey.DESCRIBE_GROUPS: {"groups": list(GROUPS), "include_authorized_operations": False},
    ApiKey.LIST_GROUPS: {"states_filter": [], "types_filter": []},
    ApiKey.API_VERSIONS: {"client_software_name": "fuzz", "client_software_version": "1.0"},
    ApiKey.CREATE_TOPICS: {"topics": [{"name": FREE_TOPICS[0], "num_partitions": 2,
                                       "replication_factor": 1, "assignments": [],
                                       "configs": [{"name": "retention.ms",
                                                    "value": "3600000"}]}],
                           "timeout": 5000, "validate_only": False},
    ApiKey.DELETE_TOPICS: {"topic_names": [FREE_TOPICS[0]],
                           "topics": [{"name": FREE_TOPICS[0], "topic_id": _TOPIC_ID}],
                           "timeout": 5000},
    ApiKey.DELETE_RECORDS: {"topics": [{"name": "fuzz-b", "partitions": [
        {"partition_index": 0, "offset": 1}]}], "timeout": 5000},
    ApiKey.INIT_PRODUCER_ID: {"transactional_id": None, "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1},
    ApiKey.DESCRIBE_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": "fuzz-a",
                                             "configuration_keys": None}],
                              "include_synonyms": True, "include_documentation": True},
    ApiKey.ALTER_CONFIGS: {"resources": [{"resource_type": 2, "resource_name": FREE_TOPICS[0],
                                          "configs": [{"name": "retention.ms",
                                                       "value": "7200000"}]}],
                           "validate_only": False},
    ApiKey.CREATE_PARTITIONS: {"topics": [{"name": FREE_TOPICS[0], "count": 3,
                                           "assignments": None}],
                               "timeout": 5000, "validate_only": False},
    ApiKey.DELETE_GROUPS: {"groups_names": [GROUPS[1]]},
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {"resources": [
        {"resource_type": 2, "resource_name": FREE_TOPICS[0],
         "configs": [{"name": "retention.ms", "config_operation": 0, "value": "100000"}]}],
        "validate_only": False},
    ApiKey.OFFSET_DELETE: {"group_id": GROUPS[0], "topics": [
        {"name": "fuzz-b", "partitions": [{"partition_index": 0}]}]},
    ApiKey.DESCRIBE_CLUSTER: {"include_cluster_authorized_operations": False,
                              "endpoint_type": 1, "include_fenced_brokers": False},
    ApiKey.CONSUMER_GROUP_HEARTBEAT: {
        "group_id": GROUPS[2], "member_id": "fuzz-member-848", "member_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout": 5000,
        "subscribed_topic_names": ["fuzz-a"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []},
    ApiKey.CONSUMER_GROUP_DESCRIBE: {"group_ids": [GROUPS[2]],
                                     "include_authorized_operations": False},
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {"replica_id": -1, "topics": [
        {"topic": "fuzz-a", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
            {"partition": 1, "current_leader_epoch": 0, "leader_epoch": 0}]}]},
    ApiKey.DESCRIBE_PRODUCERS: {"topics": [{"name": "fuzz-a", "partition_indexes": [0, 1]}]},
    # Named partitions of one topic (null topics, every partition, comes from mutation).
    ApiKey.DESCRIBE_LOG_DIRS: {"topics": [{"topic": "fuzz-a", "partitions": [0, 1]}]},
    # A broker asking the controller for a block of producer ids (the fuzz broker is node 1).
    ApiKey.ALLOCATE_PRODUCER_IDS: {"broker_id": 1, "broker_epoch": -1},
    # A leader asking the controller for an ISR change (an unknown topic id; v2 reads
    # new_isr, v3 new_isr_with_epochs).
    ApiKey.ALTER_PARTITION: {"broker_id": 1, "broker_epoch": -1, "topics": [
        {"topic_id": "5c6e3a34-0d5c-4f4b-9c67-9a1f5e2b7d10", "partitions": [
            {"partition_index": 0, "leader_epoch": 0, "partition_epoch": 0,
             "leader_recovery_state": 0, "new_isr": [1],
             "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": -1}]}]}]},
}


def built_seed(api_key: int, version: int, examples: list[Seed]) -> Seed | None:
    """A request of ``(api_key, version)``: the captured example of the nearest version
    converted field by field, else :data:`TEMPLATES` (None when neither encodes). APIs
    without a kio schema are written by their hand-coded codec
    (:data:`~.mutate.HAND_CODED`)."""
    hand_coded = HAND_CODED.get(api_key)
    if hand_coded is not None:
        frame = hand_coded.encode(version, "fuzz-built", hand_coded.template)
        parse_frame(frame)
        return Seed("built", frame)
    schema = request_schema(api_key, version)
    assert schema is not None
    candidates: list[Any] = []
    for seed in sorted(examples, key=lambda s: abs(s.api_version - version)):
        header, offset = decode_request_header(seed.frame)
        with contextlib.suppress(Exception):
            candidates.append(to_dict(decode_request(header, seed.frame, offset)))
    if api_key in TEMPLATES:
        candidates.append(TEMPLATES[api_key])
    for data in candidates:
        try:
            entity = build(schema, data)
            frame = encode_request(api_key, version, 1, "fuzz-built", entity)[4:]
            parse_frame(frame)  # the broker must be able to read a seed
        except Exception:
            continue
        return Seed("built", frame)
    return None


def select(frames: list[Seed]) -> list[Seed]:
    """Up to PER_SOURCE distinct frames per (api key, version, source), smallest first,
    skipping frames over MAX_SEED_BYTES when a smaller one exists."""
    groups: dict[tuple[int, int, str], dict[bytes, Seed]] = collections.defaultdict(dict)
    for seed in frames:
        if len(seed.frame) < 8:
            continue
        # The correlation id differs on every frame; compare without it.
        key = hashlib.sha1(seed.frame[:4] + seed.frame[8:]).digest()
        groups[(seed.api_key, seed.api_version, seed.source)].setdefault(key, seed)
    out = []
    for (_k, _v, _s), distinct in sorted(groups.items()):
        ordered = sorted(distinct.values(), key=lambda s: len(s.frame))
        small = [s for s in ordered if len(s.frame) <= MAX_SEED_BYTES] or ordered[:1]
        # Spread over sizes: the smallest and the largest that fit.
        picked = small[:1] + small[-1:] if len(small) > 1 else small
        out += picked[:PER_SOURCE]
    return out


def capture(clients: list[str]) -> list[Seed]:
    recorder = Recorder().start()
    try:
        broker_port = free_port()
        with BrokerProcess(settings={
            **BROKER_SETTINGS,
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{recorder.port}",
        }) as broker:
            recorder.upstream_port = broker.port()
            bootstrap = f"127.0.0.1:{recorder.port}"
            for name in clients:
                print(f"capturing {name} ...", flush=True)
                recorder.source = name
                started = time.monotonic()
                try:
                    WORKLOADS[name](bootstrap)
                except Exception:
                    traceback.print_exc()
                time.sleep(1.0)  # let background requests (heartbeats, leaves) arrive
                print(f"  {name}: {sum(1 for f in recorder.frames if f.source == name)} "
                      f"frames in {time.monotonic() - started:.1f} s", flush=True)
    finally:
        recorder.stop()
    return recorder.frames


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    import logging

    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=CORPUS_PATH)
    parser.add_argument("--clients", default=",".join(WORKLOADS),
                        help="comma-separated subset of " + ", ".join(WORKLOADS))
    parser.add_argument("--missing-only", action="store_true",
                        help="keep the corpus at --out as it is and only add built seeds for "
                             "the (api key, version)s it lacks (APIs added since the last "
                             "capture), without running the clients")
    args = parser.parse_args(argv)
    if args.missing_only:
        seeds = read_corpus(args.out)
    else:
        with _quiet_logs():
            frames = capture([c for c in args.clients.split(",") if c])
        seeds = select(frames)
    captured = {(s.api_key, s.api_version) for s in seeds}
    by_api: dict[int, list[Seed]] = collections.defaultdict(list)
    for seed in seeds:
        by_api[seed.api_key].append(seed)
    registry = load_handlers()
    missing = []
    for api_key, spec in sorted(registry.items()):
        for version in range(spec.min_version, spec.max_version + 1):
            if (api_key, version) in captured:
                continue
            seed = built_seed(api_key, version, by_api.get(api_key, []))
            if seed is None:
                missing.append((api_key, version))
            else:
                seeds.append(seed)
    n = write_corpus(seeds, args.out)
    print(f"\nwrote {n} seeds ({args.out.stat().st_size} bytes) to {args.out}")
    print(f"{'api':<28} {'served':>7}  captured from clients / built")
    for api_key, spec in sorted(registry.items()):
        sources: dict[int, set[str]] = collections.defaultdict(set)
        for seed in seeds:
            if seed.api_key == api_key:
                sources[seed.api_version].add(seed.source)
        real = sorted(v for v, s in sources.items() if s - {"built"})
        built = sorted(v for v, s in sources.items() if s == {"built"})
        label = f"{api_name(api_key)} ({api_key})"
        print(f"{label:<28} {spec.min_version:>3}-{spec.max_version:<3}  real {real} "
              f"built {built}")
    if missing:
        print(f"NO SEED for {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
