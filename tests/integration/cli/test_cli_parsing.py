"""The tools' pure parts (no broker): Kafka's console line format and output format,
properties files, config and reset arguments, table layouts. Plus --help of every tool."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import pytest

from moldau.cli.common import CliError, load_properties
from moldau.cli.configs import entity_of, parse_add_config, parse_delete_config
from moldau.cli.consume import check_args as consume_check
from moldau.cli.consume import parse_offset
from moldau.cli.formatter import MessageFormatter
from moldau.cli.groups_format import (
    clamp,
    offsets_table,
    parse_datetime,
    parse_duration,
    parse_reset_csv,
    parse_states,
    parse_topic_arg,
    reset_table,
)
from moldau.cli.line_reader import LineReader, ReaderError
from moldau.cli.metadata import format_listing
from moldau.cli.topics import parse_replica_assignment, select_topics
from moldau.client import AddressMap, ConsumerRecord, PartitionLag, TopicPartition

from .conftest import moldau_many


def test_line_reader_follows_kafka() -> None:
    plain = LineReader()
    assert plain.parse("a\tb", 1) == (None, b"a\tb", [])
    keyed = LineReader.from_properties({"parse.key": "true", "key.separator": "::"})
    assert keyed.parse("k::v::w", 1) == (b"k", b"v::w", [])
    with pytest.raises(ReaderError, match="No key separator found on line number 3: 'novalue'"):
        keyed.parse("novalue", 3)
    lenient = LineReader.from_properties({"parse.key": "true", "ignore.error": "true"})
    assert lenient.parse("novalue", 1) == (None, b"novalue", [])
    both = LineReader.from_properties({"parse.headers": "true", "parse.key": "true",
                                       "headers.separator": "[,;]", "null.marker": "~"})
    assert both.parse("a:1;b:~,c:\tk\t~", 1) == (
        b"k", None, [("a", b"1"), ("b", None), ("c", b"")])
    assert both.parse("~\t~\tv", 1) == (None, b"v", [])
    with pytest.raises(ReaderError, match="No header key separator found in pair 'x'"):
        both.parse("x\tk\tv", 7)
    with pytest.raises(ReaderError, match="should not be equal to the null marker"):
        both.parse("~:1\tk\tv", 1)
    assert LineReader().parse("\udcff", 1)[1] == b"\xff"  # undecodable bytes pass through
    with pytest.raises(ReaderError, match=r"headers\.delimiter and headers\.separator"):
        LineReader.from_properties({"headers.delimiter": ",", "headers.separator": ","})
    with pytest.raises(ReaderError, match=r"null\.marker and key\.separator"):
        LineReader.from_properties({"null.marker": "\t"})


def _record(**kw: object) -> ConsumerRecord:
    base: dict[str, object] = dict(topic="t", partition=2, offset=7, timestamp=1000,
                                   timestamp_type=0, key=b"k", value=b"v", headers=[])
    base.update(kw)
    return ConsumerRecord(**base)  # type: ignore[arg-type]


def test_message_formatter_follows_kafka() -> None:
    assert MessageFormatter().format(_record()) == b"v\n"
    every = MessageFormatter.from_properties({
        "print.timestamp": "true", "print.partition": "true", "print.offset": "true",
        "print.headers": "true", "print.key": "true"})
    assert every.format(_record(headers=[("a", b"1"), ("b", None)])) == (
        b"CreateTime:1000\tPartition:2\tOffset:7\ta:1,b:null\tk\tv\n")
    assert every.format(_record(timestamp_type=1, key=None, value=None)) == (
        b"LogAppendTime:1000\tPartition:2\tOffset:7\tNO_HEADERS\tnull\tnull\n")
    key_only = MessageFormatter.from_properties({
        "print.key": "true", "print.value": "false", "line.separator": "|",
        "null.literal": "-", "headers.separator": ";"})
    assert key_only.format(_record(key=None)) == b"-|"
    assert MessageFormatter.from_properties({"print.value": "false"}).format(_record()) == b""


def test_properties_files(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# comment\n! also\nbootstrap.servers = a:1,\\\n    b:2\nclient.id:me\n"
                    "empty=\nspaced value here\nunicode=\\u00e9\\t!\n")
    assert load_properties(str(path), "--command-config") == {
        "bootstrap.servers": "a:1,b:2", "client.id": "me", "empty": "",
        "spaced": "value here", "unicode": "\u00e9\t!"}
    path.write_text("ok=1\nbad=\\u00\n")
    with pytest.raises(CliError, match=r"cannot read --command-config .*: line 2: malformed"):
        load_properties(str(path), "--command-config")


def test_config_arguments() -> None:
    assert parse_add_config("a=1,b=[x,y],c=[k=v]") == {"a": "1", "b": "x,y", "c": "k=v"}
    with pytest.raises(CliError, match='must be in the format "key=val"'):
        parse_add_config("a=1=2")
    with pytest.raises(CliError, match="Invalid character found for config key: a b"):
        parse_add_config("a b=1")
    assert parse_delete_config(["a,b", " c "]) == ["a", "b", "c"]

    def ns(**kw: object) -> argparse.Namespace:
        base = dict(entity_type=None, entity_name=None, entity_default=False, topic=None,
                    broker=None, broker_defaults=False)
        base.update(kw)
        return argparse.Namespace(**base)

    assert entity_of(ns(entity_type="topics", entity_name="t")) == ("topics", "t")
    assert entity_of(ns(broker_defaults=True)) == ("brokers", "")
    assert entity_of(ns(entity_type="brokers")) == ("brokers", None)
    for bad in (ns(), ns(topic="a", broker="1"), ns(entity_type="users", entity_name="u"),
                ns(entity_type="topics", entity_default=True), ns(broker="one"),
                ns(topic="bad name")):
        with pytest.raises(CliError):
            entity_of(bad)


def test_topic_and_consumer_arguments() -> None:
    assert parse_replica_assignment("1:2,2:3") == {0: [1, 2], 1: [2, 3]}
    with pytest.raises(CliError, match="duplicate entries"):
        parse_replica_assignment("1:1")
    with pytest.raises(CliError, match="different replication factor"):
        parse_replica_assignment("1:2,3")
    names = ["a.b", "axb", "c", "__consumer_offsets"]
    assert select_topics(names, "a.b", {"__consumer_offsets"}, False) == ["a.b", "axb"]
    assert select_topics(names, "a\\.b,c", set(), False) == ["a.b", "c"]
    assert select_topics(names, None, {"__consumer_offsets"}, True) == ["a.b", "axb", "c"]

    assert parse_offset(None, True) == -2 and parse_offset(None, False) == -1
    assert parse_offset("LATEST", False) == -1 and parse_offset("42", False) == 42
    with pytest.raises(CliError, match="The provided offset value '-3' is incorrect"):
        parse_offset("-3", False)

    def ns(**kw: object) -> argparse.Namespace:
        base = dict(topic="t", include=None, partition=None, offset=None, from_beginning=False,
                    group=None, max_messages=None)
        base.update(kw)
        return argparse.Namespace(**base)

    assert consume_check(ns(), {}) is None
    assert consume_check(ns(partition=0, offset="1", from_beginning=True), {}) == (
        "Options from-beginning and offset cannot be specified together.")
    assert consume_check(ns(group="a"), {"group.id": "b"}).startswith(
        "The group ids provided in different places")
    assert consume_check(ns(group="a", partition=1), {}) == (
        "Options group and partition cannot be specified together.")


def test_group_arguments_and_tables() -> None:
    assert parse_topic_arg("t") == ("t", None)
    assert parse_topic_arg("t:0,2") == ("t", [0, 2])
    with pytest.raises(CliError, match="Invalid partition 'x'"):
        parse_topic_arg("t:x")
    assert parse_states("stable,EMPTY") == ["Stable", "Empty"]
    with pytest.raises(CliError, match="Invalid state list"):
        parse_states("sleeping")
    utc = int(datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC).timestamp() * 1000)
    assert parse_datetime("2024-05-01T00:00:00.000") == utc
    assert parse_datetime("2024-05-01T02:00:00.000+02:00") == utc
    assert parse_datetime("2024-05-01T00:00:00Z") == utc
    with pytest.raises(CliError, match="does not contain a 'T'"):
        parse_datetime("2024-05-01")
    assert parse_duration("P1DT2H3M4.5S") == datetime.timedelta(days=1, hours=2, minutes=3,
                                                                seconds=4.5)
    for bad in ("1H", "PT", "P"):
        with pytest.raises(CliError):
            parse_duration(bad)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    assert clamp({tp0: -1, tp1: 99}, {tp0: 0, tp1: 0}, {tp0: 5, tp1: 5})[0] == {tp0: 0, tp1: 5}
    assert parse_reset_csv("t,0,5\n\nt,1,6\n", ["g"]) == {"g": {tp0: 5, tp1: 6}}
    assert parse_reset_csv("g2,t,0,5\n", ["g", "h"]) == {"g2": {tp0: 5}}

    table = offsets_table("g", [PartitionLag("orders", 0, 3, 10, 7, "m-1", None, "c", "/h"),
                                PartitionLag("orders", 1, None, 4, None)])
    assert table.splitlines() == [
        "",
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG       "
        "      CONSUMER-ID     HOST            CLIENT-ID",
        "g               orders          0          3               10              7         "
        "      m-1             /h              c",
        "g               orders          1          -               4               -         "
        "      -               -               -",
    ]
    assert reset_table({"g": {}}) == "\n"


def test_metadata_listing_errors_and_map() -> None:
    meta = {"origin_id": -1, "origin": "h:1/bootstrap", "controller_id": 2,
            "brokers": [(2, "10.0.0.5", 9092)],
            "topics": [("t", 5, []), ("u", 0, [(0, -1, [2], [], 5)])]}
    text = format_listing(meta, None, AddressMap.parse("10.0.0.5:9092=gw:19092"))
    assert text.splitlines() == [
        "Metadata for all topics (from broker -1: h:1/bootstrap):",
        " 1 brokers:",
        "  broker 2 at 10.0.0.5:9092 (controller)  -> connect via gw:19092 (--address-map)",
        " 2 topics:",
        '  topic "t" with 0 partitions: Broker: Leader not available (try again)',
        '  topic "u" with 1 partitions:',
        "    partition 0, leader -1, replicas: 2, isrs: , Broker: Leader not available",
    ]


def test_every_tool_explains_itself() -> None:
    tools = ["topics", "configs", "produce", "consume", "metadata", "groups"]
    results = moldau_many(["--help"], *[[tool, "--help"] for tool in tools])
    assert all(tool in results[0].ok().stdout for tool in tools)
    for tool, result in zip(tools, results[1:], strict=True):
        text = result.ok().stdout
        assert text.startswith(f"usage: moldau {tool}")
        for flag in ("--bootstrap-server", "--address-map", "--timeout"):
            assert flag in text, (tool, flag)
        assert "example" in text
