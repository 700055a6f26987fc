"""Acceptance 5 (local mode): the exactly-once sink across a kill -9 of the whole driver.

``moldau pipeline tag`` runs as a subprocess in local mode (driver, executor and Python
workers on this machine) with small micro-batches. It is killed with SIGKILL — the driver's
JVM, its Python workers and all — at a moment when the target topic already holds records of
a micro-batch that the checkpoint does not count as committed: exactly the moment at which
Spark's Kafka sink (at-least-once) writes records twice, because the restart re-runs that
batch. The pipeline is then restarted from the checkpoint (in this process's shared Spark
session) and runs to the end.

* exactly-once (the default): read with read_committed, the target holds one tag record per
  source record — count equal, each source offset once — also through the moldau source's
  ``kafka.isolation.level=read_committed``.
* at-least-once (the difference test, Spark's Kafka connector's guarantee): the same crash
  gives duplicates > 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from moldau.client import NewTopic, SyncAdminClient, SyncConsumer
from moldau.spark.tag_pipeline import TagPipeline, run
from moldau.testing.runner import BrokerProcess
from moldau.testing.tail import complete_text

from .pipeline_helpers import (
    check_tags,
    pipeline_command,
    produce_events,
    start_standalone,
    write_reference_csv,
)

EVENTS = 120
PER_BATCH = 20


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (PySpark's worker daemon sits in its own process group)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    todo.append(child)
    return found


def _kill_all(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the pipeline process and everything it started (a crash of the driver)."""
    pids = [proc.pid, *_descendants(proc.pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(30)


def _committed_records(checkpoint: Path) -> int | None:
    """Source records of the micro-batches the checkpoint (or the at-least-once sink's
    marker) counts as committed; None while a file is being written."""
    commits = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")]
    last = max(commits, default=-1)
    marker = checkpoint / "moldau-sink"
    try:
        if marker.exists():
            last = max(last, int(json.loads(marker.read_text())["batchId"]))
        if last < 0:
            return 0
        # Spark writes each log file to a temporary name and renames it: a file that exists
        # is complete (and its last line has no newline, so complete_text would drop it).
        lines = (checkpoint / "offsets" / str(last)).read_text().splitlines()
        offsets = json.loads(lines[2])
    except (OSError, ValueError, KeyError, IndexError):
        return None
    return sum(int(o) for parts in offsets.values() for o in parts.values())


def _open_transaction(admin: SyncAdminClient, tps: list[tuple[str, int]]) -> bool:
    """True when a partition's last stable offset is below its high watermark."""
    latest = {tp: -1 for tp in tps}
    stable = admin.list_offsets(latest, isolation_level="read_committed")
    high = admin.list_offsets(latest, isolation_level="read_uncommitted")
    return any(stable[tp].offset < high[tp].offset for tp in stable)


def _crash_mid_batch(command: list[str], target: str, bootstrap: str, checkpoint: Path,
                     logs: Path, *, prefer_open_txn: bool,
                     timeout: float = 240) -> tuple[int, int, bool]:
    """Run the pipeline until the target holds records the checkpoint does not count as
    committed, then kill it: with ``prefer_open_txn`` at a moment a transaction is open
    (HW > LSO) if one is seen before half the records are committed. Returns (records seen,
    records committed, whether a transaction was open) at the kill."""
    tail = SyncConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                         "isolation.level": "read_uncommitted"})
    tps = [(target, p) for p in tail.partitions_for(target)]
    tail.assign(tps)
    admin = SyncAdminClient({"bootstrap.servers": bootstrap})
    seen = 0
    with open(logs, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen += len(tail.poll(0.02))
            committed = _committed_records(checkpoint)
            open_txn = prefer_open_txn and _open_transaction(admin, tps)
            mid_batch = committed is not None and seen > committed
            if open_txn or (mid_batch and (
                    not prefer_open_txn or (committed or 0) >= EVENTS // 2)):
                _kill_all(proc)
                return seen, committed or 0, open_txn
            assert proc.poll() is None, (
                f"the pipeline ended (rc {proc.returncode}) before it could be killed "
                f"mid-batch:\n{complete_text(logs)[-4000:]}")
        raise AssertionError(f"no micro-batch was caught mid-way in {timeout}s "
                             f"(seen {seen}):\n{complete_text(logs)[-4000:]}")
    finally:
        if proc.poll() is None:
            _kill_all(proc)
        tail.close()
        admin.close()


def _read_committed(bootstrap: str, topic: str, expected: int,
                    timeout: float = 60) -> list[dict[str, Any]]:
    consumer = SyncConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed"})
    consumer.assign([(topic, p) for p in consumer.partitions_for(topic)])
    tags: list[dict[str, Any]] = []
    deadline, quiet_until = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        for r in consumer.poll(0.3):
            tag = json.loads(r.value)
            tag["_key"] = r.key
            tags.append(tag)
        if len(tags) >= expected:
            quiet_until = quiet_until or time.monotonic() + 1.5  # duplicates, if any
            if time.monotonic() >= quiet_until:
                break
    consumer.close()
    return tags


def _crash_and_restart(spark: Any, broker: BrokerProcess, tmp_path: Path,
                       guarantee: str
                       ) -> tuple[str, str, list[dict[str, Any]], tuple[int, int, bool]]:
    source, target = f"events-{uuid.uuid4().hex[:8]}", f"tags-{uuid.uuid4().hex[:8]}"
    admin = SyncAdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(source, 2, 1), NewTopic(target, 2, 1)])
    admin.close()
    produce_events(broker.bootstrap, source, 0, EVENTS)
    csv = write_reference_csv(tmp_path / "branch.csv")
    checkpoint = tmp_path / "ck"
    more = ["--reference", str(csv), "--master", "local[2]",
            "--trigger", "processing-time=100ms",
            "--max-offsets-per-trigger", str(PER_BATCH),
            "--delivery-guarantee", guarantee,
            "--target-option", "kafka.transaction.timeout.ms=20000"]
    command = pipeline_command(broker.bootstrap, source, broker.bootstrap, target,
                               checkpoint, *more)
    at_kill = _crash_mid_batch(command, target, broker.bootstrap, checkpoint,
                               tmp_path / "crashed-run.log",
                               prefer_open_txn=guarantee == "exactly-once")
    # Restart from the checkpoint and run to the end of the source.
    pipeline = TagPipeline(
        source_bootstrap=broker.bootstrap, source_topic=source,
        target_bootstrap=broker.bootstrap, target_topic=target, checkpoint=str(checkpoint),
        reference=str(csv), max_offsets_per_trigger=PER_BATCH * 5,
        delivery_guarantee=guarantee,
        target_options={"kafka.transaction.timeout.ms": "20000"})
    run(spark, pipeline)
    return source, target, _read_committed(broker.bootstrap, target, EVENTS), at_kill


def test_source_honours_kafka_isolation_level(spark: Any, broker: BrokerProcess,
                                              new_topic: Any) -> None:
    """read_committed: committed records only, up to the last stable offset (an open
    transaction at the end is not waited for); read_uncommitted: every data record."""
    from confluent_kafka import Producer

    topic = new_topic(1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1,
                         "transactional.id": f"iso-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    for n, commit in enumerate([True, False, True, True, False, True]):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, f"{'c' if commit else 'a'}{n}-{i}".encode(), partition=0)
        producer.flush(30)  # librdkafka's abort drops queued records: put them in the log
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.flush(30)  # an open transaction: the LSO stays at its first offset

    def read(isolation: str) -> list[str]:
        return [r.value.decode() for r in (
            spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).option("kafka.isolation.level", isolation)
            .load().orderBy("offset").collect())]

    committed = read("read_committed")
    assert committed == [f"c{n}-{i}" for n in (0, 2, 3, 5) for i in range(5)]
    assert len(read("read_uncommitted")) == 6 * 5 + 1
    producer.abort_transaction(30)


def test_exactly_once_across_a_driver_kill(spark: Any, broker: BrokerProcess,
                                           tmp_path: Path) -> None:
    source, target, tags, (seen, committed, open_txn) = _crash_and_restart(
        spark, broker, tmp_path, "exactly-once")
    positions = Counter((t["source"]["partition"], t["source"]["offset"]) for t in tags)
    twice = {p: n for p, n in positions.items() if n > 1}
    assert not twice, (f"{len(twice)} source records tagged more than once after a kill "
                       f"with {seen} records written, {committed} committed")
    assert len(tags) == EVENTS
    check_tags(tags, source, EVENTS)
    print(f"exactly-once: killed with {seen} written, {committed} committed, "
          f"{'a' if open_txn else 'no'} transaction open; no duplicates")
    # The moldau source honours kafka.isolation.level: it plans to the last stable offset
    # and skips aborted records and markers.
    rows = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", target).option("kafka.isolation.level", "read_committed")
            .load().selectExpr("get_json_object(CAST(value AS STRING), '$.event.seq') AS seq")
            .collect())
    assert sorted(int(r.seq) for r in rows) == list(range(EVENTS))


