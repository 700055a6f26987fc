"""The ``moldau`` data source: Spark's Kafka source and sink, for any Kafka-compatible cluster.

Spark builds a :class:`MoldauDataSource` from the options of every ``format("moldau")``
read or write and asks it for a reader or writer; options are checked here, on the driver,
so a wrong option fails when the query is defined rather than in a task.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .batch_reader import MoldauBatchReader
from .options import OptionError, parse_sink_options, parse_source_options
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
        return spark_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return MoldauBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MoldauStreamReader(parse_source_options(self.options, streaming=True))

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
