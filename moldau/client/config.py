"""Client configuration: Kafka's Java-client key names, defaults and validation.

Each client kind (admin, producer, consumer) accepts the common keys plus its own. Values may
be given typed (``{"linger.ms": 5}``) or as strings (``{"linger.ms": "5"}``, as from a CLI
``-X key=value`` or a properties file). Unknown keys are rejected with the key named and a
close match suggested, because a misspelt key silently ignored is a week of debugging.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moldau.protocol.records.compression import Codec

from .address_map import AddressMap
from .errors import ConfigError


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key: its name, how values parse, its default and what it does."""

    name: str
    parse: Callable[[str, Any], Any]
    default: Any
    doc: str


def _int(low: int | None = None, high: int | None = None) -> Callable[[str, Any], int]:
    def parse(name: str, value: Any) -> int:
        if isinstance(value, bool):
            raise ConfigError(f"{name} must be an integer, not {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be an integer, not {value!r}") from None
        if low is not None and number < low:
            raise ConfigError(f"{name} must be at least {low}, not {number}")
        if high is not None and number > high:
            raise ConfigError(f"{name} must be at most {high}, not {number}")
        return number

    return parse


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigError(f"{name} must be true or false, not {value!r}")


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, not {value!r}")
    return value


def _optional_str(name: str, value: Any) -> str | None:
    return None if value is None else _str(name, value)


def _choice(*choices: str) -> Callable[[str, Any], str]:
    def parse(name: str, value: Any) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
        return text

    return parse


