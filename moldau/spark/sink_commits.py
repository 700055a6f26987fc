"""At-least-once mode: skip re-running a micro-batch the sink already committed.

Used with ``delivery.guarantee=at-least-once`` only; the exactly-once sink records each
task's batch id in its own transaction instead (:mod:`.txn_sink`).

Spark runs micro-batch N, calls the sink's ``commit(N)`` on the driver, and only then records
N in the checkpoint's commit log. A crash between the two makes Spark re-run N after the
restart, and without help every record of N would be written twice. So ``commit(N)`` first
records N in a marker file next to Spark's own logs, ``<checkpointLocation>/moldau-sink``,
and a write task of a re-run batch that finds its batch id there writes nothing.

What this does not cover: a crash or task failure *while* a batch is being written. The
records sent before it stay in the topic and the batch is written again (at-least-once);
the exactly-once mode covers that. The marker needs the checkpoint on a file system
the executors see at the same path (local mode, or a shared mount); for other checkpoint
locations (``hdfs://``, ``s3a://``) the sink is plainly at-least-once.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

MARKER = "moldau-sink"


def marker_path(checkpoint: str | None) -> Path | None:
    """The marker file of a checkpoint on a local file system (None otherwise)."""
    if not checkpoint:
        return None
    if checkpoint.startswith("file:"):
        checkpoint = checkpoint[len("file:"):]
        while checkpoint.startswith("//"):
            checkpoint = checkpoint[1:]
    elif "://" in checkpoint:
        return None
    return Path(checkpoint) / MARKER


def task_batch() -> tuple[str | None, int | None]:
    """(query id, batch id) of the running Spark task, when it belongs to a stream."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is the reason this module exists
        return None, None
    context = TaskContext.get()
    if context is None:
        return None, None
    query = context.getLocalProperty("sql.streaming.queryId")
    batch = context.getLocalProperty("streaming.sql.batchId")
    return query, int(batch) if batch is not None else None


def read_marker(path: Path | None) -> tuple[str | None, int]:
    """(query id, last committed batch id), or (None, -1) when there is none."""
    if path is None:
        return None, -1
    try:
        data = json.loads(path.read_text())
        return str(data["queryId"]), int(data["batchId"])
    except FileNotFoundError:
        return None, -1
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable sink commit marker %s: %s", path, exc)
        return None, -1


def already_committed(path: Path | None, query: str | None, batch: int | None) -> bool:
    """True when ``batch`` of ``query`` was committed by the sink before (a replay)."""
    if path is None or query is None or batch is None:
        return False
    marked_query, marked_batch = read_marker(path)
    return marked_query == query and batch <= marked_batch


def write_marker(path: Path | None, query: str | None, batch: int) -> None:
    """Record ``batch`` as committed (atomically: a reader sees the old or the new one)."""
    if path is None or query is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump({"queryId": query, "batchId": batch}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
