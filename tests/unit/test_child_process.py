"""The process slot shared by the local cluster's nodes (:class:`moldau.devtools.processes.
ChildProcess`: brokers and ZooKeeper servers): stop by pid with a deadline, kill -9, forget."""

from __future__ import annotations

import signal
import subprocess
import sys

from moldau.devtools.brokers import BrokerNode
from moldau.devtools.processes import ChildProcess
from moldau.devtools.zookeeper import ZooKeeperNode

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
STUBBORN = [sys.executable, "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)"]


class Slot(ChildProcess):
    def __init__(self, command: list[str] | None = None) -> None:
        self.proc = (subprocess.Popen(command, stdout=subprocess.PIPE)
                     if command is not None else None)


def test_a_slot_without_a_process_is_not_running() -> None:
    slot = Slot()
    assert (slot.pid, slot.running(), slot.wait_stopped(1)) == (None, False, None)
    slot.kill()  # nothing to do


def test_wait_stopped_sends_sigterm_and_forgets_the_process() -> None:
    slot = Slot(SLEEPER)
    pid = slot.pid
    assert pid is not None and slot.running()
    assert slot.wait_stopped(30) == -signal.SIGTERM
    assert (slot.proc, slot.pid, slot.running()) == (None, None, False)


def test_wait_stopped_kills_what_ignores_sigterm_after_the_timeout() -> None:
    slot = Slot(STUBBORN)
    assert slot.proc is not None and slot.proc.stdout is not None
    assert slot.proc.stdout.readline() == b"ready\n"  # its SIGTERM handler is installed
    assert slot.wait_stopped(0.5) == -signal.SIGKILL


def test_kill_is_kill_9() -> None:
    slot = Slot(STUBBORN)
    proc = slot.proc
    assert proc is not None and proc.stdout is not None
    proc.stdout.readline()
    slot.kill()
    assert (proc.returncode, slot.proc) == (-signal.SIGKILL, None)


def test_brokers_and_zookeeper_servers_are_such_slots() -> None:
    assert issubclass(BrokerNode, ChildProcess) and issubclass(ZooKeeperNode, ChildProcess)


def test_the_test_runners_are_such_slots_too() -> None:
    from moldau.testing.proxy import ProxyProcess
    from moldau.testing.runner import BrokerProcess

    assert issubclass(BrokerProcess, ChildProcess) and issubclass(ProxyProcess, ChildProcess)
    assert BrokerProcess().stop() == 0  # never started: nothing to stop
