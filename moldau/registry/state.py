"""The registry's state: a view of the ``_schemas`` log, changed only by :meth:`replay`.

Pure: no I/O, no schema parsing. The store replays every record of the topic, in order,
from offset 0; the service reads this view and computes the records a change needs, writes
them, and waits until they are replayed here (memory never runs ahead of the log).

Rules, as Confluent's ``KafkaStoreMessageHandler`` and lookup cache apply them:

- SCHEMA record: sets (subject, version). A record whose id is already in use by a
  *different* schema (type, text, references, metadata, rule set) is ignored and
  :meth:`replay` answers False; that is how a write from a deposed primary that allocated a
  taken id loses. ``deleted: true`` is a soft delete; a tombstone a permanent one.
- DELETE_SUBJECT: every version up to the record's ``version`` becomes soft-deleted.
- CLEAR_SUBJECT: forgets the soft-deleted versions of the subject (every subject when the
  record has none).
- CONFIG / MODE: set, or with a tombstone remove, the global (subject None) or per-subject
  setting.
- The largest id ever replayed is kept (:attr:`max_id`); ids are never reused, even after
  the versions using them were deleted. The same schema (same content) registered again
  gets the id it had, as long as that id is known (Confluent keeps its hash index too).
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

from .records import (
    ClearSubjectKey,
    ClearSubjectValue,
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    ModeKey,
    ModeValue,
    RecordKey,
    RecordValue,
    SchemaKey,
    SchemaValue,
)

log = logging.getLogger("moldau.registry.state")

SubjectVersion = tuple[str, int]
#: What "the same schema" means for id reuse: type, text, references, metadata, rule set.
ContentKey = tuple[str, str, tuple[tuple[str, str, int], ...], str, str]


def _canonical_json(value: Any) -> str:
    return "" if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def content_key(schema_type: str, schema: str, references: tuple[Any, ...] = (),
                metadata: Any = None, rule_set: Any = None) -> ContentKey:
    """The identity of a schema's content (references as (name, subject, version))."""
    refs = tuple((r.name, r.subject, r.version) for r in references)
    return (schema_type, schema, refs, _canonical_json(metadata), _canonical_json(rule_set))


def value_content(value: SchemaValue) -> ContentKey:
    return content_key(value.schema_type, value.schema, value.references, value.metadata,
                       value.rule_set)


