"""Avro reader/writer compatibility: the schema resolution rules of the Avro specification as
Avro Java's ``SchemaCompatibility`` applies them, which is what Confluent runs.

- Same types: records match by name (the reader's short name, or a reader alias naming the
  writer's full name), every reader field is found in the writer by name or field alias, or
  has a default (an enum field with an enum default is checked against the whole writer);
  enums also need every writer symbol in the reader unless the reader has a default symbol;
  fixed also need the same size; arrays and maps compare items and values; a writer union
  needs every branch readable.
- Promotions: int -> long, float, double; long -> float, double; float -> double;
  string <-> bytes. A reader union needs one branch that reads the writer; a writer union
  needs every branch readable by the reader.
- Recursive schemas: a pair being checked counts as compatible (memoized by identity).

Messages are Confluent's ``Difference`` texts: ``{errorType:'TYPE_MISMATCH', description:'The
type (path '/fields/0/type') of a field in the new schema does not match with the old schema',
additionalInfo:'reader type: STRING not compatible with writer type: INT'}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.registry.schemas.avro_model import Field, Node
from moldau.registry.schemas.base import fill_labels

_PROMOTIONS = {
    "long": {"int"},
    "float": {"int", "long"},
    "double": {"int", "long", "float"},
    "bytes": {"string"},
    "string": {"bytes"},
}

_DESCRIPTIONS = {
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{path}' in the %s schema "
    "does not match with the %s schema",
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the %s schema does not match with "
    "the %s schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": "The %s schema is missing enum symbols '{info}' at path '{path}' in "
    "the %s schema",
    "MISSING_UNION_BRANCH": "The %s schema is missing a type inside a union field at path "
    "'{path}' in the %s schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{info}' at path '{path}' in the %s schema "
    "has no default value and is missing in the %s schema",
}


@dataclass(frozen=True)
class Incompatibility:
    """One reason a reader cannot read a writer's data."""

    kind: str  # NAME_MISMATCH, FIXED_SIZE_MISMATCH, MISSING_ENUM_SYMBOLS, ...
    path: str  # JSON pointer into the reader schema, e.g. /fields/0/type
    info: str

    def message(self, reader: str, writer: str) -> str:
        """Confluent's text of this incompatibility."""
        template = _DESCRIPTIONS[self.kind].replace("{path}", self.path)
        description = fill_labels(template.replace("{info}", self.info), reader, writer)
        return (
            f"{{errorType:'{self.kind}', description:'{description}', "
            f"additionalInfo:'{self.info}'}}"
        )


class _AvroCompatibilityError(Exception):
    """A pair the resolution rules cannot decide (a reader field matching two writer fields)."""


def reader_writer_messages(
    reader_node: Node, writer_node: Node, *, reader: str = "new", writer: str = "old"
) -> list[str]:
    """Messages for every incompatibility of ``reader_node`` reading ``writer_node``'s data;
    empty when compatible. ``reader``/``writer`` name the two schemas in the messages."""
    try:
        found = incompatibilities(reader_node, writer_node)
    except _AvroCompatibilityError as exc:
        return [f"Unexpected exception during compatibility check: {exc}"]
    return [item.message(reader, writer) for item in found]


def incompatibilities(reader: Node, writer: Node) -> list[Incompatibility]:
    """The incompatibilities of ``reader`` reading ``writer``'s data (empty: compatible)."""
    return _Checker().check("", reader, writer, [])


