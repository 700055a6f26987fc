"""The registry core shared by reads and writes: schema parsing through the seam of
:mod:`.schemas.base` (``parse_schema``) and :mod:`.compatibility` (``check``), reference
resolution, and the configuration and mode in scope of a subject.

Tests may pass their own ``parse`` and ``check``; by default the real schema types are used.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import errors
from .records import SchemaValue
from .requests import SchemaRequest
from .schemas.base import ParsedSchema, Reference
from .store import Store

log = logging.getLogger("moldau.registry")

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
READ_ONLY = ("READONLY", "READONLY_OVERRIDE")
_PARSE_CACHE = 4096

ParseFn = Callable[..., ParsedSchema]
#: ``check(new, previous, level, versions=[...])`` of :mod:`.compatibility`
CheckFn = Callable[..., list[str]]


def _real_parse(schema_type: str, text: str, references: Mapping[str, str], *,
                normalize: bool = False) -> ParsedSchema:
    from .schemas.base import parse_schema

    return parse_schema(schema_type, text, references, normalize=normalize)


def _real_check(new: ParsedSchema, previous: Sequence[ParsedSchema], level: str, *,
                versions: Sequence[int] | None = None) -> list[str]:
    from .compatibility import check

    return list(check(new, previous, level, versions=versions))


@dataclass(frozen=True)
class Settings:
    """What the service takes from the registry's configuration."""

    default_level: str = "BACKWARD"
    mode_mutability: bool = True


class RegistryCore:
    """State access, parsing and scopes shared by :class:`.reads.RegistryReads` and
    :class:`.service.RegistryService`."""

    def __init__(self, store: Store, settings: Settings | None = None, *,
                 parse: ParseFn | None = None, check: CheckFn | None = None) -> None:
        self.store = store
        self.state = store.state
        self.settings = settings or Settings()
        self._parse_fn = parse or _real_parse
        self._check_fn = check or _real_check
        self._lock = asyncio.Lock()
        self._parsed: OrderedDict[tuple[Any, ...], ParsedSchema] = OrderedDict()
        self._last_id = 0

    # --- schema parsing --------------------------------------------------------------------

    def _resolve(self, references: Sequence[Reference]
                 ) -> tuple[tuple[Reference, ...], dict[str, str]]:
        """References with concrete versions, and import name -> schema text of every
        schema they reach (transitively); 42201 for a reference to nothing."""
        concrete: list[Reference] = []
        texts: dict[str, str] = {}
        for ref in references:
            target = self.state.get(ref.subject, ref.version, deleted=ref.version != -1)
            if target is None:
                raise errors.invalid_schema(
                    f"reference {ref.name!r} to subject {ref.subject!r} version "
                    f"{ref.version} does not exist")
            concrete.append(Reference(ref.name, ref.subject, target.version))
            self._collect(ref.name, target, texts)
        return tuple(concrete), texts

    def _collect(self, name: str, value: SchemaValue, texts: dict[str, str]) -> None:
        if name in texts:
            return
        texts[name] = value.schema
        for ref in value.references:
            target = self.state.get(ref.subject, ref.version, deleted=True)
            if target is None:
                raise errors.invalid_schema(
                    f"reference {ref.name!r} of {value.subject!r} version {value.version} "
                    f"to subject {ref.subject!r} version {ref.version} does not exist")
            self._collect(ref.name, target, texts)

    def _parse(self, schema_type: str, text: str, references: tuple[Reference, ...],
               texts: Mapping[str, str], normalize: bool) -> ParsedSchema:
        """The parsed schema (cached); 42201 when it does not parse."""
        from .schemas.base import InvalidSchemaError

        key = (schema_type, text, references, normalize)
        parsed = self._parsed.get(key)
        if parsed is not None:
            self._parsed.move_to_end(key)
            return parsed
        try:
            parsed = self._parse_fn(schema_type, text, texts, normalize=normalize)
        except InvalidSchemaError as exc:
            raise errors.invalid_schema(str(exc) or type(exc).__name__) from exc
        self._parsed[key] = parsed
        if len(self._parsed) > _PARSE_CACHE:
            self._parsed.popitem(last=False)
        return parsed

    def _parse_request(self, request: SchemaRequest, normalize: bool
                       ) -> tuple[ParsedSchema, tuple[Reference, ...]]:
        if not request.schema or not request.schema.strip():
            raise errors.invalid_schema("Empty schema")
        references, texts = self._resolve(request.references)
        parsed = self._parse(request.schema_type, request.schema, references, texts, normalize)
        return parsed, references

    def _parse_stored(self, value: SchemaValue, normalize: bool = False) -> ParsedSchema:
        references, texts = self._resolve(value.references)
        return self._parse(value.schema_type, value.schema, references, texts, normalize)

    def _same(self, parsed: ParsedSchema, references: tuple[Reference, ...],
              value: SchemaValue) -> bool:
        """Whether the stored version is the schema ``parsed`` (Confluent's canLookup)."""
        if value.schema_type != parsed.schema_type or value.references != references:
            return False
        if value.schema == parsed.canonical():
            return True
        try:
            return self._parse_stored(value).identity() == parsed.identity()
        except errors.RegistryError:
            return False

    def _format(self, value: SchemaValue, fmt: str) -> str:
        """The schema text for ``?format=`` (the stored text when none is asked)."""
        if not fmt or not fmt.strip():
            return value.schema
        try:
            return self._parse_stored(value).formatted(fmt.strip())
        except ValueError as exc:
            raise errors.invalid_schema(f"format {fmt!r}: {exc}") from None

    # --- configuration in scope ------------------------------------------------------------

    @staticmethod
    def _scopes(subject: str | None) -> list[str | None]:
        return [subject, None] if subject is not None else [None]

    def level_in_scope(self, subject: str | None) -> str:
        """The subject's compatibility level, else the global one, else the default."""
        for scope in self._scopes(subject):
            config = self.state.config(scope)
            if config is not None and config.compatibility is not None:
                return config.compatibility
        return self.settings.default_level

    def normalize_in_scope(self, subject: str | None) -> bool:
        """Whether schemas of the subject are normalized (config ``normalize``)."""
        for scope in self._scopes(subject):
            config = self.state.config(scope)
            if config is not None and config.normalize is not None:
                return config.normalize
        return False

    def mode_in_scope(self, subject: str | None) -> str:
        if subject is not None:
            mode = self.state.mode(subject)
            if mode is not None:
                return mode
        return self.state.mode(None) or "READWRITE"

    def _check_writable(self, subject: str | None) -> None:
        if self.mode_in_scope(subject) in READ_ONLY:
            raise errors.not_permitted(f"Subject {subject} in context . is in read-only mode")

    def _compatibility(self, subject: str, parsed: ParsedSchema,
                       previous: Sequence[SchemaValue], level: str) -> list[str]:
        """Messages why ``parsed`` breaks ``level`` against ``previous`` (oldest first)."""
        if level == "NONE" or not previous:
            return []
        if not level.endswith("_TRANSITIVE"):
            previous = previous[-1:]
        older: list[ParsedSchema] = []
        versions: list[int] = []
        for value in previous:
            try:
                older.append(self._parse_stored(value))
                versions.append(value.version)
            except errors.RegistryError as exc:
                log.warning("%s version %d does not parse any more (%s); left out of the "
                            "compatibility check", subject, value.version, exc.message)
        return self._check_fn(parsed, older, level, versions=versions) if older else []
