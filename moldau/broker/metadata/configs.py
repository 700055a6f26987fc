"""Effective and described configuration of topics and brokers, resolved the way Kafka does.

A topic config's value comes from, highest precedence first:

1. a dynamic topic config (``ConfigRecord`` for the topic, DYNAMIC_TOPIC_CONFIG),
2. a dynamic config of this broker (``ConfigRecord`` for resource name = node id,
   DYNAMIC_BROKER_CONFIG) for one of the topic key's broker synonyms,
3. a cluster-wide dynamic broker default (resource name ``""``, DYNAMIC_DEFAULT_BROKER_CONFIG),
4. the broker's static configuration (server.properties, ``KAFKA_*``, ``--override``;
   STATIC_BROKER_CONFIG),
5. the built-in default of the broker synonym (DEFAULT_CONFIG), else of the topic key.

Within one level a topic key may have several broker synonyms, tried in Kafka's order
(``retention.ms`` <- ``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``),
with hours and minutes converted to milliseconds. Everything here is pure: it reads a
:class:`MetadataImage` and a :class:`BrokerConfig` and returns values, so the replica manager
(``effective_topic_config``) and the DescribeConfigs/CreateTopics handlers (``topic_entries``,
``broker_entries``) agree by construction.
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ...protocol.config_source import ConfigSource
from ...protocol.errors import ErrorCode
from ..config.definitions import BROKER_BY_NAME, TOPIC_BY_NAME, TOPIC_CONFIGS
from ..config.kafka_dynamic import (
    KAFKA_DYNAMIC_NAMES,
    KAFKA_ONLY,
    broker_definition,
    is_dynamic,
    listener_base,
    mechanism_config,
    scope_problems,
)
from ..config.types import ConfigDef, ConfigError
from .records import BROKER_RESOURCE, TOPIC_RESOURCE

if TYPE_CHECKING:
    from ..config.loader import BrokerConfig
    from .image import MetadataImage


class ConfigType(IntEnum):
    """Kafka's DescribeConfigs ``config_type`` values (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_TYPES = {
    "bool": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "int": ConfigType.INT,
    "short": ConfigType.SHORT,
    "long": ConfigType.LONG,
    "double": ConfigType.DOUBLE,
    "list": ConfigType.LIST,
    "class": ConfigType.CLASS,
    "password": ConfigType.PASSWORD,
}

_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


@dataclass(frozen=True)
class BrokerSynonym:
    """A broker key that supplies a topic key's default, and the factor to milliseconds."""

    name: str
    factor: int = 1


def _topic_synonym_chains() -> dict[str, tuple[BrokerSynonym, ...]]:
    # Kafka's ServerTopicConfigSynonyms: keys with more than one broker synonym, in order.
    multi = {
        "segment.ms": (BrokerSynonym("log.roll.ms"), BrokerSynonym("log.roll.hours", _HOUR_MS)),
        "segment.jitter.ms": (BrokerSynonym("log.roll.jitter.ms"),
                              BrokerSynonym("log.roll.jitter.hours", _HOUR_MS)),
        "flush.ms": (BrokerSynonym("log.flush.interval.ms"),
                     BrokerSynonym("log.flush.scheduler.interval.ms")),
        "retention.ms": (BrokerSynonym("log.retention.ms"),
                         BrokerSynonym("log.retention.minutes", _MINUTE_MS),
                         BrokerSynonym("log.retention.hours", _HOUR_MS)),
    }
    chains: dict[str, tuple[BrokerSynonym, ...]] = {}
    for definition, broker_key in TOPIC_CONFIGS:
        chain = multi.get(definition.name)
        if chain is None:
            chain = (BrokerSynonym(broker_key),) if broker_key else ()
        chains[definition.name] = tuple(s for s in chain if s.name in BROKER_BY_NAME)
    return chains


TOPIC_BROKER_SYNONYMS: dict[str, tuple[BrokerSynonym, ...]] = _topic_synonym_chains()
"""Topic key -> its broker synonyms in precedence order (Kafka's ALL_TOPIC_CONFIG_SYNONYMS)."""


