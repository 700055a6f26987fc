"""moldau.devtools / moldau.testing.cluster: how brokers of a local cluster are configured and
started, checked on the processes themselves (their environment, files, logs and pids)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from moldau.broker.config.loader import env_to_key, load_config
from moldau.devtools.brokers import BrokerNode, BrokerSpec, key_to_env, properties_text
from moldau.devtools.processes import free_ports, pid_alive
from moldau.devtools.zookeeper import ZooKeeperEnsemble
from moldau.protocol import properties
from moldau.testing.cluster import TEST_DEFAULTS, seed003_specs

from .conftest import ClusterFactory


@pytest.mark.parametrize("key", ["advertised.listeners", "broker.id", "log.dirs",
                                 "listener.security.protocol.map", "zookeeper.connect",
                                 "offsets.topic.replication.factor", "a_b-c.d"])
def test_key_to_env_is_the_inverse_of_the_docker_mapping(key: str) -> None:
    assert env_to_key(key_to_env(key)) == key
    assert key_to_env("advertised.listeners") == "KAFKA_ADVERTISED_LISTENERS"


def test_properties_files_are_plain_to_read_and_load_back_exactly() -> None:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:9092,TEXT://127.0.0.1:9099",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,TEXT:PLAINTEXT",
                "zookeeper.connect": "127.0.0.1:2181/moldau", "odd": " x\\y#", "empty": ""}
    text = properties_text(settings)
    assert "listeners=PLAINTEXT://127.0.0.1:9092,TEXT://127.0.0.1:9099\n" in text
    assert "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,TEXT:PLAINTEXT\n" in text
    assert properties.parse(text) == settings


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_env_style_broker_runs_from_seed003_variables_only(
        zookeeper: ZooKeeperEnsemble, tmp_path: Path) -> None:
    """Seed 003 starts Kafka with ``docker run -e KAFKA_...``: no server.properties at all.
    The child gets exactly those variables, no ``--config``, and serves on the ports they
    name."""
    [spec] = seed003_specs(1)
    node = BrokerNode(spec, tmp_path, zookeeper.connect("/env-style"), style="env",
                      defaults=TEST_DEFAULTS, isolate=True)
    node.assign_ports(free_ports(2))
    node.start(60)
    try:
        assert node.pid is not None
        env = _environ(node.pid)
        plain, host = node.ports["PLAINTEXT"], node.ports["CONNECTIONS_FROM_HOST"]
        endpoints = (f"PLAINTEXT://127.0.0.1:{plain},"
                     f"CONNECTIONS_FROM_HOST://127.0.0.1:{host}")
        assert env["KAFKA_BROKER_ID"] == "1"
        assert env["KAFKA_ZOOKEEPER_CONNECT"] == zookeeper.connect("/env-style")
        assert env["KAFKA_LISTENERS"] == endpoints
        assert env["KAFKA_ADVERTISED_LISTENERS"] == endpoints
        assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == (
            "PLAINTEXT:PLAINTEXT,CONNECTIONS_FROM_HOST:PLAINTEXT")
        assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "PLAINTEXT"
        assert "--config" not in Path(f"/proc/{node.pid}/cmdline").read_bytes().decode()
        assert not node.config_path.exists()
        assert node.bound == {"PLAINTEXT": plain, "CONNECTIONS_FROM_HOST": host}
        # the loader reads the same variables into the same keys
        config = load_config(None, environ={k: v for k, v in env.items()
                                            if k.startswith("KAFKA_")})
        assert config.unknown == {}
        assert config["broker.id"] == 1 and config.cluster_mode
    finally:
        pid = node.pid
        assert node.stop(30) == 0
        assert pid is not None and not pid_alive(pid)


def test_properties_style_ignores_kafka_variables_of_the_callers_shell(
        zookeeper: ZooKeeperEnsemble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BROKER_ID", "77")
    spec = BrokerSpec(broker_id=4, rack="r1")
    node = BrokerNode(spec, tmp_path, zookeeper.connect("/props-style"),
                      defaults=TEST_DEFAULTS, isolate=True)
    node.assign_ports(free_ports(1))
    node.start(60)
    try:
        assert node.pid is not None
        assert "KAFKA_BROKER_ID" not in _environ(node.pid)
        config = load_config(node.config_path, environ={})
        assert config.unknown == {}
        assert config["broker.id"] == 4 and config["broker.rack"] == "r1"
        assert config.log_dirs == [tmp_path / "broker-4" / "data"]
        assert "[MoldauServer id=4]" in node.log_text()
    finally:
        assert node.stop(30) == 0


def test_a_paused_broker_is_still_stopped_by_sigterm(zookeeper: ZooKeeperEnsemble,
                                                     tmp_path: Path) -> None:
    node = BrokerNode(BrokerSpec(broker_id=5), tmp_path, zookeeper.connect("/paused"),
                      defaults=TEST_DEFAULTS, isolate=True)
    node.assign_ports(free_ports(1))
    node.start(60)
    node.signal(signal.SIGSTOP)
    started = time.monotonic()
    assert node.stop(30) == 0
    assert time.monotonic() - started < 30  # SIGCONT came with the SIGTERM, no kill -9


def test_children_die_with_the_process_that_started_them(tmp_path: Path) -> None:
    """``isolate``: the child leaves our process group (Ctrl-C is the parent's to handle),
    and Linux SIGTERMs it when its parent dies, so an interrupted run leaves no orphan."""
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from moldau.devtools.zookeeper import ZooKeeperEnsemble\n"
        "zk = ZooKeeperEnsemble(1, sys.argv[1], isolate=True).start()\n"
        "print(zk.nodes[0].pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert os.getpgid(child) != os.getpgid(parent.pid)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while pid_alive(child):
            assert time.monotonic() < deadline, f"ZooKeeper {child} outlived its parent"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child and pid_alive(child):
            os.kill(child, signal.SIGKILL)


def test_starting_again_right_after_a_crash_waits_out_the_old_registration(
        cluster_factory: ClusterFactory) -> None:
    """A broker refuses an id that another ZooKeeper session still holds (its own previous
    life, killed a moment ago; Kafka does the same). Starting the cluster again on the same
    directory (``moldau dev-cluster`` run again) waits for that registration to expire
    instead of failing."""
    cluster = cluster_factory(1)
    first = cluster.broker(1)
    cluster.kill9(1)
    assert cluster.registered_ids() == [1]  # the dead session still holds it
    started = time.monotonic()
    cluster.start()
    assert cluster.registered_ids() == [1]
    assert cluster.broker(1) is not first and cluster.broker(1).running()
    log = cluster.broker(1).log_text()
    assert "broker.id 1 is already registered by a live broker" in log
    assert time.monotonic() - started < cluster.session_timeout_s + 30
