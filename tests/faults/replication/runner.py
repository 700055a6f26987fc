"""The fault suite's run: a 3-node ZooKeeper ensemble, 3 brokers, one topic, the workload of
:mod:`.workload` and rounds of :mod:`.nemesis` faults; the history checked by :mod:`.checker`.

    .venv/bin/python -m tests.faults.replication --seed N --rounds R --duration S

prints the seed first (``--seed`` replays the same sequence of faults, targets and
durations), writes ``history.jsonl`` and ``summary.json`` under ``--out`` and exits 0 when
the checker finds nothing, 1 when it finds an anomaly, 2 when the harness itself failed (a
broker that would not come back, ...). A round: the faults start (``fault`` event), stay on
for up to ``--duration`` seconds (longer when a fault needs it), stop in reverse order, the
cluster is healed (every ZooKeeper node serving, every broker registered, every partition
led), the ``stop`` event is written, and a quiet time of up to ``--quiet`` seconds follows.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from moldau.testing.cluster import TEST_DEFAULTS, BrokerCluster, BrokerSpec
from moldau.testing.zookeeper import ZooKeeperEnsemble
from tests.net.lab import INNER_ENV

from .checker import Report, check
from .history import History, read_history
from .nemesis import ALL_KINDS, KINDS, NETNS_KINDS, NemesisEnv, choose_round, hold_time, sleep
from .txn_checker import TxnReport, check_txns
from .txn_workload import CommittedConsumer, TxnProducerWorker, final_committed_read
from .workload import ClientSettings, ConsumerWorker, ProducerWorker, final_read

__all__ = ["RunConfig", "RunResult", "main", "run"]


@dataclass
class RunConfig:
    """Everything a run depends on besides the machine's timing."""

    seed: int
    rounds: int = 10
    duration: float = 10.0
    quiet: float = 3.0
    faults: Sequence[str] = KINDS
    replication_factor: int = 3
    min_insync: int = 2
    unclean: bool = False
    partitions: int = 3
    producers: int = 2
    consumers: int = 2
    rate: float = 50.0
    acks: str = "all"
    idempotence: bool = True
    brokers: int = 3
    out: Path | None = None
    netns: bool = False
    settings: dict[str, str] = field(default_factory=dict)
    #: ``records`` (idempotent producers, :mod:`.checker`) or ``txn`` (transactions read
    #: with read_committed, :mod:`.txn_checker`)
    workload: str = "records"
    #: isolation level of the txn workload's consumers (read_uncommitted only to show the
    #: checker catching aborted reads)
    txn_isolation: str = "read_committed"

    def replay_command(self) -> str:
        parts = [f"--seed {self.seed}", f"--rounds {self.rounds}",
                 f"--duration {self.duration:g}", f"--quiet {self.quiet:g}",
                 f"--faults {','.join(self.faults)}",
                 f"--replication-factor {self.replication_factor}",
                 f"--min-insync {self.min_insync}", f"--partitions {self.partitions}",
                 f"--producers {self.producers}", f"--consumers {self.consumers}",
                 f"--rate {self.rate:g}", f"--acks {self.acks}"]
        if not self.idempotence:
            parts.append("--no-idempotence")
        if self.unclean:
            parts.append("--unclean")
        if self.netns:
            parts.append("--netns")
        if self.workload != "records":
            parts.append(f"--workload {self.workload}")
        if self.txn_isolation != "read_committed":
            parts.append(f"--txn-isolation {self.txn_isolation}")
        parts += [f"--set {key}={value}" for key, value in sorted(self.settings.items())]
        return ".venv/bin/python -m tests.faults.replication " + " ".join(parts)


@dataclass
class RunResult:
    report: Report | TxnReport
    history_path: Path
    summary_path: Path
    harness_error: str | None
    summary: dict[str, Any]

    @property
    def exit_code(self) -> int:
        if self.harness_error is not None:
            return 2
        return 0 if self.report.valid else 1


