"""Exactly-once consume-transform-produce across kill -9 (design14 §11.2, acceptance 2).

Three workers (tests/faults/txn/worker.py) share one group and transform an input topic into
an output topic, one transaction per poll with the consumed offsets sent in it. While input
keeps arriving, a random worker is killed with SIGKILL right after it printed ``txn-open``
(its transaction's records are in the log, not committed: the output's LSO is below its high
watermark), five times, and restarted with the same ``transactional.id``, which fences the
dead instance and aborts its transaction. The output read with read_committed must then hold
transform(input) exactly once per input record: no loss, no duplicate.
"""

from __future__ import annotations

import collections
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.client import NewTopic, SyncAdminClient, SyncConsumer, SyncProducer, TopicPartition
from moldau.testing.runner import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
KILLS = 5
PARTITIONS = 6
KILL_PHASE_S = 90
SETTINGS = {
    "num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
    "transaction.state.log.num.partitions": 5,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}


class Worker:
    """One worker process; its stdout lines go to a queue (a reader thread, whole lines)."""

    def __init__(self, client: str, bootstrap: str, source: str, out: str, group: str,
                 n: int) -> None:
        self.n = n
        self.lines: queue.Queue[str] = queue.Queue()
        self.history: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.txn.worker", client, bootstrap, source, out,
             group, str(n)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
            self.history.append(line.strip())
        self.lines.put("<exit>")

    def wait_for(self, prefix: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if line == "<exit>":
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"worker {self.n} exited: {err[-3000:]}")
            if line.startswith(prefix):
                return True
        return False

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def describe(self) -> str:
        """The worker's last lines and error output, for a failure message."""
        err = ""
        if self.proc.poll() is not None and self.proc.stderr is not None:
            err = self.proc.stderr.read()[-1500:]
        return f"worker {self.n}: {self.history[-6:]} {err}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(settings=dict(SETTINGS)) as b:
        yield b


def _feed(bootstrap: str, source: str, stop: threading.Event, sent: list[bytes]) -> None:
    """Input keeps arriving (about 100 records a second) until ``stop``."""
    with SyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        i = 0
        while not stop.is_set():
            for _ in range(10):
                value = f"in-{i}".encode()
                p.send(source, value, f"k{i}", partition=i % PARTITIONS)
                sent.append(value)
                i += 1
            p.flush()
            time.sleep(0.1)


def _lso_below_hw(bootstrap: str, out: str) -> int:
    """1 when some output partition's last stable offset is below its high watermark: the
    killed worker's transaction is still open (not yet aborted by its successor)."""
    specs = {TopicPartition(out, p): -1 for p in range(PARTITIONS)}
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        hw = admin.list_offsets(specs)
        lso = admin.list_offsets(specs, isolation_level="read_committed")
    return int(any(lso[tp].offset < hw[tp].offset for tp in specs))


def _read_committed(bootstrap: str, out: str, want: int, timeout: float) -> list[bytes]:
    got: list[bytes] = []
    with SyncConsumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                       "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(out, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        idle_until = None
        while time.monotonic() < deadline:
            batch = c.poll(0.5)
            got += [r.value or b"" for r in batch]
            if len(got) >= want:
                # Keep reading a little: a duplicate would arrive after the count is reached.
                idle_until = idle_until or time.monotonic() + 2
                if time.monotonic() > idle_until:
                    break
    return got


@pytest.mark.parametrize("client", ["confluent_kafka", "moldau"])
def test_each_input_exactly_once_across_kill9(broker: BrokerProcess, client: str) -> None:
    bootstrap = broker.bootstrap
    tag = uuid.uuid4().hex[:6]
    source, out, group = f"ctp-in-{tag}", f"ctp-out-{tag}", f"ctp-{tag}"
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(source, PARTITIONS, 1), NewTopic(out, PARTITIONS, 1)])
    workers = {n: Worker(client, bootstrap, source, out, group, n) for n in range(WORKERS)}
    stop = threading.Event()
    sent: list[bytes] = []
    feeder = threading.Thread(target=_feed, args=(bootstrap, source, stop, sent), daemon=True)
    rng = random.Random(14)
    kills = held = 0
    try:
        for w in workers.values():
            assert w.wait_for("ready", 60), f"worker {w.n} did not start"
        feeder.start()
        deadline = time.monotonic() + KILL_PHASE_S
        while kills < KILLS:
            assert time.monotonic() < deadline, (
                f"only {kills} of {KILLS} kills within {KILL_PHASE_S} s: no worker opened a "
                f"transaction; {len(sent)} inputs sent")
            n = rng.randrange(WORKERS)
            victim = workers[n]
            if not victim.wait_for("txn-open", 10):
                continue  # this one has no partitions at the moment: pick another
            victim.kill()
            kills += 1
            held += _lso_below_hw(bootstrap, out)
            workers[n] = Worker(client, bootstrap, source, out, group, n)
            assert workers[n].wait_for("ready", 60), f"worker {n} did not restart"
        stop.set()
        feeder.join(30)
        got = _read_committed(bootstrap, out, len(sent), timeout=60)
    finally:
        stop.set()
        for w in workers.values():
            w.stop()
        states = "\n".join(w.describe() for w in workers.values())
    want = collections.Counter(b"out-" + v for v in sent)
    have = collections.Counter(got)
    missing = sum((want - have).values())
    duplicates = sum((have - want).values())
    assert kills == KILLS
    assert held >= 1, "no kill landed inside an open transaction (output LSO = HW each time)"
    assert (missing, duplicates) == (0, 0), (
        f"{len(sent)} inputs, {len(got)} outputs: {missing} missing, {duplicates} duplicates "
        f"or unexpected; e.g. missing {list(want - have)[:5]}, "
        f"extra {list(have - want)[:5]}\n{states}")
