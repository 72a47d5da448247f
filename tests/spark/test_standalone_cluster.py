"""The tierlog source, sink and ingest pipeline on a Spark standalone cluster: one master
and two workers started from pyspark's own jars (``spark-class``) on 127.0.0.1, the
driver in a process of its own (``session(master="spark://...")``), so every split is
read and every row written by an executor JVM on a worker, not by the driver's process:
both tiers, read_committed (no aborted record), the sink, and ``pipelines.ingest``.

The cluster is on one host: the workers run this venv's Python, as they would with
tierlog installed on each host (README: Spark beyond one host).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.cli import closed_port
from tests.tiered_data import TieredTopic, running_tiered_topic, topic_rows

REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
WORKERS = 2

# The driver: reads the topic across both tiers, writes it back through the sink, and
# says which executors did the work.
DRIVER = """
import json, sys
from tierlog.spark import session
master, bootstrap, topic, remote, out_topic, txn_topic = sys.argv[1:7]
spark = session("standalone-test", master=master, delta=False,
                conf={"spark.ui.enabled": "false", "spark.cores.max": "2",
                      "spark.executor.memory": "512m"})
df = (spark.read.format("tierlog").option("kafka.bootstrap.servers", bootstrap)
      .option("subscribe", topic).option("remote.log.storage.url", remote)
      .option("tierlog.includeTier", "true").load())
rows = df.selectExpr("partition", "offset", "tier", "hex(value) as value").collect()
# Batches below the test broker's 6,000-byte segments.
(df.selectExpr("key", "value").write.format("tierlog")
   .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
   .option("kafka.batch.size", "4000").mode("append").save())
committed = (spark.read.format("tierlog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", txn_topic).option("kafka.isolation.level", "read_committed")
             .load().selectExpr("cast(value as string) as v").collect())
executors = [e.host() for e in spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()]
print(json.dumps({
    "rows": [[r["partition"], r["offset"], r["tier"], r["value"]] for r in rows],
    "committed": sorted(r["v"] for r in committed),
    "executors": len(executors) - 1,  # the driver is listed too
}))
spark.stop()
"""


# A driver whose executors run ``python`` (argv[4]): one with tierlog's libraries but not
# tierlog, so they have it only if the session ships it (argv[5]).
BARE_EXECUTORS = """
import os, sys
from tierlog.spark import session
master, bootstrap, topic, python, ship = sys.argv[1:6]
os.environ["PYSPARK_PYTHON"] = python  # the Python workers', the driver's planner's too
spark = session("bare-executors", master=master, delta=False, ship_tierlog=ship == "ship",
                conf={"spark.ui.enabled": "false", "spark.cores.max": "2",
                      "spark.executor.memory": "512m"})
df = (spark.read.format("tierlog").option("kafka.bootstrap.servers", bootstrap)
      .option("subscribe", topic).load())
