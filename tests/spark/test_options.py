"""Option parsing, offset planning and schemas of the moldau data source (no Spark session)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from moldau.client.decode import BatchColumns
from moldau.client.types import TopicPartition
from moldau.spark.options import (
    OptionError,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)
from moldau.spark.planning import (
    Range,
    from_json_offsets,
    rate_limit,
    split_ranges,
    to_json_offsets,
)
from moldau.spark.schema import arrow_schema, spark_schema, to_record_batch
from moldau.spark.session import _ROOT, prepare_environment

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9"}


def source(streaming: bool = False, **options: str):  # type: ignore[no-untyped-def]
    # Spark hands the data source lower-cased keys.
    return parse_source_options({k.lower(): v for k, v in {**BOOT, **options}.items()},
                                streaming=streaming)


def test_strategy_options_like_spark() -> None:
    assert source(subscribe="a, b,").topics == ("a", "b")
    assert source(subscribePattern="ev.*").pattern == "ev.*"
    assert dict(source(assign='{"a":[1,0],"b":[2]}').assignment) == {"a": (0, 1), "b": (2,)}
    with pytest.raises(OptionError, match=r"One of the following options"):
        source()
    with pytest.raises(OptionError, match=r"Only one of"):
        source(subscribe="a", assign='{"a":[0]}')
    with pytest.raises(OptionError, match=r"No topicpartitions to assign"):
        source(assign="a:0")
    with pytest.raises(OptionError, match=r"not a regular expression"):
        source(subscribePattern="(")


def test_offsets_defaults_and_validation() -> None:
    assert source(subscribe="a").starting.kind == "earliest"
    assert source(True, subscribe="a").starting.kind == "latest"
    spec = source(subscribe="a", startingOffsets='{"a":{"0":5,"1":-2}}').starting
    assert spec.kind == "offsets" and dict(spec.offsets["a"]) == {0: 5, 1: -2}
    assert source(subscribe="a", endingOffsets='{"a":{"0":-1}}').ending.offsets["a"][0] == -1
    with pytest.raises(OptionError, match=r"can't be latest for batch"):
        source(subscribe="a", startingOffsets="latest")
    with pytest.raises(OptionError, match=r"can't be latest"):
        source(subscribe="a", startingOffsets='{"a":{"0":-1}}')
    with pytest.raises(OptionError, match=r"can't be earliest"):
        source(subscribe="a", endingOffsets="earliest")
    with pytest.raises(OptionError, match=r"not valid in streaming"):
        source(True, subscribe="a", endingOffsets="latest")
    with pytest.raises(OptionError, match=r"not valid JSON"):
        source(subscribe="a", startingOffsets="{a}")
    with pytest.raises(OptionError, match=r"partition number"):
        source(subscribe="a", startingOffsets='{"a":{"x":1}}')


def test_timestamp_options_take_precedence() -> None:
    o = source(subscribe="a", startingOffsets="earliest", startingTimestamp="1700000000000",
               startingOffsetsByTimestampStrategy="LATEST")
    assert (o.starting.kind, o.starting.timestamp, o.timestamp_strategy) == (
        "timestamp", 1700000000000, "latest")
    o = source(subscribe="a", startingOffsetsByTimestamp='{"a":{"0":1000}}')
    assert o.starting.kind == "timestamps" and o.starting.offsets["a"][0] == 1000
    with pytest.raises(OptionError, match=r"single long"):
        source(subscribe="a", startingTimestamp="yesterday")
    with pytest.raises(OptionError, match=r"error or latest"):
        source(subscribe="a", startingOffsetsByTimestampStrategy="earliest")


def test_trigger_limits() -> None:
    o = source(True, subscribe="a", maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10",
               maxTriggerDelay="2m")
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (
        100, 10, 120000)
    with pytest.raises(OptionError, match=r"higher than the maxOffsetsPerTrigger"):
        source(True, subscribe="a", maxOffsetsPerTrigger="5", minOffsetsPerTrigger="10")
    with pytest.raises(OptionError, match=r"positive"):
        source(True, subscribe="a", maxOffsetsPerTrigger="0")
    assert [parse_duration_ms(t) for t in ("250", "250ms", "3s", "15m", "1h", "2d")] == [
        250, 250, 3000, 900000, 3600000, 172800000]
    with pytest.raises(OptionError):
        parse_duration_ms("soon")


def test_kafka_options_go_to_the_client() -> None:
    o = source(subscribe="a", **{"kafka.broker.address.map": "10.0.0.1:9092=127.0.0.1:1",
                                 "kafka.fetch.max.wait.ms": "100",
                                 "kafka.group.id": "ignored-as-in-spark"})
    config = o.consumer_config()
    assert config["broker.address.map"] == "10.0.0.1:9092=127.0.0.1:1"
    assert config["fetch.max.wait.ms"] == "100"
    assert config["auto.offset.reset"] == "none" and "group.id" not in config
    assert "fetch.max.wait.ms" not in o.admin_config()
    assert o.admin_config()["broker.address.map"] == "10.0.0.1:9092=127.0.0.1:1"
    with pytest.raises(OptionError, match=r"kafka.bootstrap.servers' must be specified"):
        parse_source_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(OptionError, match=r"'auto.offset.reset'.*startingOffsets"):
        source(subscribe="a", **{"kafka.auto.offset.reset": "earliest"})
    with pytest.raises(OptionError, match=r"unknown consumer config 'fetch.max.wait'"):
        source(subscribe="a", **{"kafka.fetch.max.wait": "5"})
    with pytest.raises(OptionError, match=r"broker.address.map"):
        source(subscribe="a", **{"kafka.broker.address.map": "nonsense"})
    sink = parse_sink_options({**BOOT, "topic": " out ", "kafka.linger.ms": "50"})
    assert sink.topic == "out" and sink.producer_config()["linger.ms"] == "50"
    with pytest.raises(OptionError, match=r"key.serializer"):
        parse_sink_options({**BOOT, "kafka.key.serializer": "x"})


def test_checkpoint_offsets_round_trip() -> None:
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 10): 3, TopicPartition("a", 2): 0}
    data = to_json_offsets(offsets)
    assert data == {"a": {"2": 0, "10": 3}, "b": {"1": 7}}
    assert from_json_offsets(data) == offsets


def test_rate_limit_is_exact_and_fair() -> None:
    a, b, c = (TopicPartition("t", i) for i in range(3))
    start = {a: 0, b: 100, c: 5}
    latest = {a: 1000, b: 110, c: 5}
    end = rate_limit(101, start, latest)
    taken = {tp: end[tp] - start[tp] for tp in start}
    assert sum(taken.values()) == 101
    assert taken[c] == 0 and taken[b] >= 1 and taken[a] > 90
    assert rate_limit(10_000, start, latest) == latest
    # Fewer records allowed than partitions with data: still exactly the limit.
    end = rate_limit(1, {a: 0, b: 0}, {a: 5, b: 5})
    assert sum(end[tp] for tp in (a, b)) == 1


def test_split_ranges() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    ranges = [Range(a, 0, 100), Range(b, 10, 10), Range(b, 0, 10)]
    assert split_ranges(ranges) == [Range(a, 0, 100), Range(b, 0, 10)]
    pieces = split_ranges(ranges, min_partitions=6)
    assert len(pieces) >= 6 and sum(p.size for p in pieces) == 110
    assert all(p.size > 0 for p in pieces)
    pieces = split_ranges(ranges, max_records=30)
    assert max(p.size for p in pieces) <= 30 and sum(p.size for p in pieces) == 110
    covered = sorted((p.start, p.end) for p in pieces if p.tp == a)
    assert covered[0][0] == 0 and covered[-1][1] == 100
    assert all(x[1] == y[0] for x, y in itertools.pairwise(covered))


def test_arrow_schema_is_what_spark_expects() -> None:
    for headers in (False, True):
        assert arrow_schema(headers).equals(to_arrow_schema(spark_schema(headers),
                                                            timezone="UTC"))
    cols = BatchColumns(10, 12, 0, [10, 11, 12], [1000, 2000, 3000], [b"k", None, b""],
                        [b"v", b"", None], [[("h", b"1")], [], [("n", None)]])
    batch = to_record_batch("t", 3, [cols], True)
    assert batch.schema.equals(arrow_schema(True))
    assert batch.column("headers").to_pylist() == [
        [{"key": "h", "value": b"1"}], None, [{"key": "n", "value": None}]]
    assert batch.column("timestamp").cast("int64").to_pylist() == [1_000_000, 2_000_000,
                                                                   3_000_000]
    assert batch.column("key").to_pylist() == [b"k", None, b""]
    assert batch.column("partition").to_pylist() == [3, 3, 3]


def test_pyspark_finds_the_source_by_itself() -> None:
    """Spark registers DefaultSource of top-level pyspark_* modules (lookup_data_sources)."""
    saved = os.environ.get("PYTHONPATH")
    try:
        prepare_environment()
        env = dict(os.environ)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    probe = (
        "from pkgutil import iter_modules\n"
        "from importlib import import_module\n"
        "from pyspark.sql.datasource import DataSource\n"
        "found = {}\n"
        "for info in iter_modules():\n"
        "    if info.name.startswith('pyspark_'):\n"
        "        mod = import_module(info.name)\n"
        "        if issubclass(getattr(mod, 'DefaultSource', object), DataSource):\n"
        "            found[mod.DefaultSource.name()] = mod.DefaultSource.__module__\n"
        "print(found)\n")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, cwd="/", check=True).stdout
    assert "'moldau': 'moldau.spark.source'" in out, out
    assert (_ROOT / "pyspark_moldau.py").exists()


def test_pipeline_command_checks_its_flags_before_starting_spark(tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = [sys.executable, "-m", "moldau.cli.main", "pipeline", "tag",
            "--source-bootstrap", "127.0.0.1:9", "--source-topic", "events",
            "--target-bootstrap", "127.0.0.1:9", "--target-topic", "tags",
            "--checkpoint", str(tmp_path / "ck")]
    cases = [
        ([], "give exactly one of --reference"),
        (["--reference", str(tmp_path / "missing.csv")], "does not exist"),
        (["--reference-topic", "ref", "--trigger", "sometimes"], "--trigger must be"),
        (["--reference-topic", "ref", "--trigger", "processing-time=soon"], "500ms"),
        (["--reference-topic", "ref", "--key-field", "a.b"], "plain field name"),
    ]
    for extra, message in cases:
        done = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and message in done.stderr, (extra, done.stderr)
    helptext = subprocess.run([*base[:5], "--help"], capture_output=True, text=True,
                              timeout=60).stdout
    assert "--address-map" in helptext and "--reference-topic" in helptext


def test_sink_delivery_guarantee_options() -> None:
    stream = parse_sink_options({**BOOT, "topic": "out"}, streaming=True)
    assert stream.exactly_once and stream.state_topic == "out"
    assert stream.transactional_id_prefix == "moldau-spark-"
    batch = parse_sink_options({**BOOT, "topic": "out"})
    assert not batch.exactly_once, "a batch write has no batch id: at-least-once"
    with pytest.raises(OptionError, match=r"exactly-once needs a streaming write"):
        parse_sink_options({**BOOT, "topic": "out", "delivery.guarantee": "exactly-once"})
    loose = parse_sink_options({**BOOT, "topic": "out", "delivery.guarantee": "AT-LEAST-ONCE"},
                               streaming=True)
    assert not loose.exactly_once
    with pytest.raises(OptionError, match=r"'delivery.guarantee' must be exactly-once or "
                                          r"at-least-once, not 'once'"):
        parse_sink_options({**BOOT, "topic": "out", "delivery.guarantee": "once"},
                           streaming=True)
    # Rows that name their topics need a state topic for the batch ids.
    with pytest.raises(OptionError, match=r"exactly.once.state.topic"):
        parse_sink_options(dict(BOOT), streaming=True)
    routed = parse_sink_options({**BOOT, "exactly.once.state.topic": "sink-state",
                                 "transactional.id.prefix": "tags-"}, streaming=True)
    assert routed.state_topic == "sink-state" and routed.transactional_id_prefix == "tags-"
    timed = parse_sink_options({**BOOT, "topic": "o", "kafka.transaction.timeout.ms": "20000"},
                               streaming=True)
    assert timed.producer_config()["transaction.timeout.ms"] == "20000"
    with pytest.raises(OptionError, match=r"kafka.transaction.timeout.ms' 10 is too short"):
        parse_sink_options({**BOOT, "topic": "o", "kafka.transaction.timeout.ms": "10"},
                           streaming=True)
    with pytest.raises(OptionError, match=r"'transactional.id.prefix' must not be empty"):
        parse_sink_options({**BOOT, "topic": "o", "transactional.id.prefix": ""},
                           streaming=True)
    with pytest.raises(OptionError, match=r"kafka.transactional.id.*transactional.id.prefix"):
        parse_sink_options({**BOOT, "topic": "o", "kafka.transactional.id": "mine"},
                           streaming=True)


def test_transactional_ids_and_fencing_errors() -> None:
    from moldau.client.errors import BrokerError, ErrorCode, ProducerFenced
    from moldau.spark.txn_sink import is_fenced, transactional_id

    assert transactional_id("moldau-spark-", "4f1c", 3) == "moldau-spark-4f1c-3"
    assert is_fenced(ProducerFenced(ErrorCode.producer_fenced))
    assert is_fenced(BrokerError(ErrorCode.invalid_producer_epoch))
    wrapped = RuntimeError("commit failed")
    wrapped.__cause__ = BrokerError(ErrorCode.producer_fenced)
    assert is_fenced(wrapped)
    assert not is_fenced(BrokerError(ErrorCode.invalid_txn_state))
    assert not is_fenced(TimeoutError())
