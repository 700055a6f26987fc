"""``moldau pipeline tag``: seed 002's tagging pipeline on Spark (needs ``moldau[spark]``).

Reads a head-office topic (through NAT with ``--address-map``), joins every record with the
branch's reference data (a CSV/Parquet file or a compacted topic) and writes one JSON tag
record per source record to a topic of the branch's cluster::

    moldau pipeline tag \\
        --source-bootstrap 203.0.113.11:9092 --source-topic events \\
        --address-map 10.10.0.11:9092=203.0.113.11:9092 \\
        --reference branch.csv \\
        --target-bootstrap localhost:9092 --target-topic tags \\
        --checkpoint /var/lib/moldau/tag-checkpoint \\
        [--master local[*] | spark://host:7077] [--trigger available-now|processing-time=10s]

The record formats are described in :mod:`moldau.spark.tag_pipeline` and docs/spark.md.
With ``--trigger available-now`` (the default) the command reads what is there, writes the
tag records and exits; with ``processing-time=...`` it runs until SIGTERM/SIGINT and stops
between micro-batches. Either way the checkpoint directory remembers the source offsets.
Tag records are written exactly once (``--delivery-guarantee exactly-once``, the default;
read them with ``isolation.level=read_committed``); ``at-least-once`` behaves as Spark's own
Kafka sink and may repeat records after a crash.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from typing import Any


def _key_values(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"moldau pipeline: {flag} needs KEY=VALUE, not {item!r}")
        out[key.strip()] = value.strip()
    return out


_PY_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*)(?:Error|Exception): .+")


def short_error(exc: BaseException) -> str:
    """The Python error at the root of a Spark failure, not the plan and JVM trace."""
    text = str(exc)
    lines = [line.strip() for line in text.splitlines()]
    causes = [line for line in lines if _PY_ERROR.match(line)]
    if causes:
        return causes[-1].split(" SQLSTATE")[0]
    return lines[0] if lines else type(exc).__name__


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "pipeline", help="run a Spark pipeline (tag: seed 002's tagging pipeline)",
        description="Spark pipelines over Kafka-compatible clusters (needs pip install "
                    "'moldau[spark]').")
    pipelines = parser.add_subparsers(dest="pipeline", metavar="PIPELINE", required=True)
    tag = pipelines.add_parser(
        "tag", help="join a (remote) topic with branch reference data into tag records",
        description=textwrap.fill(
            "Read a head-office topic (through NAT with --address-map), join every record "
            "with the branch's reference data (a CSV/Parquet file or a compacted topic) and "
            "write one JSON tag record per source record to a topic of the branch's "
            "cluster. Record formats: docs/spark.md.", 78),
        epilog="example:\n"
               "  moldau pipeline tag --source-bootstrap 203.0.113.11:9092 \\\n"
               "      --source-topic events --address-map 10.10.0.11:9092=203.0.113.11:9092 \\\n"
               "      --reference branch.csv --target-bootstrap localhost:9092 \\\n"
               "      --target-topic tags --checkpoint /var/lib/moldau/tag-checkpoint\n\n"
               + textwrap.fill("--trigger available-now (default) tags what is there and "
                               "exits; processing-time=10s runs until SIGTERM/SIGINT and "
                               "stops between micro-batches.", 78, break_on_hyphens=False),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = tag.add_argument_group("source (head office)")
    src.add_argument("--source-bootstrap", required=True, metavar="HOST:PORT[,...]")
    src.add_argument("--source-topic", required=True)
    src.add_argument("--address-map", metavar="ADVERTISED=REACHABLE[,...]",
                     help="broker.address.map for the source cluster (brokers behind NAT)")
    src.add_argument("--starting-offsets", default="earliest",
                     help="where a new query starts: earliest (default), latest or JSON")
    src.add_argument("--max-offsets-per-trigger", type=int,
                     help="at most this many source records per micro-batch")
    src.add_argument("--source-option", action="append", default=[], metavar="KEY=VALUE",
                     help="any other option of the moldau source (repeatable)")
    ref = tag.add_argument_group("reference data (branch)")
    ref.add_argument("--reference", metavar="FILE",
                     help="CSV (with a header line) or Parquet file keyed by --key-field")
    ref.add_argument("--reference-topic", metavar="TOPIC",
                     help="compacted topic: key = id, value = JSON object of attributes")
    ref.add_argument("--reference-bootstrap", metavar="HOST:PORT[,...]",
                     help="cluster of --reference-topic (default: --target-bootstrap)")
    ref.add_argument("--key-field", default="id",
                     help="field of the source JSON (and column of the reference) to join on")
    dst = tag.add_argument_group("target (branch)")
    dst.add_argument("--target-bootstrap", required=True, metavar="HOST:PORT[,...]")
    dst.add_argument("--target-topic", required=True)
    dst.add_argument("--target-option", action="append", default=[], metavar="KEY=VALUE",
                     help="any other option of the moldau sink, e.g. kafka.linger.ms=20")
    dst.add_argument("--delivery-guarantee", default="exactly-once",
                     choices=["exactly-once", "at-least-once"],
                     help="exactly-once (default): each task's tag records commit in one "
                          "transaction with the batch id, read them with read_committed; "
                          "at-least-once: as Spark's Kafka sink, a crash repeats records")
    running = tag.add_argument_group("running")
    running.add_argument("--checkpoint", required=True, metavar="DIR",
                     help="Spark checkpoint directory (source offsets, query state)")
    running.add_argument("--master", default="local[*]",
                     help="Spark master: local[*] (default) or spark://HOST:PORT")
    running.add_argument("--trigger", default="available-now",
                     help="available-now (default: process what is there, then exit) or "
                          "processing-time=INTERVAL (run until stopped)")
    running.add_argument("--driver-host", default="127.0.0.1",
                     help="address executors use to reach this driver (default 127.0.0.1; "
                          "set it when the cluster runs on other machines)")
    running.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                     help="extra Spark configuration (repeatable)")
    tag.set_defaults(func=run_tag)


def run_tag(args: argparse.Namespace) -> int:
    try:
        from moldau.spark.tag_pipeline import TagPipeline
        from moldau.spark.tag_pipeline import run as run_pipeline
    except ImportError as exc:
        print(f"moldau pipeline: needs PySpark ({exc}); install with pip install "
              "'moldau[spark]'", file=sys.stderr)
        return 2
    pipeline = TagPipeline(
        source_bootstrap=args.source_bootstrap, source_topic=args.source_topic,
        target_bootstrap=args.target_bootstrap, target_topic=args.target_topic,
        checkpoint=args.checkpoint, address_map=args.address_map, reference=args.reference,
        reference_topic=args.reference_topic, reference_bootstrap=args.reference_bootstrap,
        key_field=args.key_field, trigger=args.trigger,
        starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        delivery_guarantee=args.delivery_guarantee,
        source_options=_key_values(args.source_option, "--source-option"),
        target_options=_key_values(args.target_option, "--target-option"),
    )
    try:
        pipeline.check()
    except ValueError as exc:
        print(f"moldau pipeline tag: {exc}", file=sys.stderr)
        return 2
    from moldau.spark.session import build_session

    spark: Any = build_session(args.master, "moldau-pipeline-tag",
                               _key_values(args.spark_conf, "--spark-conf"),
                               driver_host=args.driver_host)
    try:
        summary = run_pipeline(spark, pipeline)
    except Exception as exc:
        print(f"moldau pipeline tag: {short_error(exc)}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(json.dumps({"pipeline": "tag", "source_topic": args.source_topic,
                      "target_topic": args.target_topic, **summary}), flush=True)
    return 0
