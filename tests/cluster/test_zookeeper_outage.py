"""What clients see while the brokers' ZooKeeper is down (the whole ensemble, here its one
server), for longer than ``zookeeper.session.timeout.ms``, and after it is back.

Written for docs/operations.md, "Running a cluster": the brokers keep serving the partitions
they lead (nothing in the data plane needs ZooKeeper), metadata changes wait, and when
ZooKeeper returns (with its data) every broker still holds its session and registration, the
controller is the one from before, and topics can be created again.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from moldau.testing.cluster import BrokerCluster

from .test_failover import create_topic, partitions, produce, read_all, wait_until


def test_brokers_serve_through_a_zookeeper_outage_and_carry_on_after_it(
        tmp_path: Path) -> None:
    with BrokerCluster(3, tmp_path) as cluster:  # its own ZooKeeper, to stop and start
        assert cluster.zookeeper is not None
        controller = cluster.wait_controller(60)
        bootstrap = cluster.bootstrap()
        topic = f"outage-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 6)
        wait_until(lambda: len(partitions(bootstrap, topic)) == 6, 30, "topic in metadata")
        assert produce(bootstrap, topic, dict.fromkeys(range(6), 2), "before") == {
            p: [] for p in range(6)}
        sessions = {i: cluster.registration(i) for i in cluster.brokers}
        zk = cluster.zookeeper.nodes[0]

        cluster.zookeeper.stop_node(zk)
        down_at = time.monotonic()
        # the data plane goes on: every partition takes writes and serves reads
        assert produce(bootstrap, topic, dict.fromkeys(range(6), 2), "during") == {
            p: [] for p in range(6)}
        assert all(len(v) == 4 for v in read_all(bootstrap, topic, list(range(6))).values())
        # a metadata change cannot be made meanwhile: the client's request times out
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        future = admin.create_topics([NewTopic(f"no-zk-{uuid.uuid4().hex[:6]}", 1, 1)],
                                     operation_timeout=5, request_timeout=8)
        failed: Any = None
        try:
            next(iter(future.values())).result(30)
        except KafkaException as exc:
            failed = exc.args[0]
        assert failed is not None, "a topic was created while ZooKeeper was down"
        time.sleep(max(0.0, cluster.session_timeout_s + 2 - (time.monotonic() - down_at)))
        assert all(node.running() for node in cluster.brokers.values())

        cluster.zookeeper.start_node(zk)
        cluster.wait_registered(timeout=60)
        assert cluster.controller_id() == controller
        assert {i: cluster.registration(i) for i in cluster.brokers} == sessions
        after = f"after-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, after, 3)
        wait_until(lambda: len(partitions(bootstrap, after)) == 3, 30, f"{after} in metadata")
        assert all(error == 0 for _l, error in partitions(bootstrap, topic).values())
