"""Consumer-group test harness: group consumers of every real client as separate processes
(so a test can kill -9 one), and the checks acceptance asks for.

Each worker writes one JSON line per event to its own file, flushed as it happens:
``{"e": "assign"|"revoke", "p": [partitions]}``, ``{"e": "rec", "p": 0, "o": 12}``,
``{"e": "commit", "p": 0, "o": 13}`` (sync commits, after the broker acknowledged them) and
``{"e": "ready"}``. The Python worker (``python groups_harness.py worker ...``) drives
confluent-kafka, kafka-python or aiokafka; tests/compat/js/group_worker.js drives kafkajs;
kcat's balanced consumer (``-G``) is parsed from its output.

Used by tests/integration/test_groups_clients.py and test_groups_commit_modes.py.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.testing.processes import kill, terminate
from moldau.testing.tail import complete_lines

REPO = Path(__file__).resolve().parents[2]
JS_DIR = REPO / "tests" / "compat" / "js"
PYTHON_CLIENTS = ("confluent", "kafka-python", "aiokafka")


# --- the worker (runs in its own process) -------------------------------------------------
class Emitter:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps({"e": event, "t": time.time(), **fields}) + "\n"
        os.write(self.fd, line.encode())


def _confluent_worker(args: argparse.Namespace, emit: Emitter) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "auto.offset.reset": "earliest", "enable.auto.commit": args.commit == "auto",
        "auto.commit.interval.ms": args.auto_commit_ms, "log_level": 3,
        "client.id": f"worker-{args.name}",
    }
    if args.protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": args.session_ms,
                     "heartbeat.interval.ms": args.heartbeat_ms})
        if args.assignor:
            conf["partition.assignment.strategy"] = args.assignor
    if args.instance:
        conf["group.instance.id"] = args.instance
    consumer = Consumer(conf)

    def assigned(_c: Any, parts: list[Any]) -> None:
        emit("assign", p=sorted(p.partition for p in parts))

    def revoked(_c: Any, parts: list[Any]) -> None:
        emit("revoke", p=sorted(p.partition for p in parts))

    consumer.subscribe([args.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    emit("ready")
    stop = _stop_flag()
    while not stop():
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        emit("rec", p=msg.partition(), o=msg.offset())
        time.sleep(args.delay_ms / 1000)
        if args.commit == "sync":
            try:
                consumer.commit(message=msg, asynchronous=False)
                emit("commit", p=msg.partition(), o=msg.offset() + 1)
            except KafkaException as exc:
                emit("commit_failed", p=msg.partition(), o=msg.offset() + 1, error=str(exc))
        elif args.commit == "async":
            consumer.commit(message=msg, asynchronous=True)
    consumer.close()


def _kafka_python_worker(args: argparse.Namespace, emit: Emitter) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata
    from kafka.errors import KafkaError

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
        enable_auto_commit=args.commit == "auto", auto_commit_interval_ms=args.auto_commit_ms,
        session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
        client_id=f"worker-{args.name}")

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
            emit("revoke", p=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
            emit("assign", p=sorted(tp.partition for tp in assigned))

    # kafka-python 3.0.12 bug: a leader that assigned without the topic's metadata rejoins once
    # the metadata arrives; if its poll() timer runs out while that rejoin is in flight, the
    # rejoin's own assignment refreshes the metadata snapshot, need_rejoin() turns False, and
    # the finished join is never completed: the member keeps no partitions and never
    # heartbeats again. A metadata update after subscribe() (topics() forces one) fills the
    # snapshot before the first join, so no such rejoin happens (docs/compatibility.md).
    consumer.subscribe([args.topic], listener=Listener())
    consumer.topics()
    emit("ready")
    stop = _stop_flag()
    while not stop():
        batches = consumer.poll(timeout_ms=100)
        for tp, messages in batches.items():
            for msg in messages:
                emit("rec", p=tp.partition, o=msg.offset)
                time.sleep(args.delay_ms / 1000)
                offsets = {tp: OffsetAndMetadata(msg.offset + 1, "", -1)}
                if args.commit == "sync":
                    try:
                        consumer.commit(offsets)
                        emit("commit", p=tp.partition, o=msg.offset + 1)
                    except KafkaError as exc:
                        emit("commit_failed", p=tp.partition, o=msg.offset + 1,
                             error=repr(exc))
                elif args.commit == "async":
                    consumer.commit_async(offsets)
    consumer.close()


def _aiokafka_worker(args: argparse.Namespace, emit: Emitter) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
            emit("revoke", p=sorted(tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
            emit("assign", p=sorted(tp.partition for tp in assigned))

    async def main() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group,
            auto_offset_reset="earliest", enable_auto_commit=args.commit == "auto",
            auto_commit_interval_ms=args.auto_commit_ms, session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=args.heartbeat_ms, client_id=f"worker-{args.name}")
        consumer.subscribe([args.topic], listener=Listener())
        await consumer.start()
        emit("ready")
        stop = _stop_flag()
        pending: set[asyncio.Task[Any]] = set()
        while not stop():
            batches = await consumer.getmany(timeout_ms=100)
            for tp, messages in batches.items():
                for msg in messages:
                    emit("rec", p=tp.partition, o=msg.offset)
                    await asyncio.sleep(args.delay_ms / 1000)
                    offsets = {TopicPartition(tp.topic, tp.partition): msg.offset + 1}
                    if args.commit == "sync":
                        try:
                            await consumer.commit(offsets)
                            emit("commit", p=tp.partition, o=msg.offset + 1)
                        except KafkaError as exc:
                            emit("commit_failed", p=tp.partition, o=msg.offset + 1,
                                 error=repr(exc))
                    elif args.commit == "async":
                        task = asyncio.ensure_future(consumer.commit(offsets))
                        pending.add(task)
                        task.add_done_callback(pending.discard)
        await consumer.stop()

    asyncio.run(main())


_STOP = False


def _stop_flag() -> Callable[[], bool]:
    def handler(*_: object) -> None:
        global _STOP
        _STOP = True

    signal.signal(signal.SIGTERM, handler)
    return lambda: _STOP


def worker_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=PYTHON_CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", default="w")
    parser.add_argument("--commit", choices=("sync", "async", "auto", "none"), default="sync")
    parser.add_argument("--auto-commit-ms", type=int, default=1000)
    parser.add_argument("--delay-ms", type=float, default=0)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--assignor", default="")
    parser.add_argument("--instance", default="", help="group.instance.id (confluent only)")
    args = parser.parse_args(argv)
    # The client library's own account of joins and assignments lands in the worker's
    # stderr file, which a failing test prints.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # SIGUSR1 prints every thread's stack: how to see where a hung client waits.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    emit = Emitter(args.out)
    {"confluent": _confluent_worker, "kafka-python": _kafka_python_worker,
     "aiokafka": _aiokafka_worker}[args.client](args, emit)


# --- the test side ---------------------------------------------------------------------
@dataclass
class Worker:
    """One group consumer process and what it reported."""

    name: str
    out: Path
    proc: subprocess.Popen[bytes]
    parse: Callable[[Worker], list[dict[str, Any]]] | None = None
    killed_at: float | None = None
    stderr_path: Path | None = None
    _cache: list[dict[str, Any]] = field(default_factory=list)

    def events(self) -> list[dict[str, Any]]:
        if self.parse is not None:
            return self.parse(self)
        # The worker is still writing: its last line may be half there.
        return [json.loads(line) for line in complete_lines(self.out) if line.strip()]

    def assignment(self) -> set[int]:
        """Partitions currently owned, replaying assign/revoke events."""
        owned: set[int] = set()
        for event in self.events():
            if event["e"] == "assign":
                owned |= set(event["p"])
            elif event["e"] == "revoke":
                owned -= set(event["p"])
        return owned

    def records(self) -> list[tuple[int, int]]:
        return [(e["p"], e["o"]) for e in self.events() if e["e"] == "rec"]

    def first_assignment_time(self) -> float | None:
        for event in self.events():
            if event["e"] == "assign" and event["p"]:
                return float(event["t"])
        return None

    def kill(self) -> None:
        """kill -9."""
        self.killed_at = time.time()
        kill(self.proc)

    def stop(self, timeout: float = 20) -> None:
        terminate(self.proc, timeout)

    def log(self) -> str:
        if self.stderr_path is not None and self.stderr_path.exists():
            return self.stderr_path.read_text(errors="replace")[-3000:]
        return ""


def start_worker(client: str, tmp: Path, name: str, bootstrap: str, group: str, topic: str,
                 *, commit: str = "sync", delay_ms: float = 0, session_ms: int = 6000,
                 heartbeat_ms: int = 1000, auto_commit_ms: int = 1000,
                 protocol: str = "classic", assignor: str = "", instance: str = "") -> Worker:
    out = tmp / f"{name}.jsonl"
    err = tmp / f"{name}.err"
    stderr = open(err, "wb")  # noqa: SIM115 - handed to the child
    if client in PYTHON_CLIENTS:
        cmd = [sys.executable, str(Path(__file__).resolve()), "worker", "--client", client,
               "--bootstrap", bootstrap, "--group", group, "--topic", topic,
               "--out", str(out), "--name", name, "--commit", commit,
               "--delay-ms", str(delay_ms), "--session-ms", str(session_ms),
               "--heartbeat-ms", str(heartbeat_ms), "--auto-commit-ms", str(auto_commit_ms),
               "--protocol", protocol, "--assignor", assignor, "--instance", instance]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO)
        worker = Worker(name, out, proc, stderr_path=err)
    elif client == "kafkajs":
        script = JS_DIR / "group_worker.js"
        config = {"bootstrap": bootstrap, "group": group, "topic": topic, "out": str(out),
                  "name": name, "commit": commit, "delayMs": delay_ms,
                  "sessionMs": session_ms, "heartbeatMs": heartbeat_ms,
                  "autoCommitMs": auto_commit_ms}
        proc = subprocess.Popen(["node", str(script), json.dumps(config)],
                                stdout=subprocess.DEVNULL, stderr=stderr, cwd=JS_DIR)
        worker = Worker(name, out, proc, stderr_path=err)
    elif client == "kcat":
        stdout = open(out, "wb")  # noqa: SIM115 - handed to the child
        # kcat hands -X names that are also (legacy) topic properties to the topic config,
        # so auto.commit.interval.ms cannot be set: it auto-commits every 5 s (the default).
        cmd = ["kcat", "-b", bootstrap, "-G", group, topic, "-u", "-f", "rec %p %o\\n",
               "-X", f"session.timeout.ms={session_ms}",
               "-X", f"heartbeat.interval.ms={heartbeat_ms}",
               "-X", "auto.offset.reset=earliest", "-X", f"client.id=worker-{name}"]
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
        stdout.close()
        worker = Worker(name, out, proc, parse=_parse_kcat, stderr_path=err)
    else:
        raise ValueError(client)
    stderr.close()
    return worker


def _parse_kcat(worker: Worker) -> list[dict[str, Any]]:
    """kcat -G: records on stdout ("rec P O"), rebalances on stderr ("% Group ... rebalanced
    ... assigned: topic [0], topic [3]" / "revoked: ...")."""
    events: list[dict[str, Any]] = []
    if worker.stderr_path is not None:
        for line in complete_lines(worker.stderr_path):
            for kind in ("assigned", "revoked"):
                marker = f"{kind}: "
                if marker in line:
                    parts = [int(x.split("]")[0]) for x in line.split(marker, 1)[1].split("[")[1:]]
                    events.append({"e": "assign" if kind == "assigned" else "revoke",
                                   "p": parts, "t": 0.0})
    for line in complete_lines(worker.out):
        bits = line.split()
        if len(bits) == 3 and bits[0] == "rec":
            events.append({"e": "rec", "p": int(bits[1]), "o": int(bits[2]), "t": 0.0})
    return events


def wait_until(condition: Callable[[], bool], timeout: float, what: str,
               workers: Iterable[Worker] = ()) -> float:
    """Poll ``condition``; returns the seconds it took, fails with the workers' logs."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        time.sleep(0.05)
    logs = "\n".join(f"--- {w.name} (exit {w.proc.poll()}):\n{w.log()}" for w in workers)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{logs}")


def hung_up_connections(port: int) -> int:
    """TCP connections to local ``port`` whose client has hung up while the server has not yet
    closed its side (CLOSE_WAIT in /proc/net/tcp).

    After a kill -9 the kernel closes the dead client's sockets at once; what it had sent (a
    commit in flight) sits in the broker's receive buffer until the broker reads it and then
    the end of file, and closes. So once no such connection is left, everything the killed
    member sent has been handled: the event to wait for instead of a pause.
    """
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "08":  # CLOSE_WAIT
            count += 1
    return count


def wait_for_hangups(port: int, workers: Iterable[Worker] = (), timeout: float = 30) -> None:
    """Wait until the broker on ``port`` has handled every connection a client closed (see
    :func:`hung_up_connections`)."""
    wait_until(lambda: hung_up_connections(port) == 0, timeout,
               "the broker to finish the connections of the killed member", workers)


def node_available() -> bool:
    return shutil.which("node") is not None and (JS_DIR / "node_modules" / "kafkajs").exists()


# --- checks ------------------------------------------------------------------------------
def duplicates(workers: Iterable[Worker]) -> dict[tuple[int, int], int]:
    counts = Counter(r for w in workers for r in w.records())
    return {r: n for r, n in counts.items() if n > 1}


def check_at_least_once(workers: list[Worker], expected: set[tuple[int, int]]) -> None:
    consumed = {r for w in workers for r in w.records()}
    missing = expected - consumed
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}"


def check_duplicates_only_after_last_commit(workers: list[Worker],
                                            committed_at_kill: dict[int, int]) -> list[Any]:
    """Records consumed twice must belong to the killed member's partitions at offsets at or
    after its last commit; returns the duplicates found."""
    dups = duplicates(workers)
    bad = [(p, o) for (p, o) in dups if p not in committed_at_kill or o < committed_at_kill[p]]
    assert not bad, (f"records consumed twice outside the killed member's uncommitted tail: "
                     f"{sorted(bad)[:10]} (last commits {committed_at_kill})")
    return sorted(dups)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker_main(sys.argv[2:])
