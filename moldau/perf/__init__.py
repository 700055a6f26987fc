"""Load generators behind ``moldau perf``: producer and consumer throughput (mirroring
kafka-producer-perf-test and kafka-consumer-perf-test) and fixed-rate end-to-end latency.

librdkafka (confluent-kafka) is the engine; several worker processes generate the load so
the broker, not one Python loop, is what gets measured.
"""

from .consume import ConsumeOptions, ConsumeResult, run_consume
from .e2e import E2EOptions, E2EResult, run_e2e
from .latency import LatencyHistogram
from .produce import ProduceOptions, ProduceResult, run_produce

__all__ = [
    "ConsumeOptions", "ConsumeResult", "E2EOptions", "E2EResult", "LatencyHistogram",
    "ProduceOptions", "ProduceResult", "run_consume", "run_e2e", "run_produce",
]
