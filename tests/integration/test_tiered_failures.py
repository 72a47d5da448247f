"""The remote tier on S3 (moto's HTTP server, s3fs) under a real broker subprocess: the end
to end path, then issue 4's failures — the store unreachable, the broker killed in the
middle of an upload, a corrupt manifest — each bounded in time. Nothing may be lost.
(A store that loses committed data: test_tiered_data_loss.py.)

moto runs in this process (``ThreadedMotoServer``), so its state outlives a stop and a
restart on the same port: an outage test can take the store away after data was offloaded
and check that it is all still readable once the store is back.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.broker.harness import BrokerProcess
from tests.integration.broker_metrics import REMOTE_CYCLES, RETENTION_PASSES, wait_for_more
from tests.integration.tiered_s3 import (
    BASE_TS,
    KAFKA_STORAGE_ERROR,
    LOCAL_RETENTION,
    SEGMENT_BYTES,
    Remote,
    assert_contiguous_from_zero,
    consume,
    create_topic,
    kafka_python_replay,
    local_logs,
    local_size,
    local_start,
    produce,
    raw_fetch,
    raw_list_offset,
    s3_broker,
    wait_for_offload,
    wait_until,
)
from tests.remote.conftest import S3Bucket, create_bucket, start_moto, stop_moto

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
    # UNKNOWN_SERVER_ERROR: here the time index of a segment no lookup has read yet (in
    # the segment's one object, issue 24: the object goes).
    segment = remote.committed(topic)[5]
    assert segment["parts"]["timeindex"]["object"].endswith(".segment")
    remote.fs.rm_file(f"{remote.root}/{topic}-0/{segment['parts']['timeindex']['object']}")
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
        # Several local retention passes ran since the outage was reported.
        wait_for_more(broker.metrics_port(), RETENTION_PASSES, 3)
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
        # A few remote cycles (failing: the store is still down) and retention passes ran.
        metrics = broker.metrics_port()
        wait_for_more(metrics, REMOTE_CYCLES, 2)
        wait_for_more(metrics, RETENTION_PASSES, 2)
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
    """Holds moto's PUT of the first ``.segment`` object of ``bucket`` once armed: the
    broker's upload of that segment (one object: its log and indexes) is then stuck."""

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
                and key_name.endswith(".segment")
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
    stem = held.key.rsplit("/", 1)[1].removesuffix(".segment")
    base, segment_id = int(stem[:20]), stem[21:]
    # The held PUT lands whole once released (S3 shows an object whole or not at all),
    # an orphan no manifest names.
    orphans = {f"{stem}.segment"}
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

    # The manifest proper: the version the pointer names (a damaged pointer alone is
    # read past: the newest version is listed instead; tests/remote/test_fsspec_storage).
    path = remote.current_version_path(topic)
    remote.fs.pipe_file(path, b"\x00 this is not a manifest")
    where = f"s3://{path}"
    # Nothing to commit: the broker finds out by re-reading the manifest on its own.
    wait_until(lambda: f"{where}: corrupt remote manifest" in broker.log_text(), 10, "reported")
    errors = [line for line in broker.log_text().splitlines() if " ERROR " in line]
    assert errors and all(where in line for line in errors)

    produce(broker.bootstrap, topic, 1000, 1200)  # rolls segments: retention would trim
    # Several retention passes and remote cycles (whose commits fail) ran since.
    metrics = broker.metrics_port()
    wait_for_more(metrics, REMOTE_CYCLES, 3)
    wait_for_more(metrics, RETENTION_PASSES, 3)
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