print(df.count())
spark.stop()
"""


def spark_class(*args: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.setdefault("SPARK_NO_DAEMONIZE", "1")
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
            state: dict[str, Any] = json.loads(answer.read())
    except OSError:
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    where = tmp_path_factory.mktemp("standalone")
    port, ui_port = closed_port(), closed_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [
        spark_class(
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)),
            log=where / "master.log",
        )
    ]
    try:
        for n in range(WORKERS):
            procs.append(
                spark_class(
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g"),
                    *("--webui-port", str(closed_port()), "--work-dir", str(where / f"w{n}")),
                    log=where / f"worker-{n}.log",
                )
            )
        deadline = time.monotonic() + 120
        while alive_workers(ui_port) < WORKERS:
            exited = [p.args for p in procs if p.poll() is not None]
            assert not exited, f"exited: {exited}"
            assert time.monotonic() < deadline, "the workers did not register within 120 s"
            time.sleep(1)
        yield url
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredTopic]:
    with running_tiered_topic(tmp_path_factory.mktemp("cluster") / "data", count=2000) as topic:
        yield topic


def run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.timeout(600)
def test_executors_on_two_workers_read_both_tiers_and_write_back(
    master: str, tiered: TieredTopic
) -> None:
    out_topic, txn_topic = f"{tiered.topic}-copy", f"{tiered.topic}-txn"
    committed = transactions(tiered.bootstrap, txn_topic)
    done = run(
        [sys.executable, "-c", DRIVER, master, tiered.bootstrap, tiered.topic,
         tiered.remote_url, out_topic, txn_topic],
        timeout_s=420,
    )  # fmt: skip
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["executors"] == WORKERS
    expected = topic_rows(tiered)
    got = sorted((p, o, bytes.fromhex(v)) for p, o, _, v in answer["rows"])
    assert got == [(p, o, value) for p, o, _, value, _ in expected]
    tiers = {tier for _, _, tier, _ in answer["rows"]}
    assert tiers == {"remote", "local"}
    partitions = AdminClient({"bootstrap.servers": tiered.bootstrap}).list_topics(out_topic)
    count = len(partitions.topics[out_topic].partitions)  # auto-created by the sink's writes
    copied = TieredTopic(tiered.broker, out_topic, count, len(expected))
    assert sorted(r[3] for r in topic_rows(copied)) == sorted(r[3] for r in expected)
    assert answer["committed"] == committed  # read_committed: no aborted record


def transactions(bootstrap: str, topic: str) -> list[str]:
    """A committed, an aborted and a committed transaction into ``topic``; the values a
    read_committed reader must see, sorted."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(30)
    kept = []
    for name, count, commit in (("a", 30, True), ("b", 20, False), ("c", 10, True)):
        producer.begin_transaction()
        for n in range(count):
            producer.produce(topic, f"{name}{n}".encode())
        if commit:
            producer.commit_transaction(30)
            kept += [f"{name}{n}" for n in range(count)]
        else:
            producer.abort_transaction(30)
    return sorted(kept)


@pytest.mark.timeout(600)
def test_the_ingest_pipeline_runs_on_the_cluster(
    master: str, tiered: TieredTopic, tmp_path: Path
) -> None:
    table = tmp_path / "bronze"
    done = run(
        [sys.executable, "-m", "pipelines.ingest", "--config", str(REPO / "configs/ingest.toml"),
         "--set", f"bootstrap_servers={tiered.bootstrap}", "--set", f"topic={tiered.topic}",
         "--set", f"table_path={table}", "--set", f"remote_url={tiered.remote_url}",
         "--set", f"spark.master={master}"],
        timeout_s=420,
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows_written"] == tiered.produced, result
    assert result["from_remote"] > 0 and result["from_local"] > 0, result


def python_without_tierlog(where: Path) -> Path:
    """A virtualenv whose Python finds this venv's libraries (a path line in a ``.pth``)
    but not tierlog: its editable install is itself a ``.pth`` import hook, which only a
    site directory's processing runs, not a path line."""
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
         str(where)],
        check=True, timeout=120,
    )  # fmt: skip
    ours = next(p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_dir())
    theirs = next((where / "lib").glob("python3*/site-packages"))
    (theirs / "libraries.pth").write_text(f"{ours}\n")
    python = where / "bin" / "python"
    probe = subprocess.run(
        [str(python), "-c", "import pyarrow, confluent_kafka, pyspark; import tierlog"],
        capture_output=True, text=True, cwd=where, timeout=60, check=False,
    )  # fmt: skip
    assert "No module named 'tierlog'" in probe.stderr, probe.stderr
    return python


@pytest.mark.timeout(600)
def test_executors_without_tierlog_get_it_from_the_session(
    master: str, tiered: TieredTopic, tmp_path: Path
) -> None:
    python = python_without_tierlog(tmp_path / "bare")
    args = [sys.executable, "-c", BARE_EXECUTORS, master, tiered.bootstrap, tiered.topic]
    done = run([*args, str(python), "ship"], timeout_s=300)
    assert int(done.stdout.strip().splitlines()[-1]) == tiered.produced
    # Without the zip, the same executors cannot run the source's tasks.
    refused = subprocess.run(
        [*args, str(python), "no"], cwd=REPO, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "No module named 'tierlog'" in refused.stdout + refused.stderr
