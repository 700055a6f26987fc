"""``moldau leader-election``'s option rules and JSON file, as kafka-leader-election.sh's:
checked before anything is sent (the bootstrap address here answers nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moldau.cli.leader_election import exception_name, parse_election_file
from moldau.cli.main import main
from moldau.client import TopicPartition
from moldau.protocol.errors import ErrorCode

B = ["leader-election", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1"]


@pytest.mark.parametrize(("args", "message"), [
    (["--all-topic-partitions"], 'Missing required argument "[election-type]"'),
    (["--election-type", "fastest", "--all-topic-partitions"],
     "the election type is PREFERRED or UNCLEAN"),
    (["--election-type", "preferred"], "One and only one of the following options is required: "
                                       "topic, all-topic-partitions, path-to-json-file"),
    (["--election-type", "PREFERRED", "--all-topic-partitions", "--topic", "t",
      "--partition", "0"], "Only one of the following options is allowed: "),
    (["--election-type", "unclean", "--topic", "t"], "Missing required option(s): partition"),
    (["--election-type", "PREFERRED", "--all-topic-partitions", "--partition", "0"],
     "Option partition is only allowed if topic is used"),
])
def test_option_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]
                       ) -> None:
    assert main([*B, *args]) == 2
    err = capsys.readouterr().err
    assert message in err, err


def test_json_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"partitions": [{"topic": "a", "partition": 1},
                                               {"topic": "b", "partition": 0}]}))
    assert parse_election_file(str(good)) == [TopicPartition("a", 1), TopicPartition("b", 0)]
    cases = {
        "dup.json": ({"partitions": [{"topic": "a", "partition": 1}] * 2},
                     "contains duplicate partitions: a-1"),
        "empty.json": ({"partitions": []}, "Replica election data is empty"),
        "nofield.json": ({"topics": []}, 'missing the "partitions" field'),
        "bad.json": ({"partitions": [{"topic": "a"}]}, "is not a partition"),
    }
    for name, (document, message) in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(document))
        assert main([*B, "--election-type", "PREFERRED", "--path-to-json-file", str(path)]) == 1
        err = capsys.readouterr().err
        assert message in err and str(path) in err, err
    assert main([*B, "--election-type", "PREFERRED", "--path-to-json-file",
                 str(tmp_path / "missing.json")]) == 1
    assert "cannot read it" in capsys.readouterr().err


def test_exception_names() -> None:
    assert exception_name(ErrorCode.preferred_leader_not_available) == \
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException"
    assert exception_name(ErrorCode.election_not_needed) == \
        "org.apache.kafka.common.errors.ElectionNotNeededException"
