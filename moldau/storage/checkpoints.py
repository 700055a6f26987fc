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
import os
from collections.abc import Iterable, Mapping

from .fs import FileSystem
from .names import CLEAN_SHUTDOWN_MARKER, PARTITION_METADATA

VERSION = 0


class MalformedCheckpoint(ValueError):
    """A checkpoint file that cannot be parsed."""


def _format(lines: Iterable[str], count: int) -> bytes:
    body = "".join(line + "\n" for line in lines)
    return f"{VERSION}\n{count}\n{body}".encode()


def _parse_lines(path: str, data: bytes, fields: int) -> list[list[str]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedCheckpoint(f"checkpoint file {path} is not UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise MalformedCheckpoint(f"checkpoint file {path} is truncated")
    if lines[0].strip() != str(VERSION):
        raise MalformedCheckpoint(
            f"checkpoint file {path} has unknown version {lines[0].strip()!r}"
        )
    try:
        count = int(lines[1])
    except ValueError:
        raise MalformedCheckpoint(f"checkpoint file {path} has a bad entry count") from None
    entries = lines[2:]
    if len(entries) != count:
        raise MalformedCheckpoint(
            f"checkpoint file {path} should have {count} entries but has {len(entries)}"
        )
    out = []
    for line in entries:
        parts = line.split(" ")
        if len(parts) != fields:
            raise MalformedCheckpoint(f"malformed line in checkpoint file {path}: {line!r}")
        out.append(parts)
    return out


def write_offset_checkpoint(
    fs: FileSystem, path: str, offsets: Mapping[tuple[str, int], int]
) -> None:
    lines = [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    fs.write_file_atomic(path, _format(lines, len(lines)))


def read_offset_checkpoint(fs: FileSystem, path: str) -> dict[tuple[str, int], int]:
    """Entries of an offset checkpoint; empty if the file does not exist."""
    if not fs.exists(path):
        return {}
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in _parse_lines(path, fs.read_file(path), 3):
        try:
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            raise MalformedCheckpoint(
                f"malformed line in checkpoint file {path}: {topic} {partition} {offset}"
            ) from None
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
    for epoch, offset in _parse_lines(path, fs.read_file(path), 2):
        try:
            out.append((int(epoch), int(offset)))
        except ValueError:
            raise MalformedCheckpoint(
                f"malformed line in checkpoint file {path}: {epoch} {offset}"
            ) from None
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
