"""Seed 002's pipeline on Spark: head-office events + branch reference data -> tag records.

The head office publishes events to a topic of its own cluster, which the branch reaches
only through NAT (its brokers advertise internal addresses; ``kafka.broker.address.map``
rewrites them). The branch joins every event with its own reference data and writes one
enriched *tag record* per event to a topic of its own cluster. Offsets of the head-office
topic live in the query's checkpoint directory, so a restart goes on where the last run
stopped.

Record formats:

* **source event** (head-office topic): the value is a JSON object; the field named by
  ``key_field`` (default ``id``) says which subject (customer, account, device) it is about.
* **reference data**: either a CSV file with a header line (or a Parquet file) with a
  column named ``key_field`` and one column per attribute; or a compacted topic read as a
  table, whose record key is the subject id (UTF-8) and whose value is a JSON object of
  attributes (the latest value per key wins; a null value deletes the key).
* **tag record** (target topic): key = the subject id, value = JSON::

      {"id": "c-42", "tags": {...attributes, null when the branch knows no such id...},
       "event": {...the source event as it was...},
       "source": {"topic": "events", "partition": 0, "offset": 17,
                  "timestamp": "2026-11-21T12:00:00.000Z"}}

  An event whose value is not a JSON object still yields a tag record: ``id`` and ``event``
  are then null and ``raw`` holds the value as text.

Tag records are written exactly once by default (``delivery_guarantee``): each task's part of
a micro-batch commits in one transaction with its batch id, so a crash and a restart from the
checkpoint never tag a source record twice for read_committed readers (docs/spark.md).

Reference data is read when the query starts (a broadcast join), so changes are picked up
by the next run; with ``--trigger available-now`` every scheduled run sees fresh data.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@dataclass
class TagPipeline:
    """Settings of one pipeline (the CLI flags of ``moldau pipeline tag``)."""

    source_bootstrap: str
    source_topic: str
    target_bootstrap: str
    target_topic: str
    checkpoint: str
    address_map: str | None = None
    reference: str | None = None
    reference_topic: str | None = None
    reference_bootstrap: str | None = None
    key_field: str = "id"
    trigger: str = "available-now"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    delivery_guarantee: str = "exactly-once"
    source_options: dict[str, str] = field(default_factory=dict)
    target_options: dict[str, str] = field(default_factory=dict)

    def check(self) -> None:
        """Raise ValueError for settings that cannot work (before Spark starts)."""
        if (self.reference is None) == (self.reference_topic is None):
            raise ValueError("give exactly one of --reference FILE (CSV or Parquet) and "
                             "--reference-topic TOPIC")
        if self.reference is not None:
            path = Path(self.reference)
            if not path.exists():
                raise ValueError(f"reference file {self.reference} does not exist")
            if reference_format(self.reference) is None:
                raise ValueError(f"reference file {self.reference}: use a .csv or .parquet "
                                 "file (or a directory of them)")
        if not _FIELD.fullmatch(self.key_field):
            raise ValueError(f"--key-field {self.key_field!r} must be a plain field name "
                             "(letters, digits, _ and -)")
        parse_trigger(self.trigger)
        if self.delivery_guarantee not in ("exactly-once", "at-least-once"):
            raise ValueError("--delivery-guarantee must be exactly-once or at-least-once, "
                             f"not {self.delivery_guarantee!r}")


def reference_format(path: str) -> str | None:
    """csv or parquet, from the file name (or the files of a directory)."""
    p = Path(path)
    names = [p.name] if p.is_file() else [c.name for c in p.iterdir()] if p.is_dir() else []
    for name in names:
        lowered = name.lower()
        if lowered.endswith(".csv") or lowered.endswith(".csv.gz"):
            return "csv"
        if lowered.endswith(".parquet"):
            return "parquet"
    return None


def parse_trigger(text: str) -> dict[str, Any]:
    """``available-now`` or ``processing-time=10s`` as keyword arguments of trigger()."""
    if text == "available-now":
        return {"availableNow": True}
    if text.startswith("processing-time="):
        interval = text.split("=", 1)[1].strip()
        match = re.fullmatch(r"(\d+)\s*(ms|s|m|h)", interval)
        if not match:
            raise ValueError(f"--trigger {text!r}: the interval must look like 500ms, 10s, 1m "
                             "or 1h")
        unit = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}[match[2]]
        return {"processingTime": f"{match[1]} {unit}"}
    raise ValueError(f"--trigger must be available-now or processing-time=INTERVAL, not "
                     f"{text!r}")


def _source_options(p: TagPipeline) -> dict[str, str]:
    options = {"kafka.bootstrap.servers": p.source_bootstrap, "subscribe": p.source_topic,
               "startingOffsets": p.starting_offsets}
    if p.address_map:
        options["kafka.broker.address.map"] = p.address_map
    if p.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(p.max_offsets_per_trigger)
    options.update(p.source_options)
    return options


def reference_table(spark: Any, p: TagPipeline) -> Any:
    """DataFrame (id string, tags) of the branch's reference data."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if p.reference is not None:
        fmt = reference_format(p.reference)
        reader = spark.read.option("header", "true") if fmt == "csv" else spark.read
        table = reader.format(fmt).load(p.reference)
        if p.key_field not in table.columns:
            raise ValueError(f"reference file {p.reference} has no column {p.key_field!r} "
                             f"(columns: {', '.join(table.columns)})")
        attributes = [c for c in table.columns if c != p.key_field]
        tags = F.struct(*[F.col(f"`{c}`") for c in attributes]) if attributes else F.lit(None)
        return table.select(F.col(f"`{p.key_field}`").cast("string").alias("id"),
                            F.to_variant_object(tags).alias("tags")).dropDuplicates(["id"])
    options = {"kafka.bootstrap.servers": p.reference_bootstrap or p.target_bootstrap,
               "subscribe": p.reference_topic, "startingOffsets": "earliest"}
    records = spark.read.format("moldau").options(**options).load()
    latest = Window.partitionBy("id").orderBy(F.col("offset").desc())
    return (records.where(F.col("key").isNotNull())
            .select(F.col("key").cast("string").alias("id"),
                    F.col("value").cast("string").alias("value"), "offset")
            .withColumn("rank", F.row_number().over(latest))
            .where((F.col("rank") == 1) & F.col("value").isNotNull())
            .select("id", F.try_parse_json("value").alias("tags")))