def test_at_least_once_repeats_records_across_the_same_kill(spark: Any, broker: BrokerProcess,
                                                           tmp_path: Path) -> None:
    _, _, tags, (seen, committed, _) = _crash_and_restart(spark, broker, tmp_path,
                                                          "at-least-once")
    positions = Counter((t["source"]["partition"], t["source"]["offset"]) for t in tags)
    assert {t["event"]["seq"] for t in tags} == set(range(EVENTS)), "a record was lost"
    duplicates = sum(n - 1 for n in positions.values())
    assert duplicates >= seen - committed > 0, (
        f"at-least-once wrote {duplicates} duplicates after a kill with {seen} records "
        f"written and {committed} committed")
    assert len(tags) == EVENTS + duplicates
    print(f"at-least-once: killed with {seen} written, {committed} committed; "
          f"{duplicates} duplicates")


def _executors(worker_pid: int) -> list[int]:
    """Executor JVMs the standalone worker launched."""
    found = []
    for pid in _descendants(worker_pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in command:
            found.append(pid)
    return found


def _kill_executors(worker_pid: int) -> int:
    """SIGKILL every executor JVM of the worker and its Python workers; how many processes."""
    victims = [p for e in _executors(worker_pid) for p in (e, *_descendants(e))]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(victims)


def test_exactly_once_across_executor_and_driver_kills_on_a_standalone_cluster(
        broker: BrokerProcess, tmp_path: Path) -> None:
    """On a standalone master + worker: the executor JVM (and its Python workers) killed when
    a task's transaction is seen open, else once a quarter of the records are committed (its
    tasks then die inside or between their transactions) — Spark retries the tasks on a new
    executor, whose producers fence the dead ones'; later the driver killed with a transaction
    open, a micro-batch partly committed, or (once three quarters are committed) between
    micro-batches, and the pipeline restarted from its checkpoint on the same cluster. Which
    moments were hit is printed."""
    events = 2 * EVENTS  # more micro-batches after the executor's, to catch one mid-way
    source, target = f"events-{uuid.uuid4().hex[:8]}", f"tags-{uuid.uuid4().hex[:8]}"
    admin = SyncAdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(source, 2, 1), NewTopic(target, 2, 1)])
    produce_events(broker.bootstrap, source, 0, events)
    csv = write_reference_csv(tmp_path / "branch.csv")
    checkpoint = tmp_path / "ck"
    cluster = start_standalone(tmp_path / "standalone")
    tps = [(target, 0), (target, 1)]
    # read_committed: records of committed task transactions (aborted attempts not counted)
    tail = SyncConsumer({"bootstrap.servers": broker.bootstrap,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    tail.assign(tps)
    seen = executor_killed = driver_killed_at = 0
    how = executor_how = ""
    try:
        command = pipeline_command(
            broker.bootstrap, source, broker.bootstrap, target, checkpoint,
            "--reference", str(csv), "--master", cluster.url,
            "--spark-conf", "spark.executor.memory=1g",
            "--max-offsets-per-trigger", str(PER_BATCH),
            "--target-option", "kafka.transaction.timeout.ms=20000")
        with open(tmp_path / "run-1.log", "wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while proc.poll() is None and time.monotonic() < deadline:
                seen += len(tail.poll(0.02))
                open_txn = _open_transaction(admin, tps)
                committed = _committed_records(checkpoint) or 0
                # the executor while a task's transaction is open; a task's transaction can
                # be shorter than one look, so at the latest once a quarter is committed
                # (mid-run: its tasks then die between or inside their transactions)
                if not executor_killed and (open_txn or committed >= events // 4):
                    executor_killed = _kill_executors(cluster.worker.pid)
                    executor_how = "in a transaction" if open_txn else "mid-run"
                    continue
                # the driver in a later micro-batch: while a task's transaction is open, or
                # after some tasks of the batch committed theirs; at the latest between two
                # micro-batches once three quarters are done
                if executor_killed and committed > 0:
                    how = ("a transaction open" if open_txn else "a batch partly committed"
                           if seen > committed else "between batches"
                           if committed >= events * 3 // 4 else "")
                    if how:
                        _kill_all(proc)
                        driver_killed_at = committed
                        break
        finally:
            if proc.poll() is None:
                _kill_all(proc)
        assert executor_killed and driver_killed_at, (
            "no transaction was seen open (executor killed: "
            f"{executor_killed}, driver killed: {driver_killed_at}):\n"
            f"{complete_text(tmp_path / 'run-1.log')[-4000:]}")
        with open(tmp_path / "run-2.log", "wb") as out:
            restart = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                                     timeout=300)
        assert restart.returncode == 0, complete_text(tmp_path / "run-2.log")[-5000:]
    finally:
        cluster.stop()
        admin.close()
        tail.close()
    tags = _read_committed(broker.bootstrap, target, events)
    positions = Counter((t["source"]["partition"], t["source"]["offset"]) for t in tags)
    assert not {p: n for p, n in positions.items() if n > 1}, "a source record tagged twice"
    check_tags(tags, source, events)
    print(f"standalone: executor killed {executor_how}, then the driver with {how} and "
          f"{driver_killed_at} records committed; no duplicates")
