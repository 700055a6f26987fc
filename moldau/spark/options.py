"""Options of the ``moldau`` Spark data source, named and checked as Spark's Kafka source.

Pure functions: nothing here talks to a cluster or imports pyspark, so every rule is unit
tested on its own. :func:`parse_source_options` and :func:`parse_sink_options` take the
data source's case-insensitive option map (Spark lower-cases the keys) and return frozen
records; a problem raises :class:`OptionError` saying which option is wrong and how to fix it.

``kafka.*`` options go to the moldau client with the prefix removed (``kafka.linger.ms`` is the
producer's ``linger.ms``), exactly as Spark hands them to the Java client. The client knows
the Java key names and rejects unknown ones, so a misspelt option fails before the query
starts instead of being ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.client.config import KINDS, parse_config
from moldau.client.errors import ConfigError

from .decode_options import DecodeOptionError, DecodingOptions, parse_decoding_options

EARLIEST = -2
LATEST = -1

# Options Spark's Kafka source refuses, with the reason it gives.
_SOURCE_REFUSED = {
    "auto.offset.reset": (
        "set the source option 'startingOffsets' to 'earliest' or 'latest' instead; Spark "
        "tracks the offsets it reads in its checkpoint, not in the consumer"),
    "key.deserializer": ("keys are always binary; use DataFrame operations (CAST(key AS "
                         "STRING), from_json, ...) to decode them"),
    "value.deserializer": ("values are always binary; use DataFrame operations (CAST(value AS "
                           "STRING), from_json, ...) to decode them"),
    "enable.auto.commit": "the source does not commit offsets to the cluster",
    "interceptor.classes": "interceptors are not supported",
}
_SINK_REFUSED = {
    "transactional.id": ("the exactly-once sink derives one transactional id per task from "
                         "the option 'transactional.id.prefix', the query id and the "
                         "partition; set that prefix instead"),
    "key.serializer": "keys are written as given (binary, or strings as UTF-8)",
    "value.serializer": "values are written as given (binary, or strings as UTF-8)",
    "interceptor.classes": "interceptors are not supported",
}
# Accepted for compatibility with Spark jobs but meaningless here (no consumer group is used).
_SOURCE_IGNORED = {"group.id"}

# Client settings the source uses unless the job sets them (kafka.*): bigger fetches than the
# Java defaults because Spark tasks read long ranges of one partition.
SOURCE_CLIENT_DEFAULTS = {
    "max.partition.fetch.bytes": "4194304",
    "client.id": "moldau-spark",
}
SINK_CLIENT_DEFAULTS = {
    "client.id": "moldau-spark",
    "linger.ms": "5",
    "batch.size": "262144",
}


class OptionError(ValueError):
    """A data source option is missing, unknown or malformed."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or stop: ``kind`` is earliest, latest, offsets, timestamp or timestamps.

    ``offsets``: {topic: {partition: offset}} with -2 = earliest, -1 = latest.
    ``timestamp``: one timestamp (ms) for every partition; ``timestamps``: per partition.
    """

    kind: str
    offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    timestamp: int | None = None

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp}"
        return json.dumps({t: {str(p): o for p, o in ps.items()} for t, ps in
                           self.offsets.items()})


@dataclass(frozen=True)
class SourceOptions:
    """A validated source configuration (see docs/spark.md for each option)."""

    strategy: str  # assign | subscribe | subscribePattern
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assignment: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 120000
    client_config: Mapping[str, str] = field(default_factory=dict)
    # value.format=avro / key.format=avro (see .decode_options)
    decoding: DecodingOptions = field(default_factory=DecodingOptions)

    def consumer_config(self) -> dict[str, str]:
        """Settings of the executors' consumers: the job's ``kafka.*`` over our defaults."""
        config = {**SOURCE_CLIENT_DEFAULTS, **self.client_config}
        # Executors read exactly the ranges the driver planned; a reset would hide data loss.
        config["auto.offset.reset"] = "none"
        config["enable.auto.commit"] = "false"
        return config

    def admin_config(self) -> dict[str, str]:
        """Settings of the driver's admin client (the keys an admin client knows)."""
        keys = KINDS["admin"]
        config = {k: v for k, v in self.consumer_config().items() if k in keys}
        return config

    @property
    def read_committed(self) -> bool:
        return self.client_config.get("isolation.level", "").lower() == "read_committed"


EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
DELIVERY_GUARANTEES = (EXACTLY_ONCE, AT_LEAST_ONCE)
DEFAULT_TXN_PREFIX = "moldau-spark-"


@dataclass(frozen=True)
class SinkOptions:
    """A validated sink configuration.

    ``delivery_guarantee`` is exactly-once only for streams (:mod:`.txn_sink`); a batch
    ``df.write`` has no batch id to record and stays at-least-once. ``state_topic`` is the
    topic whose partition 0 names the committed-batch offset of each transactional id (the
    ``topic`` option unless ``exactly.once.state.topic`` says otherwise).
    """

    topic: str | None
    client_config: Mapping[str, str] = field(default_factory=dict)
    checkpoint: str | None = None  # a stream's checkpointLocation option, if given
    delivery_guarantee: str = AT_LEAST_ONCE
    transactional_id_prefix: str = DEFAULT_TXN_PREFIX
    state_topic: str | None = None

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    def producer_config(self) -> dict[str, str]:
        return {**SINK_CLIENT_DEFAULTS, **self.client_config}


# --- small parsers ------------------------------------------------------------------------------


def _get(options: Mapping[str, Any], name: str) -> str | None:
    """Option ``name`` (case-insensitive), stripped; None when absent."""
    value = options.get(name.lower())
    if value is None:
        for key, v in options.items():
            if key.lower() == name.lower():
                value = v
                break
    return None if value is None else str(value).strip()


def _bool(options: Mapping[str, Any], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise OptionError(f"option {name!r} must be true or false, not {text!r}")


def _long(options: Mapping[str, Any], name: str, *, positive: bool = True) -> int | None:
    text = _get(options, name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"option {name!r} must be a whole number, not {text!r}") from None
    if positive and value <= 0:
        raise OptionError(f"option {name!r} must be positive, not {value}")
    return value


_TIME_UNITS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60000, "min": 60000, "h": 3600000,
               "d": 86400000}


def parse_duration_ms(text: str, name: str = "duration") -> int:
    """Spark's time strings: ``500ms``, ``10s``, ``15m``, ``1h``, ``2d``; a bare number is ms."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not match or match[2] not in ("", *_TIME_UNITS):
        raise OptionError(f"{name} {text!r} is not a duration such as 500ms, 10s, 15m or 1h")
    return int(match[1]) * _TIME_UNITS.get(match[2] or "ms", 1)


def parse_partition_json(text: str, name: str) -> dict[str, dict[int, int]]:
    """``{"topicA":{"0":23,"1":-1}}`` to {topic: {partition: value}} (keys are strings)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"option {name!r} is not valid JSON ({exc.msg}); expected e.g. "
            '{"topicA":{"0":23,"1":-2},"topicB":{"0":-1}}') from None
    if not isinstance(data, dict) or not data:
        raise OptionError(f"option {name!r} must be a JSON object of topics, e.g. "
                          '{"topicA":{"0":23}}')
    out: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name!r}: topic {topic!r} must map partition numbers "
                              f'to values, e.g. {{"{topic}":{{"0":23}}}}')
        out[topic] = {}
        for part, value in parts.items():
            try:
                number = int(part)
            except (TypeError, ValueError):
                raise OptionError(f"option {name!r}: {part!r} of topic {topic!r} is not a "
                                  "partition number") from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(f"option {name!r}: value of {topic}-{part} must be a whole "
                                  f"number, not {value!r}")
            out[topic][number] = value
    return out


def parse_assign(text: str) -> dict[str, tuple[int, ...]]:
    """``{"topicA":[0,1],"topicB":[2,4]}`` to {topic: partitions}."""
    if not text.startswith("{"):
        raise OptionError(f"No topicpartitions to assign as specified value for option "
                          f"'assign' is {text!r}; expected JSON such as "
                          '{"topicA":[0,1],"topicB":[2,4]}')
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option 'assign' is not valid JSON ({exc.msg}); expected e.g. "
                          '{"topicA":[0,1]}') from None
    out: dict[str, tuple[int, ...]] = {}
    for topic, parts in (data.items() if isinstance(data, dict) else ()):
        if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
            raise OptionError(f"option 'assign': topic {topic!r} needs a list of partition "
                              f"numbers, e.g. {{\"{topic}\":[0,1]}}")
        out[topic] = tuple(sorted(set(parts)))
    if not out or not any(out.values()):
        raise OptionError(f"option 'assign' names no partitions: {text!r}")
    return out


