"""Moldau's PySpark data source: ``format("moldau")`` with Spark's Kafka source options.

Reads (batch and streaming) and writes (batch and streaming) any Kafka-compatible cluster
through the moldau client, including across NAT with ``kafka.broker.address.map``. Jobs
written for Spark's Kafka connector port by changing ``format("kafka")`` to
``format("moldau")`` (the name "kafka" belongs to Spark's own JVM connector). See
docs/spark.md.

Installed with ``pip install 'moldau[spark]'``, the source registers itself with every
SparkSession (Spark looks for the top-level ``pyspark_moldau`` module). Otherwise, or to be
explicit, call :func:`register` once per session.
"""

from __future__ import annotations

from typing import Any

from .options import OptionError
from .source import NAME, MoldauDataSource

__all__ = ["NAME", "MoldauDataSource", "OptionError", "register"]


def register(spark: Any) -> None:
    """Make ``format("moldau")`` available in ``spark`` (a SparkSession).

    Also makes ``spark`` the JVM's active session for the calling thread: Spark looks up
    Python data sources of a ``writeStream`` in the active session, and a Python thread
    other than the one that built the session has none (DATA_SOURCE_NOT_FOUND). Call it in
    the thread that starts a streaming query.
    """
    spark.dataSource.register(MoldauDataSource)
    jvm = getattr(spark, "_jvm", None)
    if jvm is not None:  # classic sessions; Spark Connect has no JVM on this side
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
