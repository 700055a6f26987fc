"""File and directory names, exactly as Kafka's ``LogFileUtils`` and ``UnifiedLog`` spell them."""

from __future__ import annotations

import os
import re
import uuid

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"

_DELETE_DIR = re.compile(r"(.+)-(\d+)\.([0-9a-f]{32})-delete")
_MAX_NAME = 255


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded offset that names segment and snapshot files."""
    return f"{offset:020d}"


def segment_file(directory: str, base_offset: int, suffix: str, extra: str = "") -> str:
    return os.path.join(directory, filename_prefix(base_offset) + suffix + extra)


def offset_from_filename(name: str) -> int:
    """The base offset a segment, index or snapshot file is named after."""
    return int(name.split(".", 1)[0])


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` for a live partition directory name, else None."""
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        return None
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


def delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid hex>-delete``, shortening the topic to fit 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: _MAX_NAME - len(suffix)] + suffix


def is_delete_dir(name: str) -> bool:
    return bool(_DELETE_DIR.fullmatch(name)) or name.endswith(DELETE_DIR_SUFFIX)
