"""What the transaction acceptance tests share (design14 §11.1 and §11.3).

Every test module drives ONE client's transactional producer (a :class:`WriterProc`: the
client in a subprocess, steered step by step, so it can also be killed with SIGKILL inside a
transaction) against one broker, and checks what every client reads back:

- :func:`run_scenario` over 2 topics x 3 partitions: a committed transaction, an aborted one,
  one that commits while another producer's transaction is open (that one aborts), a large
  committed one that spans many fetch responses (readers fetch 16 KiB per partition), and a
  last committed transaction with one sentinel record per partition.
- :func:`check_matrix`: read_committed readers of every client see exactly the committed
  records in order (no control records, nothing aborted); read_uncommitted readers see all.
- :func:`check_send_offsets`: offsets sent in a transaction are visible to the group only
  after it commits; an abort leaves them unchanged; while it is open, a require_stable fetch
  keeps retrying UNSTABLE_OFFSET_COMMIT.
- :func:`check_fencing` and :func:`check_timeout_abort` (§11.3).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from moldau.client import NewTopic, SyncAdminClient, SyncConsumer, SyncProducer, TopicPartition
from moldau.client.errors import KafkaTimeoutError

from .endpoint import KafkaEndpoint, direct_endpoint

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = Path(__file__).resolve().parent / "js"
READERS = ("moldau", "confluent_kafka", "kafka_python", "aiokafka", "kafkajs")
FETCH_BYTES = 16384
TXN_SETTINGS = {
    "auto.create.topics.enable": "true",
    "num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
    "transaction.state.log.num.partitions": 5,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}
Key = tuple[str, int]
Record = tuple[str, str]  # key, value


def txn_endpoint() -> Iterator[KafkaEndpoint]:
    """One broker for a test module, with the transaction settings above."""
    with direct_endpoint(TXN_SETTINGS) as endpoint:
        yield endpoint


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topics(bootstrap: str, names: list[str], partitions: int = 3) -> None:
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(n, partitions, 1) for n in names])


# --- the writer under test --------------------------------------------------------------------

class WriterProc:
    """A client's transactional producers in a subprocess (tests/compat/txn_proc.py, or
    js/txn.js for kafkajs); :meth:`step` sends one step and returns the JSON answer."""

    def __init__(self, client: str, bootstrap: str) -> None:
        if client == "kafkajs":
            cmd = ["node", str(JS_DIR / "txn.js"), "writer", bootstrap]
            env = {**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")}
            cwd = JS_DIR
        else:
            cmd = [sys.executable, "-m", "tests.compat.txn_proc", client, bootstrap]
            env, cwd = dict(os.environ), ROOT
        self.client = client
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        assert self._answer().get("ready"), f"{client} writer did not start"

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"{self.client} writer died: {err[-3000:]}")
        return json.loads(line)  # type: ignore[no-any-return]

    def step(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def ok(self, op: str, **args: Any) -> None:
        answer = self.step(op, **args)
        assert answer["ok"], f"{self.client} {op} {args}: {answer}"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> WriterProc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- the scenario -----------------------------------------------------------------------------

@dataclass
class Expected:
    """Records per partition in log order: committed only, and everything."""

    committed: dict[Key, list[Record]] = field(default_factory=dict)
    everything: dict[Key, list[Record]] = field(default_factory=dict)
    sentinels: dict[Key, str] = field(default_factory=dict)

    def add(self, tp: Key, record: Record, committed: bool) -> None:
        self.everything.setdefault(tp, []).append(record)
        if committed:
            self.committed.setdefault(tp, []).append(record)


def _sends(w: WriterProc, p: str, exp: Expected, tps: list[Key], prefix: str, n: int,
           committed: bool, value: str | None = None) -> None:
    for i in range(n):
        tp = tps[i % len(tps)]
        key = f"{prefix}-{i}"
        val = value if value is not None else f"{prefix}-value-{i}"
        w.ok("send", p=p, topic=tp[0], partition=tp[1], key=key, value=val)
        exp.add(tp, (key, val), committed)


def run_scenario(w: WriterProc, topics: list[str]) -> Expected:
    """The §11.1 transactions (see the module docstring); returns what readers must see."""
    tps = [(t, p) for t in topics for p in range(3)]
    exp = Expected()
    tid = unique(f"{w.client}-scenario")
    w.ok("init", p="p1", tid=tid + "-1")
    w.ok("begin", p="p1")
    _sends(w, "p1", exp, tps, "committed", 12, True)
    w.ok("commit", p="p1")
    w.ok("begin", p="p1")
    _sends(w, "p1", exp, tps, "aborted", 12, False)
    w.ok("flush", p="p1")  # the aborted records reach the log before the abort
    w.ok("abort", p="p1")
    w.ok("init", p="p2", tid=tid + "-2")
    w.ok("begin", p="p2")
    _sends(w, "p2", exp, tps, "open", 6, False)
    w.ok("flush", p="p2")
    w.ok("begin", p="p1")
    _sends(w, "p1", exp, tps, "interleaved", 12, True)
    w.ok("commit", p="p1")  # commits while p2's transaction is still open
    _sends(w, "p2", exp, tps, "open-late", 6, False)
    w.ok("flush", p="p2")
    w.ok("abort", p="p2")
    w.ok("begin", p="p1")
    _sends(w, "p1", exp, tps[:1], "large", 120, True, value="x" * 1024)
    w.ok("commit", p="p1")
    w.ok("begin", p="p1")
    for tp in tps:
        key = f"sentinel-{tp[0]}-{tp[1]}"
        w.ok("send", p="p1", topic=tp[0], partition=tp[1], key=key, value="end")
        exp.add(tp, (key, "end"), True)
        exp.sentinels[tp] = key
    w.ok("commit", p="p1")
    return exp


# --- readers ----------------------------------------------------------------------------------

Got = list[tuple[str, int, str | None, str | None]]


def _done(got: Got, sentinels: dict[Key, str]) -> bool:
    seen = {(t, p) for t, p, k, _v in got if sentinels.get((t, p)) == k}
    return seen >= set(sentinels)


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode()


def read(client: str, bootstrap: str, sentinels: dict[Key, str], committed: bool,
         timeout: float = 30.0) -> Got:
    """Read every partition of ``sentinels`` from the start with ``client`` until each
    partition's sentinel arrived (or ``timeout``)."""
    tps = sorted(sentinels)
    deadline = time.monotonic() + timeout
    got: Got = []
    level = "read_committed" if committed else "read_uncommitted"
    if client == "moldau":
        with SyncConsumer({"bootstrap.servers": bootstrap, "isolation.level": level,
                           "auto.offset.reset": "earliest",
                           "max.partition.fetch.bytes": FETCH_BYTES}) as c:
            c.assign([TopicPartition(*tp) for tp in tps])
            while not _done(got, sentinels) and time.monotonic() < deadline:
                got += [(r.topic, r.partition, _text(r.key), _text(r.value))
                        for r in c.poll(0.5)]
    elif client == "confluent_kafka":
        from confluent_kafka import OFFSET_BEGINNING, Consumer
        from confluent_kafka import TopicPartition as CTP

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                      "isolation.level": level, "enable.auto.commit": False,
                      "max.partition.fetch.bytes": FETCH_BYTES})
        c.assign([CTP(t, p, OFFSET_BEGINNING) for t, p in tps])
        while not _done(got, sentinels) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    got.append((m.topic(), m.partition(), _text(m.key()), _text(m.value())))
        c.close()
    elif client == "kafka_python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=level,
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          max_partition_fetch_bytes=FETCH_BYTES)
        c.assign([KTP(t, p) for t, p in tps])
        c.seek_to_beginning()
        while not _done(got, sentinels) and time.monotonic() < deadline:
            for tp, msgs in c.poll(500).items():
                got += [(tp.topic, tp.partition, _text(m.key), _text(m.value)) for m in msgs]
        c.close()
    elif client == "aiokafka":
        got = asyncio.run(_read_aiokafka(bootstrap, tps, sentinels, level, deadline))
    elif client == "kafkajs":
        job = {"bootstrap": bootstrap, "topics": sorted({t for t, _p in tps}),
               "groupId": unique("reader"), "readUncommitted": not committed,
               "sentinels": [[t, p, k] for (t, p), k in sorted(sentinels.items())],
               "timeoutMs": int(timeout * 1000)}
        run = subprocess.run(["node", str(JS_DIR / "txn.js"), "read"], input=json.dumps(job),
                             capture_output=True, text=True, timeout=timeout + 30, cwd=JS_DIR,
                             env={**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")})
        assert run.returncode == 0, f"txn.js read failed:\n{run.stderr[-3000:]}"
        got = [tuple(r) for r in json.loads(run.stdout.strip().splitlines()[-1])["records"]]
    else:
        raise ValueError(client)
    return got


async def _read_aiokafka(bootstrap: str, tps: list[Key], sentinels: dict[Key, str], level: str,
                         deadline: float) -> Got:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    got: Got = []
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=level,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         max_partition_fetch_bytes=FETCH_BYTES)
    await c.start()
    try:
        c.assign([ATP(t, p) for t, p in tps])
        await c.seek_to_beginning()
        while not _done(got, sentinels) and time.monotonic() < deadline:
            for tp, msgs in (await c.getmany(timeout_ms=500)).items():
                got += [(tp.topic, tp.partition, _text(m.key), _text(m.value)) for m in msgs]
    finally:
        await c.stop()
    return got


def by_partition(got: Got) -> dict[Key, list[Record]]:
    out: dict[Key, list[Record]] = {}
    for t, p, k, v in got:
        out.setdefault((t, p), []).append((k or "", v or ""))
    return out


def check_matrix(bootstrap: str, exp: Expected, readers: tuple[str, ...] = READERS) -> None:
    """Every reader, both isolation levels (librdkafka and kafkajs default to read_committed:
    the level is always set explicitly)."""
    failures = []
    for reader in readers:
        for committed in (True, False):
            got = by_partition(read(reader, bootstrap, exp.sentinels, committed))
            want = exp.committed if committed else exp.everything
            if got != want:
                level = "read_committed" if committed else "read_uncommitted"
                bad = sorted(tp for tp in set(got) | set(want) if got.get(tp) != want.get(tp))
                tp = bad[0]
                failures.append(f"{reader} {level}: {len(bad)} partition(s) differ; {tp}: "
                                f"got {len(got.get(tp, []))} records {got.get(tp, [])[:4]}..., "
                                f"want {len(want.get(tp, []))} {want.get(tp, [])[:4]}...")
    assert not failures, "\n".join(failures)


# --- offsets in transactions ------------------------------------------------------------------

def _committed(bootstrap: str, group: str, tp: TopicPartition, stable: bool,
               timeout_ms: int = 30000) -> int | None:
    with SyncAdminClient({"bootstrap.servers": bootstrap,
                          "default.api.timeout.ms": timeout_ms}) as admin:
        found = admin.list_group_offsets(group, [tp], require_stable=stable)[tp]
    return None if found is None else found.offset


def check_send_offsets(w: WriterProc, bootstrap: str) -> None:
    """send_offsets_to_transaction: commit -> visible; abort -> unchanged; open -> a
    require_stable fetch retries (here: until its time limit), a plain one sees the old."""
    source, out = unique("offsets-in"), unique("offsets-out")
    make_topics(bootstrap, [source, out], 1)
    group = unique(f"{w.client}-group")
    tp = TopicPartition(source, 0)
    w.ok("init", p="o", tid=unique(f"{w.client}-offsets"))
    for offset, end in ((5, "commit"), (9, "abort")):
        w.ok("begin", p="o")
        w.ok("send", p="o", topic=out, partition=0, key=f"k{offset}", value="v")
        w.ok("offsets", p="o", group=group, topic=source, partition=0, offset=offset)
        w.ok("flush", p="o")
        w.ok(end, p="o")
        assert _committed(bootstrap, group, tp, stable=True) == 5, f"after {end} of {offset}"
    w.ok("begin", p="o")
    w.ok("send", p="o", topic=out, partition=0, key="k12", value="v")
    w.ok("offsets", p="o", group=group, topic=source, partition=0, offset=12)
    w.ok("flush", p="o")
    assert _committed(bootstrap, group, tp, stable=False) == 5
    with pytest.raises(KafkaTimeoutError, match=r"(?i)unstable_offset_commit"):
        _committed(bootstrap, group, tp, stable=True, timeout_ms=2000)
    w.ok("commit", p="o")
    assert _committed(bootstrap, group, tp, stable=True) == 12


# --- fencing and the transaction timeout (§11.3) -----------------------------------------------

def check_fencing(w: WriterProc, bootstrap: str) -> None:
    """A second producer with the same transactional id fences the first: the first's commit
    fails, and its send, commit (or, for kafka-python, the abort after it) raises the client's
    fenced error; its open transaction is aborted."""
    topic = unique("fence")
    make_topics(bootstrap, [topic], 1)
    tid = unique(f"{w.client}-fenced")
    w.ok("init", p="old", tid=tid)
    w.ok("begin", p="old")
    w.ok("send", p="old", topic=topic, partition=0, key="old-1", value="v")
    w.ok("flush", p="old")
    w.ok("init", p="new", tid=tid)  # waits for the old transaction's abort
    answers = [w.step("send", p="old", topic=topic, partition=0, key="old-2", value="v"),
               w.step("flush", p="old"), w.step("commit", p="old")]
    assert not answers[-1]["ok"], f"the fenced producer committed: {answers}"
    if not any(a["fenced"] for a in answers if not a["ok"]):
        # kafka-python (KIP-360/588): INVALID_PRODUCER_EPOCH from Produce starts an epoch
        # bump in the background and commit fails on that state; the bump's InitProducerId
        # then meets PRODUCER_FENCED, which the next call raises.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            answers.append(w.step("abort", p="old"))
            if answers[-1]["ok"] or answers[-1]["fenced"]:
                break
            time.sleep(0.2)
    fenced = [a for a in answers if not a["ok"] and a["fenced"]]
    assert fenced, f"no fenced error: {answers}"
    if w.client == "confluent_kafka":
        assert fenced[0]["fatal"], fenced[0]
    w.ok("begin", p="new")
    w.ok("send", p="new", topic=topic, partition=0, key="new-1", value="v")
    w.ok("commit", p="new")
    got = by_partition(read("moldau", bootstrap, {(topic, 0): "new-1"}, committed=True))
    assert got == {(topic, 0): [("new-1", "v")]}


def check_timeout_abort(client: str, bootstrap: str) -> None:
    """A producer killed inside a transaction (transaction.timeout.ms=3000): the coordinator
    aborts it (CompleteAbort at epoch + 1) and a read_committed reader held at the LSO moves
    on to what was committed after it, without the dead producer's records."""
    topic = unique("timeout")
    make_topics(bootstrap, [topic], 1)
    tid = unique(f"{client}-killed")
    w = WriterProc(client, bootstrap)
    w.ok("init", p="z", tid=tid, timeout_ms=3000)
    w.ok("begin", p="z")
    w.ok("send", p="z", topic=topic, partition=0, key="zombie", value="v")
    w.ok("flush", p="z")
    with SyncAdminClient({"bootstrap.servers": bootstrap}) as admin:
        before = admin.describe_transactions([tid])[tid]
        assert before.state == "Ongoing", before
        w.kill()
        with SyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as p:
            p.send(topic, "v", "after", partition=0).result(30)
        started = time.monotonic()
        got = by_partition(read("moldau", bootstrap, {(topic, 0): "after"}, committed=True,
                                timeout=20))
        assert got == {(topic, 0): [("after", "v")]}, got
        deadline = started + 20
        while True:
            now = admin.describe_transactions([tid])[tid]
            if now.state == "CompleteAbort" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (now.state, now.producer_epoch) == ("CompleteAbort", before.producer_epoch + 1)