def parse_servers(name: str, value: Any) -> list[tuple[str, int]]:
    """``host:port,host:port`` (or a list of them) to a list of (host, port)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    servers: list[tuple[str, int]] = []
    for raw in items:
        item = str(raw).strip()
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, port_text = item.rpartition(":")
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ConfigError(
                f"{name} entry {item!r} is not host:port (e.g. localhost:9092, [::1]:9092)"
            )
        servers.append((host, int(port_text)))
    if not servers:
        raise ConfigError(f"{name} is empty; give at least one host:port, e.g. localhost:9092")
    return servers


def _acks(name: str, value: Any) -> int:
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise ConfigError(f"{name} must be all, -1, 0 or 1, not {value!r}")


def _codec(name: str, value: Any) -> Codec:
    if isinstance(value, Codec):
        return value
    try:
        return Codec.parse(str(value))
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def _strategies(name: str, value: Any) -> tuple[str, ...]:
    from .group.assignors import parse_strategies  # the group package imports config

    return parse_strategies(name, value)


def _address_map(name: str, value: Any) -> AddressMap:
    return AddressMap.parse(value)


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {key.name: key for key in keys}


COMMON = _keys(
    ConfigKey("bootstrap.servers", parse_servers, None,
              "host:port list of brokers to learn the cluster from"),
    ConfigKey("client.id", _str, "moldau", "name sent with every request (broker logs, quotas)"),
    ConfigKey("request.timeout.ms", _int(1), 30000,
              "how long to wait for a response before failing the request"),
    ConfigKey("socket.connection.setup.timeout.ms", _int(1), 10000,
              "time limit for DNS lookup, TCP connect and the ApiVersions handshake"),
    ConfigKey("retry.backoff.ms", _int(0), 100, "first pause before retrying a failed request"),
    ConfigKey("retry.backoff.max.ms", _int(0), 1000,
              "upper bound of the exponential retry pause"),
    ConfigKey("reconnect.backoff.ms", _int(0), 50, "first pause before reconnecting a broker"),
    ConfigKey("reconnect.backoff.max.ms", _int(0), 1000, "upper bound of the reconnect pause"),
    ConfigKey("metadata.max.age.ms", _int(0), 300000,
              "refresh cluster metadata at least this often"),
    ConfigKey("broker.address.map", _address_map, AddressMap(),
              "ADVERTISED=REACHABLE rewrites of broker addresses (see address_map.py)"),
    ConfigKey("client.software.name", _str, "moldau-python", "sent in ApiVersions v3+"),
    ConfigKey("client.software.version", _str, "0.1.0", "sent in ApiVersions v3+"),
)

ADMIN = _keys(
    ConfigKey("default.api.timeout.ms", _int(1), 60000,
              "overall time limit of one admin call, retries included"),
)

PRODUCER = _keys(
    ConfigKey("acks", _acks, -1, "0: no response; 1: leader wrote it; all/-1: ISR has it"),
    ConfigKey("linger.ms", _int(0), 5, "wait this long for more records before sending a batch"),
    ConfigKey("batch.size", _int(0), 16384, "close a partition's batch at this many bytes"),
    ConfigKey("compression.type", _codec, Codec.NONE, "none, gzip, snappy, lz4 or zstd"),
    ConfigKey("max.in.flight.requests.per.connection", _int(1), 5,
              "unanswered produce requests per broker (≤ 5 with idempotence)"),
    ConfigKey("retries", _int(0), 2147483647, "how often to retry a failed batch"),
    ConfigKey("enable.idempotence", _bool, True,
              "InitProducerId + per-partition sequence numbers: no duplicates on retry"),
    ConfigKey("delivery.timeout.ms", _int(1), 120000,
              "upper bound from send() to success or failure, retries included"),
    ConfigKey("max.request.size", _int(1), 1048576, "largest record batch / request to send"),
    ConfigKey("buffer.memory", _int(1), 33554432,
              "bytes of unsent records before send() waits (max.block.ms)"),
    ConfigKey("max.block.ms", _int(0), 60000,
              "how long send() may wait for metadata or buffer space"),
    ConfigKey("partitioner.ignore.keys", _bool, False,
              "use sticky partitioning even for keyed records"),
    ConfigKey("transaction.timeout.ms", _int(1), 60000,
              "the coordinator aborts a transaction open longer than this"),
    ConfigKey("transactional.id", _optional_str, None,
              "makes the producer transactional (forces idempotence, acks=all, "
              "in-flight <= 5); one id per producer instance, stable across restarts"),
)

CONSUMER = _keys(
    ConfigKey("auto.offset.reset", _choice("earliest", "latest", "none"), "latest",
              "where to start when there is no valid position"),
    ConfigKey("fetch.min.bytes", _int(0), 1, "broker waits for this many bytes"),
    ConfigKey("fetch.max.wait.ms", _int(0), 500, "…or this long, whichever comes first"),
    ConfigKey("max.partition.fetch.bytes", _int(1), 1048576, "per-partition fetch size"),
    ConfigKey("fetch.max.bytes", _int(1), 52428800, "per-request fetch size"),
    ConfigKey("isolation.level", _choice("read_uncommitted", "read_committed"),
              "read_uncommitted", "read_committed hides aborted transactional records"),
    ConfigKey("check.crcs", _bool, True, "verify CRC-32C of every fetched batch"),
    ConfigKey("max.poll.records", _int(1), 500, "most records one poll() returns"),
    ConfigKey("client.rack", _str, "", "sent in Fetch for rack-aware replica selection"),
    ConfigKey("default.api.timeout.ms", _int(1), 60000,
              "time limit of blocking calls such as position() and offset lookups"),
    # Consumer groups (moldau.client.group).
    ConfigKey("group.id", _optional_str, None,
              "consumer group to join (subscribe) or commit to; None: no group"),
    ConfigKey("group.instance.id", _optional_str, None,
              "static membership (KIP-345): a restart within session.timeout.ms keeps the "
              "partitions without a rebalance; unique per consumer"),
    ConfigKey("group.protocol", _choice("classic", "consumer"), "classic",
              "classic: JoinGroup/SyncGroup with client-side assignors; consumer: KIP-848 "
              "heartbeats with assignment on the broker"),
    ConfigKey("group.remote.assignor", _optional_str, None,
              "group.protocol=consumer: the broker's assignor (uniform, range); None: "
              "the broker's default"),
    ConfigKey("enable.auto.commit", _bool, True,
              "commit the positions of records poll() returned every auto.commit.interval.ms "
              "(and before partitions are revoked, and on close)"),
    ConfigKey("auto.commit.interval.ms", _int(0), 5000, "auto-commit period"),
    ConfigKey("session.timeout.ms", _int(1), 45000,
              "classic: the group drops a member whose heartbeats stop for this long"),
    ConfigKey("heartbeat.interval.ms", _int(1), 3000,
              "classic: heartbeat period (below session.timeout.ms, typically a third)"),
    ConfigKey("max.poll.interval.ms", _int(1), 300000,
              "leave the group when poll() is not called for this long; also the rebalance "
              "timeout members have to rejoin"),
    ConfigKey("partition.assignment.strategy", _strategies, ("range", "cooperative-sticky"),
              "classic: assignors in order of preference: range, roundrobin, sticky, "
              "cooperative-sticky (or Java class names); cooperative rebalancing only when "
              "all are cooperative"),
)

KINDS: dict[str, dict[str, ConfigKey]] = {
    "admin": {**COMMON, **ADMIN},
    "producer": {**COMMON, **PRODUCER},
    "consumer": {**COMMON, **CONSUMER},
}


def parse_config(kind: str, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate ``given`` for a client ``kind`` and fill in defaults.

    Raises :class:`ConfigError` for unknown keys (naming the closest known key), bad values
    and a missing ``bootstrap.servers``.
    """
    keys = KINDS[kind]
    given = dict(given or {})
    result: dict[str, Any] = {}
    for name, value in given.items():
        key = keys.get(name)
        if key is None:
            hint = difflib.get_close_matches(name, list(keys), n=1)
            other = [k for k, defs in KINDS.items() if k != kind and name in defs]
            text = f"unknown {kind} config {name!r}"
            if hint:
                text += f"; did you mean {hint[0]!r}?"
            elif other:
                text += f" (it is a {other[0]} setting)"
            raise ConfigError(text)
        result[name] = key.parse(name, value)
    for name, key in keys.items():
        if name not in result:
            if key.default is None and name == "bootstrap.servers":
                raise ConfigError(
                    "bootstrap.servers is required: a host:port list such as localhost:9092"
                )
            result[name] = key.default
    return result


def describe(kind: str) -> list[tuple[str, Any, str]]:
    """(key, default, doc) for every key a client kind accepts, for help output."""
    return [(k.name, k.default, k.doc) for k in KINDS[kind].values()]
