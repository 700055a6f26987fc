"""The ``__cluster_metadata`` log: metadata records made durable, replayed at start-up.

It is an ordinary partition log (``__cluster_metadata-0`` in the first log dir, same segment
format as every topic), written one batch per controller operation so each change is atomic,
and fsynced on every append: metadata changes are rare and must survive a machine crash, as
KRaft's metadata log does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ...protocol.errors import KafkaError
from ...protocol.records.batch import validate_batches
from ...protocol.records.codec import build_batch, iter_decoded
from ...storage.log import Log
from .image import MetadataImage
from .records import MetadataRecord, decode_record

log = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"
# The largest batch the metadata log takes: KRaft's MAX_BATCH_SIZE_BYTES. One controller
# operation is one batch (atomic); the controller refuses or splits anything larger.
METADATA_MAX_BATCH_BYTES = 8 << 20


class MetadataLog:
    """Append metadata records to a :class:`Log` and replay them into an image."""

    def __init__(self, partition_log: Log, time_ms: Callable[[], int]) -> None:
        self.log = partition_log
        self.time_ms = time_ms
        self.leader_epoch = 0

    def replay_into(self, image: MetadataImage) -> int:
        """Replay every record in the log into ``image``; returns the number replayed."""
        offset = self.log.log_start_offset
        count = 0
        while offset < self.log.log_end_offset:
            chunk = self.log.read(offset, 1 << 20).records
            if not chunk:
                break
            for batch in iter_decoded(chunk):
                for record in batch.records:
                    if record.value is None:
                        continue
                    image.replay(decode_record(record.value), record.offset)
                    count += 1
                offset = batch.header.next_offset
        return count

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append ``records`` as one batch; returns the offset of the last one. The batch is
        written and fsynced on the event loop (metadata changes are rare); the method is
        asynchronous because other stores wait for the network."""
        now = self.time_ms()
        raw = build_batch([(None, r.encode(), (), now) for r in records])
        buf = bytearray(raw)
        info = self.log.append(buf, validate_batches(buf), self.leader_epoch)
        try:
            self.log.flush()
        except KafkaError:
            # Not durable, so not committed: take the batch back out, or a restart would
            # replay a change the caller was told had failed.
            try:
                self.log.truncate_to(info.first_offset)
            except (KafkaError, ValueError):
                log.exception("could not remove an unflushed metadata batch at offset %d",
                              info.first_offset)
            raise
        self.log.update_high_watermark(self.log.log_end_offset)
        return info.last_offset
