"""Shared fixtures of the remote-tier tests: a moto S3 server, buckets, real local segments.

``s3_server`` starts moto's HTTP server on 127.0.0.1 (a free port) once per session;
``s3_bucket`` creates a fresh bucket per test. ``closed_log`` writes a real ``Log`` with
several closed segments so the remote tier is tested on the bytes the local tier writes.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tierlog.local.config import LogConfig
from tierlog.local.file_lease import FileSlice
from tierlog.local.log import Log
from tierlog.local.segment import LogSegment
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import Compression
from tierlog.remote.api import RemoteSegment, SegmentState
from tierlog.remote.manifest import segment_leader_epochs
from tierlog.util.clock import ManualClock

T0 = 1_700_000_000_000
TOPIC = "orders"
PARTITION = 3
TOPIC_ID = uuid.UUID("6f1c9f5e-0d1b-4c35-9a3f-1d2e3f405162")


# -- S3 through moto's server ---------------------------------------------------------------


@dataclass(frozen=True)
class S3Bucket:
    """A bucket on the moto server and the s3fs options that reach it."""

    name: str
    endpoint_url: str

    @property
    def url(self) -> str:
        return f"s3://{self.name}/tiered"

    def options(self, **extra: Any) -> dict[str, Any]:
        return s3_options(self.endpoint_url, **extra)


def s3_options(endpoint_url: str, **extra: Any) -> dict[str, Any]:
    """s3fs storage options for a test endpoint: fixed credentials, short timeouts, no
    botocore retries (an unreachable store must fail fast)."""
    options: dict[str, Any] = {
        "endpoint_url": endpoint_url,
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
        "config_kwargs": {
            "connect_timeout": 1,
            "read_timeout": 5,
            "retries": {"max_attempts": 1, "mode": "standard"},
        },
        # A fresh filesystem per store: no connection pool shared between tests.
        "skip_instance_cache": True,
    }
    options.update(extra)
    return options


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_moto() -> tuple[Any, str]:
    """A started ThreadedMotoServer on 127.0.0.1 and its endpoint URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def stop_moto(server: Any) -> None:
    server.stop()
    # stop() only leaves serve_forever; close the listening socket too, so new
    # connections are refused rather than left unanswered.
    server._server.server_close()


def create_bucket(endpoint_url: str, name: str) -> None:
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=name)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """moto's S3 server for the whole session; yields its endpoint URL."""
    server, endpoint = start_moto()
    try:
        yield endpoint
    finally:
        stop_moto(server)


@pytest.fixture
def s3_bucket(s3_server: str) -> S3Bucket:
    """A new, empty bucket on the session's moto server."""
    bucket = S3Bucket(f"tierlog-{uuid.uuid4().hex[:12]}", s3_server)
    create_bucket(s3_server, bucket.name)
    return bucket


# -- real local segments ----------------------------------------------------------------------


def batch(
    n: int, ts: int, value_size: int = 40, compression: Compression = Compression.NONE
) -> bytes:
    """A batch of ``n`` records with timestamps ``ts, ts + 7, ...`` (not all increasing
    across batches: the caller picks ``ts``)."""
    records = [
        Record(f"k{i}".encode(), bytes([97 + i % 26]) * value_size, timestamp=ts + 7 * i)
        for i in range(n)
    ]
    return build_batch(records, compression=compression)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def closed_log(tmp_path: Path, clock: ManualClock) -> Iterator[Log]:
    """A Log of ~8 segments of 6 KiB with sparse indexes (256-byte interval): small and
    large batches, gzip, timestamps going back now and then. All but the last segment are
    closed."""
    config = LogConfig.from_props({"segment.bytes": 6000, "index.interval.bytes": 256})
    log = Log(tmp_path / f"{TOPIC}-{PARTITION}", config, clock=clock)
    ts = T0
    for n in range(160):
        if n % 37 == 5:
            data = batch(1, ts, value_size=5000)  # bigger than a scan window of 4 KiB
        elif n % 11 == 0:
            data = batch(5, ts, compression=Compression.GZIP)
        else:
            data = batch(1 + n % 4, ts)
        log.append(data, leader_epoch=0 if n < 80 else 2)
        ts += -50 if n % 13 == 0 else 100
    assert len(log.segments) >= 6
    try:
        yield log
    finally:
        log.close()


def remote_segment(
    seg: LogSegment,
    log: Log | None = None,
    *,
    segment_id: str | None = None,
    state: SegmentState = SegmentState.COPY_STARTED,
    created_ms: int = T0,
) -> RemoteSegment:
    """The RemoteSegment describing a closed local segment of ``closed_log`` (its leader
    epochs taken from ``log`` when given)."""
    end = seg.next_offset - 1
    return RemoteSegment(
        topic=TOPIC,
        partition=PARTITION,
        topic_id=TOPIC_ID,
        base_offset=seg.base_offset,
        end_offset=end,
        segment_id=segment_id or str(uuid.uuid4()),
        size_bytes=seg.size,
        max_timestamp=seg.max_timestamp,
        first_batch_timestamp=(
            seg.first_batch_timestamp if seg.first_batch_timestamp is not None else -1
        ),
        leader_epochs=(
            segment_leader_epochs(log.leader_epoch_cache.entries, seg.base_offset, end)
            if log is not None
            else ((0, seg.base_offset),)
        ),
        state=state,
        created_ms=created_ms,
    )


def paths(seg: LogSegment) -> tuple[Path, Path, Path]:
    """The three local files to pass to ``copy_segment``."""
    return seg.path, seg.offset_index.path, seg.time_index.path


def records_bytes(records: FileSlice | bytes | None) -> bytes | None:
    """The bytes of a read's answer (a slice to send is read and released, as the server
    releases it once sent), bytes, or None."""
    if not isinstance(records, FileSlice):
        return records
    try:
        return records.read()
    finally:
        records.release()
