"""The registry's read operations (the GET endpoints, lookup and compatibility checks).

Each waits until the store caught up with the topic (:meth:`.store.Store.sync`), so it sees
every write acknowledged before it, then answers from the state. A mixin of
:class:`.service.RegistryService`; parsing and scopes come from :class:`.core.RegistryCore`.
"""

from __future__ import annotations

from typing import Any

from . import errors
from .core import RegistryCore
from .records import SchemaValue, config_value_to_json
from .requests import (
    CONTEXT_WILDCARD,
    DEFAULT_CONTEXT_PREFIX,
    SchemaRequest,
    context_of,
    is_default_context,
    normalize_subject,
    parse_version,
    schema_entity,
    schema_string,
)
from .schemas.base import SCHEMA_TYPES


class RegistryReads(RegistryCore):
    """Read operations; every method returns the JSON answer of its endpoint."""

    async def subjects(self, prefix: str | None, *, deleted: bool = False,
                       deleted_only: bool = False) -> list[str]:
        """``GET /subjects``: sorted names, filtered by ``subjectPrefix``."""
        await self.store.sync()
        names = self.state.subject_names(deleted=deleted, deleted_only=deleted_only)
        if prefix is None or prefix == CONTEXT_WILDCARD:
            return names
        if prefix.startswith(DEFAULT_CONTEXT_PREFIX):
            rest = prefix[len(DEFAULT_CONTEXT_PREFIX):]
            return [n for n in names if not n.startswith(":.") and n.startswith(rest)]
        return [n for n in names if n.startswith(prefix)]

    async def versions(self, subject_text: str, *, deleted: bool = False,
                       deleted_only: bool = False) -> list[int]:
        """``GET /subjects/{subject}/versions``."""
        subject = normalize_subject(subject_text)
        await self.store.sync()
        if not self.state.has_subject(subject, deleted=deleted or deleted_only):
            raise errors.subject_not_found(subject)
        found = self.state.versions(subject, deleted=deleted or deleted_only)
        if deleted_only:
            found = [v for v in found if v.deleted]
        return [v.version for v in found]

    def _version(self, subject: str, version_text: str, deleted: bool) -> SchemaValue:
        version = parse_version(version_text)
        value = self.state.get(subject, version, deleted=deleted)
        if value is None:
            if not self.state.has_subject(subject, deleted=deleted):
                raise errors.subject_not_found(subject)
            raise errors.version_not_found(version)
        return value

    async def get_version(self, subject_text: str, version_text: str, *,
                          deleted: bool = False, fmt: str = "") -> dict[str, Any]:
        """``GET /subjects/{subject}/versions/{version}``: the Schema entity."""
        subject = normalize_subject(subject_text)
        await self.store.sync()
        value = self._version(subject, version_text, deleted)
        return schema_entity(value, self._format(value, fmt))

    async def raw_version(self, subject_text: str, version_text: str, *,
                          deleted: bool = False, fmt: str = "") -> str:
        """``GET /subjects/{subject}/versions/{version}/schema``: the schema text alone."""
        subject = normalize_subject(subject_text)
        await self.store.sync()
        value = self._version(subject, version_text, deleted)
        return self._format(value, fmt)

    async def referenced_by(self, subject_text: str, version_text: str, *,
                            deleted: bool = False) -> list[int]:
        """``GET .../versions/{version}/referencedby``: ids of the schemas referencing it."""
        subject = normalize_subject(subject_text)
        await self.store.sync()
        value = self._version(subject, version_text, True)
        return sorted({v.id for v in self.state.referencing(subject, value.version,
                                                              deleted=deleted)})

    async def lookup(self, subject_text: str, request: SchemaRequest, *,
                     normalize: bool = False, deleted: bool = False,
                     fmt: str = "") -> dict[str, Any]:
        """``POST /subjects/{subject}``: the version holding this schema (40401, 40403)."""
        subject = normalize_subject(subject_text)
        await self.store.sync()
        if not self.state.has_subject(subject, deleted=deleted):
            raise errors.subject_not_found(subject)
        normalize = normalize or self.normalize_in_scope(subject)
        parsed, references = self._parse_request(request, normalize)
        for value in reversed(self.state.versions(subject, deleted=deleted)):
            if self._same(parsed, references, value):
                return schema_entity(value, self._format(value, fmt))
        raise errors.schema_not_found()

    async def latest_with_metadata(self, subject_text: str, wanted: dict[str, str], *,
                                   deleted: bool = False, fmt: str = "") -> dict[str, Any]:
        """``GET /subjects/{subject}/metadata?key=K&value=V...``: the latest version whose
        metadata properties hold every pair asked for (40401 subject, 40403 none)."""
        subject = normalize_subject(subject_text)
        await self.store.sync()
        for value in reversed(self.state.versions(subject, deleted=deleted)):
            properties = (value.metadata or {}).get("properties")
            if isinstance(properties, dict) and all(
                    properties.get(k) == v for k, v in wanted.items()):
                return schema_entity(value, self._format(value, fmt))
        if not self.state.has_subject(subject, deleted=deleted):
            raise errors.subject_not_found(subject)
        raise errors.schema_not_found()

    # --- by id -----------------------------------------------------------------------------

    def _by_id(self, schema_id: int) -> SchemaValue:
        value = self.state.schema_by_id(schema_id)
        if value is None:
            raise errors.schema_not_found(schema_id)
        return value

    async def schema_by_id(self, schema_id: int, *, fmt: str = "",
                           fetch_max_id: bool = False) -> dict[str, Any]:
        """``GET /schemas/ids/{id}``: Confluent's SchemaString."""
        await self.store.sync()
        value = self._by_id(schema_id)
        answer = schema_string(value, self._format(value, fmt))
        if fetch_max_id:
            answer["maxId"] = self.state.max_id
        return answer

    async def raw_schema_by_id(self, schema_id: int, *, fmt: str = "") -> str:
        """``GET /schemas/ids/{id}/schema``."""
        await self.store.sync()
        value = self._by_id(schema_id)
        return self._format(value, fmt)

    async def subjects_for_id(self, schema_id: int, *, deleted: bool = False) -> list[str]:
        """``GET /schemas/ids/{id}/subjects``."""
        await self.store.sync()
        self._by_id(schema_id)
        return sorted({v.subject for v in self.state.id_versions(schema_id, deleted=deleted)})

    async def versions_for_id(self, schema_id: int, *, deleted: bool = False
                              ) -> list[dict[str, Any]]:
        """``GET /schemas/ids/{id}/versions``: ``[{"subject", "version"}]``."""
        await self.store.sync()
        self._by_id(schema_id)
        return [{"subject": v.subject, "version": v.version}
                for v in self.state.id_versions(schema_id, deleted=deleted)]

    async def schemas(self, prefix: str | None, *, deleted: bool = False,
                      latest_only: bool = False) -> list[dict[str, Any]]:
        """``GET /schemas``: Schema entities of the subjects matching the prefix."""
        names = await self.subjects(prefix or CONTEXT_WILDCARD, deleted=deleted)
        found: list[dict[str, Any]] = []
        for name in names:
            values = self.state.versions(name, deleted=deleted)
            for value in values[-1:] if latest_only else values:
                found.append(schema_entity(value))
        return found

    async def contexts(self) -> list[str]:
        """``GET /contexts``: the default context and those of qualified subjects."""
        await self.store.sync()
        return sorted({"."} | {context_of(s) for s in self.state.subjects})

    @staticmethod
    def schema_types() -> list[str]:
        """``GET /schemas/types``."""
        return list(SCHEMA_TYPES)

    # --- config and mode -------------------------------------------------------------------

    def config_json(self, subject: str | None) -> dict[str, Any]:
        """The configuration of a scope as GET answers it (global: the default when unset)."""
        config = self.state.config(subject)
        if config is None:
            return {"compatibilityLevel": self.settings.default_level}
        answer = config_value_to_json(config)
        if subject is None and "compatibilityLevel" not in answer:
            answer["compatibilityLevel"] = self.settings.default_level
        return answer

    async def get_config(self, subject_text: str | None, *,
                         default_to_global: bool = False) -> dict[str, Any]:
        """``GET /config[/{subject}]`` (40408 for an unset subject without
        ``defaultToGlobal``)."""
        await self.store.sync()
        if subject_text is None or is_default_context(subject_text):
            return self.config_json(None)
        subject = normalize_subject(subject_text)
        if self.state.config(subject) is not None:
            answer = self.config_json(subject)
            if "compatibilityLevel" not in answer and default_to_global:
                answer["compatibilityLevel"] = self.level_in_scope(subject)
            return answer
        if default_to_global:
            return self.config_json(None)
        raise errors.compatibility_not_configured(subject)

    async def get_mode(self, subject_text: str | None, *,
                       default_to_global: bool = False) -> dict[str, Any]:
        """``GET /mode[/{subject}]`` (40409 for an unset subject without
        ``defaultToGlobal``)."""
        await self.store.sync()
        if subject_text is None or is_default_context(subject_text):
            return {"mode": self.mode_in_scope(None)}
        subject = normalize_subject(subject_text)
        mode = self.state.mode(subject)
        if mode is not None:
            return {"mode": mode}
        if default_to_global:
            return {"mode": self.mode_in_scope(None)}
        raise errors.mode_not_configured(subject)

    # --- compatibility ---------------------------------------------------------------------

    async def check_compatibility(self, subject_text: str, version_text: str | None,
                                  request: SchemaRequest, *, normalize: bool = False,
                                  verbose: bool = False) -> dict[str, Any]:
        """``POST /compatibility/subjects/{subject}/versions[/{version}]``:
        ``{"is_compatible": ...}`` (with ``messages`` when ``verbose``)."""
        subject = normalize_subject(subject_text)
        await self.store.sync()
        if version_text is not None:
            version = parse_version(version_text)
            target = self.state.get(subject, version)
            if target is None and version != -1:
                raise errors.version_not_found(version)
            previous = [target] if target is not None else []
        else:
            previous = self.state.versions(subject)
        normalize = normalize or self.normalize_in_scope(subject)
        try:
            parsed, _ = self._parse_request(request, normalize)
        except errors.RegistryError as exc:
            if not verbose or exc.error_code != errors.INVALID_SCHEMA:
                raise
            return {"is_compatible": False, "messages": [exc.message]}
        level = self.level_in_scope(subject)
        if version_text is not None:
            level = level.removesuffix("_TRANSITIVE")
        messages = self._compatibility(subject, parsed, previous, level)
        answer: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            answer["messages"] = messages
        return answer
