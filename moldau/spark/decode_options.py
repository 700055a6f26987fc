"""Source options that decode schema-registry framed Avro keys and values into columns.

Named after what Spark users know: ``from_avro``'s ``mode`` and ``avroSchema``
(``jsonFormatSchema``), Databricks' ``schemaRegistryAddress`` / ``subject`` and its
``confluent.schema.registry.<key>`` client options, Confluent's ``schema.registry.url``:

======================================  =====================================================
``value.format`` / ``key.format``       ``binary`` (default: the column stays binary) or
                                        ``avro`` (registry-framed Avro: magic byte, schema
                                        id, Avro binary) decoded into a column of the reader
                                        schema's type
``schema.registry.url``                 the registry (``schemaRegistryAddress`` too)
``value.subject`` / ``key.subject``     whose latest version is the reader schema (default
                                        ``<topic>-value`` / ``<topic>-key`` when one topic
                                        is read); ``subject`` means ``value.subject``
``value.avroSchema`` / ``key.avroSchema``  a reader schema given as Avro JSON instead (as
                                        from_avro's jsonFormatSchema); ``avroSchema`` and
                                        ``jsonFormatSchema`` mean ``value.avroSchema``
``mode``                                ``FAILFAST`` (default: a record that cannot be
                                        decoded fails the query) or ``PERMISSIVE`` (it
                                        becomes null)
``confluent.schema.registry.<key>``     registry client settings, e.g.
                                        ``confluent.schema.registry.basic.auth.user.info``
                                        (``schema.registry.<key>`` too)
======================================  =====================================================

Pure: nothing here talks to the registry (:mod:`.registry_decode` does).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from moldau.registry.client import KNOWN_KEYS, Schema

FORMATS = ("binary", "avro")
MODES = ("FAILFAST", "PERMISSIVE")
_CLIENT_PREFIXES = ("confluent.schema.registry.", "schema.registry.")


class DecodeOptionError(ValueError):
    """A decoding option is missing or malformed."""


@dataclass(frozen=True)
class AvroDecoding:
    """How one column (``key`` or ``value``) is decoded: the reader schema, given or taken
    from ``subject``'s latest version on the driver."""

    column: str
    subject: str | None = None
    reader: Schema | None = None


@dataclass(frozen=True)
class DecodingOptions:
    """The decoding of a read: per column, the mode, and the registry client's settings."""

    key: AvroDecoding | None = None
    value: AvroDecoding | None = None
    mode: str = "FAILFAST"
    registry_config: Mapping[str, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.key is not None or self.value is not None

    @property
    def permissive(self) -> bool:
        return self.mode == "PERMISSIVE"

    def columns(self) -> list[AvroDecoding]:
        return [d for d in (self.key, self.value) if d is not None]

    def with_reader(self, column: str, reader: Schema) -> DecodingOptions:
        decoding = getattr(self, column)
        return replace(self, **{column: replace(decoding, reader=reader)})

    def cache_key(self) -> str:
        """A stable text naming this configuration (for per-process caches)."""
        return json.dumps([repr(self.key), repr(self.value), self.mode,
                           sorted(self.registry_config.items())])


def _get(options: Mapping[str, Any], *names: str) -> str | None:
    lowered = {str(k).lower(): v for k, v in options.items()}
    for name in names:
        value = lowered.get(name.lower())
        if value is not None:
            return str(value).strip()
    return None


def _single_topic(options: Mapping[str, Any]) -> str | None:
    """The one topic a read names (subscribe or assign), None with several or a pattern."""
    subscribe = _get(options, "subscribe")
    if subscribe is not None:
        topics = [t.strip() for t in subscribe.split(",") if t.strip()]
        return topics[0] if len(topics) == 1 else None
    assign = _get(options, "assign")
    if assign is not None:
        try:
            data = json.loads(assign)
        except json.JSONDecodeError:
            return None
        if isinstance(data, dict) and len(data) == 1:
            return str(next(iter(data)))
    return None


def _column(options: Mapping[str, Any], column: str) -> AvroDecoding | None:
    fmt = (_get(options, f"{column}.format") or "binary").lower()
    if fmt not in FORMATS:
        raise DecodeOptionError(f"option '{column}.format' must be binary or avro, not {fmt!r}")
    if fmt == "binary":
        return None
    aliases = ("subject",) if column == "value" else ()
    subject = _get(options, f"{column}.subject", *aliases)
    schema_aliases = ("avroSchema", "jsonFormatSchema") if column == "value" else ()
    text = _get(options, f"{column}.avroSchema", *schema_aliases)
    reader = None
    if text:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise DecodeOptionError(f"option '{column}.avroSchema' is not Avro schema JSON: "
                                    f"{exc}") from None
        reader = Schema(text, "AVRO")
    elif not subject:
        topic = _single_topic(options)
        if topic is None:
            raise DecodeOptionError(
                f"{column}.format=avro needs the reader schema: set '{column}.subject' (its "
                f"latest version is used) or '{column}.avroSchema'; the default subject "
                f"<topic>-{column} needs exactly one topic in 'subscribe' or 'assign'")
        subject = f"{topic}-{column}"
    return AvroDecoding(column, subject or None, reader)


def parse_decoding_options(options: Mapping[str, Any]) -> DecodingOptions:
    """The decoding options of a read (inactive when both columns stay binary)."""
    key = _column(options, "key")
    value = _column(options, "value")
    mode = (_get(options, "mode") or "FAILFAST").upper()
    if mode not in MODES:
        raise DecodeOptionError(f"option 'mode' must be FAILFAST or PERMISSIVE, not {mode!r}")
    if key is None and value is None:
        return DecodingOptions(mode=mode)
    url = _get(options, "schema.registry.url", "schemaRegistryAddress")
    if not url:
        raise DecodeOptionError(
            "Avro decoding reads the writers' schemas from the schema registry: set the "
            "option 'schema.registry.url' (or 'schemaRegistryAddress'), e.g. "
            "http://localhost:8081")
    config = {"url": url}
    for raw_key, value_text in options.items():
        lowered = str(raw_key).lower()
        for prefix in _CLIENT_PREFIXES:
            if lowered.startswith(prefix) and lowered != "schema.registry.url":
                name = lowered[len(prefix):]
                if name not in KNOWN_KEYS or name == "url":
                    raise DecodeOptionError(
                        f"option {raw_key!r}: {name!r} is not a schema registry client "
                        f"setting (known: {', '.join(sorted(KNOWN_KEYS - {'url'}))})")
                config[name] = str(value_text)
                break
    return DecodingOptions(key, value, mode, config)
