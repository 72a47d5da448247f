"""The remote tier on S3 (moto's HTTP server, s3fs) under a real broker subprocess: the end
to end path, then issue 4's failures — the store unreachable, the broker killed in the
middle of an upload, a corrupt manifest — each bounded in time. Nothing may be lost. Then
issue 10's item 7: a store that lost committed data (a partition's objects deleted; moto
restarted empty, bucket and all) is reported, never skipped silently.

moto runs in this process (``ThreadedMotoServer``), so its state outlives a stop and a
restart on the same port: an outage test can take the store away after data was offloaded
and check that it is all still readable once the store is back.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kio.index import load_request_schema

from tests.broker.harness import BrokerProcess
from tests.remote.conftest import S3Bucket, create_bucket, s3_options, start_moto, stop_moto
from tierlog.protocol import ApiKey, ErrorCode, decode_response, encode_request
from tierlog.protocol.kio_build import build

pytest.importorskip("s3fs")
pytest.importorskip("moto")

BASE_TS = 1_700_000_000_000
SEGMENT_BYTES = 16384
LOCAL_RETENTION = 32768
FAST = {
    "log.segment.bytes": str(SEGMENT_BYTES),
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
}
KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)  # 56, retriable


# -- helpers ------------------------------------------------------------------------------


def s3_broker(data: Path, endpoint: str, bucket: str) -> BrokerProcess:
    """A broker (not started) whose remote tier is ``s3://<bucket>/tiered`` on ``endpoint``;
    botocore does not retry and times out fast, so an outage shows within a second."""
    prefix = "remote.log.storage.options."
    return BrokerProcess(
        data,
        {
            **FAST,
            "remote.log.storage.url": f"s3://{bucket}/tiered",
            f"{prefix}endpoint_url": endpoint,
            f"{prefix}key": "testing",
            f"{prefix}secret": "testing",
            f"{prefix}client_kwargs.region_name": "us-east-1",
            f"{prefix}config_kwargs.connect_timeout": "1",
            f"{prefix}config_kwargs.read_timeout": "5",
            f"{prefix}config_kwargs.retries.max_attempts": "1",
        },
    )


class Remote:
    """The test's own view of the bucket (s3fs, no listing cache)."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        import s3fs

        self.fs = s3fs.S3FileSystem(**s3_options(endpoint))
        self.root = f"{bucket}/tiered"

    def manifest_path(self, topic: str) -> str:
        return f"{self.root}/{topic}-0/manifest.json"

    def manifest(self, topic: str) -> dict[str, Any]:
        try:
            return dict(json.loads(self.fs.cat_file(self.manifest_path(topic))))
        except FileNotFoundError:
            return {"segments": [], "log_start_offset": 0}

    def committed(self, topic: str) -> list[dict[str, Any]]:
        return [s for s in self.manifest(topic)["segments"] if s["state"] == "COPY_FINISHED"]

    def objects(self, topic: str) -> set[str]:
        try:
            entries = self.fs.ls(f"{self.root}/{topic}-0", refresh=True)
        except FileNotFoundError:
            return set()
        return {str(e).rsplit("/", 1)[-1] for e in entries}


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "remote.storage.enable": "true",
        "local.retention.bytes": str(LOCAL_RETENTION),
        "retention.ms": "-1",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=10)


def value(i: int) -> bytes:
    return b"%06d" % i + b"-" * 100


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """Messages ``start .. start+count-1``: value numbered, timestamp BASE_TS + i s."""
    # Batches of 20 (~2.5 KiB) stay well below segment.bytes (16 KiB).
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.num.messages": 20, "acks": "all"}
    )
    errors: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    for i in range(start, start + count):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=value(i),
            timestamp=BASE_TS + i * 1000,
            on_delivery=delivered,
        )
    assert producer.flush(30) == 0
    assert errors == []


def local_logs(data: Path, topic: str) -> list[Path]:
    return sorted((data / f"{topic}-0").glob("*.log"))


def local_size(data: Path, topic: str) -> int:
    return sum(p.stat().st_size for p in local_logs(data, topic))


def local_start(data: Path, topic: str) -> int:
    return int(local_logs(data, topic)[0].stem)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"not {what} within {timeout}s")


def wait_for_offload(remote: Remote, data: Path, topic: str, timeout: float = 30) -> None:
    """Until every closed local segment is committed remotely and the local tier is
    trimmed to its hot tail (local.retention.bytes plus the active segment)."""

    def done() -> bool:
        committed = remote.committed(topic)
        logs = local_logs(data, topic)
        return (
            bool(committed)
            and committed[-1]["end_offset"] + 1 == int(logs[-1].stem)
            and local_size(data, topic) <= LOCAL_RETENTION + SEGMENT_BYTES
        )

    wait_until(done, timeout, f"offloaded ({remote.manifest(topic)})")


