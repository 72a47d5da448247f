"""``tierlog demo``: the sample activity stream written to local logs and read back.

Writes page-view and click events into a 4-partition topic through the ``LogManager`` (the
same path a broker's produce takes), reads every partition back through ``Log.read`` slices
(what a fetch sends), decodes them, checks that every event came back in order, and prints a
summary. Later issues grow this into broker + remote tier + Spark.
"""

from __future__ import annotations

import shutil
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import TextIO

from tierlog.local.config import LogConfig
from tierlog.local.log_manager import LogManager
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import Compression
from tierlog.records.reader import iter_batches_records
from tierlog.tools.activity import activity_stream

TOPIC = "activity"


def partition_for(key: bytes, partitions: int) -> int:
    # Any stable hash keeps one user's events in one partition; clients use murmur2.
    return zlib.crc32(key) % partitions


def run_demo(
    data_dir: Path,
    out: TextIO,
    *,
    events: int = 200_000,
    partitions: int = 4,
    batch_records: int = 500,
    compression: str = "lz4",
) -> dict[str, float]:
    if data_dir.exists():
        shutil.rmtree(data_dir)
    codec = Compression[compression.upper()]
    config = LogConfig.from_props({"segment.bytes": str(8 << 20)})
    manager = LogManager([data_dir / "logs"], config)
    manager.startup()
    logs = [manager.get_or_create_log(TOPIC, p) for p in range(partitions)]

    pending: list[list[Record]] = [[] for _ in range(partitions)]
    kinds: Counter[str] = Counter()
    pages: Counter[str] = Counter()
    payload_bytes = 0
    started = time.perf_counter()
    for event in activity_stream(events):
        p = partition_for(event.key(), partitions)
        pending[p].append(Record(event.key(), event.value(), timestamp=event.timestamp_ms))
        kinds[event.kind] += 1
        pages[event.page] += 1
        if len(pending[p]) == batch_records:
            payload_bytes += logs[p].append(build_batch(pending[p], compression=codec)).size
            pending[p] = []
    for p, remaining in enumerate(pending):
        if remaining:
            payload_bytes += logs[p].append(build_batch(remaining, compression=codec)).size
    write_s = time.perf_counter() - started

    started = time.perf_counter()
    read_back = 0
    for topic_log in logs:
        expected = topic_log.log_start_offset
        offset = expected
        while offset < topic_log.log_end_offset:
            chunk = topic_log.read(offset, 1 << 20)
            assert chunk is not None
            for header, decoded in iter_batches_records(chunk.read()):
                for record in decoded:
                    if record.offset < offset:
                        continue  # a fetch starts at the batch holding the offset
                    if record.offset != expected:
                        raise AssertionError(f"offset {record.offset}, expected {expected}")
                    expected += 1
                    read_back += 1
                offset = header.next_offset
    read_s = time.perf_counter() - started
    segments = sum(len(lg.segments) for lg in logs)
    manager.shutdown()

    mb = payload_bytes / 1e6
    print(
        f"tierlog demo: {events} activity events into topic '{TOPIC}' ({partitions} "
        f"partitions, {compression}, {batch_records} records/batch) under {data_dir}",
        file=out,
    )
    print(
        f"  wrote {mb:.1f} MB in {write_s:.2f} s ({events / write_s:,.0f} events/s incl. "
        f"building batches)",
        file=out,
    )
    print(
        f"  read back {read_back} events in {read_s:.2f} s ({read_back / read_s:,.0f} "
        f"events/s incl. decoding), all in order: {read_back == events}",
        file=out,
    )
    print(f"  segments: {segments}; events by kind: {dict(kinds)}", file=out)
    print(f"  top pages: {', '.join(f'{p} {n}' for p, n in pages.most_common(3))}", file=out)
    if read_back != events:
        raise SystemExit(f"demo failed: wrote {events} events, read {read_back}")
    return {"events": events, "read_back": read_back, "write_s": write_s, "read_s": read_s}
