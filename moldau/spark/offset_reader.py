"""Driver-side lookups: which partitions a job reads and what its offset options resolve to.

Runs where Spark plans (the driver's Python planner and streaming-source processes) with a
cached :class:`~moldau.client.AdminClient`: Metadata for the topics, ListOffsets for the
earliest/latest offsets and for timestamps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from moldau.client.admin_types import AdminError
from moldau.client.types import TopicPartition

from .clients import admin_for, call
from .options import EARLIEST, LATEST, OffsetSpec, OptionError, SourceOptions
from .planning import PartitionOffsets


class OffsetReader:
    """Partition discovery and offset resolution for one source configuration."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.config = options.admin_config()
        self._isolation = "read_committed" if options.read_committed else "read_uncommitted"

    @property
    def admin(self):  # type: ignore[no-untyped-def]
        return admin_for(self.config)

    # --- partitions -------------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """The partitions the job reads now (topics that do not exist yet have none)."""
        o = self.options
        if o.strategy == "assign":
            wanted = [TopicPartition(t, p) for t, ps in o.assignment.items() for p in ps]
            topics = call(self.admin.list_topics())
            missing = [tp for tp in wanted if tp.topic not in topics
                       or tp.partition not in topics[tp.topic].partitions]
            if missing:
                raise OptionError(
                    "option 'assign' names partitions the cluster does not have: "
                    + ", ".join(str(tp) for tp in missing))
            return sorted(wanted)
        topics = call(self.admin.list_topics())
        if o.strategy == "subscribe":
            names = [t for t in o.topics if t in topics]
        else:
            assert o.pattern is not None
            pattern = re.compile(o.pattern)
            names = [t for t in topics if pattern.fullmatch(t)]
        return sorted(TopicPartition(name, p) for name in names
                      for p in topics[name].partitions)

    # --- offsets ----------------------------------------------------------------------------

    def list_offsets(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets for each partition: -2 earliest, -1 latest, or a timestamp (ms).

        A timestamp without a record at or after it gives -1.
        """
        if not specs:
            return {}
        try:
            result = call(self.admin.list_offsets(dict(specs), isolation_level=self._isolation))
        except AdminError as exc:
            raise RuntimeError(f"listing offsets failed: {exc}") from exc
        return {tp: r.offset for tp, r in result.items()}  # type: ignore[union-attr]

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets({tp: EARLIEST for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets({tp: LATEST for tp in tps})

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], *,
                ending: bool = False, what: str = "startingOffsets") -> PartitionOffsets:
        """Concrete offsets of ``spec`` for ``tps``.

        JSON offsets must name every partition read (as with Spark's Kafka source); -2 and -1
        become the earliest and latest offsets. A timestamp without a matching record fails
        a start with ``startingOffsetsByTimestampStrategy=error`` and becomes the latest
        offset otherwise (always, for an end).
        """
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            given = {TopicPartition(t, p): off for t, ps in spec.offsets.items()
                     for p, off in ps.items()}
            _check_covers(given, tps, what)
            for tp, off in given.items():
                if off < 0 and off not in (EARLIEST, LATEST):
                    raise OptionError(f"{what}: offset {off} of {tp} is not valid (use -2 for "
                                      "earliest, -1 for latest, or an offset >= 0)")
            resolved = dict(given)
            special = {tp: off for tp, off in given.items() if off in (EARLIEST, LATEST)}
            resolved.update(self.list_offsets(special))
            return resolved
        if spec.kind == "timestamp":
            assert spec.timestamp is not None
            stamps = {tp: spec.timestamp for tp in tps}
        else:
            stamps = {TopicPartition(t, p): ts for t, ps in spec.offsets.items()
                      for p, ts in ps.items()}
            _check_covers(stamps, tps, what)
        for tp, ts in stamps.items():
            if ts < 0:
                raise OptionError(f"{what}: timestamp {ts} of {tp} is negative")
        found = self.list_offsets(stamps)
        unmatched = [tp for tp, off in found.items() if off < 0]
        if unmatched and not ending and self.options.timestamp_strategy == "error":
            raise RuntimeError(
                f"No offset matched the timestamp(s) of {what} for "
                + ", ".join(f"{tp} (timestamp {stamps[tp]})" for tp in unmatched)
                + "; set startingOffsetsByTimestampStrategy=latest to start at the latest "
                "offset instead")
        if unmatched:
            found.update(self.latest(unmatched))
        return found


def _check_covers(given: Mapping[TopicPartition, int], tps: list[TopicPartition],
                  what: str) -> None:
    if set(given) != set(tps):
        raise OptionError(
            f"If {what} contains specific offsets, you must specify all topic partitions "
            "(use -2 for earliest, -1 for latest). Specified: "
            f"{', '.join(sorted(map(str, given))) or 'none'}; read: "
            f"{', '.join(sorted(map(str, tps))) or 'none'}")
