"""The transaction coordinator's housekeeping: aborting timed-out transactions and removing
expired transactional ids (Kafka's ``abortTimedOutTransactions`` and
``removeExpiredTransactionalIds``).

Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (10 s) each open
transaction older than its ``transaction.timeout.ms`` is aborted at a bumped epoch: its markers
carry the new epoch, so the producer, if it still lives, is fenced on the data partitions
(INVALID_PRODUCER_EPOCH) and at the coordinator (PRODUCER_FENCED), and read_committed consumers
held at the open transaction's first offset move on. Every
``transaction.remove.expired.transaction.cleanup.interval.ms`` (1 h) idle ids unused for
``transactional.id.expiration.ms`` (7 days) get a tombstone.
"""

from __future__ import annotations

import logging

from .coordinator import TransactionCoordinator
from .errors import TxnError
from .transitions import is_timed_out, plan_expire, plan_timeout

log = logging.getLogger(__name__)

_ABORT_KEY = ("txn-abort-timed-out",)
_EXPIRE_KEY = ("txn-expire-ids",)


async def abort_timed_out(coordinator: TransactionCoordinator) -> int:
    """Abort every timed-out open transaction of the loaded shards; how many were."""
    aborted = 0
    now = coordinator.timer.now_ms()
    for shard in coordinator.shards():
        for txn_id, meta in list(shard.txns.items()):
            if not is_timed_out(meta, now):
                continue
            try:
                plan = await coordinator.runtime.run(coordinator.change(
                    txn_id, lambda cur: plan_timeout(cur, now=coordinator.timer.now_ms()),
                    shard=shard))
            except TxnError as exc:
                log.warning("could not abort the timed-out transaction of %s: %s", txn_id, exc)
                continue
            if plan.write is not None:
                aborted += 1
                log.info("aborting the transaction of %s (producer id %d): open for more than "
                         "its transaction.timeout.ms=%d; producer epoch bumped to %d", txn_id,
                         meta.producer_id, meta.timeout_ms, plan.write.producer_epoch)
    return aborted


async def expire_ids(coordinator: TransactionCoordinator) -> int:
    """Tombstone idle transactional ids past ``transactional.id.expiration.ms``."""
    expired = 0
    expiration_ms = coordinator.config.id_expiration_ms
    for shard in coordinator.shards():
        for txn_id in list(shard.txns):
            try:
                plan = await coordinator.runtime.run(coordinator.change(
                    txn_id, lambda cur: plan_expire(cur, expiration_ms=expiration_ms,
                                                    now=coordinator.timer.now_ms()),
                    shard=shard))
            except TxnError as exc:
                log.warning("could not expire transactional id %s: %s", txn_id, exc)
                continue
            if plan.tombstone:
                expired += 1
    if expired:
        log.info("removed %d transactional ids idle for transactional.id.expiration.ms=%d",
                 expired, expiration_ms)
    return expired


def start_maintenance(coordinator: TransactionCoordinator) -> None:
    """Schedule both jobs on the coordinator's timer, each again after it ran."""
    timer = coordinator.timer
    runtime = coordinator.runtime

    def abort_tick() -> None:
        if runtime.closed:
            return
        runtime.spawn(abort_timed_out(coordinator))
        timer.schedule(_ABORT_KEY, coordinator.config.abort_interval_ms, abort_tick)

    def expire_tick() -> None:
        if runtime.closed:
            return
        runtime.spawn(expire_ids(coordinator))
        timer.schedule(_EXPIRE_KEY, coordinator.config.expire_interval_ms, expire_tick)

    timer.schedule(_ABORT_KEY, coordinator.config.abort_interval_ms, abort_tick)
    timer.schedule(_EXPIRE_KEY, coordinator.config.expire_interval_ms, expire_tick)


def stop_maintenance(coordinator: TransactionCoordinator) -> None:
    coordinator.timer.cancel(_ABORT_KEY)
    coordinator.timer.cancel(_EXPIRE_KEY)
