"""What replication costs: throughput, end-to-end latency and failover times (issue 13).

In one run, with the same client (``moldau perf produce``: librdkafka producers, W1's
settings) and the same records, three halves:

* **single**: one ``moldau serve`` without ZooKeeper (the broker of the other benchmarks),
  topic with replication factor 1, ``acks=1``;
* **replicated**: three ``moldau serve`` processes on 127.0.0.1 and a ZooKeeper started here
  (:class:`moldau.testing.cluster.BrokerCluster`), topic with replication factor 3 and
  ``min.insync.replicas=2``, ``acks=all``;
* **cluster_rf1**: the same three brokers with a replication factor 1 topic and ``acks=1``,
  Kafka's own baseline for its published ratio (same machines, no replication).

The single broker and the cluster stay up for the whole run and the passes alternate
(single, cluster_rf1, replicated, single, ...), so the halves of each ratio see the same
machine load; the ratios (replicated / single, and replicated / cluster_rf1) are taken per
pass and their medians reported, with the brokers' CPU seconds per GB of each half.

Then, on the cluster: end-to-end latency (produce -> consume, ``moldau perf e2e``) at
10,000 msg/s of 1 KiB with ``acks=all`` (and the single node with ``acks=1`` for reference),
and failover times: a controlled shutdown (SIGTERM) of a partition leader until
ZooKeeper names another leader, and kill -9 of a leader until an idempotent producer's first
record sent after the kill is acknowledged.

CPU split as ``bench.run``: for throughput every broker and ZooKeeper run on CPU 1 and the
client processes on CPU 0 (``--no-pin`` to leave them free); latency and failover unpinned.

    .venv/bin/python -m bench.replication                      # ~2.5 minutes here
    .venv/bin/python -m bench.replication --repeat 3 --records 1000000
    .venv/bin/python -m bench.replication --profile            # py-spy on each broker

Prints the figures and writes bench/results/replication-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.perf.e2e import E2EOptions, run_e2e
from moldau.perf.produce import ProduceOptions, run_produce
from moldau.testing.cluster import BrokerCluster

from .brokers import BenchBroker, create_topic, pin_self, servers_on, start_broker
from .common import RESULTS
from .proc import Sampler, cpu_seconds
from .pyspy_profile import _IDLE as _PYSPY_IDLE
from .workloads import PRODUCER_E2E, PRODUCER_W1

BROKER_CPU = 1
CLIENT_CPU = 0
KAFKA_RATIO = 421_823 / 821_557  # Kafka 2014: 3 replicas acks=all vs 1 replica


@dataclass
class Plan:
    """How much the run does (the smoke test shrinks everything)."""

    records: int = 1_000_000
    record_size: int = 100
    partitions: int = 6
    processes: int = 2
    repeat: int = 3
    e2e_rate: float = 10_000
    e2e_seconds: float = 15.0
    e2e_warmup_s: float = 2.0
    failover: bool = True
    pin: bool = True
    profile_dir: Path | None = None


def _set_affinity(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` onto ``cpus``."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return
    for task in tasks:
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except OSError:
            pass


def _all_cpus() -> set[int]:
    return set(range(os.cpu_count() or 1))


class Setup:
    """The single broker and the 3-broker cluster (with its own ZooKeeper), both running."""

    def __init__(self, plan: Plan, workdir: Path) -> None:
        self.plan = plan
        self.workdir = workdir
        self.single: BenchBroker | None = None
        self.cluster: BrokerCluster | None = None

    def start(self) -> Setup:
        with servers_on({BROKER_CPU}, {CLIENT_CPU}, pin=self.plan.pin):
            self.single = start_broker("moldau", None, workdir=self.workdir / "single")
            self.cluster = BrokerCluster(3, self.workdir / "cluster").start()
        return self

    def server_pids(self) -> list[int]:
        pids = [self.single.pid] if self.single is not None else []
        if self.cluster is not None:
            pids += [n.pid for n in self.cluster.brokers.values() if n.running() and n.pid]
            if self.cluster.zookeeper is not None:
                pids += [n.pid for n in self.cluster.zookeeper.nodes if n.pid]
        return pids

    def unpin(self) -> None:
        """Latency and failover phases: everything may use every CPU."""
        for pid in self.server_pids():
            _set_affinity(pid, _all_cpus())
        pin_self(_all_cpus())

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        if self.single is not None:
            self.single.close()

    @property
    def cluster_bootstrap(self) -> str:
        assert self.cluster is not None
        return self.cluster.bootstrap()

    def cluster_pids(self) -> dict[int, int]:
        assert self.cluster is not None
        return {i: n.pid for i, n in self.cluster.brokers.items() if n.running() and n.pid}


def create_replicated_topic(bootstrap: str, name: str, partitions: int,
                            timeout_s: float = 60.0) -> None:
    """Replication factor 3, ``min.insync.replicas=2``; waits for a full ISR everywhere."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})],
        operation_timeout=timeout_s, request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 and len(p.isrs) == 3
                        for p in topic.partitions.values())):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name}: no full ISR on {partitions} partitions "
                       f"after {timeout_s} s")


