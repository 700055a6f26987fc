"""REST Proxy configuration: Confluent's key names and defaults (``kafka-rest.properties``).

Given as a properties file (``--config``), ``--property key=value`` overrides, or, in the
broker, built from ``rest.proxy.listeners``. Known keys with bad values are errors that name
the key; unknown keys are logged and ignored, as Confluent's proxy ignores them.

Kafka client settings follow Confluent's prefixes: ``client.<key>`` applies to every client
the proxy opens, ``producer.<key>`` / ``consumer.<key>`` / ``admin.<key>`` to one kind (the
more specific prefix wins). ``<key>`` must be a setting of moldau's client
(:mod:`moldau.client.config`); others are logged and ignored. The proxy's own
``consumer.request.timeout.ms``, ``consumer.instance.timeout.ms`` ... keys are not client
settings. ``client.security.protocol`` may only be PLAINTEXT (the moldau client has no TLS or
SASL yet).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moldau.client.config import KINDS, parse_config
from moldau.client.config import parse_servers as _parse_servers
from moldau.client.errors import ConfigError
from moldau.registry.config_keys import Key, describe_keys, read_settings
from moldau.registry.config_keys import boolean as _bool
from moldau.registry.config_keys import integer as _int
from moldau.registry.config_keys import listeners as _listeners
from moldau.registry.config_keys import text as _str

log = logging.getLogger("moldau.rest")

DEFAULT_LISTENERS = "http://0.0.0.0:8082"


def _advertised(key: str, value: str) -> str:
    text = str(value).strip()
    return _listeners(key, text) if text else ""


def _servers(key: str, value: str) -> str:
    text = str(value).strip()
    # Confluent accepts PLAINTEXT://host:port entries; the moldau client wants host:port.
    entries = [item.strip().split("://", 1)[-1] for item in text.split(",") if item.strip()]
    _parse_servers(key, entries)
    return ",".join(entries)


KEYS: dict[str, Key] = {k.name: k for k in (
    Key("listeners", _listeners, DEFAULT_LISTENERS,
        "Comma-separated http://HOST:PORT to serve the API on (port 0: a free port)."),
    Key("bootstrap.servers", _servers, None,
        "host:port list of the Kafka cluster (required; PLAINTEXT://host:port accepted)."),
    Key("advertised.listeners", _advertised, "",
        "URLs clients reach the proxy at; the first with the request's scheme builds "
        "consumer base_uri values."),
    Key("host.name", _str, "",
        "Host name for base_uri values when advertised.listeners is empty (with the "
        "listener's port); empty: the request's Host header."),
    Key("id", _str, "",
        "This proxy's id, part of generated consumer instance names (rest-consumer-ID-UUID)."),
    Key("schema.registry.url", _str, "http://localhost:8081",
        "Schema registry of the avro, jsonschema and protobuf embedded formats."),
    Key("consumer.instance.timeout.ms", _int(1), 300000,
        "Idle time after which a consumer instance is closed and forgotten."),
    Key("consumer.request.timeout.ms", _int(0), 1000,
        "Longest time GET .../records waits for records (an instance's own "
        "consumer.request.timeout.ms replaces it; the request's timeout may only shorten "
        "it)."),
    Key("consumer.request.max.bytes", _int(1), 67108864,
        "Most key+value bytes one GET .../records answers (max_bytes may lower it)."),
    Key("fetch.min.bytes", _int(-1, 10000000), -1,
        "GET .../records answers once this many bytes arrived (-1: wait for the timeout "
        "or max bytes); an instance's fetch.min.bytes overrides it."),
    Key("consumer.max.instances", _int(1), 10000,
        "Most consumer instances at once (more: 503 with 50301, retry after idle ones "
        "expire).",
        "Moldau's own (Confluent bounds threads: consumer.threads)"),
    Key("request.max.bytes", _int(1024), 16777216,
        "Largest request body accepted (413 above it).", "Moldau's own (Jetty's limits)"),
    Key("api.v2.enable", _bool, True, "Serve API v2."),
    Key("api.v3.enable", _bool, True, "Serve API v3 (/v3/...)."),
)}

#: Confluent keys that configure things moldau does differently; accepted and ignored.
IGNORED = ("port", "consumer.threads", "producer.threads", "consumer.iterator.timeout.ms",
           "consumer.iterator.backoff.ms",
           "simpleconsumer.pool.size.max", "simpleconsumer.pool.timeout.ms",
           "zookeeper.connect", "debug", "kafka.rest.resource.extension.class",
           "access.control.allow.origin", "access.control.allow.methods",
           "authentication.method", "response.mediatype.default", "response.mediatype.preferred")

CLIENT_PREFIXES = ("client.", "producer.", "consumer.", "admin.")


@dataclass(frozen=True)
class RestConfig:
    """Parsed proxy settings plus the Kafka client settings of each client kind."""

    values: Mapping[str, Any]
    clients: Mapping[str, Mapping[str, Any]]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def client(self, kind: str) -> dict[str, Any]:
        """Settings for a new client of ``kind`` (admin, producer, consumer)."""
        return dict(self.clients[kind])


def _client_settings(raw: Mapping[str, str], servers: str) -> dict[str, dict[str, Any]]:
    """``client.*`` then ``<kind>.*`` settings per client kind (the latter win)."""
    out: dict[str, dict[str, Any]] = {}
    for kind in ("admin", "producer", "consumer"):
        settings: dict[str, Any] = {}
        for prefix in ("client.", f"{kind}."):
            for key, value in raw.items():
                if not key.startswith(prefix) or key in KEYS or key in IGNORED:
                    continue
                name = key[len(prefix):]
                if name == "security.protocol":
                    if str(value).strip().upper() != "PLAINTEXT":
                        raise ConfigError(f"{key}={value!r}: the proxy's Kafka clients speak "
                                          "PLAINTEXT only")
                    continue
                if name in ("bootstrap.servers", "group.id"):
                    continue
                if name not in KINDS[kind]:
                    if prefix != "client." and kind == prefix[:-1]:
                        log.warning("ignoring %s: not a %s setting of moldau's Kafka client",
                                    key, kind)
                    continue
                settings[name] = value
        settings["bootstrap.servers"] = servers
        if kind != "consumer":  # consumer instances get Kafka's default, see v2/instances.py
            settings.setdefault("client.id", f"moldau-rest-proxy-{kind}")
        out[kind] = settings
    return out


def build_config(raw: Mapping[str, str]) -> RestConfig:
    """Validate ``raw`` (key -> text) and fill in defaults; ConfigError naming the key."""
    values: dict[str, Any] = {}
    for key, value in raw.items():
        spec = KEYS.get(key)
        if spec is not None:
            values[key] = spec.parse(key, value)
        elif not key.startswith(CLIENT_PREFIXES) and key not in IGNORED:
            log.warning("ignoring unknown REST proxy setting %s", key)
    if not values.get("bootstrap.servers"):
        raise ConfigError("bootstrap.servers is required (--bootstrap-server HOST:PORT): the "
                          "Kafka cluster the proxy serves")
    for key, spec in KEYS.items():
        values.setdefault(key, spec.default)
    clients = _client_settings(raw, values["bootstrap.servers"])
    for kind, settings in clients.items():
        parse_config(kind, settings)  # a bad value names its key now, not at first use
    return RestConfig(values, clients)


def load_config(path: str | Path | None = None,
                overrides: Mapping[str, str] | None = None) -> RestConfig:
    """Settings from a properties file (optional) with ``overrides`` applied."""
    return build_config(read_settings(path, overrides))


def describe() -> list[tuple[str, Any, str]]:
    """(key, default, doc) of every key, for help output and docs."""
    return describe_keys(KEYS.values())


def keys_table() -> str:
    """The Markdown table of docs/rest-proxy.md (a test keeps the doc current:
    ``python -m moldau.rest.config`` prints it)."""
    lines = ["| Key | Default | Meaning | Confluent |", "|---|---|---|---|"]
    for spec in KEYS.values():
        default = spec.default
        if default is None:
            shown = "(required)"
        elif isinstance(default, bool):
            shown = f"`{str(default).lower()}`"
        elif default == "":
            shown = "(empty)"
        else:
            shown = f"`{default}`"
        cell = spec.doc.replace("|", "\\|")
        lines.append(f"| `{spec.name}` | {shown} | {cell} | {spec.confluent} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(keys_table())
