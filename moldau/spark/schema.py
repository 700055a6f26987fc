"""The source's schema (Spark's Kafka source schema) and records-to-Arrow conversion.

Columns, as Spark's Kafka source: ``key`` binary, ``value`` binary, ``topic`` string,
``partition`` int, ``offset`` long, ``timestamp`` timestamp, ``timestampType`` int, and with
``includeHeaders=true`` ``headers`` array<struct<key: string, value: binary>> (null when a
record has no headers). Spark checks that yielded Arrow batches have exactly the Arrow form
of that schema, so :data:`arrow_schema` is the one place where it is spelled out (a unit test
compares it with pyspark's own conversion).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from moldau.client.decode import BatchColumns

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))

_BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]

TIMESTAMP_ARROW = pa.timestamp("us", tz="UTC")
HEADERS_ARROW = pa.list_(pa.field("element", pa.struct([("key", pa.string()),
                                                        ("value", pa.binary())])))
_ARROW_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_ARROW),
    pa.field("timestampType", pa.int32()),
]
_ARROW_SCHEMAS = {
    False: pa.schema(_ARROW_FIELDS),
    True: pa.schema([*_ARROW_FIELDS, pa.field("headers", HEADERS_ARROW)]),
}


def spark_schema(include_headers: bool) -> StructType:
    """The DataFrame schema of a read (``headers`` only with includeHeaders)."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the batches a read yields."""
    return _ARROW_SCHEMAS[include_headers]


def to_record_batch(topic: str, partition: int, parts: Sequence[BatchColumns],
                    include_headers: bool) -> pa.RecordBatch:
    """Records of one partition (one or more decoded batches) as one Arrow record batch."""
    if len(parts) == 1:
        only = parts[0]
        keys, values = only.keys, only.values
        offsets, stamps = only.offsets, only.timestamps
    else:
        keys, values, offsets, stamps = [], [], [], []
        for cols in parts:
            keys += cols.keys
            values += cols.values
            offsets += cols.offsets
            stamps += cols.timestamps
    n = len(offsets)
    types = {c.timestamp_type for c in parts}
    if len(types) == 1:
        ttype = pa.repeat(pa.scalar(types.pop(), pa.int32()), n)
    else:
        ttype = pa.array([c.timestamp_type for c in parts for _ in range(len(c))], pa.int32())
    millis = pa.array(stamps, pa.int64())
    micros = pc.multiply(millis, pa.scalar(1000, pa.int64())).view(TIMESTAMP_ARROW)
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        micros,
        ttype,
    ]
    if include_headers:
        columns.append(_headers(parts, n))
    return pa.RecordBatch.from_arrays(columns, schema=_ARROW_SCHEMAS[include_headers])


def _headers(parts: Sequence[BatchColumns], n: int) -> pa.Array:
    if all(c.headers is None for c in parts):
        return pa.nulls(n, HEADERS_ARROW)
    rows: list[list[tuple[str, bytes | None]] | None] = []
    for cols in parts:
        if cols.headers is None:
            rows.extend([None] * len(cols))
        else:
            rows.extend(h or None for h in cols.headers)
    return pa.array(rows, HEADERS_ARROW)