def assert_contiguous_from_zero(remote: Remote, topic: str) -> None:
    committed = remote.committed(topic)
    assert committed[0]["base_offset"] == 0
    for before, after in itertools.pairwise(committed):
        assert after["base_offset"] == before["end_offset"] + 1


def consume(bootstrap: str, topic: str, start: int, count: int, timeout: float = 30) -> list[int]:
    """Numbers of the ``count`` messages from offset ``start`` (confluent-kafka)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, start)])
    got: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            got.append(int(msg.value()[:6]))
    finally:
        consumer.close()
    return got


def kafka_python_replay(bootstrap: str, topic: str, count: int) -> tuple[list[int], int, Any]:
    """(numbers read from offset 0, beginning offset, offsets_for_times of message 123)."""
    kc = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        tp = KTopicPartition(topic, 0)
        kc.assign([tp])
        beginning = kc.beginning_offsets([tp])[tp]
        kc.seek(tp, 0)
        got: list[int] = []
        for message in kc:
            got.append(int(message.value[:6]))
            if len(got) == count:
                break
        found = kc.offsets_for_times({tp: BASE_TS + 123 * 1000 + 1})[tp]
        return got, beginning, found
    finally:
        kc.close()


def raw_call(port: int, api_key: int, version: int, data: dict[str, Any]) -> Any:
    """One request on a fresh connection; the decoded response."""
    body = build(load_request_schema(api_key, version), data)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_request(body, 7, client_id="failures-test"))
        (size,) = struct.unpack(">i", _read(sock, 4))
        correlation_id, response = decode_response(_read(sock, size), api_key, version)
    assert correlation_id == 7
    return response


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def raw_fetch(port: int, topic: str, offset: int) -> tuple[int, bytes]:
    """(error code, records) of a one-partition Fetch v11 at ``offset`` (no long poll)."""
    response = raw_call(
        port,
        ApiKey.FETCH,
        11,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    partition = response.responses[0].partitions[0]
    return int(partition.error_code), bytes(partition.records or b"")


def raw_list_offset(port: int, topic: str, timestamp: int) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v5 for ``timestamp``."""
    response = raw_call(
        port,
        ApiKey.LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                    ],
                }
            ],
        },
    )
    partition = response.topics[0].partitions[0]
    return int(partition.error_code), int(partition.offset)


class MotoProcess:
    """moto's S3 server as its own process on a fixed port: ``restart_empty`` kills it and
    starts a new one on the same port, with nothing in it, not even the bucket (moto keeps
    its state in memory; the in-process server of the other tests keeps it across a
    restart)."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MotoProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                assert self.proc.poll() is None, "moto exited"
                time.sleep(0.1)
        raise AssertionError("moto did not start within 30 s")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def restart_empty(self) -> None:
        self.kill()
        self.start()


def metric(port: int, name: str) -> float:
    """A sample of the broker's Prometheus endpoint (``metrics.http.port``)."""
    url = f"http://127.0.0.1:{port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split(" ")[1])
    raise AssertionError(f"{name} not among the broker's metrics")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def moto_process() -> Iterator[MotoProcess]:
    moto = MotoProcess().start()
    try:
        yield moto
    finally:
        moto.kill()


@pytest.fixture
def brokers() -> Iterator[list[BrokerProcess]]:
    """Brokers a test starts are killed at its end, whatever happened."""
    started: list[BrokerProcess] = []
    yield started
    for broker in started:
        broker.kill()


# -- a. end to end ------------------------------------------------------------------------


def test_end_to_end_replay_from_s3(
    tmp_path: Path, s3_bucket: S3Bucket, brokers: list[BrokerProcess]
) -> None:
    messages = 3000
    broker = s3_broker(tmp_path / "data", s3_bucket.endpoint_url, s3_bucket.name)
    brokers.append(broker.start())
    remote = Remote(s3_bucket.endpoint_url, s3_bucket.name)
    topic = "history"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, messages)
    wait_for_offload(remote, broker.data_dir, topic)
    # The local disk holds only the hot tail; everything before it is in the bucket.
    start = local_start(broker.data_dir, topic)
    assert start > 0 and len(local_logs(broker.data_dir, topic)) <= 3
    assert_contiguous_from_zero(remote, topic)
    assert len(remote.committed(topic)) >= 10

    assert consume(broker.bootstrap, topic, 0, messages) == list(range(messages))
    got, beginning, found = kafka_python_replay(broker.bootstrap, topic, messages)
    assert beginning == 0  # earliest is the remote log start
    assert got == list(range(messages))
    # A timestamp seek lands in the remote range, on the right record.
    assert found is not None and found.offset == 124 < start
    # A remote object gone missing is a retriable storage error for the client, not an
    # UNKNOWN_SERVER_ERROR: here the time index of a segment no lookup has read yet.
    segment = remote.committed(topic)[5]
    remote.fs.rm_file(f"{remote.root}/{topic}-0/{segment['objects']['timeindex']}")
    ts = BASE_TS + segment["base_offset"] * 1000 + 500
    assert raw_list_offset(broker.port, topic, ts) == (KAFKA_STORAGE_ERROR, -1)
    assert broker.stop() == 0


