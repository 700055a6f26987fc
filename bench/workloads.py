"""The workloads W1-W6, each run against one broker with librdkafka clients (moldau.perf).

Client settings are the same for every broker. Producers spread keyless records over all
partitions (``sticky.partitioning.linger.ms=0``: librdkafka's random partitioner), so every
produce request carries every partition: that is what W6 scales.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from moldau.perf.consume import ConsumeOptions, run_consume
from moldau.perf.e2e import E2EOptions, run_e2e
from moldau.perf.produce import ProduceOptions, run_produce

from .brokers import BenchBroker, create_topic
from .proc import Sampler

MiB = 1 << 20

# W1 as the issue defines it: 100 B records, acks=1, linger.ms=5, batch.size=1 MiB.
PRODUCER_W1 = {"acks": "1", "linger.ms": "5", "batch.size": str(MiB),
               "sticky.partitioning.linger.ms": "0",
               "queue.buffering.max.messages": "1000000"}
# OpenMessaging Benchmark's Kafka driver defaults (acks=all, linger.ms=1, batch.size=1 MiB).
PRODUCER_OMB = {"acks": "all", "linger.ms": "1", "batch.size": str(MiB),
                "sticky.partitioning.linger.ms": "0"}
# Latency: send at once.
PRODUCER_E2E = {"acks": "1", "linger.ms": "0", "sticky.partitioning.linger.ms": "0"}


@dataclass
class Sizes:
    """How much each workload does (``--quick`` shrinks some)."""

    w1_records: int = 3_000_000
    w2_records: int = 600_000
    w3_records: int = 2_000_000
    w4_seconds: float = 15.0
    w5_seconds: float = 20.0
    w6_records: int = 3_000_000
    w6_partitions: tuple[int, ...] = (1, 100, 1000)
    idle_connections: int = 1000
    processes: int = 2


def _children_cpu() -> float:
    """CPU seconds of this process's reaped children (the perf worker processes)."""
    t = os.times()
    return t.children_user + t.children_system


def _cfg(broker: BenchBroker, base: dict[str, str]) -> dict[str, str]:
    out = dict(base)
    out["bootstrap.servers"] = broker.bootstrap
    return out


def produce_run(broker: BenchBroker, topic: str, partitions: int, records: int, size: int,
                config: dict[str, str], processes: int, create: bool = True) -> dict[str, Any]:
    """Create ``topic`` and produce into it unthrottled; broker CPU/RSS sampled."""
    if create:
        create_topic(broker.bootstrap, topic, partitions)
    opts = ProduceOptions(topic, records, size, _cfg(broker, config), processes=processes)
    cpu0 = _children_cpu()
    with Sampler(broker.pid) as sampler:
        result = run_produce(opts)
    assert sampler.usage is not None
    out = result.to_json()
    out["client_cpu_s"] = round(_children_cpu() - cpu0, 2)
    out.pop("workers", None)
    out["partitions"] = partitions
    out["record_size"] = size
    out["broker"] = sampler.usage.to_json()
    ingested_gb = result.bytes / 1e9
    out["broker_cpu_s_per_gb"] = round(sampler.usage.cpu_s / ingested_gb, 3) \
        if ingested_gb else None
    return out


def w1(broker: BenchBroker, sizes: Sizes) -> dict[str, Any]:
    return produce_run(broker, "w1", 6, sizes.w1_records, 100, PRODUCER_W1, sizes.processes)


def w2(broker: BenchBroker, sizes: Sizes) -> dict[str, Any]:
    config = dict(PRODUCER_W1, acks="all")
    return produce_run(broker, "w2", 6, sizes.w2_records, 1024, config, sizes.processes)


def w3(broker: BenchBroker, sizes: Sizes) -> dict[str, Any]:
    """Pre-fill (not timed), then consume everything from the start, no group."""
    fill = produce_run(broker, "w3", 6, sizes.w3_records, 100, PRODUCER_W1, sizes.processes)
    if fill["records"] < sizes.w3_records:
        raise RuntimeError(f"pre-fill produced {fill['records']} of {sizes.w3_records}")
    time.sleep(0.5)
    opts = ConsumeOptions("w3", sizes.w3_records, {"bootstrap.servers": broker.bootstrap},
                          assign=True, timeout_ms=30_000, processes=sizes.processes)
    cpu0 = _children_cpu()
    with Sampler(broker.pid) as sampler:
        result = run_consume(opts)
    assert sampler.usage is not None
    out = result.to_json()
    out["client_cpu_s"] = round(_children_cpu() - cpu0, 2)
    out.pop("workers", None)
    out["broker"] = sampler.usage.to_json()
    out["prefill_records_per_s"] = fill["records_per_s"]
    return out


def e2e_run(broker: BenchBroker, topic: str, partitions: int, rate: float, seconds: float,
            producer: dict[str, str], processes: int, warmup_s: float) -> dict[str, Any]:
    create_topic(broker.bootstrap, topic, partitions)
    opts = E2EOptions(topic, rate, seconds, 1024, _cfg(broker, producer),
                      {"bootstrap.servers": broker.bootstrap}, processes=processes,
                      warmup_s=warmup_s)
    cpu0 = _children_cpu()
    with Sampler(broker.pid) as sampler:
        result = run_e2e(opts)
    assert sampler.usage is not None
    out = result.to_json()
    out["client_cpu_s"] = round(_children_cpu() - cpu0, 2)
    out["partitions"] = partitions
    out["target_rate"] = rate
    out["broker"] = sampler.usage.to_json()
    return out


def w4(broker: BenchBroker, sizes: Sizes) -> dict[str, Any]:
    return e2e_run(broker, "w4", 6, 10_000, sizes.w4_seconds, PRODUCER_E2E, 1, 2.0)


def w5(broker: BenchBroker, sizes: Sizes) -> dict[str, Any]:
    return e2e_run(broker, "w5", 100, 50_000, sizes.w5_seconds, PRODUCER_OMB, 2, 3.0)


def w6(broker: BenchBroker, sizes: Sizes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for partitions in sizes.w6_partitions:
        out[str(partitions)] = produce_run(broker, f"w6-{partitions}", partitions,
                                           sizes.w6_records, 100, PRODUCER_W1,
                                           sizes.processes)
    return out


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6}
