"""``moldau produce`` and ``moldau consume`` against a broker subprocess: Kafka's console
producer line format, the console consumer's output format, positions, groups, failures.
Records are cross-checked with confluent-kafka."""

from __future__ import annotations

import re

from confluent_kafka import Consumer, TopicPartition

from .conftest import moldau, moldau_many, unique


def _read_all(bootstrap: str, topic: str, count: int, partition: int = 0) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("check"),
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, partition, 0)])
    records = []
    try:
        while len(records) < count:
            message = consumer.poll(10)
            assert message is not None, f"only {len(records)} of {count} records arrived"
            assert message.error() is None, message.error()
            records.append(message)
    finally:
        consumer.close()
    return records


def test_keys_headers_and_print_options(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    topic = unique("kh")
    lines = (
        "trace:abc,n:1\tk1\tv1\n"       # two headers, key, value
        "NULL\tk2\tv with spaces\n"       # no headers (null marker), key
        "h:NULL\tNULL\tv3\n"             # a header with a null value, null key
        "x:y\tk4\tNULL\n"                # null value (tombstone)
        "\tk5\tv5\r\n"                   # empty headers field, CRLF line ending
    )
    moldau("produce", *b, "--topic", topic, "--property", "parse.headers=true",
           "--property", "parse.key=true", "--property", "null.marker=NULL", stdin=lines).ok()

    # What a real client reads back.
    got = _read_all(bootstrap, topic, 5)
    assert [(m.key(), m.value(), m.headers()) for m in got] == [
        (b"k1", b"v1", [("trace", b"abc"), ("n", b"1")]),
        (b"k2", b"v with spaces", None),
        (None, b"v3", [("h", None)]),
        (b"k4", None, [("x", b"y")]),
        (b"k5", b"v5", None),
    ]
    stamps = [m.timestamp()[1] for m in got]

    full, default, custom = moldau_many(
        ["consume", *b, "--topic", topic, "--from-beginning", "--max-messages", "5",
         "--property", "print.timestamp=true", "--property", "print.partition=true",
         "--property", "print.offset=true", "--property", "print.headers=true",
         "--property", "print.key=true"],
        ["consume", *b, "--topic", topic, "--from-beginning", "--max-messages", "5"],
        ["consume", *b, "--topic", topic, "--from-beginning", "--max-messages", "5",
         "--property", "print.key=true", "--property", "print.value=false",
         "--property", "key.separator= | ", "--property", "line.separator=;",
         "--property", "null.literal=<nil>", "--property", "print.offset=true"],
    )
    assert full.ok().stdout.splitlines() == [
        f"CreateTime:{stamps[0]}\tPartition:0\tOffset:0\ttrace:abc,n:1\tk1\tv1",
        f"CreateTime:{stamps[1]}\tPartition:0\tOffset:1\tNO_HEADERS\tk2\tv with spaces",
        f"CreateTime:{stamps[2]}\tPartition:0\tOffset:2\th:null\tnull\tv3",
        f"CreateTime:{stamps[3]}\tPartition:0\tOffset:3\tx:y\tk4\tnull",
        f"CreateTime:{stamps[4]}\tPartition:0\tOffset:4\tNO_HEADERS\tk5\tv5",
    ]
    assert full.stderr.strip().endswith("Processed a total of 5 messages")
    assert default.ok().stdout == "v1\nv with spaces\nv3\nnull\nv5\n"
    assert custom.ok().stdout == ("Offset:0 | k1;Offset:1 | k2;Offset:2 | <nil>;Offset:3 | k4;"
                                  "Offset:4 | k5;")


def test_positions_limits_and_key_separator(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    topic = unique("pos")
    moldau("topics", *b, "--create", "--topic", topic, "--partitions", "2").ok()
    data = "".join(f"key{i}:value{i}\n" for i in range(20))
    moldau("produce", *b, "--topic", topic, "--property", "parse.key=true",
           "--property", "key.separator=:", "--sync", stdin=data).ok()

    p0_from_3, p0_latest, limited, everything = moldau_many(
        ["consume", *b, "--topic", topic, "--partition", "0", "--offset", "3",
         "--max-messages", "2", "--property", "print.offset=true",
         "--property", "print.key=true", "--property", "key.separator=="],
        ["consume", *b, "--topic", topic, "--partition", "0", "--offset", "latest",
         "--timeout-ms", "1000"],
        ["consume", *b, "--topic", topic, "--from-beginning", "--max-messages", "7"],
        # All 20: stop at the count; the idle time-out only guards against a hang (2 s of
        # idleness from start-up missed records on a busy machine).
        ["consume", *b, "--topic", topic, "--from-beginning", "--max-messages", "20",
         "--timeout-ms", "30000", "--property", "print.partition=true",
         "--property", "print.key=true"],
    )
    by_partition: dict[str, list[str]] = {"0": [], "1": []}
    for line in everything.ok().stdout.splitlines():
        part, key, value = line.split("\t")
        by_partition[part.split(":")[1]].append(f"{key}:{value}")
    assert sorted(by_partition["0"] + by_partition["1"]) == sorted(data.splitlines())
    assert everything.stderr.strip().endswith("Processed a total of 20 messages")

    p0 = [kv.split(":")[0] for kv in by_partition["0"]]
    p0_expected = p0[3:5]
    assert p0_from_3.ok().stdout.splitlines() == [
        f"Offset:{3 + n}={key}=value{key[3:]}" for n, key in enumerate(p0_expected)]
    assert p0_latest.ok().stdout == ""
    assert p0_latest.stderr.strip().endswith("Processed a total of 0 messages")
    assert len(limited.ok().stdout.splitlines()) == 7
    assert limited.stderr.strip().endswith("Processed a total of 7 messages")


def test_compression_sync_and_auto_creation(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    topics = {codec: unique(f"codec-{codec}") for codec in ("gzip", "snappy", "lz4", "zstd")}
    payload = "".join(f"line {i} " + "x" * 50 + "\n" for i in range(50))
    results = moldau_many(*[
        (["produce", *b, "--topic", t, "--compression-codec", codec, "--linger-ms", "20"],
         payload)
        for codec, t in topics.items()
    ], (["produce", *b, "--topic", unique("gzipdefault"), "--compression-codec", "--sync"],
        "a\nb\n"))
    for r in results:
        r.ok()
    for t in topics.values():  # auto-created by the producer's metadata request
        got = _read_all(bootstrap, t, 50)
        assert [m.value().decode() for m in got] == payload.splitlines()


def test_group_consumption_commits(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    topic, group = unique("grp"), unique("console-group")
    moldau("produce", *b, "--topic", topic, stdin="".join(f"m{i}\n" for i in range(10))).ok()
    first = moldau("consume", *b, "--topic", topic, "--group", group, "--from-beginning",
                   "--max-messages", "4").ok()
    assert first.stdout.splitlines() == ["m0", "m1", "m2", "m3"]
    # The rest: a restart at m0 would print m0-m5; the generous idle time-out only guards
    # against a hang (1.5 s, from start-up, included the group join).
    second = moldau("consume", *b, "--topic", topic, "--group", group, "--from-beginning",
                    "--max-messages", "6", "--timeout-ms", "30000").ok()
    assert second.stdout.splitlines() == [f"m{i}" for i in range(4, 10)]
    # The committed offset is what a real client in the same group sees.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    try:
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset == 10


def test_delivery_and_input_failures(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    small, parse, missing = unique("small"), unique("parse"), unique("nokey")
    moldau("topics", *b, "--create", "--topic", small, "--config", "max.message.bytes=200").ok()
    too_big, bad_line, bad_props, conflicting, no_topic = moldau_many(
        (["produce", *b, "--topic", small, "--sync"], "ok\n" + "x" * 500 + "\nlater\n"),
        (["produce", *b, "--topic", parse, "--property", "parse.key=true", "--sync"],
         "k1\tv1\nno separator here\nk3\tv3\n"),
        (["produce", *b, "--topic", missing, "--property", "headers.separator=:"], "x\n"),
        ["consume", *b, "--topic", small, "--from-beginning", "--consumer-property",
         "auto.offset.reset=latest"],
        ["consume", *b, "--partition", "0"],
    )
    too_big.failed()
    assert re.search(rf"Error when sending message to topic {small} with key: null, value: "
                     r"500 bytes with error: .*max\.message\.bytes", too_big.stderr)
    bad_line.failed()
    assert "No key separator found on line number 2: 'no separator here'" in bad_line.stderr
    assert [m.value() for m in _read_all(bootstrap, parse, 1)] == [b"v1"]
    assert "headers.separator and headers.key.separator may not be equal" in (
        bad_props.failed(2).stderr)
    assert "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest'" in (
        conflicting.failed(2).stderr)
    assert "Exactly one of --include/--topic is required." in no_topic.failed(2).stderr
