"""bench/transactions.py run with tiny numbers, so the benchmark cannot rot: one broker,
idempotent and transactional passes with both clients, a topic with aborted transactions
read with both isolation levels, and the JSON report. 20,000 records per half, because the
broker's CPU is read in clock ticks (10 ms) and a few MB can cost it less than one."""

from __future__ import annotations

import json
from pathlib import Path

from bench import transactions


def test_transactions_benchmark_runs_every_part_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "transactions.json"
    code = transactions.main([
        "--records", "20000", "--record-size", "1024", "--partitions", "2", "--txn-ms", "20",
        "--repeat", "1", "--consume-records", "2000", "--txn-records", "50",
        "--abort-ratio", "0.1", "--no-pin", "--workdir", str(tmp_path), "--out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    for client in ("confluent", "moldau"):
        (only,) = result["produce"][client]["passes"]
        assert only["idempotent"]["records"] == only["transactional"]["records"] == 20000
        assert only["idempotent"]["transactions"] == 0
        assert only["transactional"]["transactions"] >= 1
        assert result["summary"][f"{client}_txn_vs_idempotent"] == only["ratio"] > 0
        assert only["idempotent"]["broker_cpu_s_per_gb"] > 0
        assert only["transactional"]["broker_cpu_s_per_gb"] > 0
    consume = result["consume"]
    # 40 transactions of 50 records, every 10th aborted
    assert consume["written"] == {"committed": 1800, "aborted": 200}
    (only,) = consume["passes"]
    assert only["read_uncommitted"]["records"] == 2000
    assert only["read_committed"]["records"] == 1800
    assert result["summary"]["read_committed_vs_uncommitted"] == only["ratio"] > 0
