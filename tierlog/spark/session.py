"""``session()``: a SparkSession ready for tierlog — Delta configured, its jars resolved,
the executors' Python set, the ``tierlog`` data source registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# Spark's log4j2 configuration without the warnings and traces a normal run prints that
# nobody can act on (the file says which and why).
LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def session(
    app_name: str = "tierlog",
    *,
    master: str | None = None,
    delta: bool = True,
    kafka_source: bool = False,
    extra_jars: Iterable[str | Path] = (),
    conf: Mapping[str, Any] | None = None,
    log_level: str = "WARN",
) -> Any:
    """The active SparkSession, or a new one configured for tierlog.

    Args:
        app_name: Spark's application name.
        master: e.g. ``local[2]``; default ``SPARK_MASTER`` or ``local[*]``.
        delta: add Delta Lake (jars, SQL extension, catalog).
        kafka_source: add Spark's own Kafka source (``format("kafka")``) too.
        extra_jars: more jar paths for ``spark.jars``.
        conf: more Spark settings; they win over the defaults here.
        log_level: the JVM's log level (Spark's default INFO floods notebooks); the
            JVM logs through ``log4j2.properties`` beside this module (``quiet_logging``).

    Raises:
        ImportError: pyspark is not installed (the message says how to install it).
        JarError: a jar is missing and mvn could not fetch it.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # style rule 7: optional heavy imports carry a hint
        raise ImportError("tierlog.spark needs pyspark: pip install 'tierlog[spark]'") from exc

    from tierlog.spark.datasource import TierlogDataSource

    # Imported here, not at the top: `python -m tierlog.spark.jars` (run by make) imports
    # this package first, and runpy warns when the module it runs is already imported.
    from tierlog.spark.jars import DELTA, KAFKA_SOURCE, resolve

    # Executors are Python workers the JVM starts: they must run this interpreter (its
    # venv has tierlog), whatever `python3` on PATH is.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("SPARK_MASTER", "local[*]")
    if master.startswith("local"):
        # Local mode talks to itself only: keep Spark off the machine's other interfaces.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = [str(p) for p in extra_jars]
    if delta:
        jars += [str(p) for p in resolve(DELTA)]
    if kafka_source:
        jars += [str(p) for p in resolve(KAFKA_SOURCE)]
    settings: dict[str, Any] = {
        # Loopback only unless the caller says otherwise (local mode needs nothing else).
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Small defaults for one machine; a cluster sets its own.
        "spark.sql.shuffle.partitions": "8",
    }
    if jars:
        settings["spark.jars"] = ",".join(jars)
    if delta:
        settings["spark.sql.extensions"] = "io.delta.sql.DeltaSparkSessionExtension"
        settings["spark.sql.catalog.spark_catalog"] = (
            "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    settings.update(conf or {})
    quiet_logging(settings)
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    spark.dataSource.register(TierlogDataSource)
    return spark


def quiet_logging(settings: dict[str, Any]) -> None:
    """Point the driver JVM at ``LOG4J2_PROPERTIES``: ``-Dlog4j2.configurationFile``
    added to ``settings``' ``spark.driver.extraJavaOptions`` (as a URI: a path with spaces
    stays one option), unless those options name a configuration already.

    pyspark passes the session's settings to the JVM it launches, so this takes effect
    only when ``session()`` starts the JVM; in local mode the executors are that JVM.
    Nothing changes when ``$SPARK_CONF_DIR`` holds a ``log4j2.properties``: the user's
    configuration comes first.
    """
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if conf_dir and (Path(conf_dir) / "log4j2.properties").is_file():
        return
    option = f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}"
    given = str(settings.get(DRIVER_JAVA_OPTIONS, "")).strip()
    if "-Dlog4j2.configurationFile=" in given:
        return
    settings[DRIVER_JAVA_OPTIONS] = f"{option} {given}".strip()
