"""Records of the ``_schemas`` topic in Confluent's key and value JSON formats.

Every key is a JSON object with ``keytype`` and ``magic`` (Confluent's order and compact
separators, so a key written here is byte-identical to Confluent's and compaction keeps the
last of either)::

    SCHEMA          {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
    CONFIG          {"keytype":"CONFIG","magic":0}                  (global)
                    {"keytype":"CONFIG","subject":"s","magic":0}    (per subject)
    MODE            {"keytype":"MODE","magic":0} / ... "subject":"s" ...
    DELETE_SUBJECT  {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
    CLEAR_SUBJECT   {"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}
    NOOP            {"keytype":"NOOP","magic":0}

Values (null members left out, as Jackson's NON_EMPTY does)::

    SCHEMA          {"subject","version","id","schemaType" (not for AVRO),"references" (when
                     any),"metadata","ruleSet","schema","deleted"}
    CONFIG          {"compatibilityLevel","normalize", ...}  (other members kept as given)
    MODE            {"mode"}
    DELETE_SUBJECT  {"subject","version"}: versions up to ``version`` are soft-deleted
    CLEAR_SUBJECT   {"subject"}: forget the subject's (permanently deleted) versions

A null value is a tombstone: a SCHEMA tombstone is a permanent delete, a CONFIG or MODE
tombstone removes the setting. Keys of other types Confluent writes (ASSOC, CONTEXT, ...)
decode to :class:`OtherKey` and are ignored by the state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .schemas.base import Reference

_COMPACT = (",", ":")
_EMPTY: Mapping[str, Any] = MappingProxyType({})


class RecordError(ValueError):
    """A ``_schemas`` record that is not Confluent's JSON format."""


@dataclass(frozen=True)
class SchemaKey:
    subject: str
    version: int


@dataclass(frozen=True)
class ConfigKey:
    subject: str | None = None


@dataclass(frozen=True)
class ModeKey:
    subject: str | None = None


@dataclass(frozen=True)
class DeleteSubjectKey:
    subject: str


@dataclass(frozen=True)
class ClearSubjectKey:
    subject: str | None = None


@dataclass(frozen=True)
class NoopKey:
    pass


@dataclass(frozen=True)
class OtherKey:
    """A key type this registry does not interpret (kept so the reader can skip it)."""

    keytype: str


RecordKey = (SchemaKey | ConfigKey | ModeKey | DeleteSubjectKey | ClearSubjectKey | NoopKey
             | OtherKey)


@dataclass(frozen=True)
class SchemaValue:
    """One version of a subject: its global id and schema text."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    metadata: Any = None
    rule_set: Any = None
    deleted: bool = False


@dataclass(frozen=True)
class ConfigValue:
    """A compatibility configuration; ``extra`` keeps members this registry only stores
    (``alias``, ``defaultMetadata``, ``overrideRuleSet``, ...)."""

    compatibility: str | None = None
    normalize: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True)
class ModeValue:
    mode: str


@dataclass(frozen=True)
class DeleteSubjectValue:
    subject: str
    version: int


@dataclass(frozen=True)
class ClearSubjectValue:
    subject: str | None = None


RecordValue = SchemaValue | ConfigValue | ModeValue | DeleteSubjectValue | ClearSubjectValue


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=_COMPACT, ensure_ascii=False).encode()


def encode_key(key: RecordKey) -> bytes:
    """The key's JSON bytes."""
    if isinstance(key, SchemaKey):
        return _dumps({"keytype": "SCHEMA", "subject": key.subject, "version": key.version,
                       "magic": 1})
    if isinstance(key, NoopKey):
        return _dumps({"keytype": "NOOP", "magic": 0})
    if isinstance(key, OtherKey):
        raise RecordError(f"keys of type {key.keytype} are not written by this registry")
    names = {ConfigKey: "CONFIG", ModeKey: "MODE", DeleteSubjectKey: "DELETE_SUBJECT",
             ClearSubjectKey: "CLEAR_SUBJECT"}
    obj: dict[str, Any] = {"keytype": names[type(key)]}
    if key.subject is not None:
        obj["subject"] = key.subject
    obj["magic"] = 0
    return _dumps(obj)


def _loads(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"{what} is not JSON: {exc}") from None


def _subject(obj: Mapping[str, Any], required: bool, what: str) -> str | None:
    subject = obj.get("subject")
    if subject is None and not required:
        return None
    if not isinstance(subject, str):
        raise RecordError(f"{what} has no subject: {obj!r}")
    return subject


def _int(obj: Mapping[str, Any], name: str, what: str) -> int:
    value = obj.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordError(f"{what} has no integer {name}: {obj!r}")
    return value


def decode_key(data: bytes) -> RecordKey:
    """The key of a ``_schemas`` record; RecordError for bytes that are not a key."""
    obj = _loads(data, "key")
    if not isinstance(obj, dict) or not isinstance(obj.get("keytype"), str):
        raise RecordError(f"key without keytype: {data[:200]!r}")
    keytype = obj["keytype"]
    if keytype == "SCHEMA":
        return SchemaKey(str(_subject(obj, True, "SCHEMA key")),
                         _int(obj, "version", "SCHEMA key"))
    if keytype == "CONFIG":
        return ConfigKey(_subject(obj, False, "CONFIG key"))
    if keytype == "MODE":
        return ModeKey(_subject(obj, False, "MODE key"))
    if keytype == "DELETE_SUBJECT":
        return DeleteSubjectKey(str(_subject(obj, True, "DELETE_SUBJECT key")))
    if keytype == "CLEAR_SUBJECT":
        return ClearSubjectKey(_subject(obj, False, "CLEAR_SUBJECT key"))
    if keytype == "NOOP":
        return NoopKey()
    return OtherKey(keytype)