class RegistryState:
    """Subjects, versions, ids, references, configs and modes as replayed from the log."""

    def __init__(self) -> None:
        #: subject -> version -> record (live and soft-deleted versions)
        self.subjects: dict[str, dict[int, SchemaValue]] = {}
        #: id -> the record that defines the id's content
        self.ids: dict[int, SchemaValue] = {}
        #: id -> the (subject, version) pairs registered with it
        self.id_users: dict[int, set[SubjectVersion]] = {}
        #: content -> id, for giving the same schema the same id
        self.content_ids: dict[ContentKey, int] = {}
        #: referenced (subject, version) -> the (subject, version) pairs referencing it
        self.referrers: dict[SubjectVersion, set[SubjectVersion]] = {}
        self.configs: dict[str | None, ConfigValue] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        #: records replayed (applied or ignored)
        self.replayed = 0

    # --- replay ----------------------------------------------------------------------------

    def replay(self, key: RecordKey, value: RecordValue | None) -> bool:
        """Apply one record; False when it was ignored (a SCHEMA record whose id is taken
        by a different schema, or a value that does not belong to its key)."""
        self.replayed += 1
        if isinstance(key, SchemaKey):
            if value is None:
                self._forget(key.subject, key.version)
                return True
            if not isinstance(value, SchemaValue):
                return False
            return self._put_schema(key, value)
        if isinstance(key, ConfigKey):
            if value is None:
                self.configs.pop(key.subject, None)
            elif isinstance(value, ConfigValue):
                self.configs[key.subject] = value
            else:
                return False
            return True
        if isinstance(key, ModeKey):
            if value is None:
                self.modes.pop(key.subject, None)
            elif isinstance(value, ModeValue):
                self.modes[key.subject] = value.mode
            else:
                return False
            return True
        if isinstance(key, DeleteSubjectKey):
            if isinstance(value, DeleteSubjectValue):
                self._soft_delete_subject(value.subject, value.version)
            return True
        if isinstance(key, ClearSubjectKey):
            if isinstance(value, ClearSubjectValue):
                self._clear(value.subject)
            return True
        return True  # NOOP and key types this registry does not interpret

    def _put_schema(self, key: SchemaKey, value: SchemaValue) -> bool:
        if value.subject != key.subject or value.version != key.version:
            value = replace(value, subject=key.subject, version=key.version)
        content = value_content(value)
        owner = self.ids.get(value.id)
        users = self.id_users.get(value.id)
        if (owner is not None and users and value_content(owner) != content
                and users != {(key.subject, key.version)}):
            log.error("ignoring schema %s version %d: id %d already belongs to another "
                      "schema", key.subject, key.version, value.id)
            return False
        self._forget(key.subject, key.version)
        self.subjects.setdefault(key.subject, {})[key.version] = value
        if owner is None or not self.id_users.get(value.id) or value_content(owner) != content:
            self.ids[value.id] = value
        self.id_users.setdefault(value.id, set()).add((key.subject, key.version))
        self.content_ids[content] = value.id
        for ref in value.references:
            self.referrers.setdefault((ref.subject, ref.version), set()).add(
                (key.subject, key.version))
        self.max_id = max(self.max_id, value.id)
        return True

    def _forget(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        old = versions.pop(version, None) if versions is not None else None
        if old is None:
            return
        if not versions:
            del self.subjects[subject]
        users = self.id_users.get(old.id)
        if users is not None:
            users.discard((subject, version))
            if not users:
                del self.id_users[old.id]
        for ref in old.references:
            referrers = self.referrers.get((ref.subject, ref.version))
            if referrers is not None:
                referrers.discard((subject, version))
                if not referrers:
                    del self.referrers[(ref.subject, ref.version)]

    def _soft_delete_subject(self, subject: str, up_to: int) -> None:
        versions = self.subjects.get(subject, {})
        for version, value in list(versions.items()):
            if version <= up_to and not value.deleted:
                versions[version] = replace(value, deleted=True)

    def _clear(self, subject: str | None) -> None:
        targets = list(self.subjects) if subject is None else [subject]
        for name in targets:
            for version, value in list(self.subjects.get(name, {}).items()):
                if value.deleted:
                    self._forget(name, version)

    # --- queries ---------------------------------------------------------------------------

    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions, oldest first; soft-deleted ones only with ``deleted``."""
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def latest(self, subject: str, *, deleted: bool = False) -> SchemaValue | None:
        found = self.versions(subject, deleted=deleted)
        return found[-1] if found else None

    def get(self, subject: str, version: int, *, deleted: bool = False) -> SchemaValue | None:
        """The version (-1: the latest), or None; soft-deleted ones only with ``deleted``."""
        if version == -1:
            return self.latest(subject, deleted=deleted)
        value = self.subjects.get(subject, {}).get(version)
        if value is None or (value.deleted and not deleted):
            return None
        return value

    def has_subject(self, subject: str, *, deleted: bool = False) -> bool:
        """Whether the subject has a live version (any version with ``deleted``)."""
        versions = self.subjects.get(subject)
        if not versions:
            return False
        return deleted or any(not v.deleted for v in versions.values())

    def subject_names(self, *, deleted: bool = False, deleted_only: bool = False) -> list[str]:
        """Subjects, sorted: with a live version; also all-deleted ones with ``deleted``;
        only all-deleted ones with ``deleted_only``."""
        names = []
        for name, versions in self.subjects.items():
            live = any(not v.deleted for v in versions.values())
            if deleted_only:
                if not live:
                    names.append(name)
            elif live or deleted:
                names.append(name)
        return sorted(names)

    def next_version(self, subject: str) -> int:
        """One more than the highest version the subject ever had (soft-deleted included)."""
        return max(self.subjects.get(subject, {}), default=0) + 1

    def schema_by_id(self, schema_id: int) -> SchemaValue | None:
        """The record defining the id's content, while some version uses the id."""
        if not self.id_users.get(schema_id):
            return None
        return self.ids.get(schema_id)

    def id_versions(self, schema_id: int, *, deleted: bool = False) -> list[SchemaValue]:
        """Versions registered with the id, by subject then version."""
        found = []
        for subject, version in sorted(self.id_users.get(schema_id, ())):
            value = self.subjects.get(subject, {}).get(version)
            if value is not None and (deleted or not value.deleted):
                found.append(value)
        return found

    def id_for_content(self, key: ContentKey) -> int | None:
        return self.content_ids.get(key)

    def referencing(self, subject: str, version: int, *, deleted: bool = False
                    ) -> list[SchemaValue]:
        """Versions whose references name (subject, version); soft-deleted ones only with
        ``deleted``."""
        found = []
        for ref_subject, ref_version in sorted(self.referrers.get((subject, version), ())):
            value = self.subjects.get(ref_subject, {}).get(ref_version)
            if value is not None and (deleted or not value.deleted):
                found.append(value)
        return found

    def config(self, subject: str | None) -> ConfigValue | None:
        return self.configs.get(subject)

    def mode(self, subject: str | None) -> str | None:
        return self.modes.get(subject)
