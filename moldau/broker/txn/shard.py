"""One partition of ``__transaction_state`` in memory: :class:`TxnShard`.

The shard holds the metadata of every transactional id placed on its partition. It changes in
two ways only: replay of a record read back while loading, and :meth:`TxnShard.apply` /
:meth:`TxnShard.remove` of what the coordinator has just written (the planned metadata, which
also carries what the record does not: ``last_producer_epoch``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from ..coordinator.shard import LoggedRecord
from .records import decode_key, decode_value, metadata_from_value
from .state import TxnMetadata

log = logging.getLogger(__name__)


class TxnShard:
    """The transactional ids of one ``__transaction_state`` partition (a CoordinatorShard)."""

    def __init__(self, partition: int, epoch: int) -> None:
        self.partition = partition
        #: The partition's leader epoch at load: the coordinator epoch markers carry.
        self.epoch = epoch
        self.txns: dict[str, TxnMetadata] = {}

    def replay(self, record: LoggedRecord) -> None:
        """Apply one record of the log (a RecordFormatError, a ValueError, skips it)."""
        txn_id = decode_key(record.key)
        if record.value is None:
            self.txns.pop(txn_id, None)
            return
        self.txns[txn_id] = metadata_from_value(txn_id, decode_value(record.value))

    def replay_end_txn(self, producer_id: int, commit: bool, offset: int) -> None:
        """``__transaction_state`` never holds transactional records: nothing to do."""

    def finish_load(self, now_ms: int) -> None:
        """Nothing is derived from the whole log."""

    def apply(self, meta: TxnMetadata) -> None:
        """Keep ``meta``, just written."""
        self.txns[meta.transactional_id] = meta

    def remove(self, transactional_id: str) -> None:
        """Forget ``transactional_id``, whose tombstone was just written."""
        self.txns.pop(transactional_id, None)

    def prepared(self) -> Iterator[TxnMetadata]:
        """The transactions whose markers are still to be written (Prepare*)."""
        return (meta for meta in list(self.txns.values()) if meta.state.is_prepare)
