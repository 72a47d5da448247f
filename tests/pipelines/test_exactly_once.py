"""pipelines.exactly_once against a real broker process, Spark local mode and real Delta:
the final table holds exactly one row per committed input record (compared as a multiset
of keys and values, not counts), a re-run adds nothing, a transform SIGKILLed in the middle
of a transaction and re-run still gives every row exactly once, and the notebook shows the
table's count equal to the input the group committed.

The source mixes what a read_committed job must tell apart: plain records of every codec,
a committed transaction, an aborted one (its records are in the log) and records that are
not activity events."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pipelines.common import latest_version
from pipelines.exactly_once import committed_offsets, encode, enrich, to_delta, transform
from tests.broker.harness import BrokerProcess
from tests.tiered_data import produce_activity

REPO = Path(__file__).resolve().parents[2]
SOURCE = "activity"
PARTITIONS = 2
EVENTS = 3000
MALFORMED = [b"not json", b'{"user":"user-x"}', b"[1,2]"]
COMMITTED_TXN = 40
# Spark jobs and Delta commits take seconds each, tens on a busy machine; a hang guard.
pytestmark = [pytest.mark.timeout(600), pytest.mark.notebooks]

Input = tuple[int, int, bytes | None, bytes | None]  # partition, offset, key, value


@dataclass
class Source:
    broker: BrokerProcess
    inputs: list[Input]  # what a read_committed reader gets from the source
    aborted: int  # records of the aborted transaction, in the log but never to be read

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def expected(self, below: dict[int, int] | None = None) -> list[tuple[bytes | None, bytes]]:
        """The table's (key, value) multiset for the inputs (those below ``below`` only)."""
        return sorted(
            (key, encode(enrich(value, SOURCE, p, offset)))
            for p, offset, key, value in self.inputs
            if below is None or offset < below.get(p, -1)
        )


def read_all(bootstrap: str, topic: str, isolation: str) -> list[Input]:
    """Every record of ``topic`` from offset 0 to its end for ``isolation``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reference",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "log_level": 4,
        }
    )
    rows: list[Input] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic} not read to its end in 60 s"
            for m in consumer.consume(500, timeout=0.5):
                error, partition, offset = m.error(), m.partition(), m.offset()
                assert partition is not None and offset is not None
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(partition)
                else:
                    rows.append((partition, offset, m.key(), m.value()))
    finally:
        consumer.close()
    return sorted(rows)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    broker = BrokerProcess(
        tmp_path_factory.mktemp("exactly_once") / "data",
        {"transaction.state.log.num.partitions": "4"},
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 4})
        # The demo's events are from 2023: kept forever, here and (copied) in the sinks.
        topic = NewTopic(SOURCE, PARTITIONS, 1, config={"retention.ms": "-1"})
        admin.create_topics([topic])[SOURCE].result(10)
        produce_activity(broker.bootstrap, SOURCE, EVENTS)
        plain = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 4})
        for n, value in enumerate(MALFORMED):
            plain.produce(SOURCE, value, b"bad", partition=n % PARTITIONS)
        assert plain.flush(10) == 0
        txn = Producer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "feeder", "log_level": 4}
        )
        txn.init_transactions(15)
        txn.begin_transaction()
        for n in range(25):
            txn.produce(SOURCE, b'{"page":"/aborted"}', b"aborted", partition=n % PARTITIONS)
        txn.flush(10)  # in the log before the abort
        txn.abort_transaction(15)
        txn.begin_transaction()
        for n in range(COMMITTED_TXN):
            value = f'{{"user":"user-t","event":"click","page":"/cart","ts":{n}}}'.encode()
            txn.produce(SOURCE, value, b"user-t", partition=n % PARTITIONS)
        txn.commit_transaction(15)
        inputs = read_all(broker.bootstrap, SOURCE, "read_committed")
        assert len(inputs) == EVENTS + len(MALFORMED) + COMMITTED_TXN
        assert not any(key == b"aborted" for _, _, key, _ in inputs)
        assert len(read_all(broker.bootstrap, SOURCE, "read_uncommitted")) == len(inputs) + 25
        yield Source(broker, inputs, 25)
    finally:
        broker.stop()


def table_pairs(spark: Any, path: Path) -> list[tuple[bytes | None, bytes]]:
    """The table's (key, value) rows, sorted, duplicates kept."""
    rows = spark.read.format("delta").load(str(path)).select("key", "value").collect()
    return sorted((None if r[0] is None else bytes(r[0]), bytes(r[1])) for r in rows)