def _offset_spec(options: Mapping[str, Any], timestamp_key: str, by_timestamp_key: str,
                 offsets_key: str, default: str) -> OffsetSpec:
    """Spark's order of preference: global timestamp, per-partition timestamps, offsets."""
    ts = _get(options, timestamp_key)
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts))
        except ValueError:
            raise OptionError(f"option {timestamp_key!r}: expected a single long value "
                              f"(milliseconds since the epoch), got {ts!r}") from None
    by_ts = _get(options, by_timestamp_key)
    if by_ts is not None:
        return OffsetSpec("timestamps", parse_partition_json(by_ts, by_timestamp_key))
    text = _get(options, offsets_key)
    if text is None:
        return OffsetSpec(default)
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("offsets", parse_partition_json(text, offsets_key))


def client_settings(options: Mapping[str, Any], refused: Mapping[str, str],
                    kind: str, defaults: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix removed, checked by the moldau client."""
    settings: dict[str, str] = {}
    for key, value in options.items():
        lowered = key.lower()
        if not lowered.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        # Spark lower-cases option keys; Kafka's keys are lower case already.
        name = name.lower()
        if name in refused:
            raise OptionError(f"Kafka option {name!r} (kafka.{name}) is not supported: "
                              f"{refused[name]}")
        if kind == "consumer" and name in _SOURCE_IGNORED:
            continue
        settings[name] = str(value)
    if "bootstrap.servers" not in settings:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring "
                          "the connection, e.g. .option('kafka.bootstrap.servers', "
                          "'host1:9092,host2:9092')")
    try:
        parse_config(kind, {**defaults, **settings})
    except ConfigError as exc:
        raise OptionError(f"{exc} (given as a kafka.* option of the moldau data source)") from None
    return settings


# --- the source ----------------------------------------------------------------------------------


def parse_source_options(options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    """Check the options of ``spark.read`` (``streaming=False``) or ``spark.readStream``."""
    strategies = [(name, _get(options, name)) for name in ("assign", "subscribe",
                                                            "subscribePattern")]
    given = [(name, value) for name, value in strategies if value is not None]
    if len(given) != 1:
        which = "One" if not given else "Only one"
        raise OptionError(f"{which} of the following options must be specified for the moldau "
                          "source: assign, subscribe, subscribePattern (as for Spark's Kafka "
                          "source)")
    strategy, value = given[0]
    assert value is not None
    topics: tuple[str, ...] = ()
    pattern = None
    assignment: dict[str, tuple[int, ...]] = {}
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option "
                              f"'subscribe' is {value!r}")
    elif strategy == "subscribePattern":
        if not value:
            raise OptionError("Pattern to subscribe is empty as specified value for option "
                              "'subscribePattern'")
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern': {value!r} is not a regular "
                              f"expression ({exc})") from None
        pattern = value
    else:
        assignment = parse_assign(value)

    starting = _offset_spec(options, "startingTimestamp", "startingOffsetsByTimestamp",
                            "startingOffsets", "latest" if streaming else "earliest")
    ending = OffsetSpec("latest")
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if _get(options, name) is not None:
                raise OptionError(f"option {name!r} is not valid in streaming queries: a "
                                  "stream has no end; use a batch read (spark.read) instead")
    else:
        ending = _offset_spec(options, "endingTimestamp", "endingOffsetsByTimestamp",
                              "endingOffsets", "latest")
        if starting.kind == "latest":
            raise OptionError("starting offset can't be latest for batch queries; use "
                              "earliest, JSON offsets or a timestamp")
        for topic, parts in (starting.offsets if starting.kind == "offsets" else {}).items():
            for part, off in parts.items():
                if off == LATEST:
                    raise OptionError(f"startingOffsets for {topic}-{part} can't be latest "
                                      "(-1) for batch queries")
        if ending.kind == "earliest":
            raise OptionError("ending offset can't be earliest for batch queries")
        for topic, parts in (ending.offsets if ending.kind == "offsets" else {}).items():
            for part, off in parts.items():
                if off == EARLIEST:
                    raise OptionError(f"ending offset for {topic}-{part} can't be earliest "
                                      "(-2) for batch queries")

    strategy_text = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy_text not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be error or "
                          f"latest, not {strategy_text!r}")

    max_per_trigger = _long(options, "maxOffsetsPerTrigger")
    min_per_trigger = _long(options, "minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and (
            min_per_trigger > max_per_trigger):
        raise OptionError(f"The value of minOffsetsPerTrigger({min_per_trigger}) is higher "
                          f"than the maxOffsetsPerTrigger({max_per_trigger}).")
    delay_text = _get(options, "maxTriggerDelay")
    delay = parse_duration_ms(delay_text, "option 'maxTriggerDelay'") if delay_text else (
        15 * 60 * 1000)
    poll_timeout = _long(options, "kafkaConsumer.pollTimeoutMs") or 120000
    decoding = decoding_options(options)

    return SourceOptions(
        strategy=strategy, topics=topics, pattern=pattern, assignment=assignment,
        starting=starting, ending=ending, timestamp_strategy=strategy_text,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_offsets_per_trigger=max_per_trigger, min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay,
        min_partitions=_long(options, "minPartitions"),
        max_records_per_partition=_long(options, "maxRecordsPerPartition"),
        poll_timeout_ms=poll_timeout,
        client_config=client_settings(options, _SOURCE_REFUSED, "consumer",
                                      SOURCE_CLIENT_DEFAULTS),
        decoding=decoding,
    )


def decoding_options(options: Mapping[str, Any]) -> DecodingOptions:
    """``value.format`` / ``key.format`` and the registry options (OptionError if wrong)."""
    try:
        return parse_decoding_options(options)
    except DecodeOptionError as exc:
        raise OptionError(str(exc)) from None


def parse_sink_options(options: Mapping[str, Any], *, streaming: bool = False) -> SinkOptions:
    """Check the options of ``df.write`` (``streaming=False``) / ``df.writeStream``."""
    topic = _get(options, "topic") or None
    client_config = client_settings(options, _SINK_REFUSED, "producer", SINK_CLIENT_DEFAULTS)
    guarantee = (_get(options, "delivery.guarantee")
                 or (EXACTLY_ONCE if streaming else AT_LEAST_ONCE)).lower()
    if guarantee not in DELIVERY_GUARANTEES:
        raise OptionError(f"option 'delivery.guarantee' must be exactly-once or "
                          f"at-least-once, not {guarantee!r}")
    if guarantee == EXACTLY_ONCE and not streaming:
        raise OptionError("option 'delivery.guarantee' exactly-once needs a streaming write "
                          "(df.writeStream): a batch df.write has no batch id to record, so "
                          "it is at-least-once; drop the option or set it to at-least-once")
    prefix = _get(options, "transactional.id.prefix")
    if prefix is None:
        prefix = DEFAULT_TXN_PREFIX
    state_topic = _get(options, "exactly.once.state.topic") or None
    if guarantee == EXACTLY_ONCE:
        if not prefix:
            raise OptionError("option 'transactional.id.prefix' must not be empty: it keeps "
                              "the sink's transactional ids apart from other producers'")
        timeout = _long(options, "kafka.transaction.timeout.ms")
        if timeout is not None and timeout < 1000:
            raise OptionError(f"option 'kafka.transaction.timeout.ms' {timeout} is too short "
                              "for a task's transaction; use at least 1000 (default 60000, "
                              "at most the brokers' transaction.max.timeout.ms)")
        if topic is None and state_topic is None:
            raise OptionError("the exactly-once sink records each task's committed batch as "
                              "an offset of partition 0 of one topic: give the 'topic' option "
                              "or, when rows name their topics, the option "
                              "'exactly.once.state.topic' (an existing topic)")
    return SinkOptions(
        topic=topic, client_config=client_config,
        checkpoint=_get(options, "checkpointLocation"),
        delivery_guarantee=guarantee, transactional_id_prefix=prefix,
        state_topic=state_topic or topic,
    )
