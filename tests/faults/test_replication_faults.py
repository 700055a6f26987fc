"""The replication fault suite's short run (issue 13), inside ``make test``: a real 3-node
ZooKeeper ensemble, 3 brokers, a topic with replication factor 3 and
``min.insync.replicas=2``, idempotent confluent-kafka producers with acks=all and consumers
reading as they go, a few randomized fault rounds drawn from every fault kind of the issue,
and the checker (tests/faults/replication). The seed is printed; ``MOLDAU_FAULTS_SEED=N``
repeats a run. The long run is ``make faults`` (docs/operations.md, "Fault suite").

The short run includes ``partition-leader`` (the leader cut off from the other brokers, not
from the clients), so it runs the harness's ``--netns`` mode: ``python -m
tests.faults.replication --netns`` re-executes itself in a private network namespace (SAFETY
RULE of /work/shared/FACTS.md) and starts each broker in a lab namespace of its own.

The second test shows the checker failing on a real run, as the issue asks: acks=1 and
unclean leader election, with the lossy ``unclean-failover`` fault (a partition's followers
SIGSTOPped past ``replica.lag.time.max.ms`` so the ISR is the leader alone, acks=1 records on
the leader alone, the leader killed, the followers resumed and one of them elected
uncleanly): the run must report those records lost, with its seed.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from moldau.testing.zookeeper import ZooKeeperEnsemble
from tests.faults.replication.history import read_history
from tests.faults.replication.nemesis import KINDS, NETNS_KINDS
from tests.faults.replication.runner import RunConfig, run

ROOT = Path(__file__).resolve().parents[2]
SHORT_ROUNDS = 4


def _seed() -> int:
    return int(os.environ.get("MOLDAU_FAULTS_SEED") or random.randrange(1 << 31))


def _log(line: str) -> None:
    print(line, flush=True)


@pytest.mark.net
@pytest.mark.timeout(900)
def test_short_randomized_fault_run_loses_nothing(tmp_path: Path) -> None:
    seed = _seed()
    print(f"\n[faults] short run, seed {seed} (MOLDAU_FAULTS_SEED={seed} repeats it)")
    out = tmp_path / "run"
    kinds = (*KINDS, *NETNS_KINDS)
    command = [sys.executable, "-m", "tests.faults.replication", "--netns", "--seed",
               str(seed), "--rounds", str(SHORT_ROUNDS), "--duration", "5", "--quiet", "2",
               "--rate", "40", "--faults", ",".join(kinds), "--replication-factor", "3",
               "--min-insync", "2", "--acks", "all", "--out", str(out)]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=840)
    print(proc.stdout[-20000:], proc.stderr[-5000:], sep="\n")
    summary_path = out / "summary.json"
    assert summary_path.exists(), f"seed {seed}: no summary (exit {proc.returncode})"
    summary = json.loads(summary_path.read_text())
    assert summary["harness_error"] is None, f"seed {seed}: {summary['harness_error']}"
    report = summary["report"]
    assert summary["valid"] and proc.returncode == 0, (
        f"seed {seed}: {report['totals']}; {report['per_fault']}; incomplete "
        f"{report['incomplete_partitions']}; replay: {summary['replay']}; "
        f"examples {report['examples']}")
    assert summary["rounds_done"] == SHORT_ROUNDS
    stats = report["stats"]
    # the run did something: records written and read through the faults, every round on
    assert stats["acknowledged"] > 300, stats
    assert stats["final_records"] >= stats["acknowledged"]
    assert stats["polled"] > 0
    # a patient idempotent producer gets nearly everything it sent acknowledged
    assert stats["acknowledged"] >= 0.9 * stats["attempted"], stats
    events = read_history(out / "history.jsonl")
    meta = next(e for e in events if e["type"] == "meta")
    assert meta["config"]["replication_factor"] == 3 and meta["config"]["min_insync"] == 2
    assert set(meta["config"]["faults"]) == set(kinds)
    targets = [e for e in events if e["type"] == "fault_targets"]
    assert [e["round"] for e in targets] == list(range(1, SHORT_ROUNDS + 1))


def test_the_checker_catches_acknowledged_records_lost_on_a_real_run(
        zookeeper_ensemble: ZooKeeperEnsemble, tmp_path: Path) -> None:
    seed = _seed()
    print(f"\n[faults] lossy run, seed {seed} (MOLDAU_FAULTS_SEED={seed} repeats it)")
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        _log(line)

    config = RunConfig(seed=seed, rounds=1, duration=4.0, quiet=2.0,
                       faults=("unclean-failover",), replication_factor=3, min_insync=2,
                       unclean=True, acks="1", idempotence=False, rate=60.0,
                       settings={"replica.lag.time.max.ms": "2000"}, out=tmp_path / "run")
    result = run(config, ensemble=zookeeper_ensemble, log=log)
    assert result.harness_error is None, f"seed {seed}: {result.harness_error}"
    report = result.report
    assert not report.valid and result.exit_code == 1, report.summary_line()
    assert report.totals["lost"] > 0, report.summary_line()
    assert report.per_fault["unclean-failover"]["lost"] == report.totals["lost"]
    target = next(e for e in read_history(result.history_path)
                  if e["type"] == "fault_targets")["targets"][0]
    losing = {p for p, counts in report.per_partition.items() if counts["lost"]}
    # the partition whose leader was left alone in its ISR lost the records it held alone
    assert target["partition"] in losing, (losing, target)
    # the logs say what was lost: the new leader from which offset, the old leader, restarted,
    # the exact range it truncated — from that same offset, and no fewer records than the
    # checker found lost on that partition (some it dropped may never have been acknowledged)
    topic = next(e for e in read_history(result.history_path) if e["type"] == "meta")["topic"]
    tp = f"{topic}-{target['partition']}"
    logs = {int(p.parent.name.removeprefix("broker-")): p.read_text(errors="replace")
            for p in (tmp_path / "run" / "brokers").glob("broker-*/broker.log")}
    elected = [m for text in logs.values() for m in re.finditer(
        rf"Unclean leader election of {re.escape(tp)}: broker (\d+) leads it .* Its log ends "
        rf"at offset (\d+);", text)]
    assert len(elected) == 1, [m[0] for m in elected]
    new_leader, lost_from = int(elected[0][1]), int(elected[0][2])
    assert new_leader in target["stopped"]
    truncated = [(int(m[1]), int(m[2])) for m in re.finditer(
        rf"truncated {re.escape(tp)} from \d+ to \d+ \(.*\): offsets (\d+)\.\.(\d+) are not "
        rf"the leader's", logs[target["broker"]])]
    assert truncated and truncated[0][0] == lost_from, (truncated, lost_from)
    assert sum(last - first + 1 for first, last in truncated) >= \
        report.per_partition[target["partition"]]["lost"]
    # the report names the seed, and how to replay it
    assert any(f"seed {seed}" in line and "INVALID" in line for line in lines)
    assert any(f"--seed {seed}" in line for line in lines)
    assert result.summary["seed"] == seed and not result.summary["valid"]
