"""Compatibility levels of the registry and the walk over a subject's previous versions.

Confluent's rules (``CompatibilityChecker`` / ``SchemaValidatorBuilder``):

- BACKWARD: the new schema can read data written with the previous one
  (``new.backward_messages(previous)``); FORWARD: the previous schema can read data written
  with the new one (``previous.backward_messages(new)``, messages name the reader "old");
  FULL: both, the forward messages first.
- Non-transitive levels look at the latest live version only; the transitive ones walk the
  versions from the latest to the oldest and stop at the first incompatible one.
- A previous version of another schema type is incompatible ("Incompatible because of
  different schema type").
- The messages of an incompatible pair end with ``{oldSchemaVersion: N}`` (when versions are
  given) and ``{oldSchema: '<canonical text>'}``, as Confluent's verbose answer does.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from moldau.registry.schemas.base import ParsedSchema

log = logging.getLogger(__name__)

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

DIFFERENT_SCHEMA_TYPE = "Incompatible because of different schema type"

# Confluent shortens an old schema longer than this in the messages.
_MAX_SCHEMA_TEXT = 10 * 1024


def check(
    new: ParsedSchema,
    previous: Sequence[ParsedSchema],
    level: str,
    *,
    versions: Sequence[int] | None = None,
) -> list[str]:
    """Check ``new`` against the subject's live versions ``previous`` (oldest first).

    Non-transitive levels look only at the last one. An empty list means compatible; else
    human-readable messages (the verbose answer). ``versions`` (same length as
    ``previous``) adds ``{oldSchemaVersion: N}`` to the messages. Raises ValueError for a
    level not in LEVELS (case-insensitive).
    """
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}: expected one of {LEVELS}")
    if level == "NONE" or not previous:
        return []
    if versions is not None and len(versions) != len(previous):
        raise ValueError("versions must have one entry per previous schema")
    pairs = list(zip(previous, versions or [None] * len(previous), strict=True))
    pairs.reverse()  # the latest first
    if not level.endswith("_TRANSITIVE"):
        pairs = pairs[:1]
    direction = level.removesuffix("_TRANSITIVE")
    for old, version in pairs:
        messages = _check_pair(new, old, direction, version)
        if messages:
            return messages
    return []


def _check_pair(
    new: ParsedSchema, old: ParsedSchema, direction: str, version: int | None
) -> list[str]:
    try:
        return _compare(new, old, direction, version)
    except Exception as exc:  # a bug in a rule must refuse the schema, not answer 500
        # Confluent answers this message too (AvroSchema.isBackwardCompatible)
        log.exception("unexpected error in a %s compatibility check", new.schema_type)
        return [f"Unexpected exception during compatibility check: {exc}"]


def _compare(
    new: ParsedSchema, old: ParsedSchema, direction: str, version: int | None
) -> list[str]:
    if new.schema_type != old.schema_type:
        return [DIFFERENT_SCHEMA_TYPE]
    if direction == "BACKWARD":
        return _with_old_schema(new.backward_messages(old, reader="new", writer="old"),
                                old, version)
    if direction == "FORWARD":
        return _with_old_schema(old.backward_messages(new, reader="old", writer="new"),
                                old, version)
    forward = old.backward_messages(new, reader="old", writer="new")
    backward = _with_old_schema(new.backward_messages(old, reader="new", writer="old"),
                                old, version)
    return forward + backward


def _with_old_schema(messages: list[str], old: ParsedSchema, version: int | None) -> list[str]:
    if not messages:
        return messages
    result = list(messages)
    if version is not None:
        result.append(f"{{oldSchemaVersion: {version}}}")
    text = old.canonical()
    if len(text) <= _MAX_SCHEMA_TEXT:
        result.append(f"{{oldSchema: '{text}'}}")
    else:
        result.append(f"{{oldSchema: <truncated> '{text[:_MAX_SCHEMA_TEXT]}...'}}")
    return result