def _broker_settings(config: RunConfig) -> dict[str, str]:
    settings = {**TEST_DEFAULTS, "auto.create.topics.enable": "false"}
    if config.replication_factor > 1:
        settings["min.insync.replicas"] = str(config.min_insync)
        settings["offsets.topic.replication.factor"] = str(config.replication_factor)
    settings["unclean.leader.election.enable"] = str(config.unclean).lower()
    if config.workload == "txn":
        settings["transaction.state.log.replication.factor"] = str(config.replication_factor)
        settings["transaction.state.log.min.isr"] = str(
            min(config.min_insync, config.replication_factor))
        # few coordinator partitions (a fast start); transactions a killed or replaced
        # producer left open are aborted soon after their 10 s timeout
        settings["transaction.state.log.num.partitions"] = "6"
        settings["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "1000"
    settings.update(config.settings)
    return settings


def _create_topic(cluster: BrokerCluster, config: RunConfig, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic_config = {"unclean.leader.election.enable": str(config.unclean).lower()}
    if config.replication_factor > 1:
        topic_config["min.insync.replicas"] = str(config.min_insync)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    new = NewTopic(topic, config.partitions, config.replication_factor, config=topic_config)
    admin.create_topics([new], operation_timeout=30)[topic].result(60)
    _wait_led(cluster, topic, config.partitions, 60)


def _wait_led(cluster: BrokerCluster, topic: str, partitions: int, timeout: float) -> None:
    """Wait until every partition's leader is a registered broker."""
    deadline = time.monotonic() + timeout
    while True:
        leaders = cluster.leaders(topic)
        registered = set(cluster.registered_ids())
        if len(leaders) == partitions and all(b in registered for b in leaders.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"partitions of {topic} not all led by registered brokers "
                               f"after {timeout:.0f} s: leaders {leaders}, registered "
                               f"{sorted(registered)}")
        time.sleep(0.2)


def _heal(env: NemesisEnv, config: RunConfig) -> None:
    """Every ZooKeeper node serving, every broker running and registered, every partition led
    (a fault that failed to stop leaves nothing behind for the next round)."""
    if env.lab is not None:
        env.lab.heal_all()
    env.ensemble.heal(120)
    for broker, node in env.cluster.brokers.items():
        if not node.running():
            env.cluster.restart(broker)
    env.busy.clear()
    env.cluster.wait_registered(timeout=120)
    _wait_led(env.cluster, env.topic, config.partitions, 120)


def run(config: RunConfig, *, ensemble: ZooKeeperEnsemble | None = None,
        log: Callable[[str], None] = print) -> RunResult:
    """One run; ``ensemble`` is an existing 3-node ensemble to use (else one is started).
    With ``config.netns`` the process must already be in a private namespace
    (:func:`.netlab.reexec_private`); the brokers then run in lab namespaces."""
    unknown = [k for k in config.faults if k not in ALL_KINDS]
    if unknown:
        raise ValueError(f"unknown fault kind(s) {unknown}; known: {', '.join(ALL_KINDS)}")
    needs_lab = [k for k in config.faults if k in NETNS_KINDS]
    if needs_lab and not config.netns:
        raise ValueError(f"fault kind(s) {needs_lab} need the brokers in network namespaces: "
                         "add --netns")
    log(f"[faults] seed {config.seed} (--seed {config.seed} replays it)")
    # absolute: ZooKeeper and the brokers run with other working directories
    out = Path(config.out or tempfile.mkdtemp(prefix=f"moldau-faults-{config.seed}-")).resolve()
    if out.exists() and any(out.iterdir()):
        # the brokers' data of an earlier run would belong to another cluster id
        raise ValueError(f"--out {out} is not empty: give a new or empty directory")
    out.mkdir(parents=True, exist_ok=True)
    history_path, summary_path = out / "history.jsonl", out / "summary.json"
    history_path.unlink(missing_ok=True)
    rng = random.Random(config.seed)
    topic = f"faults-{config.seed}-{uuid.uuid4().hex[:6]}"
    own_ensemble = ensemble is None
    started = time.monotonic()
    harness_error: str | None = None
    workers: dict[str, Any] = {}
    rounds_done = 0
    history = History(history_path)
    history.record("meta", seed=config.seed, topic=topic, config=asdict(config) | {
        "out": str(out), "faults": list(config.faults)})
    cluster: BrokerCluster | None = None
    lab: Any = None
    try:
        chroot = f"/faults-{uuid.uuid4().hex[:8]}"
        if config.netns:
            from .netlab import FaultLab, LabBrokerCluster

            lab = FaultLab(config.brokers, out / "lab")
            if ensemble is None:
                ensemble = ZooKeeperEnsemble(3, out / "zookeeper",
                                             bind_host=lab.host).start(120)
            specs = [BrokerSpec(broker_id=i, host=lab.broker_host(i))
                     for i in range(1, config.brokers + 1)]
            cluster = LabBrokerCluster(specs, out / "brokers", pythons=lab.pythons,
                                       defaults=_broker_settings(config),
                                       zookeeper=ensemble.connect(chroot))
        else:
            if ensemble is None:
                ensemble = ZooKeeperEnsemble(3, out / "zookeeper").start(120)
            specs = [BrokerSpec(broker_id=i) for i in range(1, config.brokers + 1)]
            cluster = BrokerCluster(specs, out / "brokers", defaults=_broker_settings(config),
                                    zookeeper=ensemble.connect(chroot))
        cluster.start(180)
        _create_topic(cluster, config, topic)
        log(f"[faults] cluster up in {time.monotonic() - started:.1f} s: brokers "
            f"{cluster.bootstrap()}, ZooKeeper {ensemble.connect_string}, topic {topic} "
            f"({config.partitions} partitions, RF {config.replication_factor})")
        settings = ClientSettings(bootstrap=cluster.bootstrap(), topic=topic,
                                  partitions=config.partitions, acks=config.acks,
                                  idempotence=config.idempotence, rate=config.rate,
                                  log_path=str(out / "clients.log"))
        producers: list[Any]
        consumers: list[Any]
        if config.workload == "txn":
            producers = [TxnProducerWorker(i, settings, history, run_id=topic,
                                           seed=config.seed)
                         for i in range(config.producers)]
            consumers = [CommittedConsumer(i, settings, history,
                                           isolation=config.txn_isolation)
                         for i in range(config.consumers)]
        else:
            producers = [ProducerWorker(i, settings, history)
                         for i in range(config.producers)]
            consumers = [ConsumerWorker(i, settings, history)
                         for i in range(config.consumers)]
        workers = {"producers": producers, "consumers": consumers}
        for worker in (*producers, *consumers):
            worker.start()
        env = NemesisEnv(cluster, ensemble, topic, rng, log, lab=lab)
        sleep(min(config.quiet, 2.0))
        for round_ in range(1, config.rounds + 1):
            faults = choose_round(rng, config.faults)
            kinds = [f.name for f in faults]
            hold = hold_time(rng, faults, env, config.duration)
            history.record("fault", round=round_, kinds=kinds, phase="start")
            targets = []
            try:
                for fault in faults:
                    targets.append(fault.start(env))
                history.record("fault_targets", round=round_, targets=targets)
                log(f"[faults] round {round_}/{config.rounds}: {' + '.join(kinds)} "
                    f"{targets} for {hold:.1f} s")
                sleep(hold)
            finally:
                for fault in reversed(faults[:len(targets)]):
                    fault.stop(env)
                _heal(env, config)
                history.record("fault", round=round_, kinds=kinds, phase="stop")
            rounds_done = round_
            sleep(rng.uniform(config.quiet / 2, config.quiet))
        log("[faults] faults done; producers finishing")
    except Exception:
        harness_error = traceback.format_exc()
        log(f"[faults] harness error (seed {config.seed}):\n{harness_error}")
    finally:
        _finish(workers, cluster, config, settings if workers else None, history, log)
        history.close()
        if cluster is not None:
            cluster.close()
        if own_ensemble and ensemble is not None:
            ensemble.close()
        if lab is not None:
            lab.close()
    report = (check_txns if config.workload == "txn" else check)(read_history(history_path))
    if harness_error is None and not report.stats["acknowledged"]:
        # nothing to lose proves nothing (acks=all on a topic whose followers never fetch)
        harness_error = (f"no record was acknowledged in {rounds_done} rounds: the run proves "
                         f"nothing (are the replicas fetching? see {out / 'clients.log'})")
        log(f"[faults] {harness_error}")
    attempted = report.stats["attempted"]
    # a patient producer's records all end up acknowledged: a low ratio means clients stalled
    acked_ratio = round(report.stats["acknowledged"] / attempted, 4) if attempted else 0.0
    summary = {
        "seed": config.seed, "valid": report.valid and harness_error is None,
        "acknowledged_ratio": acked_ratio, "rounds_per_kind": report.rounds_per_kind,
        "replay": config.replay_command(), "rounds_done": rounds_done,
        "seconds": round(time.monotonic() - started, 1), "history": str(history_path),
        "harness_error": harness_error, "report": report.as_dict(),
        "producers": [{"id": p.producer_id, "unresolved": p.unresolved,
                       "error": repr(p.error) if p.error else None,
                       **({"transactions": p.txns, "replaced": p.replaced}
                          if config.workload == "txn" else {})}
                      for p in workers.get("producers", [])],
        "consumers": [{"id": c.consumer_id, "records": c.records, "sessions": c.sessions}
                      for c in workers.get("consumers", [])],
    }
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    verdict = "HARNESS FAILED (exit 2), checker: " if harness_error else ""
    log(f"[faults] seed {config.seed}: {verdict}{report.summary_line()}; {rounds_done} rounds, "
        f"{report.stats}, {acked_ratio:.1%} of the attempted records acknowledged; rounds "
        f"per fault kind {report.rounds_per_kind}; history {history_path}, summary "
        f"{summary_path}")
    if not report.valid:
        log(f"[faults] per partition {report.as_dict()['per_partition']}; per fault "
            f"{report.as_dict()['per_fault']}; replay: {config.replay_command()}")
    return RunResult(report, history_path, summary_path, harness_error, summary)


def _finish(workers: dict[str, Any], cluster: BrokerCluster | None, config: RunConfig,
            settings: ClientSettings | None, history: History,
            log: Callable[[str], None]) -> None:
    """Stop the producers (waiting for every outcome), the consumers, then the final read,
    while the cluster still runs."""
    producers = workers.get("producers", [])
    for producer in producers:  # all at once: their flushes overlap
        if config.workload == "txn":
            producer.halt()  # after the transaction under way
        else:
            producer.halt(flush_timeout=120)
    for producer in producers:
        producer.join(150)
    if settings is not None:
        sleep(1.0)  # the consumers catch up with the last acknowledged records
    for consumer in workers.get("consumers", []):
        consumer.finish()
    if settings is not None and cluster is not None:
        try:
            reader = final_committed_read if config.workload == "txn" else final_read
            complete = reader(settings, history)
            log(f"[faults] final read {'complete' if complete else 'INCOMPLETE'}")
        except Exception:
            log(f"[faults] final read failed:\n{traceback.format_exc()}")


def parse_args(argv: Sequence[str] | None = None) -> RunConfig:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.replication",
        description="Fault rounds against 3 brokers and a 3-node ZooKeeper ensemble; checks "
                    "that no acknowledged record is lost, duplicated or divergent.")
    parser.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--duration", type=float, default=10.0,
                        help="longest time a fault stays on, s (a fault may need longer)")
    parser.add_argument("--quiet", type=float, default=3.0,
                        help="longest quiet time between rounds, s")
    parser.add_argument("--faults", default=None,
                        help=f"comma list of fault kinds (default: all but the lossy one, and "
                             f"{', '.join(NETNS_KINDS)} only with --netns); "
                             f"known: {', '.join(ALL_KINDS)}")
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--min-insync", type=int, default=2,
                        help="min.insync.replicas when the replication factor is over 1")
    parser.add_argument("--unclean", action="store_true",
                        help="unclean.leader.election.enable=true (broker and topic)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--rate", type=float, default=50.0,
                        help="records per second per producer")
    parser.add_argument("--acks", default="all", choices=["all", "1", "0", "-1"])
    parser.add_argument("--no-idempotence", dest="idempotence", action="store_false")
    parser.add_argument("--netns", action="store_true",
                        help="every broker in a network namespace of its own, inside a "
                             "private namespace (adds the partition-leader fault kind)")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="a broker setting on top of the suite's (repeatable), e.g. "
                             "--set replica.lag.time.max.ms=2000")
    parser.add_argument("--workload", choices=["records", "txn"], default="records",
                        help="records: idempotent producers, every acknowledged record kept; "
                             "txn: transactions committed or aborted at random, read with "
                             "read_committed (aborted reads, lost commits, duplicates, "
                             "partial transactions)")
    parser.add_argument("--txn-isolation", choices=["read_committed", "read_uncommitted"],
                        default="read_committed",
                        help="isolation level of the txn workload's consumers (the final "
                             "read is always read_committed); read_uncommitted shows the "
                             "checker catching aborted reads")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for history.jsonl, summary.json and the processes' "
                             "data and logs (default: a new temporary directory)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    default = ",".join(KINDS + (NETNS_KINDS if args.netns else ()))
    faults = [k.strip() for k in (args.faults or default).split(",") if k.strip()]
    settings = {}
    for item in args.settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--set {item!r}: expected KEY=VALUE, e.g. "
                         "--set replica.lag.time.max.ms=2000")
        settings[key.strip()] = value.strip()
    unknown = [k for k in faults if k not in ALL_KINDS]
    if unknown or not faults:
        parser.error(f"--faults: unknown kind(s) {unknown}; known: {', '.join(ALL_KINDS)}")
    return RunConfig(seed=seed, rounds=args.rounds, duration=args.duration, quiet=args.quiet,
                     faults=faults, replication_factor=args.replication_factor,
                     min_insync=args.min_insync, unclean=args.unclean,
                     partitions=args.partitions, producers=args.producers,
                     consumers=args.consumers, rate=args.rate, acks=args.acks,
                     idempotence=args.idempotence, out=args.out, netns=args.netns,
                     settings=settings, workload=args.workload,
                     txn_isolation=args.txn_isolation)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    if config.netns and os.environ.get(INNER_ENV) != "1":
        from .netlab import reexec_private

        # the seed is fixed here so the run inside is the one printed
        print(f"[faults] seed {config.seed}: re-running inside a private network namespace",
              flush=True)
        given = list(sys.argv[1:] if argv is None else argv)
        return reexec_private([*given, "--seed", str(config.seed)])
    # kazoo warns on stderr at every connection ZooKeeper faults drop (the brokers' own logs
    # and the history say what happened)
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    # run() prints the seed first, before anything that can hang or fail
    result = run(config, log=lambda line: print(line, flush=True))
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
