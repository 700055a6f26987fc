"""Perf-tool properties: k=v pairs, Java properties files, Java-only keys dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.perf.props import PropsError, librdkafka_config, parse_pairs, read_properties


def test_pairs() -> None:
    assert parse_pairs(["acks=all", "linger.ms = 5", "client.id=a=b"]) == {
        "acks": "all", "linger.ms": "5", "client.id": "a=b"}
    with pytest.raises(PropsError, match="KEY=VALUE"):
        parse_pairs(["acks"])
    with pytest.raises(PropsError):
        parse_pairs(["=1"])


def test_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "producer.properties"
    path.write_text("# comment\n! also\n\nbootstrap.servers=h:1\nacks: all\n"
                    "key.serializer=org.apache.kafka.common.serialization.ByteArraySerializer\n")
    props = read_properties(path)
    assert props["acks"] == "all" and props["bootstrap.servers"] == "h:1"
    assert librdkafka_config(props) == {"bootstrap.servers": "h:1", "acks": "all"}
    # "key value" is a property, as java.util.Properties reads it (perf once refused it);
    # values are trimmed for librdkafka as the Java clients' ConfigDef trims them.
    path.write_text("linger.ms 5\nacks = all  \n")
    props = read_properties(path)
    assert props == {"linger.ms": "5", "acks": "all  "}
    assert librdkafka_config(props) == {"linger.ms": "5", "acks": "all"}
    path.write_text("acks=\\u1\n")
    with pytest.raises(PropsError, match=r"producer\.properties: line 1: malformed"):
        read_properties(path)
    with pytest.raises(PropsError, match="cannot read"):
        read_properties(tmp_path / "missing")