def broker_key_synonyms(name: str) -> tuple[str, ...]:
    """Broker keys that set the same thing as ``name``, highest precedence first
    (Kafka's ``DynamicBrokerConfig.brokerConfigSynonyms``)."""
    for chain in TOPIC_BROKER_SYNONYMS.values():
        names = tuple(s.name for s in chain)
        if len(names) > 1 and name in names:
            return names
    base = listener_base(name)
    if base is not None:
        # listener.name.<l>.<config> falls back to <config>; a SASL mechanism's
        # (listener.name.<l>.<mechanism>.<config>) to <config> without the mechanism.
        return (name, mechanism_config(base) or base)
    return (name,)


DYNAMIC_BROKER_CONFIGS: frozenset[str] = KAFKA_DYNAMIC_NAMES
"""The broker keys Kafka lets AlterConfigs change at run time (``DynamicBrokerConfig``; the
data is in :mod:`..config.kafka_dynamic`), without their ``listener.name.*`` forms. Other known
keys answer "Cannot update these configs dynamically"."""

APPLIED_BROKER_CONFIGS: frozenset[str] = frozenset(
    chain[0].name for chain in TOPIC_BROKER_SYNONYMS.values() if chain
) & DYNAMIC_BROKER_CONFIGS
"""The dynamic broker keys a change of which Moldau applies at once: the primary broker
synonym of every topic config (log.retention.ms, not log.retention.hours), which the replica
manager re-resolves for every topic. The other dynamic keys are stored and described only."""


def validate_broker_changes(resource_name: str, changes: Mapping[str, str | None]
                            ) -> tuple[ErrorCode, str] | None:
    """Dynamic config changes of a BROKER resource (value None = delete), in the order of
    Kafka's ``DynamicBrokerConfig.validateConfigs``: known names, names that may change at run
    time, listener-only security configs, parseable values, per-broker configs at the cluster
    default. Kafka answers INVALID_REQUEST for all of these (KAFKA-13609)."""
    unknown = sorted(k for k in changes if broker_definition(k) is None)
    if unknown:
        return (ErrorCode.invalid_request,
                f"Unknown broker config name(s): {', '.join(unknown)}")
    static_only = sorted(k for k in changes if not is_dynamic(k))
    if static_only:
        return (ErrorCode.invalid_request,
                f"Cannot update these configs dynamically: {', '.join(static_only)}. Set them "
                f"in server.properties and restart the broker; docs/configuration.md lists "
                f"the keys that can change at run time")
    values = {k: v for k, v in changes.items() if v is not None}
    for key, value in values.items():
        definition = broker_definition(key)
        assert definition is not None
        try:
            definition.parse(value)
        except ConfigError as exc:
            return ErrorCode.invalid_request, str(exc)
    problem = scope_problems(resource_name, values)
    return None if problem is None else (ErrorCode.invalid_request, problem)


def config_type(definition: ConfigDef) -> ConfigType:
    return _TYPES.get(definition.type, ConfigType.UNKNOWN)


def is_sensitive(definition: ConfigDef) -> bool:
    return definition.type == "password"


def java_double(value: float) -> str:
    """``Double.toString`` as Java renders it (1.0, 0.5, 1.0E-5, 1.0E7)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(value)
        return text if ("." in text or "e" in text) else text + ".0"
    digits = decimal.Decimal(repr(value)).normalize()
    sign, numerals, _ = digits.as_tuple()
    mantissa = "".join(str(d) for d in numerals)
    exponent = digits.adjusted()
    body = mantissa[0] + "." + (mantissa[1:] or "0")
    return ("-" if sign else "") + f"{body}E{exponent}"


def render(definition: ConfigDef | None, value: Any) -> str | None:
    """A typed config value as Kafka's ``ConfigDef.convertToString`` renders it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, float) or (definition is not None and definition.type == "double"):
        return java_double(float(value))
    return str(value)


def _parse(definition: ConfigDef, raw: str | None) -> Any:
    """Parse a stored dynamic value; a value that no longer parses is ignored (as Kafka does
    with invalid dynamic configs) by returning None."""
    try:
        return definition.parse(raw)
    except ConfigError:
        return None


