"""Acceptance 2: streaming reads resume from the checkpoint without loss or duplicates;
``maxOffsetsPerTrigger`` bounds every micro-batch, with ``availableNow`` too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from moldau.client import SyncProducer
from moldau.spark.options import parse_source_options
from moldau.spark.planning import OffsetRange
from moldau.spark.range_reader import DataLossError
from moldau.spark.stream_reader import MoldauStreamReader
from moldau.testing.runner import BrokerProcess


def fill(bootstrap: str, topic: str, first: int, count: int, partitions: int = 2) -> None:
    producer = SyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i in range(first, first + count):
        producer.send(topic, f"v-{i}", key=f"k-{i}", partition=i % partitions)
    producer.flush()
    producer.close()


def stream(spark: Any, broker: BrokerProcess, topic: str, **options: str) -> Any:
    return (spark.readStream.format("moldau")
            .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").options(**options).load()
            .selectExpr("CAST(value AS STRING) AS value", "partition", "offset"))


def to_parquet(df: Any, out: Path, checkpoint: Path) -> Any:
    return (df.writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)))


def batch_sizes(query: Any) -> list[int]:
    return [int(p["numInputRows"]) for p in query.recentProgress]


def test_restart_from_checkpoint_no_loss_no_duplicates(spark: Any, broker: BrokerProcess,
                                                       new_topic: Any, tmp_path: Path) -> None:
    topic = new_topic(2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    fill(broker.bootstrap, topic, 0, 100)

    # Run 1: availableNow in micro-batches of at most 30 records.
    query = to_parquet(stream(spark, broker, topic, maxOffsetsPerTrigger="30"), out,
                       checkpoint).trigger(availableNow=True).start()
    query.awaitTermination(180)
    sizes = batch_sizes(query)
    assert sum(sizes) == 100 and max(sizes) <= 30 and len([s for s in sizes if s]) >= 4, sizes
    assert query.exception() is None

    # Run 2: a continuous query, stopped while it works through new records.
    fill(broker.bootstrap, topic, 100, 200)
    query = to_parquet(stream(spark, broker, topic, maxOffsetsPerTrigger="20"), out,
                       checkpoint).trigger(processingTime="100 milliseconds").start()
    deadline = time.monotonic() + 120
    while sum(batch_sizes(query)) < 40 and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()
    assert 0 < sum(batch_sizes(query)) < 200, batch_sizes(query)
    assert max(batch_sizes(query)) <= 20

    # Run 3: restart from the checkpoint and read everything that is left.
    fill(broker.bootstrap, topic, 300, 50)
    query = to_parquet(stream(spark, broker, topic), out, checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert query.exception() is None

    rows = spark.read.parquet(str(out)).collect()
    positions = [(r.partition, r.offset) for r in rows]
    assert len(positions) == len(set(positions)), "a record was delivered twice"
    assert sorted(r.value for r in rows) == sorted(f"v-{i}" for i in range(350))


def test_stream_through_the_moldau_sink(spark: Any, broker: BrokerProcess, new_topic: Any,
                                        tmp_path: Path) -> None:
    source, target = new_topic(2), new_topic(1)
    fill(broker.bootstrap, source, 0, 40)
    query = (spark.readStream.format("moldau")
             .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", source)
             .option("startingOffsets", "earliest").option("includeHeaders", "true").load()
             .selectExpr("key", "upper(CAST(value AS STRING)) AS value",
                         "array(named_struct('key', 'from', 'value', "
                         "CAST(concat(topic, '-', partition, '-', offset) AS BINARY))) "
                         "AS headers")
             .writeStream.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", target).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    rows = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", target).option("includeHeaders", "true").load().collect())
    assert sorted(r.value.decode() for r in rows) == sorted(f"V-{i}" for i in range(40))
    assert {r.headers[0].value.decode().rsplit("-", 2)[0] for r in rows} == {source}
    assert {r.key for r in rows} == {f"k-{i}".encode() for i in range(40)}


def reader(broker: BrokerProcess, topic: str, **options: str) -> MoldauStreamReader:
    given = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
             "startingOffsets": "earliest", **options}
    return MoldauStreamReader(parse_source_options({k.lower(): v for k, v in given.items()},
                                                   streaming=True))


def rows(offsets: dict[str, dict[str, int]]) -> int:
    return sum(v for parts in offsets.values() for v in parts.values())


def test_admission_control_on_the_driver(broker: BrokerProcess, new_topic: Any,
                                         admin: Any) -> None:
    """The driver-side half of the stream reader, called as Spark calls it."""
    topic = new_topic(2)
    fill(broker.bootstrap, topic, 0, 50)
    r = reader(broker, topic, maxOffsetsPerTrigger="15")
    start = r.initialOffset()
    assert start == {topic: {"0": 0, "1": 0}}
    assert r.getDefaultReadLimit() == ReadMaxRows(15)
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert rows(end) == 15
    assert r.reportLatestOffset() == {topic: {"0": 25, "1": 25}}
    assert rows(r.latestOffset(start, ReadAllAvailable())) == 50
    planned = r.partitions(start, end)
    assert all(isinstance(p, OffsetRange) for p in planned)
    assert sum(p.end - p.start for p in planned) == 15

    # availableNow: the target is fixed when the query starts; later records wait.
    r.prepareForTriggerAvailableNow()
    fill(broker.bootstrap, topic, 50, 10)
    seen, batches, offset = 0, 0, start
    while True:
        nxt = r.latestOffset(offset, r.getDefaultReadLimit())
        if nxt == offset:
            break
        assert rows(nxt) - rows(offset) <= 15
        seen, batches, offset = seen + rows(nxt) - rows(offset), batches + 1, nxt
    assert (seen, batches) == (50, 4)

    # A partition added later starts at its earliest offset.
    admin.create_partitions({topic: 3})
    fill(broker.bootstrap, topic, 60, 3, partitions=3)
    r2 = reader(broker, topic)
    end = r2.latestOffset(offset, ReadAllAvailable())
    assert end[topic]["2"] == 1
    ranges = {(p.partition, p.start, p.end) for p in r2.partitions(offset, end)}
    assert (2, 0, 1) in ranges

    # minOffsetsPerTrigger waits for enough records, or for maxTriggerDelay: 3 records
    # (fewer than 100) are admitted once the delay has passed, never before. The reader's
    # clock starts when it is made, after `made`; so however slowly the machine runs the
    # producer and the calls, admission may not come sooner than 2 s after `made` (and a
    # reader that ignored the delay would admit them on the first call after fill()).
    made = time.monotonic()
    r3 = reader(broker, topic, minOffsetsPerTrigger="100", maxTriggerDelay="2s")
    assert r3.getDefaultReadLimit() == ReadMinRows(100)
    assert r3.latestOffset(end, ReadMinRows(100)) == end
    fill(broker.bootstrap, topic, 63, 3, partitions=3)
    while (admitted := r3.latestOffset(end, ReadMinRows(100))) == end:
        assert time.monotonic() - made < 60, "the 3 records were never admitted"
        time.sleep(0.05)
    assert time.monotonic() - made >= 2.0, "admitted before maxTriggerDelay"
    assert rows(admitted) == rows(end) + 3


def test_data_loss_is_reported_when_planning(broker: BrokerProcess, new_topic: Any) -> None:
    topic = new_topic(1)
    fill(broker.bootstrap, topic, 0, 5, partitions=1)
    ahead = {topic: {"0": 9}}  # the checkpoint says 9, the log now ends at 5
    with pytest.raises(DataLossError, match=r"went back from 9 to 5"):
        reader(broker, topic).partitions(ahead, {topic: {"0": 5}})
    assert list(reader(broker, topic, failOnDataLoss="false")
                .partitions(ahead, {topic: {"0": 5}})) == []
    with pytest.raises(DataLossError, match=r"are gone"):
        reader(broker, topic).partitions({**ahead, "gone": {"0": 1}}, {topic: {"0": 9}})


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_batch_rerun_after_the_sink_committed_is_not_written_again(
        spark: Any, broker: BrokerProcess, new_topic: Any, tmp_path: Path,
        guarantee: str) -> None:
    """Crash between the sink's commit and Spark's commit log: the re-run writes nothing.
    At-least-once knows it from the sink's marker file, exactly-once from the batch ids its
    tasks committed in their transactions (no marker file)."""
    source, target = new_topic(2), new_topic(1)
    fill(broker.bootstrap, source, 0, 30)
    checkpoint = tmp_path / "checkpoint"

    def run() -> Any:
        query = (spark.readStream.format("moldau")
                 .option("kafka.bootstrap.servers", broker.bootstrap)
                 .option("subscribe", source).option("startingOffsets", "earliest").load()
                 .selectExpr("key", "value").writeStream.format("moldau")
                 .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", target)
                 .option("checkpointLocation", str(checkpoint))
                 .option("delivery.guarantee", guarantee)
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        assert query.exception() is None
        return query

    def written() -> int:
        return (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", target).option("kafka.isolation.level", "read_committed")
                .load().count())

    def forget_last_commit() -> None:
        commits = checkpoint / "commits"
        last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        for name in (str(last), f".{last}.crc"):
            (commits / name).unlink(missing_ok=True)

    run()
    assert written() == 30
    marker = checkpoint / "moldau-sink"
    assert marker.exists() == (guarantee == "at-least-once")
    forget_last_commit()
    rerun = run()
    assert sum(batch_sizes(rerun)) == 30, "Spark did not re-run the batch"
    assert written() == 30
    if guarantee == "exactly-once":
        return
    # Without the marker the same re-run writes every record again: the marker did it.
    forget_last_commit()
    marker.unlink()
    run()
    assert written() == 60
