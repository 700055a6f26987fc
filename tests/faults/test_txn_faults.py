"""The fault suite's transactional workload (issue 14, acceptance 4) on a real cluster: a
3-node ZooKeeper ensemble, 3 brokers, a topic and ``__transaction_state`` with replication
factor 3 and ``min.insync.replicas=2``, transactional confluent-kafka producers committing
or aborting at random, read_committed consumers, randomized fault rounds, and
:func:`~tests.faults.replication.txn_checker.check_txns`: no aborted read, no lost commit, no
duplicate, no partial transaction. The seed is printed; ``MOLDAU_FAULTS_SEED=N`` repeats a
run (``python -m tests.faults.replication --workload txn --seed N ...`` the long one).

The second test shows the checker is not blind: the same workload read with
read_uncommitted consumers must report aborted reads (the final read stays read_committed,
so nothing else may be reported).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from moldau.testing.zookeeper import ZooKeeperEnsemble
from tests.faults.replication.nemesis import KINDS
from tests.faults.replication.runner import RunConfig, run

# ~60-75 s of fault rounds: the slow suite (`make test` runs it after the default one).
pytestmark = pytest.mark.slow

# Every fault kind that needs no network namespace (partition-leader needs --netns) and loses
# nothing by design: kill-leader, kill-controller, pause-leader, kill-zookeeper,
# zookeeper-quorum-loss, restart-all (the nemesis's KINDS, so a new kind joins by itself).
FAULTS = KINDS


def _seed() -> int:
    return int(os.environ.get("MOLDAU_FAULTS_SEED") or random.randrange(1 << 31))


@pytest.mark.timeout(600)
def test_short_transactional_fault_run_finds_nothing(zookeeper_ensemble: ZooKeeperEnsemble,
                                                     tmp_path: Path) -> None:
    seed = _seed()
    print(f"\n[faults] txn run, seed {seed} (MOLDAU_FAULTS_SEED={seed} repeats it)")
    config = RunConfig(seed=seed, rounds=3, duration=5.0, quiet=2.0, faults=FAULTS,
                       replication_factor=3, min_insync=2, workload="txn",
                       out=tmp_path / "run")
    result = run(config, ensemble=zookeeper_ensemble, log=lambda line: print(line, flush=True))
    assert result.harness_error is None, f"seed {seed}: {result.harness_error}"
    report = result.report
    assert report.valid and result.exit_code == 0, (
        f"seed {seed}: {report.summary_line()}; {report.as_dict()['examples']}; replay: "
        f"{config.replay_command()}")
    stats = report.stats
    # the run did something: transactions of both ends through the faults, read as they came
    assert stats["committed"] >= 20 and stats["aborted"] >= 5, stats
    # every committed value, plus those of transactions whose end the producer did not learn
    # and that committed all the same
    assert stats["final_records"] >= stats["acknowledged"], stats
    assert stats["polled"] > 0, stats


@pytest.mark.timeout(600)
def test_the_checker_sees_aborted_records_read_uncommitted(
        zookeeper_ensemble: ZooKeeperEnsemble, tmp_path: Path) -> None:
    seed = _seed()
    print(f"\n[faults] read_uncommitted run, seed {seed}")
    config = RunConfig(seed=seed, rounds=1, duration=3.0, quiet=2.0, faults=("kill-leader",),
                       replication_factor=3, min_insync=2, workload="txn",
                       txn_isolation="read_uncommitted", out=tmp_path / "run")
    result = run(config, ensemble=zookeeper_ensemble, log=lambda line: print(line, flush=True))
    assert result.harness_error is None, f"seed {seed}: {result.harness_error}"
    report = result.report
    assert not report.valid and result.exit_code == 1, report.summary_line()
    assert report.totals["aborted_reads"] > 0, report.summary_line()
    # only the consumers were not isolated: the final read_committed read is clean
    assert {k: v for k, v in report.totals.items() if k != "aborted_reads"} == {
        "lost_commits": 0, "duplicates": 0, "partial": 0, "unexpected": 0}
    assert "--txn-isolation read_uncommitted" in config.replay_command()
