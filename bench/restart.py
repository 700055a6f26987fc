"""Restart time of a broker holding a large log, after kill -9 and after a clean shutdown.

Only Moldau keeps a log it can restart with: Tansu runs with ``memory://`` (a restart starts
empty) and noida-db keeps everything in one JSON file (not built for gigabytes).
The log is written with :mod:`bench.rawload` (1 MiB batches, as fast as the broker appends).
Then: kill -9 right after the writes (recovery must scan what was not checkpointed), start,
stop cleanly, start again. Restart time is from exec to the first answered ApiVersions; the
log end offsets are checked to be unchanged after each restart.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from moldau.testing.peers import free_port

from .brokers import BenchBroker, create_topic
from .rawload import fill

TOPIC = "restart"
PARTITIONS = 8


def _end_offsets(bootstrap: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-restart"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                for p in range(PARTITIONS)]
    finally:
        consumer.close()


def _disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*.log"))


def measure(cpus: str | None, total_bytes: int, root: Path | None = None) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-restart-", dir=root))
    broker = BenchBroker("moldau", free_port(), workdir, cpus)
    try:
        broker.start()
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        filled = fill("127.0.0.1", broker.port, TOPIC, PARTITIONS, total_bytes)
        offsets = _end_offsets(broker.bootstrap)
        log_bytes = _disk_bytes(workdir / "data")
        broker.kill()
        broker.start(timeout_s=600)
        unclean_s = broker.started_in_s
        ok_unclean = _end_offsets(broker.bootstrap) == offsets
        stop_s = broker.stop()
        broker.start(timeout_s=600)
        clean_s = broker.started_in_s
        ok_clean = _end_offsets(broker.bootstrap) == offsets
        broker.stop()
    finally:
        broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"log_gb": round(log_bytes / 1e9, 2), "fill": filled,
            "shutdown_s": round(stop_s, 2), "restart_clean_s": round(clean_s, 2),
            "restart_after_kill9_s": round(unclean_s, 2),
            "offsets_intact": ok_clean and ok_unclean, "offsets": sum(offsets)}