# Besides the event loop waiting: kazoo's thread in its select and idle executor threads
# (py-spy samples every thread; these wait, they do not use the CPU).
_IDLE = (*_PYSPY_IDLE, "EpollSelector.select (selectors.py",
         "_worker (concurrent/futures/thread.py:81)", "_worker (concurrent/futures/thread.py:83)",
         "wait (threading.py")


class _Profiler:
    """py-spy attached to each broker pid while a block runs (``--profile``)."""

    def __init__(self, pids: dict[str, int], out_dir: Path | None) -> None:
        self.pids, self.out_dir = pids, out_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> _Profiler:
        if self.out_dir is None:
            return self
        from .pyspy_profile import py_spy

        self.out_dir.mkdir(parents=True, exist_ok=True)
        spy = py_spy()
        for name, pid in self.pids.items():
            self.procs.append(subprocess.Popen(
                ["taskset", "-c", ",".join(map(str, sorted(_all_cpus()))), spy, "record",
                 "-p", str(pid), "-o", str(self.out_dir / f"{name}.txt"), "-f", "raw",
                 "-r", "200", "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.out_dir is not None:
            from .pyspy_profile import summarize

            summary = {name: summarize(self.out_dir / f"{name}.txt", top=30, idle=_IDLE)
                       for name in self.pids if (self.out_dir / f"{name}.txt").exists()}
            (self.out_dir / "summary.json").write_text(json.dumps(summary, indent=2))


def _produce(bootstrap: str, topic: str, plan: Plan, acks: str,
             pids: dict[str, int], profile_dir: Path | None) -> dict[str, Any]:
    opts = ProduceOptions(topic, plan.records, plan.record_size,
                          dict(PRODUCER_W1, acks=acks, **{"bootstrap.servers": bootstrap}),
                          processes=plan.processes)
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    with _Profiler(pids, profile_dir), Sampler(next(iter(pids.values()))) as sampler:
        result = run_produce(opts)
    out = result.to_json()
    out.pop("workers", None)
    out["acks"] = acks
    out["wall_s"] = sampler.usage.wall_s if sampler.usage else None
    spent = {name: cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
    out["server_cpu_s"] = {name: round(s, 2) for name, s in spent.items()}
    out["mb_per_s"] = round(result.mb_per_s, 2)
    # what the records cost the brokers, all of them: a figure the machine's load moves less
    # than throughput does (from the unrounded seconds: a short run spends only a few ticks)
    out["server_cpu_s_per_gb"] = (round(sum(spent.values()) / (result.bytes / 1e9), 2)
                                  if result.bytes else None)
    return out


def _ratio(a: dict[str, Any], b: dict[str, Any]) -> float:
    return round(a["records_per_s"] / b["records_per_s"], 4) if b["records_per_s"] else 0.0


def throughput_pass(setup: Setup, n: int) -> dict[str, Any]:
    """One pass: the single node with acks=1; the cluster with a replication factor 1 topic
    and acks=1 (Kafka's own baseline: same brokers, no replication); the cluster with
    replication factor 3 and acks=all."""
    plan = setup.plan
    assert setup.single is not None
    single_topic, rf1_topic, repl_topic = f"single-{n}", f"rf1-{n}", f"replicated-{n}"
    create_topic(setup.single.bootstrap, single_topic, plan.partitions)
    create_topic(setup.cluster_bootstrap, rf1_topic, plan.partitions)
    create_replicated_topic(setup.cluster_bootstrap, repl_topic, plan.partitions)
    profile = plan.profile_dir / f"pass-{n}" if plan.profile_dir else None
    cluster = {f"broker-{i}": pid for i, pid in setup.cluster_pids().items()}
    single = _produce(setup.single.bootstrap, single_topic, plan, "1",
                      {"single": setup.single.pid},
                      profile / "single" if profile else None)
    rf1 = _produce(setup.cluster_bootstrap, rf1_topic, plan, "1", cluster,
                   profile / "cluster-rf1" if profile else None)
    replicated = _produce(setup.cluster_bootstrap, repl_topic, plan, "all", cluster,
                          profile / "replicated" if profile else None)
    return {"single": single, "cluster_rf1": rf1, "replicated": replicated,
            "ratio": _ratio(replicated, single), "ratio_same_cluster": _ratio(replicated, rf1)}


def e2e(bootstrap: str, topic: str, plan: Plan, acks: str, replicated: bool,
        pids: dict[str, int], profile_dir: Path | None = None) -> dict[str, Any]:
    if replicated:
        create_replicated_topic(bootstrap, topic, plan.partitions)
    else:
        create_topic(bootstrap, topic, plan.partitions)
    opts = E2EOptions(topic, plan.e2e_rate, plan.e2e_seconds, 1024,
                      dict(PRODUCER_E2E, acks=acks, **{"bootstrap.servers": bootstrap}),
                      {"bootstrap.servers": bootstrap}, processes=1,
                      warmup_s=plan.e2e_warmup_s)
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    with _Profiler(pids, profile_dir):
        out = run_e2e(opts).to_json()
    out["acks"] = acks
    out["server_cpu_s"] = {name: round(cpu_seconds(pid) - cpu0[name], 2)
                           for name, pid in pids.items()}
    return out


class _SteadyProducer:
    """An idempotent acks=all producer sending one record to one partition every 5 ms in a
    thread; remembers when each record was sent and when (and how) it was answered."""

    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 0,
                                  "message.timeout.ms": 120_000,
                                  "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.topic, self.partition = topic, partition
        self.acked: list[tuple[float, float]] = []  # (sent at, acked at)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            sent = time.monotonic()

            def report(err: Any, _msg: Any, sent: float = sent) -> None:
                if err is None:
                    self.acked.append((sent, time.monotonic()))
                else:
                    self.errors.append(str(err))

            self.producer.produce(self.topic, str(i).encode(), partition=self.partition,
                                  on_delivery=report)
            i += 1
            self.producer.poll(0.005)

    def start(self) -> _SteadyProducer:
        self._thread.start()
        return self

    def first_ack_after(self, t0: float, timeout: float) -> float:
        """Seconds from ``t0`` to the first acknowledgement of a record sent after ``t0``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for sent, acked in list(self.acked):
                if sent >= t0:
                    return acked - t0
            time.sleep(0.01)
        raise RuntimeError(f"no record sent after the fault was acknowledged in {timeout} s "
                           f"(errors: {self.errors[:3]})")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.producer.flush(30)


def _leader(cluster: BrokerCluster, topic: str, partition: int) -> int:
    return cluster.leaders(topic).get(partition, -1)


def _steady_partition(cluster: BrokerCluster, topic: str) -> tuple[int, int, int | None]:
    """(partition, its leader, the controller): a partition led by a broker that is not the
    controller, the ordinary case (a killed controller adds its own re-election)."""
    controller = cluster.controller_id()
    leaders = cluster.leaders(topic)
    partition = next((p for p, b in sorted(leaders.items()) if b != controller), 0)
    return partition, leaders.get(partition, -1), controller


def failover(setup: Setup, n: int) -> dict[str, Any]:
    """Controlled shutdown of a leader (SIGTERM -> ZooKeeper names another leader), restart
    it, then kill -9 of a leader (-> first acknowledged record sent after the kill); an
    idempotent acks=all producer sends to the victim's partition all along."""
    cluster = setup.cluster
    assert cluster is not None
    topic = f"failover-{n}"
    create_replicated_topic(cluster.bootstrap(), topic, 3)
    out: dict[str, Any] = {"session_timeout_s": cluster.session_timeout_s}

    partition, victim, controller = _steady_partition(cluster, topic)
    producer = _SteadyProducer(cluster.bootstrap(), topic, partition).start()
    try:
        producer.first_ack_after(time.monotonic(), 60)
        t0 = time.monotonic()
        cluster.brokers[victim].terminate()
        while _leader(cluster, topic, partition) in (victim, -1):
            if time.monotonic() - t0 > 60:
                raise RuntimeError(f"leadership of {topic}-{partition} did not move")
            time.sleep(0.01)
        moved = time.monotonic() - t0
        cluster.brokers[victim].wait_stopped(60)
        exited = time.monotonic() - t0
        produced = producer.first_ack_after(t0, 60)
    finally:
        producer.close()
    out["controlled_shutdown"] = {
        "broker": victim, "controller": controller, "leadership_moved_s": round(moved, 3),
        "broker_exited_s": round(exited, 3), "first_ack_after_sigterm_s": round(produced, 3),
        "producer_errors": len(producer.errors)}
    _restart(setup, victim, topic)

    partition, victim, controller = _steady_partition(cluster, topic)
    producer = _SteadyProducer(cluster.bootstrap(), topic, partition).start()
    try:
        producer.first_ack_after(time.monotonic(), 60)
        t0 = time.monotonic()
        cluster.kill9(victim)
        produced = producer.first_ack_after(t0, 120)
    finally:
        producer.close()
    out["kill9"] = {"broker": victim, "controller": controller,
                    "first_ack_after_kill_s": round(produced, 3),
                    "new_leader": _leader(cluster, topic, partition),
                    "producer_errors": len(producer.errors)}
    _restart(setup, victim, topic)
    return out


def _restart(setup: Setup, broker_id: int, topic: str) -> None:
    assert setup.cluster is not None
    node = setup.cluster.restart(broker_id)
    if setup.plan.pin:  # it inherited the clients' CPU
        _set_affinity(node.pid or 0, _all_cpus())
    _wait_full_isr(setup.cluster, topic)


def _wait_full_isr(cluster: BrokerCluster, topic: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [cluster.partition_state(topic, p) for p in cluster.leaders(topic)]
        if states and all(s is not None and len(s["isr"]) == 3 for s in states):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic}: ISR not full again after {timeout} s")


def summarize(passes: list[dict[str, Any]], e2e_runs: dict[str, Any],
              failovers: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the passes."""
    def med(values: list[float]) -> float:
        return round(statistics.median(values), 4) if values else 0.0

    out: dict[str, Any] = {
        "single_records_per_s": med([p["single"]["records_per_s"] for p in passes]),
        "single_mb_per_s": med([p["single"]["mb_per_s"] for p in passes]),
        "replicated_records_per_s": med([p["replicated"]["records_per_s"] for p in passes]),
        "replicated_mb_per_s": med([p["replicated"]["mb_per_s"] for p in passes]),
        "cluster_rf1_records_per_s": med([p["cluster_rf1"]["records_per_s"] for p in passes]),
        "cluster_rf1_mb_per_s": med([p["cluster_rf1"]["mb_per_s"] for p in passes]),
        "ratio_median": med([p["ratio"] for p in passes]),
        "ratios": [p["ratio"] for p in passes],
        "ratio_same_cluster_median": med([p["ratio_same_cluster"] for p in passes]),
        "ratios_same_cluster": [p["ratio_same_cluster"] for p in passes],
        "cpu_s_per_gb": {half: med([p[half]["server_cpu_s_per_gb"] for p in passes
                                    if p[half]["server_cpu_s_per_gb"] is not None])
                         for half in ("single", "cluster_rf1", "replicated")},
        "kafka_ratio": round(KAFKA_RATIO, 4),
    }
    for name, run in e2e_runs.items():
        out[f"e2e_{name}_p50_ms"] = run["end_to_end_ms"]["p50"]
        out[f"e2e_{name}_p99_ms"] = run["end_to_end_ms"]["p99"]
    if failovers:
        out["controlled_shutdown_leadership_moved_s"] = med(
            [f["controlled_shutdown"]["leadership_moved_s"] for f in failovers])
        out["kill9_first_ack_s"] = med([f["kill9"]["first_ack_after_kill_s"]
                                        for f in failovers])
    return out


def report_lines(summary: dict[str, Any], passes: list[dict[str, Any]]) -> list[str]:
    lines = []
    for i, p in enumerate(passes, 1):
        s, c, r = p["single"], p["cluster_rf1"], p["replicated"]
        lines.append(f"pass {i}: single acks=1 {s['records_per_s']:,.0f} rec/s "
                     f"({s['mb_per_s']:.1f} MB/s); 3 brokers RF1 acks=1 "
                     f"{c['records_per_s']:,.0f} rec/s; RF3 acks=all "
                     f"{r['records_per_s']:,.0f} rec/s ({r['mb_per_s']:.1f} MB/s); ratio "
                     f"{p['ratio']:.1%} (same cluster {p['ratio_same_cluster']:.1%})")
    lines.append(f"median: single {summary['single_records_per_s']:,.0f} rec/s, replicated "
                 f"{summary['replicated_records_per_s']:,.0f} rec/s, ratio "
                 f"{summary['ratio_median']:.1%}, same cluster RF1 "
                 f"{summary['cluster_rf1_records_per_s']:,.0f} rec/s, ratio "
                 f"{summary['ratio_same_cluster_median']:.1%} (Kafka 2014: {KAFKA_RATIO:.1%});"
                 f" broker CPU-s per GB {summary['cpu_s_per_gb']}")
    for key in ("e2e_replicated", "e2e_single"):
        if f"{key}_p99_ms" in summary:
            lines.append(f"{key}: p50 {summary[key + '_p50_ms']:.2f} ms, "
                         f"p99 {summary[key + '_p99_ms']:.2f} ms")
    if "kill9_first_ack_s" in summary:
        lines.append(f"failover: controlled shutdown moved leadership in "
                     f"{summary['controlled_shutdown_leadership_moved_s']:.2f} s; kill -9 "
                     f"of a leader to the first acknowledged produce "
                     f"{summary['kill9_first_ack_s']:.2f} s")
    return lines


def run(plan: Plan, log: Callable[[str], None] = print,
        workdir: Path | None = None) -> dict[str, Any]:
    """The whole benchmark; the result as a JSON-able dict."""
    root = Path(tempfile.mkdtemp(prefix="moldau-bench-repl-", dir=workdir))
    setup = Setup(plan, root)
    started = time.time()
    load = os.getloadavg()
    passes: list[dict[str, Any]] = []
    e2e_runs: dict[str, Any] = {}
    failovers: list[dict[str, Any]] = []
    try:
        setup.start()
        for n in range(1, plan.repeat + 1):
            passes.append(throughput_pass(setup, n))
            log(report_lines(summarize(passes[-1:], {}, []), passes[-1:])[0]
                .replace("pass 1", f"pass {n}"))
        setup.unpin()
        if plan.e2e_seconds > 0:
            assert setup.single is not None
            profile = plan.profile_dir / "e2e" if plan.profile_dir else None
            e2e_runs["replicated"] = e2e(
                setup.cluster_bootstrap, "e2e-replicated", plan, "all", True,
                {f"broker-{i}": pid for i, pid in setup.cluster_pids().items()},
                profile / "replicated" if profile else None)
            log(f"e2e RF3 acks=all: {e2e_runs['replicated']['end_to_end_ms']}")
            e2e_runs["single"] = e2e(setup.single.bootstrap, "e2e-single", plan, "1", False,
                                     {"single": setup.single.pid},
                                     profile / "single" if profile else None)
            log(f"e2e single acks=1: {e2e_runs['single']['end_to_end_ms']}")
        if plan.failover:
            for n in range(1, plan.repeat + 1):
                failovers.append(failover(setup, n))
                log(f"failover {n}: {failovers[-1]}")
    finally:
        setup.close()
        pin_self(_all_cpus())
        shutil.rmtree(root, ignore_errors=True)
    from .run import machine

    summary = summarize(passes, e2e_runs, failovers)
    return {"started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
            "seconds": round(time.time() - started, 1), "machine": machine(),
            "load_average_at_start": load, "plan": {k: str(v) for k, v in vars(plan).items()},
            "summary": summary, "passes": passes, "e2e": e2e_runs, "failover": failovers}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=Plan.records)
    parser.add_argument("--record-size", type=int, default=Plan.record_size)
    parser.add_argument("--partitions", type=int, default=Plan.partitions)
    parser.add_argument("--processes", type=int, default=Plan.processes,
                        help="producer processes")
    parser.add_argument("--repeat", type=int, default=Plan.repeat)
    parser.add_argument("--e2e-seconds", type=float, default=Plan.e2e_seconds,
                        help="0 skips the latency runs")
    parser.add_argument("--e2e-rate", type=float, default=Plan.e2e_rate)
    parser.add_argument("--e2e-warmup", type=float, default=Plan.e2e_warmup_s,
                        help="seconds at the start of each latency run not counted")
    parser.add_argument("--no-failover", dest="failover", action="store_false")
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy on every broker during the throughput passes")
    parser.add_argument("--workdir", help="where brokers keep their data (default: /tmp)")
    parser.add_argument("--out", help="JSON path (default bench/results/replication-<time>)")
    args = parser.parse_args(argv)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    plan = Plan(records=args.records, record_size=args.record_size,
                partitions=args.partitions, processes=args.processes, repeat=args.repeat,
                e2e_rate=args.e2e_rate, e2e_seconds=args.e2e_seconds,
                e2e_warmup_s=args.e2e_warmup,
                failover=args.failover, pin=args.pin,
                profile_dir=RESULTS / f"replication-profile-{stamp}" if args.profile else None)
    result = run(plan, workdir=Path(args.workdir) if args.workdir else None)
    for line in report_lines(result["summary"], result["passes"]):
        print(line)
    out = Path(args.out) if args.out else RESULTS / f"replication-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
