"""``moldau dev-cluster`` with brokers that register in ZooKeeper: the addresses it prints
are the ones clients are told, Ctrl-C leaves nothing running, an existing ZooKeeper is used
under its chroot and left running."""

from __future__ import annotations

import re
import signal
import uuid
from pathlib import Path

from moldau.devtools.processes import pid_alive
from moldau.devtools.zookeeper import ZooKeeperEnsemble

from .devcluster import READY, DevCluster, consecutive_free_ports, processes_under

_BROKER_LINE = re.compile(r"^broker (\d+)\s+PLAINTEXT://(\S+)\s+\(pid (\d+); log (\S+)\)$", re.M)
_ZK_LINE = re.compile(r"^ZooKeeper\s+(\S+)\s+\(pid (\d+);", re.M)


def test_three_brokers_print_their_addresses_and_ctrl_c_stops_everything(
        tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient
    from kazoo.client import KazooClient

    base = consecutive_free_ports(3)
    dev = DevCluster(tmp_path, "--brokers", "3", "--base-port", str(base))
    try:
        dev.wait_for(READY)
        text = dev.text()
        brokers = {int(m[1]): (m[2], int(m[3])) for m in _BROKER_LINE.finditer(text)}
        assert {i: addr for i, (addr, _pid) in brokers.items()} == {
            i: f"127.0.0.1:{base + i - 1}" for i in (1, 2, 3)}
        bootstrap = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        assert f"bootstrap.servers={bootstrap}" in text
        zk_match = _ZK_LINE.search(text)
        assert zk_match, text
        zk_address, zk_pid = zk_match[1], int(zk_match[2])

        zk = KazooClient(hosts=zk_address)
        zk.start(30)
        try:
            assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        finally:
            zk.stop()
            zk.close()
        # any one broker tells a client about all three
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{base + 1}"})
        metadata = admin.list_topics(timeout=30)
        assert {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()} == {
            i: f"127.0.0.1:{base + i - 1}" for i in (1, 2, 3)}

        pids = [zk_pid, *(pid for _addr, pid in brokers.values())]
        assert all(pid_alive(pid) for pid in pids)
        assert dev.stop(signal.SIGINT) == 0  # what Ctrl-C sends to the command
        assert "Stopped." in dev.text()
        assert not [pid for pid in pids if pid_alive(pid)]
        assert processes_under(dev.dir) == []
    finally:
        dev.close()


def test_an_existing_zookeeper_is_used_and_left_running(
        tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> None:
    from kazoo.client import KazooClient

    chroot = f"/dev-cluster-{uuid.uuid4().hex[:8]}"
    dev = DevCluster(tmp_path, "--brokers", "2", "--zookeeper", zookeeper.connect(chroot))
    try:
        dev.wait_for(READY)
        assert f"ZooKeeper   {zookeeper.connect(chroot)}   (already running)" in dev.text()
        assert not (dev.dir / "zookeeper").exists()
        zk = KazooClient(hosts=zookeeper.connect_string)
        zk.start(30)
        try:
            assert sorted(zk.get_children(f"{chroot}/brokers/ids")) == ["1", "2"]
        finally:
            zk.stop()
            zk.close()
        assert dev.stop(signal.SIGTERM) == 0
        assert zookeeper.nodes[0].mode() == "standalone"
        assert processes_under(dev.dir) == []
    finally:
        dev.close()


def test_running_it_again_on_the_same_directory_brings_the_same_cluster_back(
        tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, TopicPartition

    def cluster_ids(dev: DevCluster) -> set[str]:
        return {m[1] for i in (1, 2) for m in re.finditer(
            r"started \(cluster id ([^)]+)\)",
            (dev.dir / f"broker-{i}" / "broker.log").read_text())}

    first = DevCluster(tmp_path, "--brokers", "2")
    try:
        first.wait_for(READY)
        bootstrap = re.search(r"bootstrap.servers=(\S+)", first.text())[1]  # type: ignore[index]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("kept", 2, 1)])["kept"].result(60)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(10):
            producer.produce("kept", f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        [cluster_id] = cluster_ids(first)
        assert first.stop(signal.SIGINT) == 0
    finally:
        first.close()

    again = DevCluster(tmp_path, "--brokers", "2")  # same --dir, new free ports
    try:
        again.wait_for(READY)
        assert cluster_ids(again) == {cluster_id}
        bootstrap = re.search(r"bootstrap.servers=(\S+)", again.text())[1]  # type: ignore[index]
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                 consumer_timeout_ms=3000)
        parts = [TopicPartition("kept", p) for p in (0, 1)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        values = sorted(msg.value.decode() for msg in consumer)
        consumer.close()
        assert values == sorted(f"v{i}" for i in range(10))
        assert again.stop(signal.SIGTERM) == 0
    finally:
        again.close()
