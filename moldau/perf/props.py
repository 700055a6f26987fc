"""Client properties for the perf tools: ``k=v`` arguments and Java-style properties files.

The tools hand these to librdkafka (confluent-kafka). Keys that only the Java client knows
(serializers, ``buffer.memory`` ...) are dropped with a note, so a command line written for
kafka-producer-perf-test works unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

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
    """A Java properties file (``key=value`` or ``key: value``, ``#``/``!`` comments)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PropsError(f"cannot read properties file {path}: {exc.strerror}") from None
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise PropsError(f"{path}:{number}: expected key=value, got {raw!r}")
        out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


def librdkafka_config(props: dict[str, str]) -> dict[str, str]:
    """``props`` without Java-only keys (each dropped key is reported on stderr)."""
    dropped = sorted(k for k in props if k in JAVA_ONLY)
    if dropped:
        print(f"note: ignoring Java client settings librdkafka does not have: "
              f"{', '.join(dropped)}", file=sys.stderr)
    return {k: v for k, v in props.items() if k not in JAVA_ONLY}