# -- b. the object store unreachable ------------------------------------------------------


def test_store_outage_keeps_local_data_and_offload_catches_up(
    tmp_path: Path, brokers: list[BrokerProcess]
) -> None:
    server, endpoint = start_moto()
    port = int(endpoint.rsplit(":", 1)[1])
    bucket = f"outage-{uuid.uuid4().hex[:12]}"
    topic = "outage"
    try:
        create_bucket(endpoint, bucket)
        broker = s3_broker(tmp_path / "data", endpoint, bucket)
        brokers.append(broker.start())
        data = broker.data_dir
        remote = Remote(endpoint, bucket)
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, topic, 0, 1000)
        wait_for_offload(remote, data, topic)
        start = local_start(data, topic)
        remote_end = remote.committed(topic)[-1]["end_offset"] + 1
        assert 0 < start < remote_end

        # The store goes away while producing continues.
        stop_moto(server)
        produce(broker.bootstrap, topic, 1000, 1500)
        # Offload fails and is retried; local retention keeps what is not uploaded, so
        # the local tier grows past local.retention.bytes.
        wait_until(
            lambda: "remote tier: RemoteStorageUnavailableError" in broker.log_text(),
            15,
            "reported unreachable",
        )
        time.sleep(1)  # several retention passes
        # Only segments committed before the outage may have left the local tier.
        assert local_start(data, topic) <= remote_end
        assert local_size(data, topic) > LOCAL_RETENTION + 3 * SEGMENT_BYTES
        assert broker.proc is not None and broker.proc.poll() is None
        # Hot reads keep working.
        assert consume(broker.bootstrap, topic, 2300, 200, timeout=15) == list(range(2300, 2500))
        # Remote-only offsets answer a retriable error, promptly, with no data.
        started = time.monotonic()
        assert raw_fetch(broker.port, topic, 0) == (KAFKA_STORAGE_ERROR, b"")
        error, _ = raw_list_offset(broker.port, topic, BASE_TS + 5 * 1000)
        assert error == KAFKA_STORAGE_ERROR
        assert time.monotonic() - started < 5
        # A consumer of the remote range gets nothing while the store is down...
        assert consume(broker.bootstrap, topic, 0, 10, timeout=2) == []
        assert broker.proc is not None and broker.proc.poll() is None
        # ...also after a restart, when the manifest cannot even be read: the remote range
        # is unknown, not gone (an OFFSET_OUT_OF_RANGE or a local "earliest" would send
        # consumers with auto.offset.reset past it), and local retention deletes nothing.
        broker.kill()
        broker.start()
        time.sleep(0.5)  # a few failed remote cycles and retention passes
        assert raw_fetch(broker.port, topic, 0) == (KAFKA_STORAGE_ERROR, b"")
        assert raw_list_offset(broker.port, topic, -2)[0] == KAFKA_STORAGE_ERROR  # earliest
        assert raw_list_offset(broker.port, topic, BASE_TS)[0] == KAFKA_STORAGE_ERROR
        assert raw_list_offset(broker.port, topic, -1) == (0, 2500)  # latest: local
        assert consume(broker.bootstrap, topic, 2400, 100, timeout=15) == list(range(2400, 2500))
        assert local_start(data, topic) <= remote_end

        # ...and the store is back (same port, moto's state intact): offload catches up,
        # the local tier shrinks back to its hot tail, and nothing was lost.
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        wait_for_offload(remote, data, topic)
        assert local_start(data, topic) > remote_end
        assert_contiguous_from_zero(remote, topic)
        assert consume(broker.bootstrap, topic, 0, 2500) == list(range(2500))
        assert raw_fetch(broker.port, topic, 0)[0] == 0
        assert broker.stop() == 0
    finally:
        stop_moto(server)


# -- c. the broker killed in the middle of an upload --------------------------------------


