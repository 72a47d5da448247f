"""The remote tier on S3 losing committed data under a real broker subprocess (issue 10,
item 7): a partition's objects deleted, and moto restarted empty, bucket and all. The loss
is reported in the log and a metric, readers of the lost range get a retriable error, the
log start stays until DeleteRecords gives the range up, and a Spark read of it fails:
never skipped silently. (The store unreachable, a broker killed mid-upload, a corrupt
manifest: test_tiered_failures.py.)
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.broker.harness import BrokerProcess
from tests.integration.broker_metrics import sample
from tests.integration.tiered_s3 import (
    KAFKA_STORAGE_ERROR,
    Remote,
    consume,
    create_topic,
    local_start,
    produce,
    raw_fetch,
    raw_list_offset,
    s3_broker,
    wait_for_offload,
    wait_until,
)
from tests.remote.conftest import S3Bucket, create_bucket

LOST_RANGES = "tierlog_remote_lost_ranges_total"
MOTO_START_S = 30.0
# What moto's (werkzeug's) server prints once it listens, and what it says when the port
# is taken.
MOTO_RUNNING = re.compile(r"Running on http://127\.0\.0\.1:(\d+)")
PORT_TAKEN = "Address already in use"


class MotoProcess:
    """moto's S3 server as its own process. The first start takes a port the kernel picks
    (moto prints it); ``restart_empty`` kills it and starts a new one on that same port, the
    broker's endpoint, with nothing in it, not even the bucket (moto keeps its state in
    memory; the in-process server of the other tests keeps it across a restart). Another
    process may take the port in between: the start is tried again until the port is
    free or ``MOTO_START_S`` passed."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoProcess:
        deadline = time.monotonic() + MOTO_START_S
        while True:
            with open(self.log, "wb") as out:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            while time.monotonic() < deadline:
                output = self.log.read_text(errors="replace")
                running = MOTO_RUNNING.search(output)
                if running:
                    self.port = int(running.group(1))
                    return self
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            output = self.log.read_text(errors="replace")
            self.kill()
            if PORT_TAKEN not in output or time.monotonic() >= deadline:
                raise AssertionError(f"moto did not start on port {self.port}:\n{output[-2000:]}")
            time.sleep(0.2)  # the port is someone else's for a moment

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def restart_empty(self) -> None:
        self.kill()
        self.start()


@pytest.fixture
def moto_process(tmp_path: Path) -> Iterator[MotoProcess]:
    moto = MotoProcess(tmp_path / "moto.log").start()
    try:
        yield moto
    finally:
        moto.kill()


def offloaded(
    broker: BrokerProcess, remote: Remote, topic: str, brokers: list[BrokerProcess]
) -> int:
    """Start ``broker`` (its metrics on a port of its own), write 1000 records to ``topic``
    and wait until all but the hot tail is in the store; returns the local log start."""
    broker.overrides["metrics.http.port"] = "0"
    brokers.append(broker.start())
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 1000)
    wait_for_offload(remote, broker.data_dir, topic)
    start = local_start(broker.data_dir, topic)
    assert start > 0
    assert sample(broker.metrics_port(), LOST_RANGES) == 0
    return start


def assert_the_loss_is_served_as_lost(broker: BrokerProcess, topic: str, start: int) -> None:
    """Counted once; reads of the lost range answer a retriable error and the earliest
    offset stays (a consumer at 0 gets nothing, as librdkafka retries the error, rather
    than records from after the loss); the local tail is served as before."""
    assert sample(broker.metrics_port(), LOST_RANGES) == 1
    assert raw_fetch(broker.port, topic, 0) == (KAFKA_STORAGE_ERROR, b"")
    assert raw_list_offset(broker.port, topic, -2) == (0, 0)  # earliest: not moved
    assert consume(broker.bootstrap, topic, 0, 10, timeout=2) == []
    assert consume(broker.bootstrap, topic, start, 10) == list(range(start, start + 10))


