"""Acceptance 1: batch reads by offsets/timestamps and batch writes, byte for byte."""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from moldau.client import SyncConsumer, SyncProducer, TopicPartition
from moldau.testing.runner import BrokerProcess

BASE_TS = 1_700_000_000_000
UTC = dt.UTC


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send records (key/value/headers/partition/timestamp); returns them with offsets."""
    producer = SyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    futures = [producer.send(topic, r["value"], key=r.get("key"), headers=r.get("headers"),
                             partition=r["partition"], timestamp_ms=r["timestamp"])
               for r in records]
    producer.flush()
    out = []
    for record, future in zip(records, futures, strict=True):
        meta = future.result()
        out.append({**record, "offset": meta.offset})
    producer.close()
    return out


def sample(n_per_partition: int) -> list[dict[str, Any]]:
    records = []
    for p in (0, 1):
        for i in range(n_per_partition):
            headers = [("trace", f"{p}-{i}".encode()), ("empty", None)] if i % 3 == 0 else []
            records.append({
                "partition": p,
                "key": None if i == 4 else f"key-{p}-{i}".encode(),
                "value": None if i == 5 else bytes([p, i]) + os.urandom(8),
                "headers": headers,
                "timestamp": BASE_TS + 1000 * i + p,
            })
    return records


def read(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> list[Any]:
    df = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).options(**options).load())
    return df.orderBy("partition", "offset").collect()


def test_json_offsets_read_exactly_the_range_with_headers(spark: Any, broker: BrokerProcess,
                                                          new_topic: Any) -> None:
    topic = new_topic(2)
    sent = produce(broker.bootstrap, topic, sample(10))
    rows = read(spark, broker, topic,
                startingOffsets=json.dumps({topic: {"0": 2, "1": -2}}),
                endingOffsets=json.dumps({topic: {"0": 7, "1": -1}}),
                includeHeaders="true")
    expected = [r for r in sent if (r["partition"] == 0 and 2 <= r["offset"] < 7)
                or r["partition"] == 1]
    assert len(rows) == len(expected) == 15
    for row, want in zip(rows, expected, strict=True):
        assert row.topic == topic
        assert (row.partition, row.offset) == (want["partition"], want["offset"])
        assert row.key == want["key"] and row.value == want["value"]
        assert row.timestampType == 0
        stamp = row.timestamp.replace(tzinfo=UTC) if row.timestamp.tzinfo is None else (
            row.timestamp)
        assert stamp == dt.datetime.fromtimestamp(want["timestamp"] / 1000, UTC)
        if want["headers"]:
            assert [(h.key, h.value) for h in row.headers] == want["headers"]
        else:
            assert row.headers is None  # as Spark's Kafka source: null without headers
    df = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).load())
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType"]
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "binary", "binary", "string", "int", "bigint", "timestamp", "int"]
    assert df.count() == 20


def test_assign_pattern_timestamps_and_min_partitions(spark: Any, broker: BrokerProcess,
                                                      new_topic: Any) -> None:
    topic = new_topic(2)
    produce(broker.bootstrap, topic, sample(10))
    df = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("assign", json.dumps({topic: [1]})).load())
    assert {r.partition for r in df.collect()} == {1} and df.count() == 10
    df = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribePattern", topic[:6] + ".*").load()
          .where(F.col("topic") == topic))
    assert df.count() == 20
    # Record i of each partition has timestamp BASE_TS + 1000 * i (+ partition).
    rows = read(spark, broker, topic, startingTimestamp=str(BASE_TS + 7000))
    assert [(r.partition, r.offset) for r in rows] == [(p, o) for p in (0, 1)
                                                      for o in (7, 8, 9)]
    rows = read(spark, broker, topic, startingOffsetsByTimestamp=json.dumps(
        {topic: {"0": BASE_TS + 9000, "1": BASE_TS}}), endingOffsets=json.dumps(
        {topic: {"0": -1, "1": 2}}))
    assert [(r.partition, r.offset) for r in rows] == [(0, 9), (1, 0), (1, 1)]
    with pytest.raises(Exception, match=r"No offset matched"):
        read(spark, broker, topic, startingTimestamp=str(BASE_TS + 10**9))
    rows = read(spark, broker, topic, startingTimestamp=str(BASE_TS + 10**9),
                startingOffsetsByTimestampStrategy="latest")
    assert rows == []
    split = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic).option("minPartitions", "5").load())
    assert split.rdd.getNumPartitions() >= 5
    assert sorted(r.offset for r in split.collect()) == sorted(list(range(10)) * 2)


def test_bad_options_fail_with_a_clear_message(spark: Any, broker: BrokerProcess,
                                               new_topic: Any) -> None:
    topic = new_topic(2)
    with pytest.raises(Exception, match=r"you must specify all topic partitions"):
        read(spark, broker, topic, startingOffsets=json.dumps({topic: {"0": 0}}))
    with pytest.raises(Exception, match=r"starting offset can't be latest"):
        read(spark, broker, topic, startingOffsets="latest")
    with pytest.raises(Exception, match=r"unknown consumer config 'max.poll.record'"):
        read(spark, broker, topic, **{"kafka.max.poll.record": "5"})
    assert read(spark, broker, "no-such-topic-here") == []


def test_data_loss_after_delete_records(spark: Any, broker: BrokerProcess, new_topic: Any,
                                        admin: Any) -> None:
    topic = new_topic(1)
    produce(broker.bootstrap, topic, [{"partition": 0, "value": b"v%d" % i,
                                       "timestamp": BASE_TS + i} for i in range(10)])
    admin.delete_records({TopicPartition(topic, 0): 4})
    start = json.dumps({topic: {"0": 1}})
    with pytest.raises(Exception, match=r"failOnDataLoss"):
        read(spark, broker, topic, startingOffsets=start)
    rows = read(spark, broker, topic, startingOffsets=start, failOnDataLoss="false")
    assert [r.offset for r in rows] == list(range(4, 10))
    # An end beyond the end of the log: the missing tail is data loss too.
    beyond = json.dumps({topic: {"0": 25}})
    with pytest.raises(Exception, match=r"ends at offset 10, but offsets up to 25"):
        read(spark, broker, topic, startingOffsets=json.dumps({topic: {"0": 5}}),
             endingOffsets=beyond)
    rows = read(spark, broker, topic, startingOffsets=json.dumps({topic: {"0": 5}}),
                endingOffsets=beyond, failOnDataLoss="false")
    assert [r.offset for r in rows] == list(range(5, 10))


WRITE_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("partition", IntegerType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])


def test_batch_write_then_read_back_byte_exact(spark: Any, broker: BrokerProcess,
                                               new_topic: Any) -> None:
    topic = new_topic(2)
    rows = []
    for i in range(300):
        key = None if i % 17 == 0 else bytes([i % 256]) + os.urandom(i % 7)
        value = None if i % 29 == 0 else bytes(range(256))[i % 256:] + os.urandom(i % 50)
        headers = [("h", bytes([i % 256])), ("null", None)] if i % 5 == 0 else None
        rows.append((key, value, i % 2, headers))
    df = spark.createDataFrame(rows, WRITE_SCHEMA).repartition(3)
    df.write.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("topic", topic).mode("append").save()

    back = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true").load().collect())
    got = sorted(((r.key, r.value, r.partition,
                   [(h.key, h.value) for h in r.headers] if r.headers else None)
                  for r in back), key=repr)
    assert got == sorted(rows, key=repr)
    # The same bytes through the plain client.
    consumer = SyncConsumer({"bootstrap.servers": broker.bootstrap,
                             "auto.offset.reset": "earliest"})
    consumer.assign([(topic, 0), (topic, 1)])
    seen: list[tuple[Any, ...]] = []
    for _ in range(50):
        seen += [(r.key, r.value, r.partition, r.headers or None) for r in consumer.poll(0.5)]
        if len(seen) >= len(rows):
            break
    consumer.close()
    assert sorted(seen, key=repr) == sorted(rows, key=repr)


def test_write_with_topic_column_string_values_and_errors(spark: Any, broker: BrokerProcess,
                                                          new_topic: Any) -> None:
    a, b = new_topic(1), new_topic(1)
    df = spark.createDataFrame([(a, "k1", "één"), (b, None, "two"), (a, "k3", None)],
                               "topic string, key string, value string")
    df.write.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap) \
        .mode("append").save()
    got = {r.topic: [] for r in df.collect()}
    for row in (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", f"{a},{b}").load().orderBy("offset").collect()):
        got[row.topic].append((row.key, row.value))
    assert got == {a: [(b"k1", "één".encode()), (b"k3", None)], b: [(None, b"two")]}

    plain = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match=r"topic option required"):
        plain.write.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap) \
            .mode("append").save()
    with pytest.raises(Exception, match=r"does not exist"):
        plain.write.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("topic", "missing-topic").mode("append").save()
    with pytest.raises(Exception, match=r"Required attribute 'value'"):
        spark.createDataFrame([("x",)], "key string").write.format("moldau") \
            .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", a) \
            .mode("append").save()
    with pytest.raises(Exception, match=r"partition attribute type must be an int"):
        spark.createDataFrame([("x", "1")], "value string, partition string").write \
            .format("moldau").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("topic", a).mode("append").save()
