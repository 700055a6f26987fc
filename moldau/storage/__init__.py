"""Kafka-format storage: segmented partition logs, indexes, recovery, retention, compaction.

Public entry points: :class:`LogManager` (all logs of all ``log.dirs``), :class:`Log` (one
partition), :class:`LogConfig`, :func:`load_log`, and :class:`FileSystem` (the seam tests use
to inject faults). Imports only :mod:`moldau.protocol` and the standard library.
"""

from .config import LogConfig
from .errors import (
    CorruptRecord,
    InvalidRecord,
    KafkaStorageError,
    OffsetOutOfRange,
    ProducerStateError,
    RecordBatchTooLarge,
    RecordTooLarge,
    UnexpectedAppendOffset,
)
from .fs import DEFAULT_FS, FileSystem
from .loader import LoadStats, load_log
from .log import AppendInfo, Log, ReadResult, TimestampAndOffset
from .manager import LogManager
from .meta import (
    MetaProperties,
    MetaPropertiesError,
    ensure_meta_properties,
    read_meta_properties,
    write_meta_properties,
)

__all__ = [
    "DEFAULT_FS",
    "AppendInfo",
    "CorruptRecord",
    "FileSystem",
    "InvalidRecord",
    "KafkaStorageError",
    "LoadStats",
    "Log",
    "LogConfig",
    "LogManager",
    "MetaProperties",
    "MetaPropertiesError",
    "OffsetOutOfRange",
    "ProducerStateError",
    "ReadResult",
    "RecordBatchTooLarge",
    "RecordTooLarge",
    "TimestampAndOffset",
    "UnexpectedAppendOffset",
    "ensure_meta_properties",
    "load_log",
    "read_meta_properties",
    "write_meta_properties",
]