# --- broker config levels --------------------------------------------------------------------
@dataclass(frozen=True)
class Level:
    """One level of broker configuration: its source and typed values by key."""

    source: ConfigSource
    values: Mapping[str, Any]
    raw: Mapping[str, str]  # the strings as stored (dynamic levels) for display


def _typed(raw: Mapping[str, str]) -> dict[str, Any]:
    result = {}
    for key, text in raw.items():
        definition = broker_definition(key)
        if definition is None:
            continue
        value = _parse(definition, text)
        if value is not None:
            result[key] = value
    return result


def broker_levels(image: MetadataImage, broker_config: BrokerConfig) -> list[Level]:
    """The broker configuration levels, highest precedence first."""
    per_broker = image.configs_of(BROKER_RESOURCE, str(broker_config.node_id))
    cluster_default = image.configs_of(BROKER_RESOURCE, "")
    static = {k: broker_config.values[k] for k in broker_config.explicit
              if k in BROKER_BY_NAME and broker_config.values.get(k) is not None}
    # the defaults of the node's mode (a cluster broker has no process.roles)
    mode_defaults = broker_config.mode_defaults
    defaults = {**_broker_defaults(), **mode_defaults} if mode_defaults else _broker_defaults()
    return [
        Level(ConfigSource.DYNAMIC_BROKER_CONFIG, _typed(per_broker), per_broker),
        Level(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, _typed(cluster_default),
              cluster_default),
        Level(ConfigSource.STATIC_BROKER_CONFIG, static, {}),
        Level(ConfigSource.DEFAULT_CONFIG, defaults, {}),
    ]


@functools.cache
def _broker_defaults() -> Mapping[str, Any]:
    definitions = [*BROKER_BY_NAME.values(), *KAFKA_ONLY.values()]
    return MappingProxyType({d.name: d.default_value() for d in definitions
                             if d.default is not None})


def _display(level: Level, key: str) -> str | None:
    if key in level.raw:
        return level.raw[key]
    return render(broker_definition(key), level.values[key])


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One described config: what DescribeConfigs and CreateTopics (v5+) report."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    synonyms: tuple[Synonym, ...]
    type: ConfigType
    documentation: str | None

    def as_describe(self, include_synonyms: bool, include_documentation: bool
                    ) -> dict[str, Any]:
        """The DescribeConfigs result entry as plain data."""
        return {
            "name": self.name,
            "value": None if self.sensitive else self.value,
            "read_only": self.read_only,
            "config_source": int(self.source),
            "is_default": self.source == ConfigSource.DEFAULT_CONFIG,
            "is_sensitive": self.sensitive,
            "synonyms": [
                {"name": s.name, "value": None if self.sensitive else s.value,
                 "source": int(s.source)}
                for s in (self.synonyms if include_synonyms else ())
            ],
            "config_type": int(self.type),
            "documentation": self.documentation if include_documentation else None,
        }