def run_transform(source: Source, sink: str, group: str, **kwargs: Any) -> Any:
    return transform(
        bootstrap_servers=source.bootstrap,
        source_topic=SOURCE,
        sink_topic=sink,
        group_id=group,
        transaction_records=400,
        timeout_s=120,
        **kwargs,
    )


@dataclass
class FirstRun:
    path: Path
    transformed: Any
    ingested: Any


@pytest.fixture(scope="module")
def first(spark: Any, source: Source, tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    path = tmp_path_factory.mktemp("exactly_once_table") / "enriched"
    transformed = run_transform(source, "enriched", "job")
    ingested = to_delta(
        spark, bootstrap_servers=source.bootstrap, sink_topic="enriched", table_path=str(path)
    )
    return FirstRun(path, transformed, ingested)


def test_a_run_gives_exactly_the_expected_rows(spark: Any, source: Source, first: FirstRun) -> None:
    total = len(source.inputs)
    assert table_pairs(spark, first.path) == source.expected()
    result = first.transformed
    assert result.records == total and result.aborted == 0
    assert result.invalid == len(MALFORMED)
    assert result.transactions >= total // 400
    assert result.transactional_id == "job:activity:0,1"
    # The group's offsets are past every input record (and the source's markers).
    ends = {p: max(o for q, o, _, _ in source.inputs if q == p) + 1 for p in range(PARTITIONS)}
    committed = committed_offsets(source.bootstrap, "job", SOURCE)
    assert result.end_offsets == committed
    assert all(committed[p] >= ends[p] for p in ends)
    assert first.ingested.rows_written == total and first.ingested.table_version == 0


def test_a_second_run_adds_nothing(spark: Any, source: Source, first: FirstRun) -> None:
    again = run_transform(source, "enriched", "job")
    assert (again.records, again.transactions) == (0, 0)
    assert again.start_offsets == again.end_offsets == first.transformed.end_offsets
    ingested = to_delta(
        spark, bootstrap_servers=source.bootstrap, sink_topic="enriched", table_path=str(first.path)
    )
    assert ingested.rows_written == 0 and not ingested.skipped
    assert latest_version(spark, str(first.path)) == first.ingested.table_version
    assert table_pairs(spark, first.path) == source.expected()


def test_a_transform_killed_mid_transaction_then_rerun_loses_and_duplicates_nothing(
    spark: Any, source: Source, tmp_path: Path
) -> None:
    sink, group, path = "enriched_killed", "killed-job", tmp_path / "enriched"
    kill_mid_transaction(source, sink, group, tmp_path / "killed.log", after_commits=3)
    # The killed job's transaction holds the group's offsets: read what is committed.
    committed = committed_offsets(source.bootstrap, group, SOURCE, wait_stable=False)
    done = sum(offset > 0 for offset in committed.values())
    assert done and sum(max(o, 0) for o in committed.values()) < len(source.inputs)
    in_log = len(read_all(source.bootstrap, sink, "read_uncommitted"))
    visible = len(read_all(source.bootstrap, sink, "read_committed"))
    assert in_log > visible, "the kill left no open transaction's records in the sink"

    # With the killed job's transaction still open, the table gets what was committed.
    def ingest() -> Any:
        return to_delta(
            spark, bootstrap_servers=source.bootstrap, sink_topic=sink, table_path=str(path)
        )

    ingest()
    assert table_pairs(spark, path) == source.expected(below=committed)

    rerun = run_transform(source, sink, group)  # fences the dead job, aborts its transaction
    assert rerun.start_offsets == committed
    ingest()
    assert table_pairs(spark, path) == source.expected()
    # The aborted output is in the sink's log: only read_committed kept it out.
    assert len(read_all(source.bootstrap, sink, "read_uncommitted")) > len(source.inputs)


def kill_mid_transaction(
    source: Source, sink: str, group: str, log: Path, *, after_commits: int
) -> None:
    """Run the transform CLI with small, slow transactions; SIGKILL it once
    ``after_commits`` transactions committed and the next one's records are written."""
    args = [
        sys.executable, "-m", "pipelines.exactly_once", "transform",
        "--set", f"bootstrap_servers={source.bootstrap}", "--set", f"source_topic={SOURCE}",
        "--set", f"sink_topic={sink}", "--set", f"group_id={group}",
        "--set", "transaction_records=100", "--set", "commit_delay_ms=300",
    ]  # fmt: skip
    writing = f"transaction {after_commits + 1}: "
    with open(log, "w") as out:
        proc = subprocess.Popen(
            args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 60
        while writing not in log.read_text():
            assert proc.poll() is None, f"the transform exited early:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no {writing!r} in 60 s:\n{log.read_text()}"
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert f"transaction {after_commits + 1} committed" not in log.read_text()


# A kernel, Spark and both stages: 4 min on a busy 2-core machine.
@pytest.mark.timeout(900)
def test_the_notebook_shows_the_table_equals_the_committed_input(
    source: Source, tmp_path: Path
) -> None:
    from tierlog.jobs.runner import run_notebook
    from tierlog.jobs.summary import read_summary

    result = run_notebook(
        "exactly_once",
        {
            "bootstrap_servers": source.bootstrap,
            "source_topic": SOURCE,
            "sink_topic": "enriched_nb",
            "group_id": "notebook-job",
            "table_path": str(tmp_path / "table"),
            "remote_url": "",
            "spark_master": "local[2]",
        },
        notebooks_dir=REPO / "notebooks",
        runs_dir=tmp_path / "runs",
        cwd=tmp_path,
        timeout_s=200,
    )
    assert result.ok, f"exactly_once failed: {result.error}; see {result.output}"
    summary = read_summary(result.output)
    total = len(source.inputs)
    assert summary["input_committed"] == summary["rows_in_table"] == total
    assert summary["distinct_inputs_in_table"] == total
    assert summary["records_transformed"] == total
    assert summary["invalid_in_table"] == len(MALFORMED)


def test_enrich_keeps_one_output_per_input() -> None:
    event = b'{"user":"user-1","event":"click","page":"/cart","ts":5}'
    assert enrich(event, "t", 1, 7) == {
        "user": "user-1",
        "event": "click",
        "page": "/cart",
        "ts": 5,
        "section": "shop",
        "valid": True,
        "source": {"topic": "t", "partition": 1, "offset": 7},
    }
    for bad in (b"not json", b"[1]", b'{"user":"u"}', None, b"\xff"):
        out = enrich(bad, "t", 0, 1)
        assert out["valid"] is False and out["source"]["offset"] == 1
    assert encode(enrich(event, "t", 1, 7)) == encode(enrich(event, "t", 1, 7))


def test_the_cli_names_a_missing_or_bad_key() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pipelines.exactly_once", *args]
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)

    base = ("--set", "bootstrap_servers=127.0.0.1:1", "--set", "sink_topic=out")
    missing = run("transform", *base)
    assert missing.returncode == 2
    assert "'source_topic': required by the transform stage" in missing.stderr
    bad = run("transform", *base, "--set", "source_topic=in", "--set", "partitions=[-1]")
    assert bad.returncode == 2 and "'partitions': -1 is below 0" in bad.stderr
    refused = run("transform", *base, "--set", "source_topic=in")
    assert refused.returncode == 1 and "cannot reach a broker at 127.0.0.1:1" in refused.stderr
