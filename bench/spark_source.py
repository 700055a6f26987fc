"""Throughput of the ``moldau`` Spark data source, next to the ceiling of a Python data source.

Measured in one run, on one local SparkSession (``local[*]``) and one ``moldau serve``:

* ceiling: a trivial Python data source whose tasks yield pre-built Arrow batches of the
  Kafka source schema (no I/O, no decoding) into Spark's ``noop`` sink — what Spark's Python
  data source path itself can carry here; measured for batch reads and for streaming reads
  (same micro-batch size, ``availableNow``);
* batch read: ``spark.read.format("moldau")`` of the whole topic into ``noop``;
* streaming read: ``spark.readStream.format("moldau")`` with ``trigger(availableNow=True)``
  into ``noop`` (one micro-batch per ``maxOffsetsPerTrigger`` records);
* write: ``spark.range`` rows (key, 100-byte value) through ``df.write.format("moldau")``.

Each case runs once to warm up and then ``--repeat`` times; the best run is reported (the
machine is shared). Prints a table, writes ``bench/results/spark_source-<time>.json``.

    .venv/bin/python -m bench.spark_source [--records 1000000] [--partitions 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Run as a script, bench/ is first on sys.path; put the repository root there instead so
# `bench.*` imports work and no bench module can shadow a standard-library one.
if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from moldau.client import NewTopic, Producer, SyncAdminClient
from moldau.spark.schema import arrow_schema, spark_schema
from moldau.spark.session import build_session
from moldau.testing.runner import BrokerProcess

VALUE = b"v" * 100
_CEILING_BATCH: dict[int, pa.RecordBatch] = {}


def _prebuilt(rows: int) -> pa.RecordBatch:
    """One Arrow batch of the source schema, built once per worker process."""
    batch = _CEILING_BATCH.get(rows)
    if batch is None:
        keys = [b"k%d" % i for i in range(rows)]
        batch = pa.RecordBatch.from_arrays([
            pa.array(keys, pa.binary()),
            pa.array([VALUE] * rows, pa.binary()),
            pa.array(["t"] * rows, pa.string()),
            pa.array([0] * rows, pa.int32()),
            pa.array(range(rows), pa.int64()),
            pa.array([1_700_000_000_000_000] * rows, pa.int64()).view(pa.timestamp("us",
                                                                                   tz="UTC")),
            pa.array([0] * rows, pa.int32()),
        ], schema=arrow_schema(False))
        _CEILING_BATCH[rows] = batch
    return batch


class CeilingReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, rows: int, partitions: int, batch_rows: int) -> None:
        self.rows, self.parts, self.batch_rows = rows, partitions, batch_rows

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        todo = self.rows // self.parts
        batch = _prebuilt(self.batch_rows)
        while todo > 0:
            n = min(todo, self.batch_rows)
            yield batch if n == self.batch_rows else batch.slice(0, n)
            todo -= n


class CeilingRange(InputPartition):  # type: ignore[misc]
    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


class CeilingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """The streaming ceiling: offsets count rows, tasks yield pre-built batches."""

    def __init__(self, rows: int, partitions: int, batch_rows: int, max_rows: int) -> None:
        self.rows, self.parts = rows, partitions
        self.batch_rows, self.max_rows = batch_rows, max_rows

    def initialOffset(self) -> dict:
        return {"rows": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if isinstance(limit, ReadMaxRows):
            return {"rows": min(self.rows, start["rows"] + limit.max_rows)}
        return {"rows": self.rows}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        total = end["rows"] - start["rows"]
        if total <= 0:
            return []
        return [CeilingRange(total * (i + 1) // self.parts - total * i // self.parts)
                for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        todo = partition.rows
        batch = _prebuilt(self.batch_rows)
        while todo > 0:
            n = min(todo, self.batch_rows)
            yield batch if n == self.batch_rows else batch.slice(0, n)
            todo -= n


class CeilingSource(DataSource):  # type: ignore[misc]
    """Yields pre-built Arrow batches: the most a Python source can deliver here."""

    @classmethod
    def name(cls) -> str:
        return "moldau_bench_ceiling"

    def schema(self) -> StructType:
        return spark_schema(False)

    def reader(self, schema: StructType) -> DataSourceReader:
        o = self.options
        return CeilingReader(int(o["rows"]), int(o["partitions"]), int(o["batchrows"]))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        o = self.options
        return CeilingStreamReader(int(o["rows"]), int(o["partitions"]), int(o["batchrows"]),
                                   int(o["maxoffsetspertrigger"]))


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    SyncAdminClient({"bootstrap.servers": bootstrap}).create_topics(
        [NewTopic(topic, partitions, 1)])

    async def produce() -> float:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                             "batch.size": 262144})
        await producer.start()
        t0 = time.perf_counter()
        for i in range(records):
            producer.send(topic, VALUE, key=b"k%d" % i, partition=i % partitions)
            if i % 20000 == 0:
                await asyncio.sleep(0)
        await producer.flush()
        elapsed = time.perf_counter() - t0
        await producer.close()
        return records / elapsed

    return asyncio.run(produce())


def best_of(repeat: int, run: Callable[[], Any]) -> tuple[float, list[float]]:
    run()  # warm-up: Python workers, JIT, caches
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times), times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=250_000)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args(argv)
    n, parts = args.records, args.partitions

    work = Path(tempfile.mkdtemp(prefix="moldau-bench-spark-"))
    broker = BrokerProcess(work / "data", {"num.partitions": parts}).start()
    try:
        produce_rate = fill(broker.bootstrap, "bench", parts, n)
        print(f"topic filled: {n} records in {parts} partitions "
              f"({produce_rate:,.0f} records/s with the asyncio producer)", flush=True)
        spark = build_session(args.master, "moldau-bench")
        spark.dataSource.register(CeilingSource)
        source = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "bench",
                  "startingOffsets": "earliest"}

        def ceiling() -> None:
            (spark.read.format("moldau_bench_ceiling").option("rows", n)
             .option("partitions", parts).option("batchrows", 50_000).load()
             .write.format("noop").mode("overwrite").save())

        def stream_ceiling() -> None:
            checkpoint = work / f"ckpt-{time.monotonic_ns()}"
            query = (spark.readStream.format("moldau_bench_ceiling").option("rows", n)
                     .option("partitions", parts).option("batchrows", 50_000)
                     .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger).load()
                     .writeStream.format("noop").trigger(availableNow=True)
                     .option("checkpointLocation", str(checkpoint)).start())
            query.awaitTermination()
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            assert rows == n, f"streaming ceiling saw {rows} rows, expected {n}"

        def batch_read() -> None:
            (spark.read.format("moldau").options(**source).load()
             .write.format("noop").mode("overwrite").save())

        def stream_read() -> None:
            checkpoint = work / f"ckpt-{time.monotonic_ns()}"
            query = (spark.readStream.format("moldau").options(**source)
                     .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger).load()
                     .writeStream.format("noop").trigger(availableNow=True)
                     .option("checkpointLocation", str(checkpoint)).start())
            query.awaitTermination()
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            assert rows == n, f"streaming read saw {rows} rows, expected {n}"

        write_round = [0]

        def write() -> None:
            write_round[0] += 1
            topic = f"bench-out-{write_round[0]}"
            SyncAdminClient({"bootstrap.servers": broker.bootstrap}).create_topics(
                [NewTopic(topic, parts, 1)])
            (spark.range(n, numPartitions=parts)
             .selectExpr("CAST(CAST(id AS STRING) AS BINARY) AS key",
                         f"CAST(repeat('v', {len(VALUE)}) AS BINARY) AS value")
             .write.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", topic).mode("append").save())

        results: dict[str, Any] = {}
        for name, run in (("ceiling", ceiling), ("batch read", batch_read),
                          ("streaming ceiling", stream_ceiling),
                          ("streaming read", stream_read), ("write", write)):
            best, times = best_of(args.repeat, run)
            results[name] = {"rows_per_s": n / best, "seconds": times}
            print(f"{name:15s} {n / best:12,.0f} rows/s  (runs: "
                  f"{', '.join(f'{t:.2f}s' for t in times)})", flush=True)
        ceiling_rate = results["ceiling"]["rows_per_s"]
        for name in ("batch read", "write"):
            results[name]["of_ceiling"] = results[name]["rows_per_s"] / ceiling_rate
        results["streaming read"]["of_ceiling"] = (
            results["streaming read"]["rows_per_s"] / results["streaming ceiling"]["rows_per_s"])
        print(f"batch read {results['batch read']['of_ceiling']:.0%} of the batch ceiling, "
              f"streaming read {results['streaming read']['of_ceiling']:.0%} of the streaming "
              "ceiling")
        spark.stop()
    finally:
        broker.stop()
        broker.close()
        shutil.rmtree(work, ignore_errors=True)

    out = {
        "benchmark": "spark_source", "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "records": n, "partitions": parts, "value_bytes": len(VALUE), "master": args.master,
        "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "produce_rate_for_setup": produce_rate, "results": results,
    }
    results_dir = Path(__file__).resolve().parent / "results"
    results_dir.mkdir(exist_ok=True)
    path = results_dir / f"spark_source-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
