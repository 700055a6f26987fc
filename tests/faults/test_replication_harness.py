"""The fault suite's pure parts besides the checker: how rounds are drawn from a seed, and
the replay command a run prints (it must parse back into the same run)."""

from __future__ import annotations

import random
import shlex

import pytest

from tests.faults.replication.nemesis import ALL_KINDS, KINDS, LOSSY_KINDS, choose_round
from tests.faults.replication.runner import parse_args


def test_default_kinds_are_every_kind_of_the_issue_and_never_the_lossy_one() -> None:
    assert set(KINDS) == {"kill-leader", "kill-controller", "pause-leader", "kill-zookeeper",
                          "zookeeper-quorum-loss", "restart-all"}
    assert LOSSY_KINDS == ("wipe-partition", "unclean-failover")


def test_rounds_follow_the_seed_and_the_domain_rules() -> None:
    def draw(seed: int) -> list[list[str]]:
        rng = random.Random(seed)
        return [[f.name for f in choose_round(rng, KINDS, combine=0.5)] for _ in range(300)]

    rounds = draw(7)
    assert rounds == draw(7) and rounds != draw(8)
    assert {kind for kinds in rounds for kind in kinds} == set(KINDS)
    for kinds in rounds:
        domains = [ALL_KINDS[k].domain for k in kinds]
        assert len(kinds) in (1, 2)
        if "everything" in domains:
            assert kinds == ["restart-all"]
        if len(kinds) == 2:
            # a broker fault and a ZooKeeper fault, the broker fault first (it stops last)
            assert domains == ["broker", "zookeeper"]
    assert any(len(kinds) == 2 for kinds in rounds)


def test_only_the_given_kinds_are_drawn() -> None:
    rng = random.Random(1)
    allowed = ("kill-controller", "kill-zookeeper")
    for _ in range(100):
        assert {f.name for f in choose_round(rng, allowed)} <= set(allowed)


def test_the_replay_command_parses_back_into_the_same_run() -> None:
    config = parse_args(["--seed", "42", "--rounds", "7", "--duration", "12.5", "--faults",
                         "kill-leader,restart-all", "--replication-factor", "1", "--acks",
                         "1", "--no-idempotence", "--unclean", "--rate", "20",
                         "--set", "replica.lag.time.max.ms=2000"])
    argv = shlex.split(config.replay_command())[3:]
    assert parse_args(argv) == config


def test_an_unknown_fault_kind_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--faults", "kill-leader,unplug-the-rack"])
    assert "unplug-the-rack" in capsys.readouterr().err
