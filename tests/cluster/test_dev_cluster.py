"""``moldau dev-cluster``: one command starts ZooKeeper and N brokers, prints where they are,
and leaves nothing running after Ctrl-C or SIGTERM. Run as a user runs it (a subprocess);
what is running is checked by pid and by /proc, never assumed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from moldau.cli.main import main
from moldau.devtools import zookeeper as zkmod

from .devcluster import DevCluster, brokers_started, processes_under


@pytest.mark.parametrize(("args", "message"), [
    (["--brokers", "0"], "--brokers 0: a cluster needs at least one broker"),
    (["--brokers", "3", "--base-port", "65534"], "--base-port 65534: brokers 1..3 need ports"),
    (["--override", "num.partitions"], "invalid --override 'num.partitions': expected"),
])
def test_bad_options_are_named(tmp_path: Path, args: list[str], message: str) -> None:
    run = subprocess.run([sys.executable, "-m", "moldau.cli.main", "dev-cluster", "--dir",
                          str(tmp_path / "dc"), *args], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    assert message in run.stderr
    assert not (tmp_path / "dc").exists()


def test_missing_zookeeper_says_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(zkmod, "ZOOKEEPER_JAR", tmp_path / "zookeeper.jar")
    assert main(["dev-cluster", "--dir", str(tmp_path / "dc")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'zookeeper.jar'} missing" in err
    assert "apt-get install -y zookeeper" in err
    assert not (tmp_path / "dc").exists()


def test_sigterm_while_starting_stops_every_process(tmp_path: Path) -> None:
    """SIGTERM as soon as the brokers run (registered or not): the command stops the
    brokers and ZooKeeper by pid and exits 0; no process naming its directory is left."""
    dev = DevCluster(tmp_path, "--brokers", "2")
    try:
        deadline = time.monotonic() + 180
        while not brokers_started(dev.dir, 2):
            assert dev.proc.poll() is None, dev.text()
            assert time.monotonic() < deadline, dev.text()
            time.sleep(0.1)
        running = processes_under(dev.dir)
        assert sum("QuorumPeerMain" in cmd for _pid, cmd in running) == 1
        assert sum(" serve --config " in cmd for _pid, cmd in running) == 2
        assert dev.stop(signal.SIGTERM) == 0
        assert "SIGTERM: stopping the brokers, then ZooKeeper" in dev.text()
        assert processes_under(dev.dir) == []
        assert (dev.dir / "zookeeper" / "zk-1" / "data" / "version-2").is_dir()
        for i in (1, 2):
            assert "shut down completed" in (dev.dir / f"broker-{i}" / "broker.log").read_text()
    finally:
        dev.close()


def test_an_unreachable_zookeeper_is_reported_with_the_brokers_own_words(
        tmp_path: Path) -> None:
    from moldau.devtools.processes import closed_port

    started = time.monotonic()
    with closed_port() as port:
        run = subprocess.run(
            [sys.executable, "-m", "moldau.cli.main", "dev-cluster", "--brokers", "2",
             "--dir", str(tmp_path / "dc"), "--zookeeper", f"127.0.0.1:{port}",
             "--override", "zookeeper.connection.timeout.ms=2000"],
            capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert "Timed out waiting for connection to ZooKeeper after 2000 ms" in run.stderr
    assert f"zookeeper.connect=127.0.0.1:{port}" in run.stderr
    assert processes_under(tmp_path / "dc") == []
    # stopping does not wait on the ZooKeeper that could not be reached (it used to, twice)
    assert time.monotonic() - started < 45