def _references_to_json(refs: tuple[Reference, ...]) -> list[dict[str, Any]]:
    return [{"name": r.name, "subject": r.subject, "version": r.version} for r in refs]


def references_from_json(raw: Any, what: str = "references") -> tuple[Reference, ...]:
    """Confluent's ``[{"name","subject","version"}]`` as Reference tuples."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RecordError(f"{what} is not a list: {raw!r}")
    refs = []
    for item in raw:
        if (not isinstance(item, dict) or not isinstance(item.get("name"), str)
                or not isinstance(item.get("subject"), str)
                or not isinstance(item.get("version"), int)
                or isinstance(item.get("version"), bool)):
            raise RecordError(f"{what}: {item!r} is not {{name, subject, version}}")
        refs.append(Reference(item["name"], item["subject"], item["version"]))
    return tuple(refs)


def schema_extras_to_json(value: SchemaValue) -> dict[str, Any]:
    """The fields of Confluent's Schema entity that only a schema with them has: references
    (when any), metadata and ruleSet (when set), in this order."""
    extras: dict[str, Any] = {}
    if value.references:
        extras["references"] = _references_to_json(value.references)
    if value.metadata is not None:
        extras["metadata"] = value.metadata
    if value.rule_set is not None:
        extras["ruleSet"] = value.rule_set
    return extras


def schema_value_to_json(value: SchemaValue) -> dict[str, Any]:
    """The SCHEMA value object (also the shape of Confluent's Schema entity)."""
    obj: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != "AVRO":
        obj["schemaType"] = value.schema_type
    obj.update(schema_extras_to_json(value))
    obj["schema"] = value.schema
    obj["deleted"] = value.deleted
    return obj


def config_value_to_json(value: ConfigValue) -> dict[str, Any]:
    obj: dict[str, Any] = dict(value.extra)
    if value.compatibility is not None:
        obj["compatibilityLevel"] = value.compatibility
    if value.normalize is not None:
        obj["normalize"] = value.normalize
    return obj


def encode_value(value: RecordValue | None) -> bytes | None:
    """The value's JSON bytes; None (a tombstone) stays None."""
    if value is None:
        return None
    if isinstance(value, SchemaValue):
        return _dumps(schema_value_to_json(value))
    if isinstance(value, ConfigValue):
        return _dumps(config_value_to_json(value))
    if isinstance(value, ModeValue):
        return _dumps({"mode": value.mode})
    if isinstance(value, DeleteSubjectValue):
        return _dumps({"subject": value.subject, "version": value.version})
    return _dumps({} if value.subject is None else {"subject": value.subject})


def _schema_value(obj: Mapping[str, Any], key: SchemaKey) -> SchemaValue:
    schema = obj.get("schema")
    if not isinstance(schema, str):
        raise RecordError(f"SCHEMA value without schema text: {obj!r}")
    schema_type = obj.get("schemaType") or "AVRO"
    if not isinstance(schema_type, str):
        raise RecordError(f"SCHEMA value with schemaType {schema_type!r}")
    return SchemaValue(
        subject=obj.get("subject") if isinstance(obj.get("subject"), str) else key.subject,
        version=obj["version"] if isinstance(obj.get("version"), int) else key.version,
        id=_int(obj, "id", "SCHEMA value"),
        schema=schema,
        schema_type=schema_type.upper(),
        references=references_from_json(obj.get("references"), "SCHEMA value references"),
        metadata=obj.get("metadata"),
        rule_set=obj.get("ruleSet"),
        deleted=bool(obj.get("deleted", False)),
    )


_CONFIG_OWN = ("compatibilityLevel", "compatibility", "normalize", "subject")


def config_value_from_json(obj: Mapping[str, Any]) -> ConfigValue:
    level = obj.get("compatibilityLevel", obj.get("compatibility"))
    normalize = obj.get("normalize")
    return ConfigValue(
        compatibility=level.upper() if isinstance(level, str) else None,
        normalize=normalize if isinstance(normalize, bool) else None,
        extra=MappingProxyType({k: v for k, v in obj.items()
                                if k not in _CONFIG_OWN and v is not None}),
    )


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    """The value of a record with ``key``; None for a tombstone or a key type without
    values (NOOP, unknown types)."""
    if data is None or isinstance(key, NoopKey | OtherKey):
        return None
    obj = _loads(data, "value")
    if not isinstance(obj, dict):
        raise RecordError(f"value is not a JSON object: {data[:200]!r}")
    if isinstance(key, SchemaKey):
        return _schema_value(obj, key)
    if isinstance(key, ConfigKey):
        return config_value_from_json(obj)
    if isinstance(key, ModeKey):
        mode = obj.get("mode")
        if not isinstance(mode, str):
            raise RecordError(f"MODE value without mode: {obj!r}")
        return ModeValue(mode.upper())
    if isinstance(key, DeleteSubjectKey):
        return DeleteSubjectValue(str(_subject(obj, False, "value") or key.subject),
                                  _int(obj, "version", "DELETE_SUBJECT value"))
    subject = _subject(obj, False, "value")
    return ClearSubjectValue(subject if subject is not None else key.subject)
