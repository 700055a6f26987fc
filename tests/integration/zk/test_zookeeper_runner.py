"""moldau.testing.zookeeper: real ZooKeeper processes, standalone and ensembles, on free ports
of 127.0.0.1, stopped by pid."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from moldau.devtools import zookeeper as zkmod
from moldau.testing.zookeeper import ZooKeeperEnsemble, ZooKeeperUnavailable, four_letter_word


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_standalone_serves_on_loopback_and_logs_to_its_own_dir(
        zookeeper: ZooKeeperEnsemble) -> None:
    [node] = zookeeper.nodes
    assert four_letter_word(node.client_port, "ruok") == "imok"
    assert node.mode() == "standalone"
    assert zookeeper.leader() is node
    assert f"clientPort={node.client_port}" in four_letter_word(node.client_port, "conf")
    assert (node.data_dir / "myid").read_text().strip() == "1"
    # its own log4j config: ZooKeeper's log is in the node's directory (not /var/log), and
    # says the client port is bound to loopback only
    assert f"binding to port /127.0.0.1:{node.client_port}" in node.log_path.read_text()
    assert "admin.enableServer=false" in node.config_path.read_text()


def test_ensemble_elects_one_leader_survives_a_kill_and_takes_the_node_back(
        zookeeper_ensemble: ZooKeeperEnsemble) -> None:
    ensemble = zookeeper_ensemble
    modes = sorted(node.mode() or "down" for node in ensemble.nodes)
    assert modes == ["follower", "follower", "leader"]
    ports = {p for n in ensemble.nodes for p in (n.client_port, n.quorum_port, n.election_port)}
    assert len(ports) == 9
    assert ensemble.connect_string.count(",") == 2

    leader = ensemble.leader()
    pid = leader.pid
    assert pid is not None
    ensemble.kill_node(leader)
    assert not _pid_alive(pid)
    # the two survivors elect a leader and the other follows it (it answers srvr only once
    # it has synced with the new leader)
    deadline = time.monotonic() + 30
    while True:
        survivors = sorted(str(n.mode()) for n in ensemble.nodes if n is not leader)
        if survivors == ["follower", "leader"]:
            break
        assert time.monotonic() < deadline, f"no new leader and follower: {survivors}"
        time.sleep(0.05)

    ensemble.start_node(leader)
    assert leader.mode() == "follower"
    assert leader.pid != pid


def test_stop_ends_each_process_by_pid_and_close_removes_the_temporary_dir() -> None:
    ensemble = ZooKeeperEnsemble(1).start()
    [node] = ensemble.nodes
    pid, base = node.pid, ensemble.base_dir
    assert pid is not None and _pid_alive(pid)
    ensemble.close()
    assert not _pid_alive(pid)
    assert not base.exists()
    with pytest.raises(OSError):
        four_letter_word(node.client_port, "ruok", timeout=1)


def test_restart_keeps_the_data(tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    with ZooKeeperEnsemble(1, tmp_path) as ensemble:
        client = KazooClient(hosts=ensemble.connect_string)
        client.start(30)
        client.create("/kept", b"yes")
        client.stop()
        client.close()
        [node] = ensemble.nodes
        ensemble.stop_node(node)
        ensemble.start_node(node)
        client = KazooClient(hosts=ensemble.connect_string)
        client.start(30)
        try:
            assert client.get("/kept")[0] == b"yes"
        finally:
            client.stop()
            client.close()
    assert (tmp_path / "zk-1" / "data" / "version-2").is_dir()


def test_missing_installation_is_named_with_the_fix(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setattr(zkmod, "ZOOKEEPER_JAR", tmp_path / "zookeeper.jar")
    with pytest.raises(ZooKeeperUnavailable, match=r"zookeeper.jar.*apt-get install -y zookeeper"):
        ZooKeeperEnsemble(1, tmp_path / "zk").start()
    assert not zkmod.installed()


def test_a_node_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    ensemble = ZooKeeperEnsemble(1, tmp_path, jvm_options=["-Xmx1k"])
    with pytest.raises(ZooKeeperUnavailable, match=r"exited with \d+ while starting"):
        ensemble.start(timeout=30)
    assert all(node.proc is None for node in ensemble.nodes)
