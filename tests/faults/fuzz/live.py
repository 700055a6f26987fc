"""Live fuzzer: mutated real-client requests against a running ``moldau serve``.

    .venv/bin/python -m tests.faults.fuzz.live --inputs 1000000 --seed 7 [--mode requests]
    .venv/bin/python -m tests.faults.fuzz.live --replay fuzz-findings/7-123456.json

A run starts a broker subprocess (data on /dev/shm when it exists, so fsync costs nothing;
small limits so hostile sizes are cheap), creates the playground topics of :mod:`.corpus`,
has real clients write the reference topics (:mod:`.checks`), then sends ``--inputs``
requests made by :class:`~.mutate.RequestMutator` (``--mode requests``: every served API
and version, seeds from requests.corpus) or Produce requests whose record sets come from
:class:`~.batches.BatchMutator` (``--mode batches``: CRC-valid batches that lie inside), or
both alternately, pipelined on several connections. It checks, as it goes:

* every request is answered (a response with its correlation id, in order, that kio can
  decode) or its connection is closed by the broker; a request left unanswered on an open
  connection for ``--timeout`` seconds is a failure;
* no traceback appears in the broker's log (a handler raised);
* the broker's RSS (VmRSS, sampled twice a second) stays under ``--rss-bound-mb``;
* an acknowledged record set is one Kafka would store (:func:`~.batches.check_batches`); the
  acknowledged records of valid ones go into a ledger;

and at the end: the ledger reads back, confluent-kafka and kafka-python read every partition
of every topic to its end without an error and the reference topics exactly, then the broker
is restarted (clean, then kill -9) and must still serve the reference data, the ledger and the
same log start / end offsets.

Each failure prints the seed, the input number and the hex of the input, and is saved as JSON
under ``--findings`` so ``--replay FILE`` sends it again to a fresh broker. ``--exclude-known``
leaves out input classes of defects found earlier (issue 11's 1, 2, 5, 10, 11 and the fuzzer's
own ``fetch-null-topic-id`` and ``join-protocol``; all fixed now): a way to run green while a
fix is pending, or to isolate a regression. The default includes everything.

The parts: :mod:`.inputs` (what is sent, and how the broker must react), :mod:`.ledger` (the
oracle's verdict on acknowledged record sets, read back at the end), :mod:`.endchecks`,
:mod:`.findings`, :mod:`.support` (in-flight state, the broker log reader). How to run it and
what it found: docs/testing.md, "Fuzzing".
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import random
import re
import selectors
import socket
import struct
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import moldau.client.kio_fixes  # noqa: F401 - DescribeTransactions' start time -1 decodes
from moldau.broker.dispatch import load_handlers
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.produce_request import ProduceRequestData
from moldau.testing.runner import BrokerProcess
from tests.integration.broker_wire import Wire, create_topic

from . import checks
from .batches import BatchMutator
from .corpus import PLAYGROUND_TOPICS, read_corpus
from .endchecks import final_checks
from .findings import Findings
from .inputs import KNOWN, Inputs, parse_known
from .ledger import Ledger
from .mutate import Pools, RequestMutator, decode_any_response, encode
from .replay import replay
from .support import (
    HANDLER_FAILED,
    SIZE,
    BrokerLog,
    Conn,
    Finding,
    Pending,
    api_versions_v0,
    cpu_seconds,
    rss_kb,
    seed_batches,
    suppress,
)

log = logging.getLogger("fuzz")
ROOT = Path(__file__).resolve().parents[3]
BROKER_SETTINGS: dict[str, Any] = {
    # Hostile sizes stay cheap: a frame may announce at most 1 MiB.
    "socket.request.max.bytes": 1 << 20,
    "message.max.bytes": 512 * 1024,
    "log.segment.bytes": 1 << 20,
    "log.retention.bytes": 8 << 20,
    "log.retention.check.interval.ms": 10_000,
    "group.min.session.timeout.ms": 100,
    "group.max.session.timeout.ms": 10_000,
    "group.consumer.session.timeout.ms": 10_000,
    "group.consumer.heartbeat.interval.ms": 1000,
    "offsets.topic.num.partitions": 3,
}
SLOW_LANES = 8
SLOW_WINDOW = 2


@dataclass
class Settings:
    inputs: int = 20_000
    seed: int = 0
    mode: str = "both"
    connections: int = 6
    window: int = 8
    timeout: float = 60.0
    rss_bound_mb: int = 400
    exclude_known: frozenset[int | str] = frozenset()
    findings: Path = ROOT / "fuzz-findings"
    progress_every: float = 15.0
    restart: bool = True


class Fuzzer:
    """One run: broker, reference data, inputs, checks. See the module docstring."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.rng = random.Random(settings.seed)
        self.findings = Findings(settings.seed, settings.mode, settings.findings)
        self.sel = selectors.DefaultSelector()
        self.conns: list[Conn] = []
        self.slow_conns: list[Conn] = []
        self.backlog: deque[Pending] = deque()
        self.requeue: deque[Pending] = deque()
        self.stats: collections.Counter[str] = collections.Counter()
        self.sent = 0  # inputs generated
        self.done = 0  # inputs answered or closed on
        self.max_rss = 0
        self.ledger = Ledger()
        self.recent: deque[tuple[int, bytes]] = deque(maxlen=64)
        self.held: list[tuple[float, str]] = []  # tracebacks waiting for their connection
        self.broker: BrokerProcess | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    # --- setup ---------------------------------------------------------------------------
    def start_broker(self) -> BrokerProcess:
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self._tmp = tempfile.TemporaryDirectory(prefix="moldau-fuzz-", dir=base)
        broker = BrokerProcess(Path(self._tmp.name) / "data", settings=BROKER_SETTINGS)
        broker.start(timeout=60)
        self.broker = broker
        return broker

    def setup(self) -> checks.Reference:
        broker = self.start_broker()
        port = broker.port()
        with Wire(port) as wire:
            for name, (partitions, configs) in PLAYGROUND_TOPICS.items():
                create_topic(wire, name, partitions, configs)
        ref = checks.write_reference(port)
        self.log = BrokerLog(broker.log_path)
        registry = load_handlers()
        served = {k: (s.min_version, s.max_version) for k, s in registry.items()}
        seeds = read_corpus()
        real_batches = [b for b in seed_batches(seeds)]
        self.batches = BatchMutator(self.rng, real_batches)
        self.pools = Pools(reference=tuple(checks.REFERENCE_TOPICS),
                           exclude_newline_names=5 in self.s.exclude_known)
        self.refresh_topic_ids()
        self.mutator = RequestMutator(seeds, served, self.rng, self.pools, self.batches,
                                      exclude_known=self.s.exclude_known)
        self.inputs = Inputs(self.s, self.rng, self.mutator, self.batches, self.pools,
                             self.stats)
        return ref

    def refresh_topic_ids(self) -> None:
        assert self.broker is not None
        with Wire(self.broker.port(), client_id="fuzz-check") as wire:
            md = wire.call(ApiKey.METADATA, 12, {"topics": None,
                                                 "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
        self.pools.topic_ids = {t["name"]: t["topic_id"] for t in md["topics"]
                                if t["error_code"] == 0}

    # --- the loop ------------------------------------------------------------------------
    def open_conn(self, lonely: bool = False, slow: bool = False) -> Conn:
        assert self.broker is not None
        sock = socket.create_connection(("127.0.0.1", self.broker.port()), timeout=10)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Conn(sock, lonely=lonely, slow=slow)
        self.sel.register(sock, selectors.EVENT_READ, conn)
        if slow:
            self.slow_conns.append(conn)
        elif not lonely:
            self.conns.append(conn)
        return conn

    def close_conn(self, conn: Conn) -> None:
        with suppress():
            self.sel.unregister(conn.sock)
        conn.sock.close()
        for lane in (self.conns, self.slow_conns):
            if conn in lane:
                lane.remove(conn)

    def fill(self) -> None:
        """Give every connection requests up to its window. Requests that may rightly wait
        (group joins, long polls) go to the slow lanes so they do not hold up the others."""
        s = self.s
        while len(self.conns) < s.connections:
            self.open_conn()
        while len(self.slow_conns) < SLOW_LANES:
            self.open_conn(slow=True)
        for conn in list(self.slow_conns):
            while len(conn.pending) < SLOW_WINDOW and self.backlog:
                self.queue(conn, self.backlog.popleft())
        for conn in list(self.conns):
            while len(conn.pending) < s.window and len(self.backlog) < 4 * SLOW_LANES:
                item = self.next_pending()
                if item is None:
                    return
                if item.expect == "lonely":
                    self.queue(self.open_conn(lonely=True), item)
                elif item.slow:
                    self.backlog.append(item)
                else:
                    self.queue(conn, item)
                    if item.expect == "close":
                        break  # nothing after it would be read

    def queue(self, conn: Conn, item: Pending) -> None:
        cid = conn.next_cid
        conn.next_cid = (conn.next_cid + 1) & 0x7FFFFFFF or 1
        item.cid = cid
        data = bytearray(item.payload)
        if len(data) >= 12 and SIZE.unpack_from(data)[0] == len(data) - 4:
            SIZE.pack_into(data, 8, cid)
        item.payload = bytes(data)
        if not conn.pending:
            conn.head_since = time.monotonic()
        conn.pending.append(item)
        conn.out += item.payload
        self.sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def next_pending(self) -> Pending | None:
        while True:
            if self.requeue:
                return self.requeue.popleft()
            if self.sent >= self.s.inputs:
                return None
            n = self.sent
            self.sent += 1
            payload, size, note = self.inputs.make(n)
            verdict = self.inputs.vet(payload)
            if verdict is None:
                self.stats["skipped"] += 1  # not sent, not counted: another input is made
                self.sent -= 1
                continue
            expect, wait, request, _ = verdict
            if expect.startswith("parser-raised:"):
                self.finding("parser", expect, f"parse_frame raised on input {n} ({note})",
                             [(n, SIZE.pack(len(payload)) + payload)])
                self.done += 1
                continue
            declared = len(payload) if size is None else size
            framed = SIZE.pack(declared) + payload
            api, version = struct.unpack_from(">hh", payload) if len(payload) >= 4 else (-1, -1)
            item = Pending(n, framed, api, version, 0, expect, wait, slow=wait > 0)
            item.fallback = expect == "fallback"
            if item.fallback:
                item.expect = "response"
            if isinstance(request, ProduceRequestData):
                item.produce = [(t, p, None if b is None else bytes(b))
                                for t, parts in request.topics for p, b in parts]
            self.stats[note.split(" ")[0].split("/")[0]] += 1
            if size is not None and size != len(payload):
                item.expect = "lonely"
            return item

    def run(self) -> bool:
        s = self.s
        print(f"[fuzz] seed {s.seed}: {s.inputs} inputs, mode {s.mode}, "
              f"{s.connections} connections x {s.window} in flight, "
              f"exclude known defects {sorted(map(str, s.exclude_known)) or 'none'}", flush=True)
        started = time.monotonic()
        ref = self.setup()
        assert self.broker is not None and self.broker.proc is not None
        print(f"[fuzz] broker pid {self.broker.proc.pid} on port {self.broker.port()}, "
              f"{ref.count()} reference records, {len(self.mutator.pairs)} (api, version) "
              f"seeded; setup took {time.monotonic() - started:.1f} s", flush=True)
        loop_started = time.monotonic()
        self.loop()
        self.scan_log(None, final=True)
        took = time.monotonic() - loop_started
        print(f"[fuzz] {self.done} inputs in {took:.0f} s ({self.done / max(took, 1e-9):.0f}/s); "
              f"max RSS {self.max_rss // 1024} MiB; "
              f"{dict(sorted(self.stats.items(), key=lambda kv: -kv[1])[:14])}",
              flush=True)
        final_checks(self, ref)
        self.findings.report()
        return not self.failures()

    def loop(self) -> None:
        s = self.s
        last_sample = last_progress = time.monotonic()
        while True:
            self.fill()
            busy = list(self.sel.get_map().values())
            # Requests that get no answer (acks=0 produce) are settled by drain_trailing:
            # waiting here for a later answer on their connection would wait forever.
            if self.sent >= s.inputs and not self.requeue and not self.backlog and all(
                    p.expect == "none" for k in busy for p in k.data.pending):
                break
            for key, events in self.sel.select(timeout=0.2):
                conn = key.data
                if events & selectors.EVENT_WRITE:
                    self.flush(conn)
                if events & selectors.EVENT_READ:
                    self.receive(conn)
            now = time.monotonic()
            if now - last_sample >= 0.5:
                last_sample = now
                self.sample(now)
                if self.broker is None or self.broker.proc is None or \
                        self.broker.proc.poll() is not None:
                    code = self.broker.proc.returncode if self.broker and self.broker.proc else "?"
                    self.finding("died", "broker exited", f"broker exited with {code}",
                                 list(self.recent))
                    return
            if now - last_progress >= s.progress_every:
                last_progress = now
                print(f"[fuzz] {self.done}/{s.inputs} inputs, RSS {self.rss_kb() // 1024} MiB, "
                      f"CPU s driver {time.process_time():.0f} broker {self.broker_cpu():.0f}, "
                      f"{len(self.findings)} distinct findings", flush=True)
        self.drain_trailing()

    def drain_trailing(self) -> None:
        """Connections whose last requests expect no answer (acks=0): one ApiVersions each,
        whose answer shows everything before it was processed."""
        for conn in [*self.conns, *self.slow_conns]:
            if conn.pending:
                payload = encode(ApiKey.API_VERSIONS, 0, "fuzz-sentinel", api_versions_v0())
                self.queue(conn, Pending(-1, SIZE.pack(len(payload)) + payload,
                                         ApiKey.API_VERSIONS, 0, 0, "response", 0.0))
                conn.head_since = time.monotonic()  # the sentinel's wait starts now
        deadline = time.monotonic() + self.s.timeout
        while any(c.pending for c in [*self.conns, *self.slow_conns]) and \
                time.monotonic() < deadline:
            for key, events in self.sel.select(timeout=0.2):
                if events & selectors.EVENT_WRITE:
                    self.flush(key.data)
                if events & selectors.EVENT_READ:
                    self.receive(key.data)
            self.sample(time.monotonic())
        for conn in [*self.conns, *self.slow_conns]:
            self.close_conn(conn)

    def flush(self, conn: Conn) -> None:
        try:
            n = conn.sock.send(conn.out)
        except BlockingIOError:
            return
        except OSError:
            self.on_closed(conn)
            return
        del conn.out[:n]
        if not conn.out:
            if conn.lonely:
                with suppress():
                    conn.sock.shutdown(socket.SHUT_WR)
            self.sel.modify(conn.sock, selectors.EVENT_READ, conn)

    def receive(self, conn: Conn) -> None:
        try:
            data = conn.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.on_closed(conn)
            return
        if conn.lonely:
            return  # answers to a frame whose size lied: only the close matters
        conn.inbuf += data
        while len(conn.inbuf) >= 4:
            (size,) = SIZE.unpack_from(conn.inbuf)
            if len(conn.inbuf) < 4 + size:
                break
            frame = bytes(conn.inbuf[4 : 4 + size])
            del conn.inbuf[: 4 + size]
            self.on_response(conn, frame)

    def on_response(self, conn: Conn, frame: bytes) -> None:
        (cid,) = struct.unpack_from(">i", frame)
        while conn.pending and conn.pending[0].expect == "none" and conn.pending[0].cid != cid:
            self.complete(conn)
        if not conn.pending or conn.pending[0].cid != cid:
            head = conn.pending[0] if conn.pending else None
            what = f"api {head.api_key} v{head.version}" if head else "nothing"
            self.finding("protocol", f"no answer to {what}, the next request answered",
                         f"response with correlation id {cid}, expected "
                         f"{head.cid if head else 'nothing'}",
                         [(head.n, head.payload)] if head else list(self.recent))
            self.on_closed(conn, culprit_known=False)
            return
        item = conn.pending[0]
        if item.expect == "close":
            self.finding("protocol", f"answered a request it cannot parse ({item.api_key})",
                         "the broker's parser refuses this frame, yet a response came",
                         [(item.n, item.payload)])
        version = 0 if item.fallback else item.version
        try:
            _cid, response = decode_any_response(item.api_key, version, frame)
        except Exception as exc:
            self.finding("protocol", f"malformed response {item.api_key}v{version}",
                         f"{type(exc).__name__}: {exc}; response {frame[:64].hex()}",
                         [(item.n, item.payload)])
            self.complete(conn)
            return
        self.learn(item, response)
        self.complete(conn)

    def complete(self, conn: Conn) -> None:
        item = conn.pending.popleft()
        conn.head_since = time.monotonic()
        if item.n >= 0:
            self.done += 1
            self.recent.append((item.n, item.payload))

    def on_closed(self, conn: Conn, culprit_known: bool = True) -> None:
        """The broker closed ``conn``: its first unanswered request is the reason; the ones
        after it were never read and are sent again on another connection."""
        pending = list(conn.pending)
        conn.pending.clear()
        self.close_conn(conn)
        if pending:
            head = pending[0]
            if head.n >= 0:
                self.done += 1
                self.recent.append((head.n, head.payload))
            self.requeue.extend(p for p in pending[1:] if p.n >= 0)
            for p in pending[1:]:
                p.payload = p.payload  # resent as is; queue() gives a new correlation id
        self.scan_log(pending[0] if pending and culprit_known else None)

    # --- what responses teach and check --------------------------------------------------
    def learn(self, item: Pending, response: Any) -> None:
        api = item.api_key
        if api == ApiKey.PRODUCE and item.produce:
            self.ledger.judge(item, response, self.finding)
        elif api in (ApiKey.JOIN_GROUP, ApiKey.CONSUMER_GROUP_HEARTBEAT) and getattr(
                response, "member_id", None):
            self._remember_member(response.member_id)
        elif api in (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS) and self.done % 50 == 0:
            self.refresh_topic_ids()

    def _remember_member(self, member_id: str) -> None:
        ids = self.pools.member_ids
        if member_id not in ids:
            ids.append(member_id)
            del ids[:-20]

    # --- watching the broker -------------------------------------------------------------
    def rss_kb(self) -> int:
        proc = self.broker.proc if self.broker is not None else None
        return rss_kb(proc.pid) if proc is not None else 0

    def broker_cpu(self) -> float:
        """CPU seconds the broker process used so far."""
        proc = self.broker.proc if self.broker is not None else None
        return cpu_seconds(proc.pid) if proc is not None else 0.0

    def sample(self, now: float) -> None:
        rss = self.rss_kb()
        self.max_rss = max(self.max_rss, rss)
        if rss > self.s.rss_bound_mb * 1024:
            self.finding("rss", "RSS over the bound",
                         f"broker RSS {rss // 1024} MiB > {self.s.rss_bound_mb} MiB after "
                         f"{self.done} inputs", list(self.recent)[-16:])
        if rss > 4 * self.s.rss_bound_mb * 1024:
            raise RuntimeError(f"broker RSS {rss // 1024} MiB: stopping the run")
        for conn in [k.data for k in list(self.sel.get_map().values())]:
            if conn.lonely:
                if now - conn.opened > self.s.timeout:
                    self.finding("hang", "frame with a lying size prefix: no close",
                                 "the broker neither closed the connection nor answered",
                                 [(p.n, p.payload) for p in conn.pending])
                    conn.pending.clear()
                    self.close_conn(conn)
                continue
            head = next((p for p in conn.pending if p.expect != "none"), None)
            if head is not None and now - conn.head_since > self.s.timeout + head.wait:
                self.finding("hang", f"no answer to api {head.api_key} v{head.version}",
                             f"no response and no close after {now - conn.head_since:.0f} s",
                             [(head.n, head.payload)])
                self.on_closed(conn, culprit_known=False)
        self.scan_log(None)

    def scan_log(self, culprit: Pending | None, *, final: bool = False) -> None:
        """Report new tracebacks of the broker log. One that names a handler is held up to
        2 s for the close of its connection, which tells exactly which input it was."""
        now = time.monotonic()
        blocks = self.held + [(now, b) for b in self.log.new_tracebacks()]
        self.held = []
        for seen, block in blocks:
            last = block.strip().splitlines()[-1]
            match = HANDLER_FAILED.search(block)
            if match and culprit is not None and (culprit.api_key, culprit.version) != (
                    int(match.group(1)), int(match.group(2))):
                culprit = None  # another connection's
            if match and culprit is None and not final and now - seen < 2.0:
                self.held.append((seen, block))
                continue
            where = f"api {match.group(1)} v{match.group(2)}" if match else "background task"
            signature = f"traceback in {where.split(' v')[0]}: " + re.sub(r"\d+", "N", last)[:120]
            if culprit is not None:
                inputs = [(culprit.n, culprit.payload)]
            else:
                # The newest input of the API and version named by the log, else the last few.
                wanted = (int(match.group(1)), int(match.group(2))) if match else None
                same = [(n, p) for n, p in self.recent
                        if wanted and len(p) >= 8 and struct.unpack_from(">hh", p, 4) == wanted]
                inputs = same[-1:] or list(self.recent)[-8:]
            known = ""
            if "replica" in block.lower() and match and match.group(1) == "1":
                known = "defect 10"
            self.finding("traceback", signature, block[-3000:], inputs, known=known)

    # --- findings ------------------------------------------------------------------------
    def finding(self, kind: str, signature: str, detail: str,
                inputs: list[tuple[int, bytes]], known: str = "") -> None:
        self.findings.add(kind, signature, detail, inputs, known)

    def failures(self) -> list[Finding]:
        return self.findings.all()

    def close(self) -> None:
        for key in list(self.sel.get_map().values()):
            key.data.sock.close()
        if self.broker is not None:
            self.broker.stop(30)
            self.broker.close()
        if self._tmp is not None:
            self._tmp.cleanup()


# --- command line ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.fuzz.live",
        description="Fuzz a live moldau broker with mutated real-client requests.")
    parser.add_argument("--inputs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    parser.add_argument("--mode", choices=["requests", "batches", "both"], default="both")
    parser.add_argument("--connections", type=int, default=6)
    parser.add_argument("--window", type=int, default=8, help="requests in flight per connection")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a request may go unanswered on an open connection")
    parser.add_argument("--rss-bound-mb", type=int, default=400)
    parser.add_argument("--exclude-known", default="none",
                        help="input classes of earlier (fixed) defects to leave out: 'all' "
                             f"({','.join(sorted(map(str, KNOWN)))}) or a comma list")
    parser.add_argument("--findings", type=Path, default=ROOT / "fuzz-findings")
    parser.add_argument("--no-restart", action="store_true")
    parser.add_argument("--progress-every", type=float, default=15.0, help="seconds")
    parser.add_argument("--replay", type=Path, help="replay a saved finding and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    if args.replay:
        return 0 if replay(args.replay) else 1
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    settings = Settings(inputs=args.inputs, seed=seed, mode=args.mode,
                        connections=args.connections, window=args.window, timeout=args.timeout,
                        rss_bound_mb=args.rss_bound_mb,
                        exclude_known=parse_known(args.exclude_known), findings=args.findings,
                        restart=not args.no_restart, progress_every=args.progress_every)
    fuzzer = Fuzzer(settings)
    try:
        ok = fuzzer.run()
    finally:
        fuzzer.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
