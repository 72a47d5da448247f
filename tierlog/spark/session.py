"""``session()``: a SparkSession ready for tierlog — Delta configured, its jars resolved,
the executors' Python set, the ``tierlog`` data source registered, and the JVM's stderr
without the one line nobody can act on.

Spark 4's launcher starts the driver JVM with ``--add-modules=jdk.incubator.vector``, and the
JVM then prints ``WARNING: Using incubator modules: jdk.incubator.vector`` on stderr at
start; no JVM flag turns it off, and in a notebook it is a red stderr box on every report.
So ``session()`` starts the JVM itself (pyspark's public ``launch_gateway`` with its stderr
piped) and copies everything else it prints to this process's stderr (file descriptor 2,
where it went before), line by line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# Spark's log4j2 configuration without the warnings and traces a normal run prints that
# nobody can act on (the file says which and why).
LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
# What the JVM prints that is dropped from its stderr (module docstring).
SILENCED_JVM_LINES = (b"WARNING: Using incubator modules: jdk.incubator.vector",)


def session(
    app_name: str = "tierlog",
    *,
    master: str | None = None,
    delta: bool = True,
    kafka_source: bool = False,
    extra_jars: Iterable[str | Path] = (),
    conf: Mapping[str, Any] | None = None,
    log_level: str = "WARN",
    ship_tierlog: bool | None = None,
) -> Any:
    """The active SparkSession, or a new one configured for tierlog.

    Args:
        app_name: Spark's application name.
        master: e.g. ``local[2]`` or ``spark://host:7077``; default: the ``SPARK_MASTER``
            environment variable, else ``local[*]``. A cluster master leaves the driver's
            address to Spark (``driver_address``).
        delta: add Delta Lake (jars, SQL extension, catalog).
        kafka_source: add Spark's own Kafka source (``format("kafka")``) too.
        extra_jars: more jar paths for ``spark.jars``.
        conf: more Spark settings; they win over the defaults here.
        log_level: the JVM's log level (Spark's default INFO floods notebooks); the
            JVM logs through ``log4j2.properties`` beside this module (``quiet_logging``).
        ship_tierlog: send the executors this tierlog, zipped, through
            ``spark.submit.pyFiles`` (``tierlog.spark.shipping``); default: when the
            master is not local (a local master's executors run this Python).

    Raises:
        ImportError: pyspark is not installed (the message says how to install it).
        JarError: a jar is missing and mvn could not fetch it.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # style rule 7: optional heavy imports carry a hint
        raise ImportError("tierlog.spark needs pyspark: pip install 'tierlog[spark]'") from exc

    # Imported here, not at the top: `python -m tierlog.spark.jars` and `-m
    # tierlog.spark.class_archive` (run by make) import this package first, and runpy warns
    # when the module it runs is already imported.
    from tierlog.spark import class_archive, shipping
    from tierlog.spark.jars import DELTA, KAFKA_SOURCE, resolve

    # Executors are Python workers the JVM starts: they must run this interpreter (its
    # venv has tierlog), whatever `python3` on PATH is.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("SPARK_MASTER") or "local[*]"
    if master.startswith("local"):
        # Local mode talks to itself only: keep Spark off the machine's other interfaces.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    jars = [str(p) for p in extra_jars]
    if delta:
        jars += [str(p) for p in resolve(DELTA)]
    if kafka_source:
        jars += [str(p) for p in resolve(KAFKA_SOURCE)]
    settings: dict[str, Any] = {
        **driver_address(master),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Small defaults for one machine; a cluster sets its own.
        "spark.sql.shuffle.partitions": "8",
        # The tierlog source's batch reads prune by the query's filters on partition,
        # offset and timestamp (tierlog.spark.pushdown); Spark asks for it by this switch.
        PUSHDOWN_CONF: "true",
    }
    if jars:
        settings["spark.jars"] = ",".join(jars)
    if delta:
        settings["spark.sql.extensions"] = "io.delta.sql.DeltaSparkSessionExtension"
        settings["spark.sql.catalog.spark_catalog"] = (
            "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        settings.update(local_delta_settings(master))
    settings.update(conf or {})
    if ship_tierlog if ship_tierlog is not None else not master.startswith("local"):
        settings = shipping.with_package(settings)
    quiet_logging(settings)
    class_archive.add_java_options(settings)  # a faster start where `make` built one
    _start_jvm(app_name, master, settings)
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the ``tierlog`` data source with ``spark`` (``session()`` does): with
    filter pushdown where the session allows it (``spark.sql.python.filterPushdown.enabled``,
    on in ``session()``), else without, since Spark refuses a reader that takes filters in
    a session that has it off. Register again after changing that setting."""
    from tierlog.spark.datasource import TierlogDataSource, TierlogDataSourceWithFilterPushdown

    enabled = str(spark.conf.get(PUSHDOWN_CONF, "false")).strip().lower() == "true"
    spark.dataSource.register(TierlogDataSourceWithFilterPushdown if enabled else TierlogDataSource)


def driver_address(master: str) -> dict[str, str]:
    """Where the driver listens: loopback for a local master (it talks to itself only);
    for a cluster master nothing, so Spark's own rules apply (``SPARK_LOCAL_IP``,
    ``spark.driver.host``, else the host's name), and executors on other hosts can
    connect back. Pinning 127.0.0.1 there made every remote executor fail to reach it."""
    if not master.startswith("local"):  # local, local[N], local-cluster[...]
        return {}
    return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def local_delta_settings(master: str) -> dict[str, str]:
    """Delta's settings for a local master: its table-state reconstruction in as many
    partitions as the master has cores, not Delta's cluster-sized 50.

    Every read of a Delta table whose state is not cached rebuilds it from the log in
    ``spark.databricks.delta.snapshotPartitions`` tasks, whatever the table's size. On a
    loaded 2-core machine a read of the demo's 100,000-row table took 54.8 s with 50 tasks
    against 11.9 s with 2, by the median (bench/spark_small_data.py, BENCHMARKS.md); the
    ingest notebook rebuilt a table's state six times."""
    cores = local_cores(master)
    if cores is None:
        return {}
    return {"spark.databricks.delta.snapshotPartitions": str(cores)}


def local_cores(master: str) -> int | None:
    """The cores a ``local``, ``local[N]``, ``local[*]`` or ``local[N,F]`` master uses;
    ``None`` for any other master (a cluster sizes itself)."""
    if master == "local":
        return 1
    if not (master.startswith("local[") and master.endswith("]")):
        return None
    threads = master[len("local[") : -1].split(",", 1)[0].strip()
    if threads == "*":
        return os.cpu_count() or 1
    return int(threads) if threads.isdigit() and int(threads) > 0 else None


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


def _start_jvm(app_name: str, master: str, settings: dict[str, Any]) -> None:
    """Start the driver JVM and a SparkContext on it with the JVM's stderr filtered
    (module docstring), unless this process has a SparkContext already (then the builder
    reuses it, as ``getOrCreate`` always did)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    # pyspark has no public "is a context running" check; getOrCreate reads the same field.
    if SparkContext._active_spark_context is not None:
        return
    conf = SparkConf().setAppName(app_name).setMaster(master)
    for key, value in settings.items():
        conf.set(key, str(value))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        threading.Thread(
            target=_copy_stderr_and_reap, args=(proc,), name="spark-jvm-stderr", daemon=True
        ).start()
    SparkContext(conf=conf, gateway=gateway)


def _copy_stderr_and_reap(proc: subprocess.Popen[bytes]) -> None:
    """The JVM's stderr to file descriptor 2, less ``SILENCED_JVM_LINES``; then, when the
    JVM has exited (its stderr ends), reap it.

    Nothing else waits for the JVM, so without the reap it stays a zombie child, and
    ipykernel's shutdown, which waits for the kernel's children to go, waited for it until
    the kernel manager's own deadline: 2.6 s at the end of every notebook run with Spark
    (BENCHMARKS.md, "Time to first result")."""
    assert proc.stderr is not None
    writable = True
    for line in iter(proc.stderr.readline, b""):
        if not writable or line.rstrip() in SILENCED_JVM_LINES:
            continue  # still read: a JVM writing to a full pipe would block
        try:
            os.write(2, line)
        except OSError:
            writable = False
    proc.wait()
