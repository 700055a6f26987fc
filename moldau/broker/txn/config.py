"""The broker settings the transaction coordinator uses, read once at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TxnConfig:
    """Transaction coordinator settings (Kafka's keys and defaults)."""

    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_interval_ms: int = 10000
    expire_interval_ms: int = 3600000
    # How long a write to __transaction_state waits for the ISR (Kafka's
    # transaction.state.log... uses request.timeout.ms for the append).
    write_timeout_ms: int = 30000
    # The single node (no zookeeper.connect) caps the replication factor at the brokers
    # alive, as for __consumer_offsets (design §6.5).
    cap_replication: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TxnConfig:
        """Build from a broker config (anything indexable by Kafka key)."""
        return cls(
            num_partitions=config["transaction.state.log.num.partitions"],
            replication_factor=config["transaction.state.log.replication.factor"],
            min_isr=config["transaction.state.log.min.isr"],
            segment_bytes=config["transaction.state.log.segment.bytes"],
            max_timeout_ms=config["transaction.max.timeout.ms"],
            id_expiration_ms=config["transactional.id.expiration.ms"],
            abort_interval_ms=config[
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            expire_interval_ms=config[
                "transaction.remove.expired.transaction.cleanup.interval.ms"],
            cap_replication=not config.get("zookeeper.connect"),
        )
