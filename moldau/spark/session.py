"""A SparkSession set up for moldau jobs: loopback-only, quiet, workers on this Python.

:func:`build_session` is what ``moldau pipeline``, the tests and the benchmark use. It

* runs Python workers with this interpreter (``PYSPARK_PYTHON``), so they import moldau;
* keeps Spark's own sockets on 127.0.0.1 (``SPARK_LOCAL_IP``, ``spark.driver.host`` and
  ``spark.driver.bindAddress``) unless the caller says otherwise — a cluster master on
  another machine needs the driver reachable, so pass ``driver_host`` then;
* logs warnings only (``log4j2.properties`` next to this module), no progress bars, no UI;
* registers the ``moldau`` data source (harmless when Spark found ``pyspark_moldau`` itself).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LOG4J2 = Path(__file__).with_name("log4j2.properties")
_ROOT = Path(__file__).resolve().parents[2]


def spark_home() -> Path:
    """The pyspark package folder: SPARK_HOME of a pip installation (bin/, jars/, sbin/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def prepare_environment(local_ip: str | None = "127.0.0.1") -> None:
    """Environment for Spark's JVM and Python workers (before the first session starts)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if local_ip:
        os.environ.setdefault("SPARK_LOCAL_IP", local_ip)
    # A source checkout (pip install -e) is not on sys.path as a directory, so Spark's scan
    # for pyspark_* modules would miss pyspark_moldau; put the checkout on PYTHONPATH.
    if (_ROOT / "pyspark_moldau.py").exists():
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if str(_ROOT) not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *paths])


def build_session(master: str = "local[*]", app_name: str = "moldau",
                  conf: Mapping[str, Any] | None = None, *,
                  driver_host: str = "127.0.0.1") -> Any:
    """Get or create a SparkSession for moldau jobs (see the module docstring)."""
    prepare_environment(driver_host if driver_host in ("127.0.0.1", "localhost") else None)
    from pyspark.sql import SparkSession

    java_opts = f"-Dlog4j2.configurationFile=file:{LOG4J2}"
    settings: dict[str, Any] = {
        "spark.driver.host": driver_host,
        "spark.driver.bindAddress": driver_host,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.pyspark.python": sys.executable,
        "spark.sql.session.timeZone": "UTC",
        # Local jobs move little data; 200 shuffle tasks per micro-batch would dominate.
        "spark.sql.shuffle.partitions": "4",
        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from . import register

    register(spark)
    return spark
