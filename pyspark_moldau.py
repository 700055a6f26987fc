"""Lets Spark find the ``moldau`` data source by itself.

PySpark registers the ``DefaultSource`` of every importable top-level module whose name
starts with ``pyspark_`` when a session first uses a Python data source, so an installed
moldau makes ``spark.read.format("moldau")`` work without a registration call.
"""

from moldau.spark import MoldauDataSource as DefaultSource

__all__ = ["DefaultSource"]
