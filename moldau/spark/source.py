"""The ``moldau`` data source: Spark's Kafka source and sink, for any Kafka-compatible cluster.

Spark builds a :class:`MoldauDataSource` from the options of every ``format("moldau")``
read or write and asks it for a reader or writer; options are checked here, on the driver,
so a wrong option fails when the query is defined rather than in a task.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .batch_reader import MoldauBatchReader
from .decode_options import DecodingOptions
from .options import (
    OptionError,
    SourceOptions,
    decoding_options,
    parse_sink_options,
    parse_source_options,
)
from .registry_decode import decoded_schema, resolve
from .schema import spark_schema
from .stream_reader import MoldauStreamReader
from .writer import (
    MoldauBatchWriter,
    MoldauStreamWriter,
    check_sink_schema,
    check_sink_topic,
)

NAME = "moldau"


class MoldauDataSource(DataSource):  # type: ignore[misc]
    """``format("moldau")``: options and schema as Spark's Kafka source (docs/spark.md)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        include = str(self.options.get("includeheaders", "false")).strip().lower() == "true"
        base = spark_schema(include)
        decoding = self._decoding()
        return decoded_schema(base, decoding) if decoding.active else base

    def _decoding(self) -> DecodingOptions:
        """The decoding options with reader schemas fixed, once: Spark pickles this object
        after schema() and plans the read with the copy, so reads use the schemas the
        DataFrame's columns were typed with."""
        found: DecodingOptions | None = getattr(self, "_resolved_decoding", None)
        if found is None:
            found = decoding_options(self.options)
            if found.active:
                found = resolve(found)
            self._resolved_decoding = found
        return found

    def _source_options(self, streaming: bool) -> SourceOptions:
        options = parse_source_options(self.options, streaming=streaming)
        return replace(options, decoding=self._decoding())

    def reader(self, schema: StructType) -> DataSourceReader:
        return MoldauBatchReader(self._source_options(streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MoldauStreamReader(self._source_options(streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("Save mode Overwrite is not allowed for the moldau sink (as for "
                              "Spark's Kafka sink): a topic cannot be truncated by a write. "
                              "Use mode('append').")
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options)
        check_sink_topic(options)
        return MoldauBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Complete output mode asks for overwrite; like Spark's Kafka sink, rows are appended.
        options = parse_sink_options(self.options, streaming=True)
        check_sink_schema(schema, options)
        check_sink_topic(options)
        return MoldauStreamWriter(options)