def test_an_emptied_bucket_is_reported_and_never_skipped_silently(
    tmp_path: Path, s3_bucket: S3Bucket, brokers: list[BrokerProcess]
) -> None:
    """The bucket loses everything while the broker runs. The broker says so, consumers of
    the lost range get a retriable error instead of being moved past it, the earliest
    offset stays, across a restart, until DeleteRecords gives the range up."""
    topic = "emptied"
    remote = Remote(s3_bucket.endpoint_url, s3_bucket.name)
    broker = s3_broker(tmp_path / "data", s3_bucket.endpoint_url, s3_bucket.name)
    start = offloaded(broker, remote, topic, brokers)
    assert consume(broker.bootstrap, topic, 0, 10) == list(range(10))

    remote.fs.rm(f"{remote.root}/{topic}-0", recursive=True)
    wait_until(lambda: "lost committed data" in broker.log_text(), 10, "reported")
    assert f"offsets 0-{start - 1} were in" in broker.log_text()
    assert_the_loss_is_served_as_lost(broker, topic, start)

    # The loss survives a restart (the partition's remote-log-checkpoint).
    assert broker.stop() == 0
    broker.start()
    # Once the manifest is read again, the earliest offset is still 0 and 0 is still lost.
    wait_until(lambda: raw_list_offset(broker.port, topic, -2) == (0, 0), 10, "read again")
    assert raw_fetch(broker.port, topic, 0) == (KAFKA_STORAGE_ERROR, b"")

    # DeleteRecords past it is the operator's explicit "give it up".
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_records([TopicPartition(topic, 0, start)])[TopicPartition(topic, 0, start)].result(
        10
    )
    assert raw_list_offset(broker.port, topic, -2) == (0, start)
    assert consume(broker.bootstrap, topic, start, 10) == list(range(start, start + 10))
    assert "gives up the lost remote offsets" in broker.log_text()
    assert broker.stop() == 0


@pytest.mark.timeout(300)  # a Spark session's start under load, then two minutes' work
def test_moto_restarted_empty_is_reported_and_a_spark_read_of_the_loss_fails(
    tmp_path: Path, moto_process: MotoProcess, brokers: list[BrokerProcess], spark: Any
) -> None:
    """As the issue ran it: moto restarted empty while the broker runs, so the bucket
    itself is gone (S3 answers NoSuchBucket, not NoSuchKey). The broker says so in its log
    and its metric, readers of the lost range get an error, the log start stays, and a
    Spark read of the range fails (failOnDataLoss) instead of returning the rows after the
    loss."""
    topic = "vanished"
    bucket = f"restart-{uuid.uuid4().hex[:12]}"
    endpoint = moto_process.endpoint
    create_bucket(endpoint, bucket)
    remote = Remote(endpoint, bucket)
    broker = s3_broker(tmp_path / "data", endpoint, bucket)
    start = offloaded(broker, remote, topic, brokers)

    moto_process.restart_empty()
    assert moto_process.endpoint == endpoint  # where the broker looks
    wait_until(lambda: "lost committed data" in broker.log_text(), 15, "reported")
    text = broker.log_text()
    assert f"{topic}-0: the remote tier lost committed data: offsets 0-{start - 1}" in text
    assert_the_loss_is_served_as_lost(broker, topic, start)

    # Spark's source, reading the remote tier straight from the (now empty) store and the
    # rest from the broker: the lost offsets make the query fail, whatever the tier.
    prefix = "remote.log.storage.options."
    options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": topic,
        "failOnDataLoss": "true",
        "remote.log.storage.url": f"s3://{bucket}/tiered",
        f"{prefix}endpoint_url": endpoint,
        f"{prefix}key": "testing",
        f"{prefix}secret": "testing",
        f"{prefix}client_kwargs.region_name": "us-east-1",
    }
    with pytest.raises(Exception) as raised:  # Spark wraps the Python worker's error
        spark.read.format("tierlog").options(**options).load().count()
    assert f"Fetch {topic}-0 at offset 0: KAFKA_STORAGE_ERROR" in str(raised.value)
    # Nothing moved meanwhile: the loss is still reported, not skipped.
    assert raw_list_offset(broker.port, topic, -2) == (0, 0)
    assert sample(broker.metrics_port(), LOST_RANGES) == 1
    assert broker.stop() == 0
