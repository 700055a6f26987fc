"""``moldau reassign-partitions`` without a broker: kafka-reassign-partitions.sh's JSON files
(parsing and the refusals that name what is wrong), Kafka's rack-unaware placement for
--generate, and ``moldau topics --describe`` of a partition being reassigned (TopicCommand's
``Adding Replicas``/``Removing Replicas`` and replication factor)."""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter

import pytest

from moldau.cli.common import CliError
from moldau.cli.reassign_partitions import (
    assign_rack_unaware,
    assignment_json,
    parse_reassignment,
    parse_topics_to_move,
    propose,
    reassignments_text,
)
from moldau.cli.topics import describe_lines
from moldau.client import PartitionReassignment, TopicInfo
from moldau.client.types import PartitionInfo, TopicPartition


def test_plans_parse_and_print_in_kafkas_form() -> None:
    doc = {"version": 1, "partitions": [
        {"topic": "b", "partition": 1, "replicas": [2, 3]},
        {"topic": "a", "partition": 0, "replicas": [4], "log_dirs": ["any"]}]}
    plan = parse_reassignment(doc)
    assert plan == {TopicPartition("b", 1): [2, 3], TopicPartition("a", 0): [4]}
    assert json.loads(assignment_json(plan)) == {"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [4], "log_dirs": ["any"]},
        {"topic": "b", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]}]}
    assert parse_topics_to_move({"topics": [{"topic": "a"}, {"topic": "a"}], "version": 1}) \
        == ["a"]


@pytest.mark.parametrize(("doc", "message"), [
    ({"partitions": []}, "Partition reassignment list cannot be empty"),
    ({"partitions": [{"topic": "a", "partition": 0, "replicas": [1, 1]}]},
     "Partition replica lists may not contain duplicate entries: a-0 has [1, 1]"),
    ({"partitions": [{"topic": "a", "partition": 0, "replicas": []}]},
     "Partition replica list for a-0 cannot be empty"),
    ({"partitions": [{"topic": "a", "partition": 0, "replicas": [1]},
                     {"topic": "a", "partition": 0, "replicas": [2]}]},
     "Partition reassignment contains duplicate topic partitions: a-0"),
    ({"partitions": [{"topic": "a", "partition": "0", "replicas": [1]}]}, '"partition"'),
    ({"partitions": [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]},
     'log_dirs of a-0 must be "any"'),
    ([], '{"version":1,"partitions":'),
])
def test_bad_plans_say_what_is_wrong(doc: object, message: str) -> None:
    with pytest.raises(CliError) as caught:
        parse_reassignment(doc, "plan.json")
    assert message in str(caught.value)


def test_generate_spreads_leaders_and_replicas_like_kafka() -> None:
    placed = assign_rack_unaware([2, 3, 4], 6, 3, random.Random(7))
    assert all(sorted(r) == [2, 3, 4] for r in placed)
    assert Counter(r[0] for r in placed) == {2: 2, 3: 2, 4: 2}  # leaders round robin
    with pytest.raises(CliError, match="Replication factor: 3 larger than available "
                                       "brokers: 2"):
        assign_rack_unaware([1, 2], 1, 3, random.Random(0))
    current = {TopicPartition("t", p): [1, 2] for p in range(4)}
    proposal = propose(current, [5, 6, 7], random.Random(1))
    assert set(proposal) == set(current)
    assert all(len(set(r)) == 2 and set(r) <= {5, 6, 7} for r in proposal.values())


def test_describe_shows_a_partition_being_moved() -> None:
    info = TopicInfo("t", None, {
        0: PartitionInfo("t", 0, 1, replicas=(2, 3, 4, 1), isr=(1, 2, 3)),
        1: PartitionInfo("t", 1, 2, replicas=(2, 3, 1), isr=(2, 3, 1))})
    flags = {f: False for f in ("under_replicated_partitions", "unavailable_partitions",
                                "under_min_isr_partitions", "at_min_isr_partitions")}
    args = argparse.Namespace(topics_with_overrides=False, **flags)
    moves = {0: PartitionReassignment((2, 3, 4, 1), (4,), (1,))}
    lines = describe_lines(info, {}, args, {1, 2, 3, 4}, moves)
    assert "\tReplicationFactor: 3\t" in lines[0]
    assert lines[1] == ("\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 2,3,4,1\tIsr: 1,2,3"
                        "\tAdding Replicas: 4\tRemoving Replicas: 1")
    assert lines[2] == "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3,1"
    # the replica being added is not "missing" from the ISR
    under = argparse.Namespace(**{**vars(args), "under_replicated_partitions": True})
    assert describe_lines(info, {}, under, {1, 2, 3, 4}, moves) == []


def test_list_prints_kafkas_lines() -> None:
    assert reassignments_text({}) == "No partition reassignments found."
    assert reassignments_text({
        TopicPartition("t", 1): PartitionReassignment((2, 3, 1), (), (1,)),
        TopicPartition("t", 0): PartitionReassignment((2, 3, 4, 1), (4,), (1,))}) == (
        "Current partition reassignments:\n"
        "t-0: replicas: 2,3,4,1. adding: 4. removing: 1.\n"
        "t-1: replicas: 2,3,1. removing: 1.")