def tag_records(events: Any, reference: Any, key_field: str) -> Any:
    """The join: one (key, value) tag record per source record (see module docstring)."""
    from pyspark.sql import functions as F

    parsed = events.select(
        F.try_parse_json(F.col("value").cast("string")).alias("event"),
        F.col("value").cast("string").alias("raw"),
        "topic", "partition", "offset", "timestamp")
    # Only JSON objects are events; scalars and arrays keep their text in "raw".
    is_object = F.expr("schema_of_variant(event) LIKE 'OBJECT%'")
    parsed = parsed.select(
        F.when(is_object, F.col("event")).alias("event"),
        F.when(~is_object | F.col("event").isNull(), F.col("raw")).alias("raw"),
        F.when(is_object, F.try_variant_get("event", f"$['{key_field}']", "string"))
        .alias("id"),
        "topic", "partition", "offset", "timestamp")
    joined = parsed.join(F.broadcast(reference), on="id", how="left")
    source = F.struct(
        "topic", "partition", "offset",
        F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("timestamp"))
    value = F.to_json(F.struct(F.col("id"), F.col("tags"), F.col("event"), F.col("raw"),
                               source.alias("source")), {"ignoreNullFields": "false"})
    return joined.select(F.col("id").cast("binary").alias("key"),
                         value.cast("binary").alias("value"))


def ensure_topic(bootstrap: str, topic: str, options: dict[str, str]) -> bool:
    """Create ``topic`` with the cluster's defaults when it does not exist (True if created).

    Kafka brokers create a topic on a producer's first write (auto.create.topics.enable);
    the moldau client does not, so the pipeline does it explicitly.
    """
    from moldau.client import NewTopic
    from moldau.client.config import KINDS

    from .clients import admin_for, call

    config = {"bootstrap.servers": bootstrap}
    config.update({k[len("kafka."):]: v for k, v in options.items()
                   if k.lower().startswith("kafka.") and k[len("kafka."):] in KINDS["admin"]})
    admin = admin_for(config)
    if topic in call(admin.list_topics()):
        return False
    call(admin.create_topics([NewTopic(topic)]))
    log.info("created target topic %s", topic)
    return True


def start(spark: Any, p: TagPipeline) -> Any:
    """Start the streaming query (returns the StreamingQuery)."""
    from . import register

    p.check()
    register(spark)
    ensure_topic(p.target_bootstrap, p.target_topic, p.target_options)
    events = spark.readStream.format("moldau").options(**_source_options(p)).load()
    records = tag_records(events, reference_table(spark, p), p.key_field)
    writer = (records.writeStream.format("moldau")
              .option("kafka.bootstrap.servers", p.target_bootstrap)
              .option("topic", p.target_topic)
              .option("checkpointLocation", p.checkpoint)
              .option("delivery.guarantee", p.delivery_guarantee)
              .options(**p.target_options)
              .queryName(f"moldau-tag-{p.source_topic}-to-{p.target_topic}")
              .trigger(**parse_trigger(p.trigger)))
    return writer.start()


def run(spark: Any, p: TagPipeline, *,
        stop_event: threading.Event | None = None) -> dict[str, Any]:
    """Run until done (available-now) or until ``stop_event``/SIGTERM/SIGINT; a summary."""
    query = start(spark, p)
    stop = stop_event or threading.Event()
    restore = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            restore.append((sig, signal.signal(sig, lambda *_: stop.set())))
    # recentProgress keeps the last 100 micro-batches only; collect them as they come.
    batches: dict[int, int] = {}

    def collect() -> None:
        for b in query.recentProgress:
            batches[int(b["batchId"])] = int(b.get("numInputRows", 0))

    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(0.5)
            collect()
        if query.isActive:
            _stop_between_batches(query)
        collect()
        if query.exception() is not None:
            raise RuntimeError(f"the pipeline failed: {query.exception()}")
    finally:
        for sig, handler in restore:
            signal.signal(sig, handler)
    return {"batches": len(batches), "records": sum(batches.values())}


def _stop_between_batches(query: Any, wait_s: float = 60.0) -> None:
    """Stop when no micro-batch is running, so a stop does not leave one half written."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and query.status.get("isTriggerActive"):
        time.sleep(0.05)
    query.stop()
