"""Avro schemas as Spark SQL types, and decoded Avro values as Arrow-ready Python values.

The mapping is Spark's own (``from_avro`` / the Avro data source, SchemaConverters):

==========================================  ==============================================
Avro                                        Spark SQL
==========================================  ==============================================
null                                        null (only inside unions)
boolean / int / long / float / double       boolean / int / bigint / float / double
string, enum, uuid                          string
bytes, fixed                                binary
decimal (bytes or fixed)                    decimal(precision, scale)
date                                        date
timestamp-millis, timestamp-micros          timestamp
local-timestamp-millis / -micros            timestamp_ntz
time-millis / time-micros                   int / bigint (milliseconds / microseconds)
record                                      struct (a field is nullable when its type is a
                                            union with null)
array / map                                 array / map<string, ...>
union [null, T]                             T, nullable
union of int and long / float and double    bigint / double
other unions                                struct<member0, member1, ...> (the branch that
                                            was written is set, the others are null)
==========================================  ==============================================

Recursive records have no Spark type and are refused (as Spark refuses them by default).
Pure code: fastavro's parsed schemas in, pyspark types out.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

Converter = Callable[[Any], Any] | None  # None: the value is Arrow-ready as it is

_PRIMITIVES: dict[str, DataType] = {
    "null": NullType(), "boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "bytes": BinaryType(),
    "string": StringType(),
}
_LOGICAL: dict[str, DataType] = {
    "date": DateType(), "timestamp-millis": TimestampType(),
    "timestamp-micros": TimestampType(), "local-timestamp-millis": TimestampNTZType(),
    "local-timestamp-micros": TimestampNTZType(), "time-millis": IntegerType(),
    "time-micros": LongType(), "uuid": StringType(),
}


class UnsupportedAvroSchema(ValueError):
    """An Avro schema without a Spark SQL type (a recursive record)."""


def named_types(schema: Any, found: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every named type (record, enum, fixed) defined in ``schema``, by full name: a parsed
    schema names a type only the first time, later uses are its name."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for branch in schema:
            named_types(branch, found)
    elif isinstance(schema, dict):
        name = schema.get("name")
        if isinstance(name, str) and schema.get("type") in ("record", "error", "enum", "fixed"):
            found[name] = schema
        for field in schema.get("fields") or ():
            named_types(field["type"], found)
        for key in ("items", "values"):
            if key in schema:
                named_types(schema[key], found)
        if isinstance(schema.get("type"), (list, dict)):
            named_types(schema["type"], found)
    return found


class _Types:
    """Resolves named-type references while walking one schema."""

    def __init__(self, schema: Any) -> None:
        self.named = named_types(schema)

    def deref(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            found = self.named.get(schema)
            if found is None:
                raise UnsupportedAvroSchema(f"unknown Avro type {schema!r}")
            return found
        return schema

    def type_name(self, schema: Any) -> str:
        schema = self.deref(schema)
        return schema if isinstance(schema, str) else str(schema.get("type"))


def to_spark_type(schema: Any) -> tuple[DataType, bool]:
    """The Spark type of a parsed (fastavro) Avro schema, and whether it is nullable."""
    return _convert(schema, (), _Types(schema))


def _convert(schema: Any, records: tuple[str, ...], types: _Types) -> tuple[DataType, bool]:
    if isinstance(schema, list):
        return _union(schema, records, types)
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        if schema in records:
            raise UnsupportedAvroSchema(
                f"the Avro record {schema} is recursive: Spark SQL types cannot express it")
        schema = types.deref(schema)
    if isinstance(schema, str):
        return _PRIMITIVES[schema], schema == "null"
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0))), False
    if logical in _LOGICAL:
        return _LOGICAL[logical], False
    if kind == "record" or kind == "error":
        name = schema["name"]
        if name in records:
            raise UnsupportedAvroSchema(
                f"the Avro record {name} is recursive: Spark SQL types cannot express it")
        fields = []
        for field in schema["fields"]:
            dtype, nullable = _convert(field["type"], (*records, name), types)
            fields.append(StructField(field["name"], dtype, nullable))
        return StructType(fields), False
    if kind == "enum":
        return StringType(), False
    if kind == "fixed":
        return BinaryType(), False
    if kind == "array":
        dtype, nullable = _convert(schema["items"], records, types)
        return ArrayType(dtype, nullable), False
    if kind == "map":
        dtype, nullable = _convert(schema["values"], records, types)
        return MapType(StringType(), dtype, nullable), False
    if isinstance(kind, (str, list, dict)):
        return _convert(kind, records, types)
    raise UnsupportedAvroSchema(f"unknown Avro schema {schema!r}")


def _union(branches: list[Any], records: tuple[str, ...], types: _Types
           ) -> tuple[DataType, bool]:
    has_null = any(types.type_name(b) == "null" for b in branches)
    rest = [b for b in branches if types.type_name(b) != "null"]
    if not rest:
        return NullType(), True
    if len(rest) == 1:
        dtype, _ = _convert(rest[0], records, types)
        return dtype, has_null
    names = {types.type_name(b) for b in rest}
    if names == {"int", "long"} and all(isinstance(b, str) for b in rest):
        return LongType(), has_null
    if names == {"float", "double"} and all(isinstance(b, str) for b in rest):
        return DoubleType(), has_null
    fields = [StructField(f"member{i}", _convert(b, records, types)[0], True)
              for i, b in enumerate(rest)]
    return StructType(fields), has_null


# --- values ----------------------------------------------------------------------------


def converter(schema: Any) -> Converter:
    """A function turning a fastavro-decoded value of ``schema`` into what pyarrow takes for
    its Spark type; None when the value is already that (most schemas)."""
    return _converter(schema, _Types(schema), ())


def _converter(schema: Any, types: _Types, records: tuple[str, ...]) -> Converter:
    if isinstance(schema, list):
        return _union_converter(schema, types, records)
    if isinstance(schema, str):
        if schema in _PRIMITIVES or schema in records:
            return None
        schema = types.deref(schema)
    logical = schema.get("logicalType")
    kind = schema.get("type")
    if logical == "uuid":
        return lambda v: None if v is None else str(v)
    if logical == "time-millis" and kind == "int":
        return lambda v: None if v is None else _micros(v) // 1000
    if logical == "time-micros" and kind == "long":
        return lambda v: None if v is None else _micros(v)
    if kind == "record" or kind == "error":
        inner_records = (*records, schema["name"])
        parts = [(f["name"], _converter(f["type"], types, inner_records))
                 for f in schema["fields"]]
        active = [(n, c) for n, c in parts if c is not None]
        if not active:
            return None

        def record(value: Any) -> Any:
            if value is None:
                return None
            out = dict(value)
            for name, convert in active:
                out[name] = convert(out.get(name))
            return out

        return record
    if kind == "array":
        item = _converter(schema["items"], types, records)
        if item is None:
            return None
        return lambda v: None if v is None else [item(x) for x in v]
    if kind == "map":
        inner = _converter(schema["values"], types, records)
        if inner is None:
            return None
        return lambda v: None if v is None else {k: inner(x) for k, x in v.items()}
    if isinstance(kind, (list, dict)):
        return _converter(kind, types, records)
    return None


def _micros(value: Any) -> int:
    if isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + (
            value.microsecond)
    return int(value)


def _union_converter(branches: list[Any], types: _Types, records: tuple[str, ...]
                     ) -> Converter:
    """Values of unions as fastavro reads them with ``return_named_type=True``: a named
    type's value comes as (full name, value), so records, enums and fixed are told apart."""
    rest = [b for b in branches if types.type_name(b) != "null"]
    if not rest:
        return None
    names = {types.type_name(b) for b in rest}
    if len(rest) == 1:
        inner = _converter(rest[0], types, records)
        if not isinstance(types.deref(rest[0]), dict) or "name" not in types.deref(rest[0]):
            return inner

        def single(value: Any) -> Any:
            if isinstance(value, tuple):
                value = value[1]
            return value if inner is None or value is None else inner(value)

        return single
    if all(isinstance(b, str) for b in rest) and names in ({"int", "long"},
                                                            {"float", "double"}):
        return None
    members = [(f"member{i}", types.deref(b), _converter(b, types, records))
               for i, b in enumerate(rest)]

    def union(value: Any) -> Any:
        if value is None:
            return None
        out: dict[str, Any] = {name: None for name, _, _ in members}
        named = value[0] if isinstance(value, tuple) else None
        if named is not None:
            value = value[1]
        for name, branch, convert in members:
            if _matches(branch, value, named):
                out[name] = value if convert is None else convert(value)
                return out
        raise ValueError(f"no branch of the Avro union matches the value {value!r}")

    return union


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,), "int": (int,), "long": (int,), "float": (float, int),
    "double": (float, int), "string": (str,), "bytes": (bytes,), "array": (list,),
    "map": (dict,),
}
_LOGICAL_TYPES: dict[str, tuple[type, ...]] = {
    "date": (datetime.date,), "timestamp-millis": (datetime.datetime,),
    "timestamp-micros": (datetime.datetime,), "local-timestamp-millis": (datetime.datetime,),
    "local-timestamp-micros": (datetime.datetime,), "time-millis": (datetime.time,),
    "time-micros": (datetime.time,), "decimal": (decimal.Decimal,),
    "uuid": (uuid.UUID, str),
}


def _matches(branch: Any, value: Any, named: str | None) -> bool:
    """Whether ``value`` was written with union branch ``branch`` (``named``: the type name
    fastavro gave with the value, for named types)."""
    if isinstance(branch, dict) and isinstance(branch.get("name"), str):
        return branch["name"] == named
    if named is not None:
        return False
    if isinstance(branch, dict) and branch.get("logicalType") in _LOGICAL_TYPES:
        wanted = _LOGICAL_TYPES[branch["logicalType"]]
        return isinstance(value, wanted) and not (
            wanted == (datetime.date,) and isinstance(value, datetime.datetime))
    name = branch if isinstance(branch, str) else str(branch.get("type"))
    if isinstance(value, bool) and name != "boolean":
        return False
    return isinstance(value, _PYTHON_TYPES.get(name, ()))