class HeldUpload:
    """Holds moto's PUT of the first ``.timeindex`` object of ``bucket`` once armed: the
    broker's upload of that segment is then stuck after its ``.log`` and ``.index``."""

    def __init__(self, bucket: str) -> None:
        self.bucket = bucket
        self.armed = False
        self.key: str | None = None
        self.reached = threading.Event()
        self.release = threading.Event()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from moto.s3.models import S3Backend

        real = S3Backend.put_object
        held = self

        def put_object(backend: Any, bucket_name: str, key_name: str, *a: Any, **kw: Any) -> Any:
            if (
                held.armed
                and held.key is None
                and bucket_name == held.bucket
                and key_name.endswith(".timeindex")
            ):
                held.key = key_name
                held.reached.set()
                held.release.wait(30)  # bounded: never hangs moto for good
            return real(backend, bucket_name, key_name, *a, **kw)

        monkeypatch.setattr(S3Backend, "put_object", put_object)


def test_broker_killed_mid_upload_leaves_no_entry_and_the_orphan_goes(
    tmp_path: Path,
    s3_bucket: S3Bucket,
    brokers: list[BrokerProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    held = HeldUpload(s3_bucket.name)
    held.install(monkeypatch)
    topic = "killed"
    remote = Remote(s3_bucket.endpoint_url, s3_bucket.name)
    broker = s3_broker(tmp_path / "data", s3_bucket.endpoint_url, s3_bucket.name)
    brokers.append(broker.start())
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, topic, 0, 1000)
        wait_for_offload(remote, broker.data_dir, topic)
        before = remote.committed(topic)

        held.armed = True
        produce(broker.bootstrap, topic, 1000, 500)
        assert held.reached.wait(15), "no upload started"
        broker.kill()  # SIGKILL, mid-upload
    finally:
        held.armed = False
        held.release.set()
    assert held.key is not None
    stem = held.key.rsplit("/", 1)[1].removesuffix(".timeindex")
    base, segment_id = int(stem[:20]), stem[21:]
    orphans = {f"{stem}.log", f"{stem}.index", f"{stem}.timeindex"}
    wait_until(lambda: orphans <= remote.objects(topic), 10, "left behind")
    # No manifest entry for the partial upload; the committed ones are untouched.
    assert remote.committed(topic) == before
    assert segment_id not in {s["segment_id"] for s in remote.manifest(topic)["segments"]}

    broker.start()
    wait_for_offload(remote, broker.data_dir, topic)
    assert not orphans & remote.objects(topic)  # the orphan is removed
    committed = remote.committed(topic)
    assert committed[: len(before)] == before
    again = [s for s in committed if s["base_offset"] == base]
    assert len(again) == 1 and again[0]["segment_id"] != segment_id  # uploaded again
    assert segment_id not in {s["segment_id"] for s in remote.manifest(topic)["segments"]}
    assert_contiguous_from_zero(remote, topic)
    assert consume(broker.bootstrap, topic, 0, 1500) == list(range(1500))
    assert broker.stop() == 0


# -- d. a corrupt manifest ----------------------------------------------------------------


def test_corrupt_manifest_is_reported_and_no_local_data_is_deleted(
    tmp_path: Path, s3_bucket: S3Bucket, brokers: list[BrokerProcess]
) -> None:
    topic = "corrupt"
    remote = Remote(s3_bucket.endpoint_url, s3_bucket.name)
    broker = s3_broker(tmp_path / "data", s3_bucket.endpoint_url, s3_bucket.name)
    # Cycles every 100 ms: an idle partition re-reads its manifest every cycle.
    broker.overrides["remote.log.manager.task.interval.ms"] = "100"
    brokers.append(broker.start())
    data = broker.data_dir
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 1000)
    wait_for_offload(remote, data, topic)
    # The local tier now holds committed segments that local retention will want to
    # delete as soon as more data arrives.
    kept = set(local_logs(data, topic))
    assert len(kept) >= 3 and local_start(data, topic) > 0

    path = remote.manifest_path(topic)
    remote.fs.pipe_file(path, b"\x00 this is not a manifest")
    where = f"s3://{path}"
    # Nothing to commit: the broker finds out by re-reading the manifest on its own.
    wait_until(lambda: f"{where}: corrupt remote manifest" in broker.log_text(), 10, "reported")
    errors = [line for line in broker.log_text().splitlines() if " ERROR " in line]
    assert errors and all(where in line for line in errors)

    produce(broker.bootstrap, topic, 1000, 1200)  # rolls segments: retention would trim
    time.sleep(1.5)  # several retention passes and remote cycles (whose commits fail)
    # Every local segment is still there, also those committed before the corruption: the
    # manifest can no longer prove they are remote.
    assert kept <= set(local_logs(data, topic))
    assert local_size(data, topic) > LOCAL_RETENTION + 3 * SEGMENT_BYTES
    assert remote.fs.cat_file(path) == b"\x00 this is not a manifest"  # not overwritten
    reports = [line for line in broker.log_text().splitlines() if "corrupt remote" in line]
    assert len(reports) == 1  # reported clearly, once, not once per cycle
    # Hot reads keep being served.
    assert consume(broker.bootstrap, topic, 2000, 200, timeout=15) == list(range(2000, 2200))
    assert broker.proc is not None and broker.proc.poll() is None
    assert broker.stop() == 0


