"""The settings every broker of a local cluster (``moldau dev-cluster``, the test clusters) gets:
Kafka's replication factor of ``__consumer_offsets``, capped at the cluster's size."""

from __future__ import annotations

from pathlib import Path

import pytest

from moldau.devtools.brokers import internal_topic_defaults
from moldau.devtools.cluster import LocalCluster
from moldau.testing.cluster import TEST_DEFAULTS


@pytest.mark.parametrize(("brokers", "factor"), [(1, "1"), (2, "2"), (3, "3"), (5, "3")])
def test_offsets_replication_factor_is_kafkas_3_capped_at_the_brokers(brokers: int,
                                                                       factor: str) -> None:
    assert internal_topic_defaults(brokers) == {"offsets.topic.replication.factor": factor}


def test_a_cluster_gets_it_unless_its_defaults_say_otherwise(tmp_path: Path) -> None:
    assert LocalCluster(2, tmp_path).defaults["offsets.topic.replication.factor"] == "2"
    assert LocalCluster(4, tmp_path, defaults=TEST_DEFAULTS).defaults[
        "offsets.topic.replication.factor"] == "3"
    chosen = LocalCluster(3, tmp_path, defaults={"offsets.topic.replication.factor": "1"})
    assert chosen.defaults["offsets.topic.replication.factor"] == "1"
