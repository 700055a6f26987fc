"""Per-log configuration built from Kafka topic-config keys.

The broker resolves each topic's effective configuration (topic override, else the broker's
``log.*`` synonym, else Kafka's default) and hands the storage layer a mapping of topic keys;
:meth:`LogConfig.from_dict` parses it. ``producer.id.expiration.ms`` is a broker key in Kafka;
it is accepted here too because the per-partition producer state needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .errors import InvalidLogConfig

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Effective configuration of one partition log (Kafka names in ``from_dict``)."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    message_timestamp_type: str = "CreateTime"
    max_message_bytes: int = 1048588
    producer_id_expiration_ms: int = 86400000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_entries(self) -> int:
        """Entries an offset index may hold before the segment rolls (8 bytes each)."""
        return max(1, self.segment_index_bytes // 8)

    @property
    def max_time_index_entries(self) -> int:
        """Entries a time index may hold before the segment rolls (12 bytes each)."""
        return max(1, self.segment_index_bytes // 12)

    @classmethod
    def from_dict(cls, props: Mapping[str, object] | None = None) -> LogConfig:
        """Build from Kafka topic-config keys (values as strings or numbers).

        Unknown keys are ignored (the broker's topic configs hold more than storage needs).
        Raises :class:`InvalidLogConfig` naming the key and the allowed range.
        """
        values: dict[str, object] = {}
        for key, raw in (props or {}).items():
            spec = _KEYS.get(key)
            if spec is None or raw is None:
                continue
            field_name, kind, minimum = spec
            values[field_name] = _parse(key, raw, kind, minimum)
        return cls(**values)  # type: ignore[arg-type]

    def updated(self, props: Mapping[str, object]) -> LogConfig:
        """A copy with the given Kafka keys changed (others keep their current values)."""
        return LogConfig.from_dict({**self.to_dict(), **props})

    def to_dict(self) -> dict[str, str]:
        """The Kafka keys and string values (for DescribeConfigs-style output)."""
        out: dict[str, str] = {}
        for key, (field_name, kind, _minimum) in _KEYS.items():
            value = getattr(self, field_name)
            if kind == "list":
                out[key] = ",".join(value)
            else:
                out[key] = str(value)
        return out


# Kafka key -> (field, kind, minimum).
_KEYS: dict[str, tuple[str, str, float | None]] = {
    "segment.bytes": ("segment_bytes", "int", 14),
    "segment.ms": ("segment_ms", "int", 1),
    "segment.jitter.ms": ("segment_jitter_ms", "int", 0),
    "segment.index.bytes": ("segment_index_bytes", "int", 4),
    "index.interval.bytes": ("index_interval_bytes", "int", 0),
    "retention.ms": ("retention_ms", "int", -1),
    "retention.bytes": ("retention_bytes", "int", None),
    "flush.messages": ("flush_messages", "int", 1),
    "flush.ms": ("flush_ms", "int", 0),
    "file.delete.delay.ms": ("file_delete_delay_ms", "int", 0),
    "cleanup.policy": ("cleanup_policy", "list", None),
    "delete.retention.ms": ("delete_retention_ms", "int", 0),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", "int", 0),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", "int", 1),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", "float", 0),
    "message.timestamp.type": ("message_timestamp_type", "timestamp_type", None),
    "max.message.bytes": ("max_message_bytes", "int", 0),
    "producer.id.expiration.ms": ("producer_id_expiration_ms", "int", 1),
}


def _parse(key: str, raw: object, kind: str, minimum: float | None) -> object:
    if kind == "list":
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        policy = tuple(sorted({str(p).strip() for p in items if str(p).strip()}))
        bad = [p for p in policy if p not in ("delete", "compact")]
        if bad or not policy:
            raise InvalidLogConfig(
                f"Invalid value {raw!r} for configuration {key}: use delete, compact or "
                "delete,compact"
            )
        return policy
    if kind == "timestamp_type":
        if raw not in ("CreateTime", "LogAppendTime"):
            raise InvalidLogConfig(
                f"Invalid value {raw!r} for configuration {key}: use CreateTime or LogAppendTime"
            )
        return raw
    try:
        text = str(raw).strip()
        value: float = float(text) if kind == "float" else int(text)
    except (TypeError, ValueError):
        raise InvalidLogConfig(
            f"Invalid value {raw!r} for configuration {key}: expected a number"
        ) from None
    if minimum is not None and value < minimum:
        raise InvalidLogConfig(
            f"Invalid value {raw!r} for configuration {key}: value must be at least {minimum:g}"
        )
    if kind == "float" and value > 1:
        raise InvalidLogConfig(
            f"Invalid value {raw!r} for configuration {key}: value must be at most 1"
        )
    return value
