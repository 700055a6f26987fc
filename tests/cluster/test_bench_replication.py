"""bench/replication.py run with tiny numbers, so the benchmark cannot rot: it starts its own
ZooKeeper and three brokers, measures both halves of the ratio, end-to-end latency with
acks=all and both failover times, and writes a JSON report. 30,000 records, because the
brokers' CPU is read in clock ticks (10 ms) and 3,000 records cost one broker less than one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import replication

# a benchmark smoke run of ~25 s: the slow suite (`make test` runs it after the default one).
pytestmark = pytest.mark.slow


def test_replication_benchmark_runs_every_part_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "replication.json"
    code = replication.main([
        "--records", "30000", "--partitions", "3", "--processes", "1", "--repeat", "1",
        "--e2e-seconds", "3", "--e2e-rate", "200", "--e2e-warmup", "1", "--no-pin",
        "--workdir", str(tmp_path),
        "--out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    summary = result["summary"]
    (only,) = result["passes"]
    assert only["single"]["records"] == 30000 and only["single"]["errors"] == 0
    assert only["replicated"]["records"] == 30000 and only["replicated"]["errors"] == 0
    assert only["replicated"]["acks"] == "all" and only["single"]["acks"] == "1"
    assert only["cluster_rf1"]["records"] == 30000 and only["cluster_rf1"]["acks"] == "1"
    assert summary["ratio_median"] == only["ratio"] > 0
    assert summary["ratio_same_cluster_median"] == only["ratio_same_cluster"] > 0
    assert all(summary["cpu_s_per_gb"][half] > 0
               for half in ("single", "cluster_rf1", "replicated"))
    assert result["e2e"]["replicated"]["received"] > 0
    assert result["e2e"]["replicated"]["errors"] == 0
    assert summary["e2e_replicated_p99_ms"] > 0
    (fail,) = result["failover"]
    shutdown, kill = fail["controlled_shutdown"], fail["kill9"]
    # the victims led a partition and were not the controller; leadership moved off them
    assert shutdown["broker"] != shutdown["controller"]
    assert kill["broker"] != kill["controller"] and kill["new_leader"] not in (-1, kill["broker"])
    assert 0 < shutdown["leadership_moved_s"] < 60
    assert 0 < kill["first_ack_after_kill_s"] < 120
