"""Schema registry configuration: Confluent's key names and defaults.

Given as a ``schema-registry.properties`` file (``--config``), ``--property key=value``
overrides, or, in the broker, from ``schema.registry.*`` keys. Unknown keys are logged and
ignored, as Confluent's registry ignores them; known keys with bad values are errors that
name the key.

``kafkastore.<key>`` passes ``<key>`` to the registry's own Kafka client
(:mod:`moldau.client`), e.g. ``kafkastore.broker.address.map``, ``kafkastore.client.id``,
``kafkastore.request.timeout.ms``; ``kafkastore.security.protocol`` may only be PLAINTEXT
(the moldau client has no TLS or SASL yet).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.client.config import COMMON as CLIENT_KEYS
from moldau.client.config import parse_servers
from moldau.client.errors import ConfigError

from .config_keys import Key, describe_keys, read_settings
from .config_keys import boolean as _bool
from .config_keys import integer as _int
from .config_keys import listeners as _listeners
from .config_keys import text as _str

log = logging.getLogger("moldau.registry")

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
          "FULL", "FULL_TRANSITIVE")


def _level(key: str, value: str) -> str:
    level = str(value).strip().upper()
    if level not in LEVELS:
        raise ConfigError(f"{key} must be one of {', '.join(LEVELS).lower()}, not {value!r}")
    return level


def _servers(key: str, value: str) -> str:
    parse_servers(key, value)
    return str(value).strip()


def _protocol(key: str, value: str) -> str:
    text = str(value).strip().lower()
    if text != "http":
        raise ConfigError(f"{key}={value!r}: only http is supported")
    return text


KEYS: dict[str, Key] = {k.name: k for k in (
    Key("listeners", _listeners, "http://0.0.0.0:8081",
        "Comma-separated http://HOST:PORT to serve the REST API on (port 0: a free port)."),
    Key("kafkastore.bootstrap.servers", _servers, None,
        "host:port list of the Kafka cluster that stores the registry (required)."),
    Key("kafkastore.topic", _str, "_schemas", "The topic the registry's state lives in."),
    Key("kafkastore.topic.replication.factor", _int(1), 3,
        "Replication factor of the topic when the registry creates it (capped at the live "
        "brokers, with a warning)."),
    Key("kafkastore.timeout.ms", _int(1), 500,
        "Time limit of a write and of waiting until the reader reached the end of the "
        "topic (50002 when exceeded)."),
    Key("kafkastore.init.timeout.ms", _int(1), 60000,
        "Time limit of start-up: creating the topic and reading it to its end."),
    Key("schema.compatibility.level", _level, "BACKWARD",
        "Global compatibility level until one is set with PUT /config."),
    Key("mode.mutability", _bool, True, "Whether PUT/DELETE /mode may change modes."),
    Key("schema.registry.group.id", _str, "schema-registry",
        "Group the registry instances of one cluster elect their primary in."),
    Key("leader.eligibility", _bool, True, "Whether this instance may become the primary."),
    Key("host.name", _str, "",
        "Host name other instances reach this one at (default: this machine's name)."),
    Key("schema.registry.inter.instance.protocol", _protocol, "http",
        "Protocol secondaries forward writes to the primary with."),
    Key("request.max.bytes", _int(1024), 8 * 1024 * 1024,
        "Largest request body accepted (413 above it)."),
    Key("kafkagroup.session.timeout.ms", _int(1), 10000,
        "Session timeout of this instance in the primary election's group."),
    Key("kafkagroup.heartbeat.interval.ms", _int(1), 3000,
        "Heartbeat interval in the primary election's group."),
    Key("kafkagroup.rebalance.timeout.ms", _int(1), 300000,
        "Rebalance timeout in the primary election's group."),
    Key("leader.connect.timeout.ms", _int(1), 60000,
        "Time limit of connecting to the primary when forwarding a write (50003 beyond)."),
    Key("leader.read.timeout.ms", _int(1), 60000,
        "Time limit of the primary's answer to a forwarded write (50003 beyond)."),
    Key("inter.instance.headers.whitelist", _str, "",
        "Comma-separated request headers passed on with a forwarded write."),
)}

#: Deprecated names Confluent still reads, and the key each stands for.
ALIASES = {"master.eligibility": "leader.eligibility"}

#: Confluent keys that configure things moldau does differently; accepted and ignored.
IGNORED = ("kafkastore.connection.url", "kafkastore.group.id", "debug",
           "schema.registry.resource.extension.class", "authentication.method")


@dataclass(frozen=True)
class RegistryConfig:
    """Parsed registry settings (``values``) plus the client settings for ``_schemas``."""

    values: Mapping[str, Any]
    client: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def host_name(self) -> str:
        return self.values["host.name"] or socket.getfqdn()


def _client_settings(raw: Mapping[str, str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for key, value in raw.items():
        if not key.startswith("kafkastore.") or key in KEYS or key in IGNORED:
            continue
        name = key[len("kafkastore."):]
        if name == "security.protocol":
            if str(value).strip().upper() != "PLAINTEXT":
                raise ConfigError(f"{key}={value!r}: the registry's Kafka client speaks "
                                  "PLAINTEXT only")
            continue
        if name not in CLIENT_KEYS:
            log.warning("ignoring %s: not a setting of moldau's Kafka client", key)
            continue
        settings[name] = value
    settings["bootstrap.servers"] = raw["kafkastore.bootstrap.servers"]
    settings.setdefault("client.id", "moldau-schema-registry")
    return settings


def build_config(raw: Mapping[str, str]) -> RegistryConfig:
    """Validate ``raw`` (key -> text) and fill in defaults; ConfigError naming the key."""
    values: dict[str, Any] = {}
    raw = {**{ALIASES[k]: v for k, v in raw.items() if k in ALIASES}, **{
        k: v for k, v in raw.items() if k not in ALIASES}}
    for key, value in raw.items():
        spec = KEYS.get(key)
        if spec is not None:
            values[key] = spec.parse(key, value)
        elif not key.startswith("kafkastore.") and key not in IGNORED:
            log.warning("ignoring unknown schema registry setting %s", key)
    if not values.get("kafkastore.bootstrap.servers"):
        raise ConfigError("kafkastore.bootstrap.servers is required (--bootstrap-server "
                          "HOST:PORT): the Kafka cluster that stores the registry")
    for key, spec in KEYS.items():
        values.setdefault(key, spec.default)
    raw_with_servers = {**raw, "kafkastore.bootstrap.servers":
                        values["kafkastore.bootstrap.servers"]}
    return RegistryConfig(values, _client_settings(raw_with_servers))


def load_config(path: str | Path | None = None,
                overrides: Mapping[str, str] | None = None) -> RegistryConfig:
    """Settings from a properties file (optional) with ``overrides`` applied."""
    return build_config(read_settings(path, overrides))


def describe() -> list[tuple[str, Any, str]]:
    """(key, default, doc) of every key, for help output and docs."""
    return describe_keys(KEYS.values())


def keys_table() -> str:
    """The Markdown table of docs/configuration.md, "Schema registry" (a test keeps the doc
    current: ``python -m moldau.registry.config`` prints it)."""
    lines = ["| Key | Default | Meaning |", "|---|---|---|"]
    for name, default, doc in describe():
        shown = "(required)" if default is None else f"`{default}`"
        if default == "":
            shown = "(this machine's name)" if name == "host.name" else "(none)"
        if isinstance(default, bool):
            shown = f"`{str(default).lower()}`"
        cell = doc.replace("|", "\\|")
        lines.append(f"| `{name}` | {shown} | {cell} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(keys_table())
