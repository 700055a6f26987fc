"""``moldau perf produce|consume|e2e``: load generators with Kafka's perf-tool flags.

``produce`` mirrors kafka-producer-perf-test (``--topic --num-records --record-size
--throughput --producer-props k=v ... --producer.config``) and prints its summary line;
``consume`` mirrors kafka-consumer-perf-test (``--bootstrap-server --topic --messages --group
--fetch-size --timeout --show-detailed-stats``) and prints its CSV columns (librdkafka's
``fetch.queue.backoff.ms`` defaults to 10 ms here, not 1 s, so the consumer does not idle);
``e2e`` measures end-to-end latency at a fixed rate (Kafka's EndToEndLatency, OpenMessaging
style).
All three accept ``--processes N`` (worker processes) and ``--json``; a progress bar is drawn
when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from ..perf.props import PropsError, librdkafka_config, parse_pairs, read_properties


def _default_processes() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "perf", help="producer/consumer load generators (kafka-*-perf-test)",
        description="Load generators mirroring kafka-producer-perf-test and "
                    "kafka-consumer-perf-test, driven by librdkafka in several processes.")
    sub = parser.add_subparsers(dest="perf_command", metavar="TOOL")
    sub.required = True

    p = sub.add_parser("produce", help="producer throughput and latency",
                       description="Produce --num-records records and report throughput "
                                   "and per-record latency (kafka-producer-perf-test).")
    p.add_argument("--topic", required=True, help="topic to produce to")
    p.add_argument("--num-records", type=int, required=True, help="records to produce")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--record-size", type=int, help="bytes per record (random, distinct)")
    size.add_argument("--payload-file", help="file of payloads, split by --payload-delimiter")
    p.add_argument("--payload-delimiter", default="\n", help="payload separator (default \\n)")
    p.add_argument("--throughput", type=float, default=-1,
                   help="records/sec over all processes; -1 = unthrottled")
    p.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE",
                   help="librdkafka/Kafka producer settings, e.g. bootstrap.servers=HOST:PORT")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                   help="producer settings file (Java properties format)")
    p.add_argument("--bootstrap-server", help="shortcut for bootstrap.servers")
    p.add_argument("--partition", type=int, help="send every record to this partition")
    _common(p)
    p.set_defaults(func=run_produce_cmd)

    c = sub.add_parser("consume", help="consumer throughput",
                       description="Consume --messages records and report throughput "
                                   "(kafka-consumer-perf-test).")
    c.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...]")
    c.add_argument("--topic", required=True, help="topic to consume")
    c.add_argument("--messages", type=int, required=True, help="records to consume")
    c.add_argument("--group", help="consumer group (default perf-consumer-<random>)")
    c.add_argument("--assign", action="store_true",
                   help="no group: split the partitions between processes, read from the start")
    c.add_argument("--fetch-size", type=int, help="max.partition.fetch.bytes")
    c.add_argument("--timeout", type=int, default=10_000,
                   help="ms without records before giving up (default 10000)")
    c.add_argument("--from-latest", action="store_true", help="start at the end of the log")
    c.add_argument("--show-detailed-stats", action="store_true",
                   help="print a stats line every --reporting-interval")
    c.add_argument("--reporting-interval", type=int, default=5000, help="ms (default 5000)")
    c.add_argument("--hide-header", action="store_true", help="no column header")
    c.add_argument("--consumer-props", nargs="+", default=[], metavar="KEY=VALUE",
                   help="librdkafka/Kafka consumer settings")
    c.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                   help="consumer settings file (Java properties format)")
    _common(c)
    c.set_defaults(func=run_consume_cmd)

    e = sub.add_parser("e2e", help="end-to-end latency at a fixed rate",
                       description="Produce at --rate records/s for --duration seconds and "
                                   "report end-to-end (produce to consume) and publish "
                                   "latency percentiles.")
    e.add_argument("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...]")
    e.add_argument("--topic", required=True)
    e.add_argument("--rate", type=float, default=10_000, help="records/sec (default 10000)")
    e.add_argument("--duration", type=float, default=10.0, help="seconds (default 10)")
    e.add_argument("--record-size", type=int, default=1024, help="bytes (default 1024)")
    e.add_argument("--warmup", type=float, default=1.0, help="seconds not counted (default 1)")
    e.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE")
    e.add_argument("--consumer-props", nargs="+", default=[], metavar="KEY=VALUE")
    _common(e, default_processes=1)
    e.set_defaults(func=run_e2e_cmd)


def _common(p: argparse.ArgumentParser, default_processes: int | None = None) -> None:
    p.add_argument("--processes", type=int, default=default_processes or _default_processes(),
                   help="worker processes generating load (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--reporting-interval-ms", dest="interval_ms", type=int, default=5000,
                   help=argparse.SUPPRESS)


def _config(pairs: list[str], path: str | None, bootstrap: str | None) -> dict[str, str]:
    props = read_properties(path) if path else {}
    props.update(parse_pairs(pairs))
    if bootstrap:
        props["bootstrap.servers"] = bootstrap
    if "bootstrap.servers" not in props:
        raise PropsError("no bootstrap.servers: pass --bootstrap-server HOST:PORT or "
                         "--producer-props bootstrap.servers=HOST:PORT")
    return librdkafka_config(props)


class _Reporter:
    """A bar on a terminal; Kafka-style interval lines on stdout otherwise (not with --json)."""

    def __init__(self, total: int, interval_ms: int, quiet: bool) -> None:
        from ..perf.progress import ProgressBar, use_bar

        self.bar = ProgressBar(total) if use_bar(sys.stderr) else None
        self.quiet = quiet
        self.interval = interval_ms / 1000
        self.next_line = self.interval
        self.last = (0, 0.0, 0)

    def produce(self, acked: int, errors: int, elapsed: float, window: dict[str, float],
                size: int) -> None:
        rate = acked / elapsed if elapsed else 0.0
        if self.bar is not None:
            self.bar.update(acked, rate, rate * size / 1048576)
            return
        if self.quiet or elapsed < self.next_line:
            return
        self.next_line += self.interval
        n0, t0, _ = self.last
        d, dt = acked - n0, elapsed - t0
        self.last = (acked, elapsed, 0)
        r = d / dt if dt else 0.0
        print(f"{d} records sent, {r:.1f} records/sec ({r * size / 1048576:.2f} MB/sec), "
              f"{window['avg_ms']:.1f} ms avg latency, {window['max_ms']:.1f} ms max latency.",
              flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_produce_cmd(args: argparse.Namespace) -> int:
    from ..perf.payloads import file_payloads
    from ..perf.produce import ProduceOptions, run_produce

    try:
        config = _config(args.producer_props, args.producer_config, args.bootstrap_server)
        payloads = file_payloads(args.payload_file, args.payload_delimiter) \
            if args.payload_file else None
    except (PropsError, OSError, ValueError) as exc:
        print(f"moldau perf produce: {exc}", file=sys.stderr)
        return 2
    if payloads is None and not args.record_size:
        print("moldau perf produce: pass --record-size or --payload-file", file=sys.stderr)
        return 2
    opts = ProduceOptions(args.topic, args.num_records, args.record_size or 0, config,
                          throughput=args.throughput, processes=args.processes,
                          payloads=payloads, partition=args.partition)
    size = args.record_size or (sum(map(len, payloads)) // len(payloads) if payloads else 0)
    rep = _Reporter(args.num_records, args.interval_ms, args.json)
    try:
        result = run_produce(opts, lambda a, e, t, w: rep.produce(a, e, t, w, size))
    except RuntimeError as exc:
        rep.close()
        print(f"moldau perf produce: {exc}", file=sys.stderr)
        return 1
    rep.close()
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(result.summary_line())
        if result.errors:
            print(f"{result.errors} records failed; first error: {result.first_error}",
                  file=sys.stderr)
    return 1 if result.errors else 0


def run_consume_cmd(args: argparse.Namespace) -> int:
    from ..perf.consume import HEADER, ConsumeOptions, format_row, run_consume

    try:
        config = _config(args.consumer_props, args.consumer_config, args.bootstrap_server)
    except PropsError as exc:
        print(f"moldau perf consume: {exc}", file=sys.stderr)
        return 2
    opts = ConsumeOptions(args.topic, args.messages, config, group=args.group,
                          assign=args.assign, from_latest=args.from_latest,
                          fetch_size=args.fetch_size, timeout_ms=args.timeout,
                          processes=args.processes)
    from ..perf.progress import ProgressBar, use_bar

    bar = ProgressBar(args.messages) if use_bar(sys.stderr) and not args.json else None
    detailed = args.show_detailed_stats and not args.json
    if detailed and not args.hide_header:
        print("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec")
    state: dict[str, Any] = {"next": args.reporting_interval / 1000, "last": (0, 0, 0.0)}

    def progress(records: int, nbytes: int, elapsed: float) -> None:
        if bar is not None:
            rate = records / elapsed if elapsed else 0.0
            bar.update(records, rate, nbytes / 1048576 / elapsed if elapsed else 0.0)
        if detailed and elapsed >= state["next"]:
            state["next"] += args.reporting_interval / 1000
            r0, b0, t0 = state["last"]
            dt = elapsed - t0 or 1e-9
            state["last"] = (records, nbytes, elapsed)
            stamp = time.strftime("%Y-%m-%d %H:%M:%S:000")
            print(f"{stamp}, 0, {nbytes / 1048576:.4f}, {(nbytes - b0) / 1048576 / dt:.4f}, "
                  f"{records}, {(records - r0) / dt:.4f}", flush=True)

    try:
        result = run_consume(opts, progress)
    except RuntimeError as exc:
        if bar is not None:
            bar.close()
        print(f"moldau perf consume: {exc}", file=sys.stderr)
        return 1
    if bar is not None:
        bar.close()
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    if not args.hide_header and not detailed:
        print(HEADER)
    if not detailed:
        print(format_row(result.row()))
    if result.timed_out and result.records < args.messages:
        print(f"WARNING: Exiting before consuming the expected number of messages: timeout "
              f"({args.timeout} ms) exceeded. You can use the --timeout option to increase "
              f"the timeout.", file=sys.stderr)
    return 0


def run_e2e_cmd(args: argparse.Namespace) -> int:
    from ..perf.e2e import E2EOptions, run_e2e

    try:
        prod = _config(args.producer_props, None, args.bootstrap_server)
        cons = _config(args.consumer_props, None, args.bootstrap_server)
    except PropsError as exc:
        print(f"moldau perf e2e: {exc}", file=sys.stderr)
        return 2
    opts = E2EOptions(args.topic, args.rate, args.duration, args.record_size, prod, cons,
                      processes=args.processes, warmup_s=args.warmup)
    try:
        result = run_e2e(opts)
    except RuntimeError as exc:
        print(f"moldau perf e2e: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result.to_json()) if args.json else result.summary_line())
    return 1 if result.errors else 0