class _Checker:
    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], list[Incompatibility] | None] = {}

    def check(
        self, token: str, reader: Node, writer: Node, location: list[str]
    ) -> list[Incompatibility]:
        location.append(token)
        key = (id(reader), id(writer))
        if key in self.memo:
            cached = self.memo[key]
            result = [] if cached is None else cached  # None: recursion in progress
        else:
            self.memo[key] = None
            result = self._calculate(reader, writer, location)
            self.memo[key] = result
        location.pop()
        return result

    def compatible(self, reader: Node, writer: Node) -> bool:
        return not self.check("", reader, writer, [])

    def _calculate(self, reader: Node, writer: Node, location: list[str]) -> list[Incompatibility]:
        if reader.kind == writer.kind:
            return self._same_kind(reader, writer, location)
        if writer.kind == "union":
            found: list[Incompatibility] = []
            for index, branch in enumerate(writer.branches):
                found += self.check(str(index), reader, branch, location)
            return found
        if reader.kind == "union":
            if any(self.compatible(branch, writer) for branch in reader.branches):
                return []
            return [_incompatible("MISSING_UNION_BRANCH", location,
                                  f"reader union lacking writer type: {writer.kind.upper()}")]
        if writer.kind in _PROMOTIONS.get(reader.kind, ()):
            return []
        return [_type_mismatch(reader, writer, location)]

    def _same_kind(self, reader: Node, writer: Node, location: list[str]) -> list[Incompatibility]:
        kind = reader.kind
        if kind in ("array", "map"):
            assert reader.items is not None and writer.items is not None
            token = "items" if kind == "array" else "values"
            return self.check(token, reader.items, writer.items, location)
        if kind == "fixed":
            return _names(reader, writer, location) + _fixed_size(reader, writer, location)
        if kind == "enum":
            return _names(reader, writer, location) + _enum_symbols(reader, writer, location)
        if kind == "record":
            return _names(reader, writer, location) + self._fields(reader, writer, location)
        if kind == "union":
            found: list[Incompatibility] = []
            for index, branch in enumerate(writer.branches):
                location.append(str(index))
                if not self.compatible(reader, branch):
                    found.append(_incompatible(
                        "MISSING_UNION_BRANCH", location,
                        f"reader union lacking writer type: {branch.kind.upper()}"))
                location.pop()
            return found
        return []  # the same primitive

    def _fields(self, reader: Node, writer: Node, location: list[str]) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        location.append("fields")
        for position, reader_field in enumerate(reader.fields):
            location.append(str(position))
            writer_field = _lookup_writer_field(writer, reader_field)
            if writer_field is not None:
                found += self.check("type", reader_field.type, writer_field.type, location)
            elif not reader_field.has_default:
                field_type = reader_field.type
                if field_type.kind == "enum" and field_type.enum_default is not None:
                    found += self.check("type", field_type, writer, location)
                else:
                    found.append(_incompatible(
                        "READER_FIELD_MISSING_DEFAULT_VALUE", location, reader_field.name))
            location.pop()
        location.pop()
        return found


def _lookup_writer_field(writer: Node, reader_field: Field) -> Field | None:
    by_name = {fld.name: fld for fld in writer.fields}
    matches = [by_name[name] for name in (reader_field.name, *reader_field.aliases)
               if name in by_name]
    if len(matches) > 1:
        raise _AvroCompatibilityError(
            f"Reader record field {reader_field.name} matches multiple fields in writer record "
            f"schema {writer.name.full if writer.name else ''}"
        )
    return matches[0] if matches else None


def _names(reader: Node, writer: Node, location: list[str]) -> list[Incompatibility]:
    assert reader.name is not None and writer.name is not None
    if reader.name.name == writer.name.name:
        return []
    if writer.name.full in {alias.full for alias in reader.aliases}:
        return []
    location.append("name")
    result = [_incompatible("NAME_MISMATCH", location, f"expected: {writer.name.full}")]
    location.pop()
    return result


def _fixed_size(reader: Node, writer: Node, location: list[str]) -> list[Incompatibility]:
    if reader.size == writer.size:
        return []
    location.append("size")
    result = [_incompatible("FIXED_SIZE_MISMATCH", location,
                            f"expected: {writer.size}, found: {reader.size}")]
    location.pop()
    return result


def _enum_symbols(reader: Node, writer: Node, location: list[str]) -> list[Incompatibility]:
    missing = sorted(set(writer.symbols) - set(reader.symbols))
    if not missing or (reader.enum_default is not None and reader.enum_default in reader.symbols):
        return []
    location.append("symbols")
    result = [_incompatible("MISSING_ENUM_SYMBOLS", location, f"[{', '.join(missing)}]")]
    location.pop()
    return result


def _type_mismatch(reader: Node, writer: Node, location: list[str]) -> Incompatibility:
    return _incompatible(
        "TYPE_MISMATCH", location,
        f"reader type: {reader.kind.upper()} not compatible with writer type: "
        f"{writer.kind.upper()}",
    )


def _incompatible(kind: str, location: list[str], info: str) -> Incompatibility:
    # the root token is "" and left out; JSON pointer escaping of the rest
    tokens = [token.replace("~", "~0").replace("/", "~1") for token in location[1:]]
    return Incompatibility(kind, "/" + "/".join(tokens), info)
