"""``moldau metadata`` against kcat -L, unreachable addresses, and ``--address-map``.

The address tests use a broker that advertises a port nothing listens on (the situation of
seed 000: bootstrap works, everything after it fails), then map that address to the real one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from moldau.testing.processes import closed_port, free_port
from moldau.testing.runner import BrokerProcess

from .conftest import Result, kcat, moldau, moldau_many, unique


def test_metadata_matches_kcat(bootstrap: str) -> None:
    topic = unique("meta")
    moldau("topics", "-b", bootstrap, "--create", "--topic", topic, "--partitions", "3").ok()
    ours, ours_topic, ours_json, missing = moldau_many(
        ["metadata", "-b", bootstrap],
        ["metadata", "-b", bootstrap, "-t", topic],
        ["metadata", "-b", bootstrap, "-t", topic, "-J"],
        ["metadata", "-b", bootstrap, "-t", "no-such-topic"],
    )
    assert ours.ok().stdout == kcat("-b", bootstrap, "-L")
    assert ours_topic.ok().stdout == kcat("-b", bootstrap, "-L", "-t", topic)
    assert json.loads(ours_json.ok().stdout) == json.loads(
        kcat("-b", bootstrap, "-L", "-t", topic, "-J"))
    lines = ours_topic.stdout.splitlines()
    assert lines[0] == f"Metadata for {topic} (from broker 1: {bootstrap}/1):"
    assert lines[1:] == [
        " 1 brokers:", f"  broker 1 at {bootstrap} (controller)", " 1 topics:",
        f'  topic "{topic}" with 3 partitions:',
        *[f"    partition {p}, leader 1, replicas: 1, isrs: 1" for p in range(3)]]
    # Unlike kcat, asking about a topic does not create it.
    assert missing.failed().stdout.splitlines()[-1] == (
        '  topic "no-such-topic" with 0 partitions: Broker: Unknown topic or partition')


def test_unreachable_bootstrap_is_one_clear_line() -> None:
    with closed_port() as port:
        dead = f"127.0.0.1:{port}"
        results = _on_every_tool(dead)
    for r in results:
        r.failed()
        final = r.stderr.strip().splitlines()[-1]
        assert f"could not reach any bootstrap server within 1 s (--timeout): cannot connect " \
               f"to bootstrap server {dead}: connection refused" in final, r.stderr
    missing = moldau("topics", "--list")
    assert 'Missing required argument "--bootstrap-server"' in missing.failed(2).stderr
    malformed = moldau("metadata", "-b", "localhost")
    assert "is not host:port" in malformed.failed(2).stderr


def _on_every_tool(dead: str) -> list[Result]:
    return moldau_many(
        ["metadata", "-b", dead, "--timeout", "1"],
        ["topics", "--bootstrap-server", dead, "--list", "--timeout", "1"],
        (["produce", "-b", dead, "--topic", "t", "--timeout", "1"], "x\n"),
        ["consume", "-b", dead, "--topic", "t", "--timeout", "1"],
        ["configs", "-b", dead, "--topic", "t", "--describe", "--timeout", "1"],
        ["groups", "-b", dead, "--list", "--timeout", "1"],
    )


@pytest.fixture(scope="module")
def hidden_broker() -> Iterator[tuple[BrokerProcess, str, str]]:
    """A broker that advertises 127.0.0.1:<a dead port> for its real listener."""
    real = free_port()
    with closed_port() as dead:
        settings = {"listeners": f"PLAINTEXT://127.0.0.1:{real}",
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{dead}"}
        with BrokerProcess(settings=settings) as proc:
            yield proc, f"127.0.0.1:{real}", f"127.0.0.1:{dead}"


def test_advertised_address_unreachable(hidden_broker: tuple[BrokerProcess, str, str]) -> None:
    _proc, real, dead = hidden_broker
    topic = unique("x")
    listing = moldau("metadata", "-b", real)
    kcat_listing = kcat("-b", real, "-L")
    created, produced, consumed, grouped = moldau_many(
        ["topics", "-b", real, "--create", "--topic", unique("x"), "--timeout", "3"],
        (["produce", "-b", real, "--topic", topic, "--timeout", "3"], "lost\n"),
        ["consume", "-b", real, "--topic", topic, "--timeout", "3"],
        ["consume", "-b", real, "--topic", topic, "--group", unique("g"), "--timeout", "3"],
    )
    # The listing shows why clients fail: bootstrap is not what the broker advertises.
    assert listing.ok().stdout.splitlines()[:3] == [
        f"Metadata for all topics (from broker -1: {real}/bootstrap):",
        " 1 brokers:",
        f"  broker 1 at {dead} (controller)",
    ]
    assert listing.stdout == kcat_listing
    created.failed()
    assert f"cannot connect to broker 1 at {dead}: connection refused" in created.stderr
    assert "broker.address.map" in created.stderr and "moldau doctor" in created.stderr
    # Each client tool gives up after --timeout and names the advertised address.
    assert f"Error when sending message to topic {topic}" in produced.failed().stderr
    assert "records still unacknowledged after 3 s" in produced.stderr
    assert "could not start reading within 3 s (--timeout)" in consumed.failed().stderr
    assert f"cannot connect to broker 1 at {dead}" in consumed.stderr
    assert "the coordinator of group" in grouped.failed().stderr
    assert f"cannot connect to broker 1 at {dead}: connection refused" in grouped.stderr


def test_address_map_reaches_the_broker(hidden_broker: tuple[BrokerProcess, str, str]) -> None:
    _proc, real, dead = hidden_broker
    topic, group = unique("mapped"), unique("mapped-group")
    mapping = ["--address-map", f"{dead}={real}"]
    b = ["-b", real, *mapping]
    moldau("topics", *b, "--create", "--topic", topic, "--partitions", "2").ok()
    moldau("produce", *b, "--topic", topic, "--property", "parse.key=true",
           "--property", "key.separator=:", stdin="a:1\nb:2\nc:3\n").ok()
    consumed, grouped, described, listing, host_only = moldau_many(
        ["consume", *b, "--topic", topic, "--from-beginning", "--max-messages", "3",
         "--property", "print.key=true", "--property", "key.separator=:"],
        ["consume", *b, "--topic", topic, "--group", group, "--from-beginning",
         "--max-messages", "3"],
        ["topics", *b, "--describe", "--topic", topic],
        ["metadata", *b, "-t", topic],
        ["metadata", "-b", real, "--address-map", f"127.0.0.1={'localhost'}", "-t", topic],
    )
    assert sorted(consumed.ok().stdout.splitlines()) == ["a:1", "b:2", "c:3"]
    assert sorted(grouped.ok().stdout.splitlines()) == ["1", "2", "3"]
    assert "\tPartitionCount: 2\t" in described.ok().stdout
    assert listing.ok().stdout.splitlines()[2] == (
        f"  broker 1 at {dead} (controller)  -> connect via {real} (--address-map)")
    assert host_only.ok().stdout.splitlines()[2] == (
        f"  broker 1 at {dead} (controller)  -> connect via localhost:{dead.split(':')[1]} "
        "(--address-map)")
    lag = moldau("groups", *b, "--describe", "--group", group).ok()
    rows = [row.split() for row in lag.stdout.strip().splitlines()[1:]]
    assert [(r[1], r[2]) for r in rows] == [(topic, "0"), (topic, "1")]
    assert all(r[3] == r[4] and r[5] == "0" for r in rows), lag.stdout
    bad = moldau("metadata", "-b", real, "--address-map", "nonsense")
    assert "--address-map" in bad.failed(2).stderr and "exactly one '='" in bad.stderr