# -- e. the object store loses committed data ---------------------------------------------


def test_an_emptied_bucket_is_reported_and_never_skipped_silently(
    tmp_path: Path, s3_bucket: S3Bucket, brokers: list[BrokerProcess]
) -> None:
    """Issue 10, item 7: the bucket loses everything while the broker runs. The broker
    says so, consumers of the lost range get a retriable error instead of being moved
    past it, the earliest offset stays, across a restart, until DeleteRecords gives the
    range up."""
    topic = "emptied"
    remote = Remote(s3_bucket.endpoint_url, s3_bucket.name)
    broker = s3_broker(tmp_path / "data", s3_bucket.endpoint_url, s3_bucket.name)
    metrics_port = free_port()
    broker.overrides["metrics.http.port"] = str(metrics_port)
    brokers.append(broker.start())
    data = broker.data_dir
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 1000)
    wait_for_offload(remote, data, topic)
    start = local_start(data, topic)
    assert start > 0
    assert consume(broker.bootstrap, topic, 0, 10) == list(range(10))
    assert metric(metrics_port, "tierlog_remote_lost_ranges_total") == 0

    remote.fs.rm(f"{remote.root}/{topic}-0", recursive=True)
    wait_until(lambda: "lost committed data" in broker.log_text(), 10, "reported")
    assert f"offsets 0-{start - 1} were in" in broker.log_text()
    assert metric(metrics_port, "tierlog_remote_lost_ranges_total") == 1
    assert raw_fetch(broker.port, topic, 0) == (KAFKA_STORAGE_ERROR, b"")
    assert raw_list_offset(broker.port, topic, -2) == (0, 0)  # earliest: not moved
    # A consumer at 0 gets nothing (librdkafka retries the storage error) rather than
    # records from after the loss; the local tail is served as before.
    assert consume(broker.bootstrap, topic, 0, 10, timeout=2) == []
    assert consume(broker.bootstrap, topic, start, 10) == list(range(start, start + 10))

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
    """Issue 10, item 7 as the issue ran it: moto restarted empty while the broker runs,
    so the bucket itself is gone (S3 answers NoSuchBucket, not NoSuchKey). The broker says
    so in its log and its metric, readers of the lost range get an error, the log start
    stays, and a Spark read of the range fails (failOnDataLoss) instead of returning the
    rows after the loss."""
    topic = "vanished"
    bucket = f"restart-{uuid.uuid4().hex[:12]}"
    endpoint = moto_process.endpoint
    create_bucket(endpoint, bucket)
    remote = Remote(endpoint, bucket)
    broker = s3_broker(tmp_path / "data", endpoint, bucket)
    metrics_port = free_port()
    broker.overrides["metrics.http.port"] = str(metrics_port)
    brokers.append(broker.start())
    data = broker.data_dir
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 1000)
    wait_for_offload(remote, data, topic)
    start = local_start(data, topic)
    assert start > 0
    assert metric(metrics_port, "tierlog_remote_lost_ranges_total") == 0

    moto_process.restart_empty()
    wait_until(lambda: "lost committed data" in broker.log_text(), 15, "reported")
    text = broker.log_text()
    assert f"{topic}-0: the remote tier lost committed data: offsets 0-{start - 1}" in text
    assert metric(metrics_port, "tierlog_remote_lost_ranges_total") == 1
    assert raw_fetch(broker.port, topic, 0) == (KAFKA_STORAGE_ERROR, b"")
    assert raw_list_offset(broker.port, topic, -2) == (0, 0)  # earliest: not moved
    assert consume(broker.bootstrap, topic, 0, 10, timeout=2) == []
    assert consume(broker.bootstrap, topic, start, 10) == list(range(start, start + 10))

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
    assert metric(metrics_port, "tierlog_remote_lost_ranges_total") == 1
    assert broker.stop() == 0
