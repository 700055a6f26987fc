"""Loading broker configuration: properties file, ``KAFKA_*`` environment, ``--override``.

Precedence, lowest first: built-in defaults, the properties file, ``KAFKA_*`` environment
variables (mapped the way Kafka's Docker images map them), ``--override key=value``.
Unknown keys are reported as warnings, as Kafka does; bad values of known keys fail start-up.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ...protocol import properties
from .definitions import (
    BROKER_BY_NAME,
    BROKER_CONFIGS,
    CLUSTER_MODE_DEFAULTS,
    TOPIC_BY_NAME,
    TOPIC_CONFIGS,
)
from .listeners import ListenerConfig, resolve_listener_config
from .types import ConfigError
from .zookeeper import ZooKeeperConnect, parse_connect

log = logging.getLogger(__name__)

# KAFKA_* variables the images use for the JVM and scripts, not for server.properties.
_NOT_CONFIG_ENV = {
    "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS", "KAFKA_JMX_PORT", "KAFKA_JMX_HOSTNAME",
    "KAFKA_LOG4J_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_DEBUG", "KAFKA_VERSION",
    "KAFKA_HOME", "KAFKA_TOOLS_LOG4J_LOGLEVEL",
}


def env_to_key(name: str) -> str | None:
    """Map ``KAFKA_ADVERTISED_LISTENERS`` to ``advertised.listeners`` as the Docker images do
    (``___`` -> ``-``, ``__`` -> ``_``, ``_`` -> ``.``); None for non-config variables."""
    if not name.startswith("KAFKA_") or name in _NOT_CONFIG_ENV:
        return None
    body = name[len("KAFKA_") :].lower()
    return body.replace("___", "\0").replace("__", "\1").replace("_", ".").replace(
        "\0", "-"
    ).replace("\1", "_")


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"Invalid --override {item!r}: expected key=value")
        result[key.strip()] = value
    return result


def embedded_defaults_text() -> str:
    """The server.properties ``moldau serve`` uses when no --config is given."""
    return resources.files("moldau.broker.config").joinpath("server.properties").read_text()


@dataclass
class BrokerConfig:
    """Parsed, validated broker configuration (Kafka key names)."""

    values: dict[str, Any]
    explicit: set[str] = field(default_factory=set)
    unknown: dict[str, str] = field(default_factory=dict)
    listener_config: ListenerConfig | None = None

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def node_id(self) -> int:
        if self.values["node.id"] >= 0:
            return self.values["node.id"]
        if self.values["broker.id"] >= 0:
            return self.values["broker.id"]
        return 1

    @property
    def cluster_mode(self) -> bool:
        """Whether this node is a broker of a ZooKeeper cluster (``zookeeper.connect`` set)."""
        return self.values.get("zookeeper.connect") is not None

    @property
    def mode_defaults(self) -> dict[str, Any]:
        """Typed defaults that replace the definitions' in this node's mode (cluster mode:
        :data:`~.definitions.CLUSTER_MODE_DEFAULTS`; a single node: none), so what
        DescribeConfigs reports as a default is the value the node runs with."""
        if not self.cluster_mode:
            return {}
        return {key: BROKER_BY_NAME[key].parse(text)
                for key, text in CLUSTER_MODE_DEFAULTS.items()}

    @property
    def zookeeper(self) -> ZooKeeperConnect:
        """The parsed ``zookeeper.connect`` (only in cluster mode)."""
        return parse_connect(self.values["zookeeper.connect"])

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """``zookeeper.connection.timeout.ms``, or the session timeout when unset (Kafka)."""
        value = self.values.get("zookeeper.connection.timeout.ms")
        return value if value is not None else self.values["zookeeper.session.timeout.ms"]

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"] or [self.values["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def listeners(self) -> ListenerConfig:
        assert self.listener_config is not None
        return self.listener_config

    # --- derived broker-level durations, resolving Kafka's ms/minutes/hours synonyms -------
    @property
    def retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * 60_000
        return v["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        v = self.values
        if v["log.roll.ms"] is not None:
            return v["log.roll.ms"]
        return v["log.roll.hours"] * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        v = self.values
        if v["log.roll.jitter.ms"] is not None:
            return v["log.roll.jitter.ms"]
        return v["log.roll.jitter.hours"] * 3_600_000

    def topic_defaults(self) -> dict[str, Any]:
        """Default value of every topic-level key, taken from its broker synonym."""
        derived = {
            "log.retention.ms": self.retention_ms,
            "log.roll.ms": self.roll_ms,
            "log.roll.jitter.ms": self.roll_jitter_ms,
            "log.flush.interval.ms": self.values["log.flush.interval.ms"],
        }
        result: dict[str, Any] = {}
        for definition, broker_key in TOPIC_CONFIGS:
            if broker_key is None:
                result[definition.name] = definition.default_value()
                continue
            value = derived.get(broker_key, self.values.get(broker_key))
            if value is None:
                value = definition.default_value()
            result[definition.name] = value
        return result

    def with_overrides(self, **changes: Any) -> BrokerConfig:
        values = dict(self.values)
        values.update({k.replace("_", "."): v for k, v in changes.items()})
        return BrokerConfig(values, set(self.explicit), dict(self.unknown),
                            self.listener_config)


def build_config(raw: Mapping[str, str]) -> BrokerConfig:
    """Validate raw string settings and produce a :class:`BrokerConfig`."""
    values: dict[str, Any] = {}
    unknown: dict[str, str] = {}
    for key, text in raw.items():
        if key not in BROKER_BY_NAME:
            unknown[key] = text
    for definition in BROKER_CONFIGS:
        if definition.name in raw:
            values[definition.name] = definition.parse(raw[definition.name])
        else:
            values[definition.name] = definition.default_value()
    _check_process_roles(raw, values)
    config = BrokerConfig(values, set(raw) - set(unknown), unknown)
    _check_log_dirs(raw, values)
    if values["node.id"] >= 0 and values["broker.id"] >= 0 and (
        values["node.id"] != values["broker.id"]
    ):
        raise ConfigError(
            f"Invalid value {values['broker.id']!r} for configuration broker.id: it differs "
            f"from node.id ({values['node.id']}); both name this broker's id (broker.id is "
            f"ZooKeeper mode's name, KAFKA_BROKER_ID in Docker): set only one of them"
        )
    config.listener_config = resolve_listener_config(
        listeners=values["listeners"],
        advertised=values["advertised.listeners"],
        protocol_map_raw=values["listener.security.protocol.map"],
        inter_broker_listener=values["inter.broker.listener.name"],
        inter_broker_protocol=values["security.inter.broker.protocol"],
        inter_broker_protocol_explicit="security.inter.broker.protocol" in raw,
        controller_listener_names=values["controller.listener.names"],
    )
    return config


def _check_process_roles(raw: Mapping[str, str], values: dict[str, Any]) -> None:
    """A broker of a ZooKeeper cluster has no ``process.roles``: in Kafka an empty
    ``process.roles`` is what makes a node run with ZooKeeper, and roles make it a KRaft node.
    Moldau turns cluster mode on by ``zookeeper.connect``, so there the roles are empty
    (whatever the single node's default), and roles set explicitly are an error rather than
    a claim the node does not keep."""
    if values["zookeeper.connect"] is None:
        return
    if "process.roles" in raw and values["process.roles"]:
        raise ConfigError(
            f"Invalid value {raw['process.roles']!r} for configuration process.roles: it "
            f"names KRaft roles, but zookeeper.connect ({values['zookeeper.connect']}) makes "
            f"this node a broker of a ZooKeeper cluster, and such brokers have no "
            f"process.roles (as Kafka's ZooKeeper-mode brokers): remove process.roles, or "
            f"remove zookeeper.connect for a single node")
    for key, text in CLUSTER_MODE_DEFAULTS.items():
        if key not in raw:
            values[key] = BROKER_BY_NAME[key].parse(text)


def _check_log_dirs(raw: Mapping[str, str], values: Mapping[str, Any]) -> None:
    """An empty ``log.dirs`` (or ``log.dir`` without ``log.dirs``) is an error, as in Kafka
    ("At least one log directory must be defined via log.dirs or log.dir."), never a silent
    fall-back to the temporary directory."""
    if "log.dirs" in raw and not values["log.dirs"]:
        key = "log.dirs"
    elif not values["log.dirs"] and not str(values["log.dir"] or "").strip():
        key = "log.dir"
    else:
        return
    raise ConfigError(
        f"Invalid value {raw.get(key, '')!r} for configuration {key}: at least one log "
        f"directory must be defined via log.dirs or log.dir. Set log.dirs to a "
        f"comma-separated list of directories, e.g. log.dirs=/var/lib/moldau/data")


def load_config(
    path: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> BrokerConfig:
    """Load configuration the way ``moldau serve`` does."""
    if path is None:
        raw = properties.parse(embedded_defaults_text())
    else:
        try:
            raw = properties.parse(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(f"Cannot read config file {path}: {exc.strerror}") from None
        except properties.PropertiesError as exc:
            raise ConfigError(f"Cannot read config file {path}: {exc}") from None
    env = os.environ if environ is None else environ
    from_env = {key: value for key, value in ((env_to_key(n), v) for n, v in env.items()) if key}
    layers = (from_env, parse_overrides(overrides))
    for layer in layers:
        _merge_layer(raw, layer)
    if path is None and not any("process.roles" in layer for layer in layers):
        _drop_single_node_roles(raw)
    config = build_config(raw)
    for key in config.unknown:
        log.warning("The configuration '%s' was supplied but isn't a known config.", key)
    return config


def _drop_single_node_roles(raw: dict[str, str]) -> None:
    """The embedded defaults describe the single node (a KRaft-style combined broker and
    controller); a node the environment or overrides make a broker of a ZooKeeper cluster
    (seed 003's ``KAFKA_ZOOKEEPER_CONNECT`` without a file) does not take their roles."""
    if BROKER_BY_NAME["zookeeper.connect"].parse(raw.get("zookeeper.connect", "")) is not None:
        raw.pop("process.roles", None)


def _merge_layer(raw: dict[str, str], layer: Mapping[str, str]) -> None:
    """Apply a higher-precedence layer; broker.id and node.id replace each other."""
    for key, twin in (("broker.id", "node.id"), ("node.id", "broker.id")):
        if key in layer and twin not in layer:
            raw.pop(twin, None)
    raw.update(layer)


def validate_topic_config(name: str, raw: str) -> Any:
    """Parse one topic-level config value; ConfigError for unknown keys or bad values."""
    definition = TOPIC_BY_NAME.get(name)
    if definition is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    return definition.parse(raw)
