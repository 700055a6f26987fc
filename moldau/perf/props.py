"""Client properties for the perf tools: ``k=v`` arguments and Java-style properties files.

The tools hand these to librdkafka (confluent-kafka). Keys that only the Java client knows
(serializers, ``buffer.memory`` ...) are dropped with a note, so a command line written for
kafka-producer-perf-test works unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from ..protocol import properties

# Java client settings without a librdkafka equivalent; harmless to drop for a perf run.
JAVA_ONLY = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "buffer.memory", "max.block.ms", "max.in.flight.requests.per.connection",
    "delivery.timeout.ms.config", "interceptor.classes", "metric.reporters",
    "partitioner.class", "exclude.internal.topics", "client.dns.lookup",
})


class PropsError(ValueError):
    """A property argument or file that cannot be parsed."""


def parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """``["acks=all", "linger.ms=5"]`` -> dict; raises :class:`PropsError` on a bad pair."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PropsError(f"expected KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java properties file, read as ``java.util.Properties.load`` reads it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PropsError(f"cannot read properties file {path}: {exc.strerror}") from None
    try:
        return properties.parse(text)
    except properties.PropertiesError as exc:
        raise PropsError(f"{path}: {exc}") from None


def librdkafka_config(props: dict[str, str]) -> dict[str, str]:
    """``props`` without Java-only keys (each dropped key is reported on stderr)."""
    dropped = sorted(k for k in props if k in JAVA_ONLY)
    if dropped:
        print(f"note: ignoring Java client settings librdkafka does not have: "
              f"{', '.join(dropped)}", file=sys.stderr)
    # The Java clients' ConfigDef trims values; librdkafka would refuse "all " for acks.
    return {k: v.strip() for k, v in props.items() if k not in JAVA_ONLY}
