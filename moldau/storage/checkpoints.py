"""Kafka's small text checkpoint files.

* Offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``), one per log dir::

      0                      <- version
      2                      <- number of entries
      orders 0 1234          <- topic partition offset
      orders 1 99

* ``leader-epoch-checkpoint``, one per partition dir: version ``0``, count, then
  ``epoch startOffset`` lines.
* ``partition.metadata``: ``version: 0`` and ``topic_id: <base64 uuid>`` lines.

All are written atomically (temp file, fsync, rename, fsync of the directory) like Kafka's
``CheckpointFile``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping

from .fs import FileSystem
from .names import CLEAN_SHUTDOWN_MARKER, PARTITION_METADATA

log = logging.getLogger(__name__)

VERSION = 0


class MalformedCheckpoint(ValueError):
    """A checkpoint file that cannot be parsed; the message names the file, the line and what
    is wrong with it (Kafka's "Malformed line in checkpoint file")."""

    def __init__(self, path: str, problem: str, line_no: int | None = None,
                 line: str | None = None) -> None:
        where = f"line {line_no} of {path}" if line_no is not None else path
        shown = f": {line!r}" if line is not None else ""
        super().__init__(f"malformed checkpoint file: {where} {problem}{shown}")
        self.path = path
        self.problem = problem
        self.line_no = line_no
        self.line = line


def _format(lines: Iterable[str], count: int) -> bytes:
    body = "".join(line + "\n" for line in lines)
    return f"{VERSION}\n{count}\n{body}".encode()


def _parse_lines(path: str, data: bytes, fields: int, layout: str) -> list[list[str]]:
    """The entry lines of a checkpoint, split into ``fields`` fields each. The first bad line
    is reported (not just a wrong count), so a user can find and fix it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedCheckpoint(path, f"is not UTF-8 text (byte {exc.start})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise MalformedCheckpoint(path, "is empty; it should start with the version line '0'")
    if lines[0].strip() != str(VERSION):
        raise MalformedCheckpoint(path, f"has an unknown version (expected {VERSION})", 1,
                                  lines[0])
    if len(lines) < 2:
        raise MalformedCheckpoint(path, "ends after the version line; the entry count is "
                                  "missing")
    try:
        count = int(lines[1])
    except ValueError:
        raise MalformedCheckpoint(path, "should hold the number of entries", 2,
                                  lines[1]) from None
    out = []
    for line_no, line in enumerate(lines[2:], start=3):
        parts = line.split(" ")
        if len(parts) != fields or not all(parts):
            raise MalformedCheckpoint(
                path, f"should be '{layout}' ({fields} fields separated by single spaces)",
                line_no, line)
        out.append(parts)
    if len(out) != count:
        raise MalformedCheckpoint(
            path, f"says it holds {count} entries (line 2) but {len(out)} entry lines follow")
    return out


def checkpointable(topic: str) -> bool:
    """Whether ``topic`` can be written to a line-based checkpoint file: names with
    whitespace (only possible for topics created before names were validated in full) would
    make the whole file unreadable."""
    return bool(topic) and not any(ch.isspace() for ch in topic)


def write_offset_checkpoint(
    fs: FileSystem, path: str, offsets: Mapping[tuple[str, int], int]
) -> None:
    """Write ``offsets``; entries of topics whose names cannot be written (see
    :func:`checkpointable`) are left out, with a warning, rather than corrupting the file."""
    skipped = sorted({t for t, _p in offsets if not checkpointable(t)})
    if skipped:
        _warn_skipped(path, skipped)
    lines = [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items()) if checkpointable(t)]
    fs.write_file_atomic(path, _format(lines, len(lines)))


_warned: set[tuple[str, str]] = set()


def _warn_skipped(path: str, topics: list[str]) -> None:
    fresh = [t for t in topics if (path, t) not in _warned]
    if not fresh:
        return
    _warned.update((path, t) for t in fresh)
    log.warning("not writing %s entries for topic(s) %s: their names contain whitespace, which "
                "that file format cannot hold; such topics lose their checkpointed offsets at "
                "every restart. Copy their data to a topic with a legal name and delete them.",
                path, ", ".join(repr(t) for t in fresh))


def read_offset_checkpoint(fs: FileSystem, path: str) -> dict[tuple[str, int], int]:
    """Entries of an offset checkpoint; empty if the file does not exist. Raises
    :class:`MalformedCheckpoint` naming the first bad line."""
    if not fs.exists(path):
        return {}
    out: dict[tuple[str, int], int] = {}
    entries = _parse_lines(path, fs.read_file(path), 3, "topic partition offset")
    for line_no, (topic, partition, offset) in enumerate(entries, start=3):
        try:
            key = (topic, int(partition))
            out[key] = int(offset)
        except ValueError:
            raise MalformedCheckpoint(path, "should be 'topic partition offset' with integer "
                                      "partition and offset", line_no,
                                      f"{topic} {partition} {offset}") from None
    return out


def write_epoch_checkpoint(
    fs: FileSystem, path: str, entries: Iterable[tuple[int, int]], *, sync: bool = True
) -> None:
    lines = [f"{epoch} {offset}" for epoch, offset in entries]
    fs.write_file_atomic(path, _format(lines, len(lines)), sync=sync)


def read_epoch_checkpoint(fs: FileSystem, path: str) -> list[tuple[int, int]]:
    if not fs.exists(path):
        return []
    out = []
    entries = _parse_lines(path, fs.read_file(path), 2, "epoch startOffset")
    for line_no, (epoch, offset) in enumerate(entries, start=3):
        try:
            out.append((int(epoch), int(offset)))
        except ValueError:
            raise MalformedCheckpoint(path, "should be 'epoch startOffset' (two integers)",
                                      line_no, f"{epoch} {offset}") from None
    return out


def write_clean_shutdown_marker(fs: FileSystem, log_dir: str, broker_epoch: int = -1) -> None:
    """``.kafka_cleanshutdown`` as Kafka 3.6+ writes it (JSON with the broker epoch)."""
    data = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()
    fs.write_file_atomic(os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER), data)


def write_partition_metadata(fs: FileSystem, partition_dir: str, topic_id: str, *,
                             sync: bool = True) -> None:
    data = f"version: 0\ntopic_id: {topic_id}\n".encode()
    fs.write_file_atomic(os.path.join(partition_dir, PARTITION_METADATA), data, sync=sync)


def read_partition_metadata(fs: FileSystem, partition_dir: str) -> str | None:
    """The topic id stored in ``partition.metadata``, or None if absent or unreadable."""
    path = os.path.join(partition_dir, PARTITION_METADATA)
    if not fs.exists(path):
        return None
    fields = {}
    for line in fs.read_file(path).decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0":
        return None
    return fields.get("topic_id") or None
