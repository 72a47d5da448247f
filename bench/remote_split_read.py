"""One Spark remote split read from S3 (moto's server on loopback): ranges fetched one
after another vs two ahead while one is decoded (issue 24: parallel ranges within a split).

A segment of 200-byte records (~244 MiB; quick ~61 MiB) is uploaded as one object. Each
round reads it as the Spark source's executors do (``RemoteSegmentReader.chunks`` in 16 MiB
ranges, every batch checked, then ``to_record_batches`` to Arrow), once with ``ahead=0``
and once with ``ahead=2`` (``tierlog.spark.split_readers.REMOTE_RANGES_AHEAD``),
alternating. The figure is MiB/s of segment bytes, ahead=2 over ahead=0 by the median of
the rounds. Quick: 3 rounds; full: 5 rounds. The LAST line is the JSON report.

    .venv/bin/python bench/remote_split_read.py --quick
    .venv/bin/python bench/remote_split_read.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer
from reporting import Report

from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.arrow import to_record_batches
from tierlog.records.builder import Record, build_batch
from tierlog.remote.api import RemoteSegment, SegmentState
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.segment_reader import RemoteSegmentReader
from tierlog.spark.split_readers import REMOTE_CHUNK_BYTES, REMOTE_RANGES_AHEAD
from tierlog.util.clock import ManualClock

TOPIC, T0 = "split-bench", 1_700_000_000_000
BUCKET = "tierlog-bench"
MiB = 1 << 20


def write_segment(directory: Path, batches: int) -> Log:
    log = Log(directory / f"{TOPIC}-0", LogConfig.from_props({"segment.bytes": 1 << 30}),
              clock=ManualClock(T0))  # fmt: skip
    for n in range(batches):
        records = [Record(f"k{i}".encode(), bytes([97 + i % 26]) * 200, timestamp=T0 + n)
                   for i in range(200)]  # fmt: skip
        log.append(build_batch(records), leader_epoch=0)
    log.roll()
    return log


def upload(store: FsspecRemoteStore, log: Log) -> RemoteSegment:
    seg = log.segments[0]
    segment = RemoteSegment(
        topic=TOPIC,
        partition=0,
        topic_id=uuid.uuid4(),
        base_offset=seg.base_offset,
        end_offset=seg.next_offset - 1,
        segment_id=str(uuid.uuid4()),
        size_bytes=seg.size,
        max_timestamp=seg.max_timestamp,
        first_batch_timestamp=seg.first_batch_timestamp or T0,
        leader_epochs=((0, seg.base_offset),),
        state=SegmentState.COPY_FINISHED,
        created_ms=T0,
    )
    return store.copy_segment(segment, seg.path, seg.offset_index.path, seg.time_index.path)


def read_split(store: FsspecRemoteStore, segment: RemoteSegment, ahead: int) -> tuple[int, float]:
    """(rows, seconds) of one whole-segment split read and decoded to Arrow."""
    started, rows = time.perf_counter(), 0
    reader = RemoteSegmentReader(store, segment)
    for whole in reader.chunks(segment.base_offset, REMOTE_CHUNK_BYTES, ahead=ahead):
        for part in to_record_batches(
            whole, TOPIC, 0, start_offset=segment.base_offset, end_offset=segment.end_offset + 1
        ):
            rows += part.num_rows
    return rows, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~61 MiB segment, 3 rounds")
    args = parser.parse_args(argv)
    report = Report("remote_split_read", quick=args.quick)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", **credentials
        ).create_bucket(Bucket=BUCKET)
        options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
        store = FsspecRemoteStore(f"s3://{BUCKET}/tiered", options)
        with tempfile.TemporaryDirectory() as scratch:
            log = write_segment(Path(scratch), 1_500 if args.quick else 6_000)
            segment = upload(store, log)
            log.close()
        size_mib = segment.size_bytes / MiB
        report.say(f"segment of {size_mib:.1f} MiB uploaded to moto's S3 at {endpoint}")
        read_split(store, segment, 0)  # warm-up: the connection pool, the index
        rates: dict[str, list[float | None]] = {"ahead 2": [], "ahead 0": []}
        expected_rows = segment.end_offset - segment.base_offset + 1
        for round_no in range(3 if args.quick else 5):
            for ahead in (REMOTE_RANGES_AHEAD, 0) if round_no % 2 else (0, REMOTE_RANGES_AHEAD):
                rows, seconds = read_split(store, segment, ahead)
                if rows != expected_rows:
                    report.fail(f"ahead={ahead}: {rows} rows, expected {expected_rows}")
                rates[f"ahead {ahead}"].append(round(size_mib / seconds, 1))
                report.say(f"  round {round_no + 1} ahead={ahead}: {size_mib / seconds:.1f} MiB/s")
        report.data.update(segment_mib=round(size_mib, 1), rows=expected_rows)
        report.side_by_side("split read from S3, ranges ahead", rates, unit="MiB/s")
    finally:
        server.stop()
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
