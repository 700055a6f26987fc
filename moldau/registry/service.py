"""The registry's operations, as Confluent's ``KafkaSchemaRegistry`` defines them.

Reads wait until the store caught up with the topic (:meth:`Store.sync`) and answer from
the state. Writes run one at a time: sync, validate against the state (pure), compute the
records, write them, and return once the store replayed them; nothing changes in memory
before the log has it. Only the primary calls the write methods (see :mod:`.primary`).

Schema parsing and compatibility come through the seam of :mod:`.schemas.base`
(``parse_schema``) and :mod:`.compatibility` (``check``); tests may pass their own.

Registration (``register``), in Confluent's order: the mode must allow it (READWRITE, or
IMPORT for requests carrying an id); an empty schema reuses the latest version's; the schema
is parsed with its references resolved (42201); a schema already registered under the
subject answers its id; the same content elsewhere reuses its id; the compatibility level
of the subject (else global) is checked against the live versions (409); a new id is the
largest id ever seen plus one.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from . import errors
from .config import LEVELS
from .core import MODES, READ_ONLY, Settings
from .reads import RegistryReads
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
    config_value_from_json,
)
from .requests import (
    SchemaRequest,
    bad_body,
    check_subject,
    is_default_context,
    normalize_subject,
    parse_version,
    schema_entity,
)
from .state import content_key, value_content

log = logging.getLogger("moldau.registry")

Records = list[tuple[RecordKey, RecordValue | None]]

__all__ = ["MODES", "RegistryService", "Settings"]


def registered(value: SchemaValue) -> dict[str, Any]:
    """The answer to a registration: the Schema entity without its subject and its text
    (Confluent's clients read ``id``; newer ones, as the JavaScript client, read ``version``
    too). The text stays out: confluent-kafka caches a schema text it finds in this answer
    under the id, and its Protobuf deserializer then gets ``.proto`` text where it asked for
    the base64 descriptor (``format=serialized``); without one it caches what it sent."""
    entity = schema_entity(value)
    del entity["subject"]
    entity.pop("schema", None)
    return entity


class RegistryService(RegistryReads):
    """Every operation of the API over a :class:`~.store.Store`."""

    # --- registration ----------------------------------------------------------------------

    def _allocate_id(self) -> int:
        self._last_id = max(self._last_id, self.state.max_id) + 1
        return self._last_id

    async def register(self, subject_text: str, request: SchemaRequest, *,
                       normalize: bool = False, force: bool = False) -> dict[str, Any]:
        """``POST /subjects/{subject}/versions``: the registered version as Confluent's
        RegisterSchemaResponse (id, version, schemaType unless AVRO, references when any,
        metadata, ruleSet; see :func:`registered`): the new version, or the one already
        holding it."""
        subject = check_subject(subject_text)
        async with self._lock:
            await self.store.sync()
            return await self._register(subject, request, normalize, force)

    def _check_register_mode(self, subject: str, requested_id: int) -> str:
        """The subject's mode, when it allows this registration (42205 otherwise)."""
        mode = self.mode_in_scope(subject)
        if mode in READ_ONLY:
            raise errors.not_permitted(f"Subject {subject} in context . is in read-only mode")
        if requested_id >= 0 and mode != "IMPORT":
            raise errors.not_permitted(f"Subject {subject} in context . is not in import mode")
        if requested_id < 0 and mode != "READWRITE":
            raise errors.not_permitted(
                f"Subject {subject} in context . is not in read-write mode")
        return mode

    @staticmethod
    def _from_previous(request: SchemaRequest, latest: SchemaValue) -> SchemaRequest:
        """An empty schema is the latest version's again; metadata and rule set not given
        are the latest version's (Confluent's maybePopulateFromPrevious)."""
        if not request.schema or not request.schema.strip():
            request = replace(request, schema=latest.schema, schema_type=latest.schema_type,
                              references=latest.references)
        if request.metadata is None and latest.metadata is not None:
            request = replace(request, metadata=latest.metadata)
        if request.rule_set is None and latest.rule_set is not None:
            request = replace(request, rule_set=latest.rule_set)
        return request

    def _version_for(self, subject: str, request: SchemaRequest, importing: bool) -> int:
        version = self.state.next_version(subject)
        if request.version is not None and request.version > 0:
            if request.version != version and not importing:
                raise errors.invalid_schema("Version is not one more than previous version")
            version = request.version
        return version

    async def _register(self, subject: str, request: SchemaRequest, normalize: bool,
                        force: bool) -> dict[str, Any]:
        requested_id = request.id if request.id is not None and request.id >= 0 else -1
        importing = self._check_register_mode(subject, requested_id) == "IMPORT"
        everything = self.state.versions(subject, deleted=True)
        live = [v for v in everything if not v.deleted]
        if not importing and live:
            request = self._from_previous(request, live[-1])
        normalize = normalize or self.normalize_in_scope(subject)
        parsed, references = self._parse_request(request, normalize)
        text = parsed.canonical()
        content = content_key(request.schema_type, text, references, request.metadata,
                              request.rule_set)
        # 1. the same schema, already registered: its id (under this subject: done)
        schema_id = requested_id
        known = self.state.id_for_content(content)
        if known is not None and schema_id in (-1, known):
            schema_id = known
        if not request.version:
            for value in reversed(live):
                if schema_id in (-1, value.id) and (
                        value.id == known or self._same(parsed, references, value)):
                    return registered(value)
        # 2. a new version: compatible, with its version and id
        if not importing and not force:
            messages = self._compatibility(subject, parsed, live,
                                           self.level_in_scope(subject))
            if messages:
                raise errors.incompatible(subject, messages)
        version = self._version_for(subject, request, importing)
        if schema_id >= 0:
            owner = self.state.schema_by_id(schema_id)
            if owner is not None and value_content(owner) != content:
                raise errors.not_permitted(
                    f"Overwrite new schema with id {schema_id} in context . is not permitted.")
        else:
            schema_id = self._allocate_id()
        # soft-deleted versions with the same id go (Confluent tombstones them)
        records: Records = [
            (SchemaKey(subject, old.version), None) for old in everything
            if old.deleted and old.id == schema_id and old.version < version
            and not self.state.referencing(subject, old.version, deleted=True)]
        new = SchemaValue(subject, version, schema_id, text, request.schema_type, references,
                          request.metadata, request.rule_set)
        records.append((SchemaKey(subject, version), new))
        applied = await self.store.write(records)
        if not applied[-1]:
            raise errors.store_error(f"schema id {schema_id} was taken by another schema "
                                     "while this one was written; register it again")
        log.info("registered %s version %d with id %d", subject, version, schema_id)
        return registered(new)

    # --- deletes ---------------------------------------------------------------------------

    def _drop_settings(self, subject: str) -> Records:
        """Tombstones for a subject's config and mode (when its last version goes)."""
        records: Records = []
        if self.state.config(subject) is not None:
            records.append((ConfigKey(subject), None))
        if self.state.mode(subject) is not None:
            records.append((ModeKey(subject), None))
        return records

    async def delete_version(self, subject_text: str, version_text: str,
                             permanent: bool) -> int:
        """``DELETE /subjects/{subject}/versions/{version}``: the version deleted."""
        subject = normalize_subject(subject_text)
        version = parse_version(version_text)
        async with self._lock:
            await self.store.sync()
            if version == -1:
                target = self.state.latest(subject, deleted=permanent)
            else:
                target = self.state.get(subject, version, deleted=True)
                if target is not None and target.deleted and not permanent:
                    raise errors.version_soft_deleted(subject, version)
            if target is None:
                if not self.state.has_subject(subject, deleted=True):
                    raise errors.subject_not_found(subject)
                raise errors.version_not_found(version)
            self._check_writable(subject)
            if self.state.referencing(subject, target.version, deleted=permanent):
                raise errors.reference_exists(subject, target.version)
            if permanent and not target.deleted:
                raise errors.version_not_soft_deleted(subject, target.version)
            records: Records
            if permanent:
                records = [(SchemaKey(subject, target.version), None)]
                if len(self.state.versions(subject, deleted=True)) == 1:
                    records += self._drop_settings(subject)
            else:
                records = [(SchemaKey(subject, target.version), replace(target, deleted=True))]
            await self.store.write(records)
            return target.version

    async def delete_subject(self, subject_text: str, permanent: bool) -> list[int]:
        """``DELETE /subjects/{subject}``: the versions deleted."""
        subject = normalize_subject(subject_text)
        async with self._lock:
            await self.store.sync()
            if not self.state.has_subject(subject, deleted=True):
                raise errors.subject_not_found(subject)
            if not permanent and not self.state.has_subject(subject):
                raise errors.subject_soft_deleted(subject)
            self._check_writable(subject)
            targets = self.state.versions(subject, deleted=permanent)
            for value in targets:
                users = {v.subject for v in self.state.referencing(
                    subject, value.version, deleted=permanent)} - {subject}
                if users:
                    raise errors.reference_exists(subject, value.version)
                if permanent and not value.deleted:
                    raise errors.subject_not_soft_deleted(subject)
            records: Records
            if permanent:
                records = [(SchemaKey(subject, v.version), None) for v in reversed(targets)]
                records += self._drop_settings(subject)
            else:
                records = [(DeleteSubjectKey(subject),
                            DeleteSubjectValue(subject, targets[-1].version))]
            await self.store.write(records)
            return [v.version for v in targets]

    # --- config ----------------------------------------------------------------------------

    @staticmethod
    def _scope(subject_text: str | None) -> str | None:
        if subject_text is None or is_default_context(subject_text):
            return None
        return check_subject(subject_text)

    async def set_config(self, subject_text: str | None, body: Any) -> dict[str, Any]:
        """``PUT /config[/{subject}]``: the update as Confluent echoes it."""
        if not isinstance(body, dict):
            raise bad_body("the request body must be a JSON object such as "
                           '{"compatibility": "BACKWARD"}')
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is not None and (not isinstance(level, str) or level.upper() not in LEVELS):
            raise errors.invalid_compatibility()
        if body.get("normalize") is not None and not isinstance(body["normalize"], bool):
            raise bad_body("normalize must be true or false")
        fields = {k: v for k, v in body.items()
                  if k not in ("compatibility", "compatibilityLevel")}
        if level is not None:
            fields["compatibilityLevel"] = level
        update = config_value_from_json(fields)
        subject = self._scope(subject_text)
        async with self._lock:
            await self.store.sync()
            self._check_writable(subject)
            old = self.state.config(subject) or ConfigValue()
            merged = ConfigValue(
                update.compatibility or old.compatibility,
                update.normalize if update.normalize is not None else old.normalize,
                {**old.extra, **update.extra})
            await self.store.write([(ConfigKey(subject), merged)])
        answer: dict[str, Any] = dict(merged.extra)
        if merged.compatibility is not None:
            answer["compatibility"] = merged.compatibility
        if merged.normalize is not None:
            answer["normalize"] = merged.normalize
        return answer

    async def delete_config(self, subject_text: str | None) -> dict[str, Any]:
        """``DELETE /config[/{subject}]``: the configuration that was in place."""
        subject = self._scope(subject_text)
        async with self._lock:
            await self.store.sync()
            old = self.state.config(subject)
            if subject is not None and old is None:
                raise errors.subject_not_found(subject)
            self._check_writable(subject)
            answer = self.config_json(subject)
            if old is not None:
                await self.store.write([(ConfigKey(subject), None)])
            return answer

    # --- mode ------------------------------------------------------------------------------

    async def set_mode(self, subject_text: str | None, body: Any, force: bool
                       ) -> dict[str, Any]:
        """``PUT /mode[/{subject}]``: ``{"mode": ...}``."""
        if not self.settings.mode_mutability:
            raise errors.not_permitted("Mode changes are not allowed")
        if not isinstance(body, dict):
            raise bad_body('the request body must be a JSON object such as {"mode": "IMPORT"}')
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode()
        mode = mode.upper()
        subject = self._scope(subject_text)
        async with self._lock:
            await self.store.sync()
            records: Records = []
            if mode == "IMPORT" and self.mode_in_scope(subject) != "IMPORT" and not force:
                records = self._clear_for_import(subject)
            records.append((ModeKey(subject), ModeValue(mode)))
            await self.store.write(records)
        return {"mode": mode}

    def _clear_for_import(self, subject: str | None) -> Records:
        """IMPORT needs an empty scope: live subjects refuse it (42205); soft-deleted
        versions are deleted permanently and the subject cleared, as Confluent does."""
        names = self.state.subject_names(deleted=True) if subject is None else [subject]
        if any(self.state.has_subject(name) for name in names):
            raise errors.not_permitted("Cannot import since found existing subjects")
        records: Records = []
        for name in names:
            for value in self.state.versions(name, deleted=True):
                if self.state.referencing(name, value.version, deleted=True):
                    raise errors.reference_exists(name, value.version)
                records.append((SchemaKey(name, value.version), None))
        records.append((ClearSubjectKey(subject), ClearSubjectValue(subject)))
        return records

    async def delete_mode(self, subject_text: str | None) -> dict[str, Any]:
        """``DELETE /mode[/{subject}]``: the mode that was set."""
        if not self.settings.mode_mutability:
            raise errors.not_permitted("Mode changes are not allowed")
        subject = self._scope(subject_text)
        async with self._lock:
            await self.store.sync()
            old = self.state.mode(subject)
            if old is None:
                raise errors.subject_not_found(subject if subject is not None else "null")
            await self.store.write([(ModeKey(subject), None)])
            return {"mode": old}
