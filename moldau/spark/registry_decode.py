"""Decoding registry-framed Avro keys and values into columns (``value.format=avro``).

Driver: :func:`resolve` fixes each decoded column's reader schema when the query is defined
(the ``avroSchema`` option, or the subject's latest version then), and :func:`decoded_schema`
turns the source's schema into one whose ``key``/``value`` columns have the reader schema's
Spark type (:mod:`.avro_types`). As with Databricks' ``from_avro``, a schema registered later
does not change a running query's columns: records written with it are read through Avro's
schema resolution into the reader schema (new fields dropped, missing ones defaulted).

Executors: :func:`decode_batch` replaces the binary columns of each Arrow batch. Each record's
writer schema comes from the registry by the id in its frame (cached per process, so a schema
is fetched once per Python worker). A record that is not registry-framed Avro, whose schema
id is unknown, or that cannot be read as the reader schema fails the task
(``mode=FAILFAST``, the default) or becomes null (``PERMISSIVE``); a registry that cannot be
reached always fails it (nulls would hide data).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import DataType, StructField, StructType

from moldau.registry.client import SchemaRegistryClient, SchemaRegistryError
from moldau.registry.serde import AvroDeserializer, SerializationError
from moldau.registry.serde.avro import decode_avro

from .avro_types import Converter, UnsupportedAvroSchema, converter, to_spark_type
from .decode_options import AvroDecoding, DecodingOptions

# Registry answers that mean "this record's schema does not exist" (a malformed record), not
# "the registry is unavailable".
_NOT_FOUND = frozenset({40401, 40402, 40403})

_lock = threading.Lock()
_clients: dict[str, SchemaRegistryClient] = {}
_decoders: dict[str, ColumnsDecoder] = {}


class DecodeError(RuntimeError):
    """A record could not be decoded with mode FAILFAST, or the registry failed."""


def registry_client(options: DecodingOptions) -> SchemaRegistryClient:
    """The process's registry client for these settings (sync, on the client loop)."""
    key = repr(sorted(options.registry_config.items()))
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = SchemaRegistryClient(dict(options.registry_config))
        return client


# --- driver -------------------------------------------------------------------------------


def resolve(options: DecodingOptions) -> DecodingOptions:
    """Each decoded column with its reader schema fixed (latest version of its subject)."""
    for column in options.columns():
        if column.reader is not None:
            continue
        assert column.subject is not None
        try:
            latest = registry_client(options).get_latest_version(column.subject)
        except SchemaRegistryError as exc:
            raise DecodeError(f"{column.column}.format=avro: cannot get the latest schema of "
                              f"subject {column.subject!r} from the schema registry: "
                              f"{exc}") from exc
        if latest.schema.schema_type != "AVRO":
            raise DecodeError(f"subject {column.subject!r} holds a {latest.schema.schema_type} "
                              f"schema, not Avro ({column.column}.format=avro)")
        options = options.with_reader(column.column, latest.schema)
    return options


def _reader_type(options: DecodingOptions, column: AvroDecoding) -> DataType:
    parsed = ColumnDecoder(options, column).reader
    try:
        return to_spark_type(parsed)[0]
    except UnsupportedAvroSchema as exc:
        raise DecodeError(f"{column.column}.format=avro: {exc}") from exc


def decoded_schema(base: StructType, options: DecodingOptions) -> StructType:
    """``base`` (the source's schema) with decoded columns of the reader schemas' types."""
    types = {c.column: _reader_type(options, c) for c in options.columns()}
    return StructType([StructField(f.name, types.get(f.name, f.dataType), f.nullable)
                       for f in base.fields])


# --- executors ------------------------------------------------------------------------------


class ColumnDecoder:
    """Decodes one column: writer schemas by id (from the registry), resolved to the reader."""

    def __init__(self, options: DecodingOptions, column: AvroDecoding) -> None:
        assert column.reader is not None, "resolve() fixes the reader schema on the driver"
        self.column = column.column
        self.permissive = options.permissive
        self.deserializer = AvroDeserializer(registry_client(options), column.reader,
                                             is_key=column.column == "key")
        self._same: dict[int, bool] = {}  # writer schema id -> written with the reader schema
        self.reader = self.deserializer.reader_schema()
        self.spark_type, _ = to_spark_type(self.reader)
        self.arrow_type = to_arrow_type(self.spark_type, timezone="UTC")
        self.convert: Converter = converter(self.reader)

    def _decode(self, topic: str, data: bytes) -> Any:
        fr, writer, reader = self.deserializer.schemas(topic, data)
        same = self._same.get(fr.schema_id)
        if same is None:
            same = self._same[fr.schema_id] = writer == reader
        if same:
            reader = None  # written with the reader schema: no resolution needed
        value = decode_avro(writer, reader, fr.payload, return_named_type=True)
        return value if self.convert is None else self.convert(value)

    def decode(self, topic: str, values: Sequence[bytes | None]) -> pa.Array:
        out: list[Any] = []
        for data in values:
            if data is None:
                out.append(None)
                continue
            try:
                out.append(self._decode(topic, data))
            except SchemaRegistryError as exc:
                if exc.error_code not in _NOT_FOUND:
                    raise DecodeError(f"schema registry failed while decoding "
                                      f"{self.column}: {exc}") from exc
                out.append(self._malformed(exc))
            except (SerializationError, ValueError, TypeError) as exc:
                out.append(self._malformed(exc))
        try:
            return pa.array(out, self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise DecodeError(f"decoded {self.column} values do not fit the column type "
                              f"{self.spark_type.simpleString()}: {exc}") from exc

    def _malformed(self, exc: Exception) -> None:
        if self.permissive:
            return None
        raise DecodeError(
            f"Malformed records are detected in record parsing ({self.column}): {exc}. "
            "Current parse Mode: FAILFAST. To process malformed records as null result, try "
            "setting the option 'mode' as 'PERMISSIVE'.") from exc


@dataclass
class ColumnsDecoder:
    """The decoders of a read's columns."""

    columns: dict[str, ColumnDecoder]

    def apply(self, topic: str, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = batch.schema.names
        arrays = list(batch.columns)
        fields = list(batch.schema)
        for name, decoder in self.columns.items():
            index = names.index(name)
            arrays[index] = decoder.decode(topic, batch.column(index).to_pylist())
            fields[index] = pa.field(name, decoder.arrow_type)
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def decoder_for(options: DecodingOptions) -> ColumnsDecoder:
    """The process's decoders for these options (writer schemas cached across tasks)."""
    key = options.cache_key()
    with _lock:
        found = _decoders.get(key)
    if found is None:
        found = ColumnsDecoder({c.column: ColumnDecoder(options, c) for c in options.columns()})
        with _lock:
            _decoders[key] = found
    return found


def decode_batch(topic: str, batch: pa.RecordBatch, options: DecodingOptions
                 ) -> pa.RecordBatch:
    """``batch`` (the source's Arrow batch) with its decoded columns."""
    return decoder_for(options).apply(topic, batch)