# --- topics ------------------------------------------------------------------------------------
def _resolve_topic_key(name: str, overrides: Mapping[str, str], levels: list[Level]
                       ) -> tuple[Any, list[Synonym]]:
    """(typed effective value, synonyms in precedence order) of one topic key."""
    definition = TOPIC_BY_NAME[name]
    synonyms: list[Synonym] = []
    value: Any = None
    found = False
    if name in overrides:
        synonyms.append(Synonym(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        parsed = _parse(definition, overrides[name])
        if parsed is not None:
            value, found = parsed, True
    for level in levels:
        for synonym in TOPIC_BROKER_SYNONYMS[name]:
            if synonym.name not in level.values:
                continue
            synonyms.append(Synonym(synonym.name, _display(level, synonym.name), level.source))
            if not found:
                raw = level.values[synonym.name]
                value = raw * synonym.factor if synonym.factor != 1 else raw
                found = True
    if not found:
        value = definition.default_value()
    return value, synonyms


def effective_topic_config(image: MetadataImage, broker_config: BrokerConfig,
                           topic: str, *, levels: list[Level] | None = None) -> dict[str, Any]:
    """Typed value of every topic config for ``topic`` (dynamic topic config, else dynamic
    broker synonym, else static broker synonym, else default). The replica manager applies
    these to the topic's logs; call it again when a ConfigRecord for the topic or a broker
    arrives. Resolving many topics at once, pass ``levels=broker_levels(image,
    broker_config)`` computed once."""
    overrides = image.configs_of(TOPIC_RESOURCE, topic)
    if levels is None:
        levels = broker_levels(image, broker_config)
    return {definition.name: _resolve_topic_key(definition.name, overrides, levels)[0]
            for definition, _ in TOPIC_CONFIGS}


def topic_entries(image: MetadataImage, broker_config: BrokerConfig, topic: str,
                  keys: Iterable[str] | None = None,
                  overrides: Mapping[str, str] | None = None) -> list[ConfigEntry]:
    """Described configs of ``topic`` sorted by name (all keys, or only ``keys``).

    ``overrides`` replaces the topic's stored dynamic configs (CreateTopics describes a topic
    that is not in the image yet, or not at all with validate_only)."""
    if overrides is None:
        overrides = image.configs_of(TOPIC_RESOURCE, topic)
    levels = broker_levels(image, broker_config)
    wanted = set(keys) if keys else None
    entries = []
    for definition, _ in sorted(TOPIC_CONFIGS, key=lambda item: item[0].name):
        if wanted is not None and definition.name not in wanted:
            continue
        value, synonyms = _resolve_topic_key(definition.name, overrides, levels)
        entries.append(ConfigEntry(
            name=definition.name,
            value=render(definition, value),
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=False,
            sensitive=is_sensitive(definition),
            synonyms=tuple(synonyms),
            type=config_type(definition),
            documentation=definition.doc,
        ))
    return entries


# --- brokers ------------------------------------------------------------------------------------
def _broker_entry(name: str, levels: list[Level], value: str | None) -> ConfigEntry:
    definition = broker_definition(name)
    assert definition is not None
    synonyms = [Synonym(key, _display(level, key), level.source)
                for level in levels for key in broker_key_synonyms(name)
                if key in level.values]
    # Listed from the key itself on: higher-precedence synonyms (log.retention.ms when
    # describing log.retention.hours) are not synonyms *of* this key's value.
    while synonyms and synonyms[0].name != name:
        synonyms.pop(0)
    return ConfigEntry(
        name=name,
        value=value,
        source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
        read_only=not is_dynamic(name),
        sensitive=is_sensitive(definition),
        synonyms=tuple(synonyms),
        type=config_type(definition),
        documentation=definition.doc,
    )


def broker_entries(image: MetadataImage, broker_config: BrokerConfig, resource_name: str,
                   keys: Iterable[str] | None = None) -> list[ConfigEntry]:
    """Described configs of a broker resource sorted by name.

    ``resource_name`` is this node's id (every broker key with its current value: Moldau's
    keys, Kafka's other dynamic broker keys — with Kafka's defaults until set, as Kafka lists
    them and as kafka-python's ``alter_configs`` checks names against — and the
    ``listener.name.*`` keys that are set) or ``""`` (only the cluster-wide dynamic defaults,
    as Kafka answers)."""
    levels = broker_levels(image, broker_config)
    wanted = set(keys) if keys else None
    entries = []
    if resource_name == "":
        default_level = [lv for lv in levels
                         if lv.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        for name in sorted(default_level[0].raw):
            if broker_definition(name) is None or (wanted is not None and name not in wanted):
                continue
            entries.append(_broker_entry(name, default_level, default_level[0].raw[name]))
        return entries
    prefixed = {k for level in levels[:2] for k in level.values}
    for name in sorted(set(BROKER_BY_NAME) | set(KAFKA_ONLY) | prefixed):
        if wanted is not None and name not in wanted:
            continue
        value = next((_display(level, name) for level in levels if name in level.values), None)
        entries.append(_broker_entry(name, levels, value))
    return entries


def effective_broker_config(image: MetadataImage, broker_config: BrokerConfig
                            ) -> dict[str, Any]:
    """Typed value of every broker key with dynamic broker configs applied (this node's, then
    the cluster default, then static, then default)."""
    levels = broker_levels(image, broker_config)
    result: dict[str, Any] = dict(broker_config.values)
    for level in (levels[1], levels[0]):  # cluster default, then this node's (wins)
        result.update(level.values)
    return result
