"""tierlog.spark.session's logging set-up: the JVM gets tierlog's log4j2.properties (no Spark
started here; tests/tools/test_platform_demo.py checks a real run's log)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

# The module (tierlog.spark's ``session`` attribute is the function).
spark_session = importlib.import_module("tierlog.spark.session")

OPTIONS = spark_session.DRIVER_JAVA_OPTIONS


@pytest.fixture(autouse=True)
def no_spark_conf_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)


def test_the_driver_gets_the_packaged_configuration_after_other_options() -> None:
    settings: dict[str, object] = {OPTIONS: "-Xss4m"}
    spark_session.quiet_logging(settings)
    uri = spark_session.LOG4J2_PROPERTIES.as_uri()
    assert settings[OPTIONS] == f"-Dlog4j2.configurationFile={uri} -Xss4m"
    empty: dict[str, object] = {}
    spark_session.quiet_logging(empty)
    assert empty == {OPTIONS: f"-Dlog4j2.configurationFile={uri}"}


def test_a_configuration_the_user_chose_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = {OPTIONS: "-Dlog4j2.configurationFile=/etc/mine.properties"}
    spark_session.quiet_logging(own)
    assert own == {OPTIONS: "-Dlog4j2.configurationFile=/etc/mine.properties"}
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    settings: dict[str, object] = {}
    spark_session.quiet_logging(settings)
    assert settings == {}


def test_the_configuration_silences_what_a_normal_run_prints_and_nothing_else() -> None:
    text = spark_session.LOG4J2_PROPERTIES.read_text()
    entries = dict(
        line.split(" = ", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    assert entries["rootLogger.level"] == "warn"
    levels = {
        entries[key]: entries[key.replace(".name", ".level")]
        for key in entries
        if key.startswith("logger.") and key.endswith(".name")
        and key.replace(".name", ".level") in entries
    }  # fmt: skip
    assert levels["org.apache.hadoop.util.NativeCodeLoader"] == "error"
    assert levels["org.apache.spark.util.SparkStringUtils"] == "error"
    assert levels["org.apache.spark.util.ShutdownHookManager"] == "off"
    # The heartbeat race is dropped by its message; the logger keeps its level (root's).
    assert entries["logger.heartbeat.name"] == "org.apache.spark.util.Utils"
    assert "logger.heartbeat.level" not in entries
    assert entries["logger.heartbeat.filter.race.onMatch"] == "DENY"
    assert entries["logger.javautils.name"] == "org.apache.spark.network.util.JavaUtils"
    assert "logger.javautils.level" not in entries
    assert entries["logger.javautils.filter.rmrf.onMatch"] == "DENY"


def test_the_jvms_incubator_warning_is_dropped_the_rest_kept_and_the_jvm_reaped(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Issue 25 item 3: every report carried a red stderr box with this line. And a JVM
    that exits is reaped: ipykernel's shutdown waited 2.6 s for the zombie."""
    import subprocess
    import sys

    from tierlog.spark.session import _copy_stderr_and_reap

    # A stand-in JVM: it writes the two lines on stderr and exits; nothing else waits for it.
    jvm = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; sys.stderr.write('WARNING: Using incubator modules: "
            "jdk.incubator.vector\\n26/11/27 23:19:10 WARN Executor: something a user can "
            "act on\\n'); sys.exit(3)",
        ],
        stderr=subprocess.PIPE,
    )
    _copy_stderr_and_reap(jvm)
    assert jvm.returncode == 3  # waited for: no zombie left
    err = capfd.readouterr().err
    assert "incubator" not in err
    assert err == "26/11/27 23:19:10 WARN Executor: something a user can act on\n"


@pytest.mark.parametrize(
    ("master", "partitions"),
    [("local", "1"), ("local[2]", "2"), ("local[3, 4]", "3"), ("local[*]", None)],
)
def test_a_local_master_rebuilds_delta_state_in_as_many_tasks_as_it_has_cores(
    master: str, partitions: str | None
) -> None:
    import os

    settings = spark_session.local_delta_settings(master)
    expected = partitions or str(os.cpu_count())
    assert settings == {"spark.databricks.delta.snapshotPartitions": expected}


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "yarn", "local[x]", "local[0]"])
def test_any_other_master_keeps_deltas_own_setting(master: str) -> None:
    assert spark_session.local_delta_settings(master) == {}


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local-cluster[2,1,1024]"])
def test_a_local_master_listens_on_loopback(master: str) -> None:
    assert spark_session.driver_address(master) == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    }


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "yarn", "k8s://https://k:6443"])
def test_a_cluster_master_leaves_the_drivers_address_to_spark(master: str) -> None:
    """Executors on other hosts connect back to the driver: 127.0.0.1 would send them to
    themselves (issue 24: Spark beyond one host)."""
    assert spark_session.driver_address(master) == {}
