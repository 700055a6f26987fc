"""``moldau perf produce|consume|e2e`` against a live ``moldau serve`` (real librdkafka)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from moldau.testing.runner import BrokerProcess


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(settings={"num.partitions": 3}) as b:
        yield b


def perf(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau.cli.main", "perf", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_produce_then_consume_json(broker: BrokerProcess) -> None:
    out = perf("produce", "--topic", "perf-a", "--num-records", "6000", "--record-size", "200",
               "--throughput", "-1", "--processes", "2", "--json", "--producer-props",
               f"bootstrap.servers={broker.bootstrap}", "acks=all", "linger.ms=2")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["records"] == 6000 and result["errors"] == 0
    assert result["bytes"] == 6000 * 200
    lat = result["latency_ms"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
    assert [w["records"] for w in result["workers"]] == [3000, 3000]

    out = perf("consume", "--bootstrap-server", broker.bootstrap, "--topic", "perf-a",
               "--messages", "6000", "--assign", "--processes", "2", "--timeout", "10000",
               "--json")
    assert out.returncode == 0, out.stderr
    consumed = json.loads(out.stdout)
    assert consumed["records"] == 6000 and consumed["bytes"] == 6000 * 200
    assert not consumed["timed_out"]


def test_produce_summary_line_and_group_consume(broker: BrokerProcess) -> None:
    out = perf("produce", "--topic", "perf-b", "--num-records", "2000", "--record-size", "100",
               "--throughput", "4000", "--processes", "1", "--bootstrap-server",
               broker.bootstrap)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^2000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg "
                     r"latency, [\d.]+ ms max latency, [\d.]+ ms 50th, [\d.]+ ms 95th, "
                     r"[\d.]+ ms 99th, [\d.]+ ms 99.9th\.$", out.stdout, re.M), out.stdout
    # throttled to 4000 records/s: 2000 records take about half a second (a loaded machine
    # only makes it slower; a broken throttle sends much faster)
    rate = float(re.search(r"([\d.]+) records/sec", out.stdout.splitlines()[-1])[1])
    assert rate < 6000

    out = perf("consume", "--bootstrap-server", broker.bootstrap, "--topic", "perf-b",
               "--messages", "2000", "--group", "perf-group", "--processes", "1")
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.strip().splitlines()[-2:]
    assert header.startswith("start.time, end.time, data.consumed.in.MB")
    assert row.split(", ")[4] == "2000"


def test_e2e(broker: BrokerProcess) -> None:
    out = perf("e2e", "--bootstrap-server", broker.bootstrap, "--topic", "perf-e2e",
               "--rate", "1000", "--duration", "2", "--warmup", "0.5", "--record-size", "64",
               "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["sent"] == 2000 and result["received"] == 2000
    # The pacer sends record i at start + i/rate, so it can never be ahead of 1000/s (2000
    # records take at least 1.999 s); without it the records would go out at tens of
    # thousands per second. A loaded machine can only make it slower, which is no defect.
    assert result["achieved_rate"] <= 1010, result
    assert result["elapsed_s"] >= 1.99, result
    e2e = result["end_to_end_ms"]
    assert e2e["count"] > 1000 and 0 < e2e["p50"] <= e2e["p99"]


def test_bad_arguments_are_explained() -> None:
    out = perf("produce", "--topic", "t", "--num-records", "1", "--record-size", "10")
    assert out.returncode == 2 and "bootstrap.servers" in out.stderr
    out = perf("produce", "--topic", "t", "--num-records", "1", "--record-size", "10",
               "--producer-props", "acks")
    assert out.returncode == 2 and "KEY=VALUE" in out.stderr
